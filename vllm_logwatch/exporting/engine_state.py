"""Per-engine state of the live exporter: the last stats values, the typical spacing of the engine's
lines, and the token counters integrated from its throughputs.

It lives apart from `exporting/exporter.py` because the integration rules are the subtle part of the exporter
and they are pure given the records' times, so they read (and are tested) without Prometheus.

Why the rules are what they are (from vLLM's `v1/metrics/loggers.py`): a throughput is the
average over one window that ends at the line, windows are back-to-back, and vLLM hides a window
only when it and the one before both had zero throughput. So `tokens = throughput x window`, where
the window is the engine's typical interval; a long gap is hidden zero windows, never a long window.

vLLM's window is the time between two calls of its logging loop (`now - last_log_time`, monotonic),
which runs late when its event loop is busy (prefill-heavy intervals the most): 5.06 s for a 5 s
interval is common. Whole-second stamps cannot show that line by line, so the interval from stamps
is the mean of the last gaps (their sum telescopes: 9 gaps resolve 0.11 s, and the truncation errors
average out over a run), not their median. A live line timed when it was read (`measured`, on the
monotonic clock) is credited with its own window: the time since the end of the window credited
before it, so a run's windows add up to its measured span whatever the jitter of single reads.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from datetime import datetime
from statistics import fmean

from ..parsing.events import EngineStats, MfuStats, SpecDecodeStats, TransferStats
from ..shown import finite, json_safe
from .mfu_gauges import mfu_gauges
from .snapshot import EngineSnapshot, EngineStateName, TransferSnapshot
from .totals import RunningTotal
from .transfer_state import TransferState

__all__ = [
    "DEFAULT_INTERVAL",
    "EXACT_IDLE_GAP_FACTOR",
    "GAP_HISTORY",
    "IDLE_GAP_FACTOR",
    "MAX_FIRST_GAP",
    "MIN_WINDOW_SHARE",
    "EngineState",
    "engine_label",
]

DEFAULT_INTERVAL = 10.0
"""vLLM's default `VLLM_LOG_STATS_INTERVAL`, used until an engine's own spacing is known."""
IDLE_GAP_FACTOR = 1.5
"""A gap longer than this many typical intervals held hidden all-zero windows (an idle silence)."""
EXACT_IDLE_GAP_FACTOR = 1.9
"""The same with exact times: a hidden window makes a gap of two intervals or more, so up to that
a longer gap is vLLM's timer running late (under load), and still the line's own window."""
MAX_FIRST_GAP = 60.0
"""The first gap of an engine is believed as its interval only up to this (nothing to compare with)."""
_MIN_GAPS = 3
GAP_HISTORY = 9
"""Gaps kept for the interval: their mean resolves 1/9 s from whole-second stamps."""
MIN_WINDOW_SHARE = 0.5
"""A measured window is at least this share of the interval (a shorter gap pays back a late read)."""
MAX_CARRY = 0.5
"""The credited windows may run ahead of the measured times by up to this many intervals (a late read
paid back over the next lines); beyond it the clocks disagree, and the measured time wins."""

State = EngineStateName


def engine_label(engine: int | None, aggregated: int | None = None) -> str:
    """The `engine` label of a line's engine: its number, `0` for a line without one (the Rust front
    end, V0), `aggregated` for an aggregated line."""
    if aggregated is not None:
        return "aggregated"
    return "0" if engine is None else str(engine)


class EngineState:
    """What one engine label knows. Counters survive `reset()` (a new launch): Prometheus counters
    must not go down within our process. Gauges, intervals and the held first line do not."""

    def __init__(
        self, stats_interval: float | None = None, *, exact_times: bool = False, prior: float | None = None
    ) -> None:
        """`prior`: the interval vLLM was configured with (run mode reads VLLM_LOG_STATS_INTERVAL from
        the child's environment): the window, unless 3+ measured gaps disagree by more than 25%.
        Without it the window is the mean gap (log stamps have whole seconds). `exact_times`: the
        lines' times are precise, so gaps up to 1.9 intervals are samples (a line given a `measured`
        time in `apply_stats` is treated so on its own)."""
        self.stats_interval = stats_interval
        self.exact_times = exact_times
        self.prior = prior
        self.prompt_tokens = RunningTotal()
        self.generation_tokens = RunningTotal()
        self.busy_seconds = RunningTotal()  # windows in which tokens were computed
        self.preemptions = RunningTotal()
        self.corrupted = RunningTotal()
        self.has_corrupted = False
        self.asleep = False  # sleep mode (the exporter sets it): a sleeping engine is never stalled
        self.woke_at: float | None = None  # when it woke up: its silence counts from then
        self.spec_accepted = RunningTotal()
        self.spec_drafted = RunningTotal()
        self.stats_lines = 0
        self.has_preemptions = False
        self.has_spec_counts = False
        self.last: EngineStats | None = None
        self.last_arrival: float | None = None
        self.spec: SpecDecodeStats | None = None
        self.transfer = TransferState()
        self.mfu: MfuStats | None = None  # the last MFU line (--enable-mfu-metrics)
        self._last_time: datetime | None = None
        self._gaps: deque[float] = deque(maxlen=GAP_HISTORY)
        self._held: tuple[float | None, float | None] | None = None
        self._last_measured: float | None = None
        self._credited_to: float | None = None  # the end of the last window credited from measured times
        self._run_lines = 0  # lines since the measured times last started over

    # -- the interval ---------------------------------------------------------------------------

    def typical_interval(self) -> float | None:
        """The configured interval, else the measured one (see `__init__`), else the prior, else None."""
        if self.stats_interval is not None:
            return self.stats_interval
        measured = fmean(self._gaps) if self._gaps else None
        if self.prior is not None:
            # The configured interval is exact while vLLM's timer keeps time (measured read times
            # jitter by our own scheduling); measured gaps win only when they say the configuration
            # is not what we were told (e.g. the variable was set inside the command).
            trusted = len(self._gaps) < _MIN_GAPS or abs(measured - self.prior) <= 0.25 * self.prior  # type: ignore[operator]
            return self.prior if trusted else measured
        return measured

    def interval(self) -> float:
        """The typical interval, or vLLM's default before one is known."""
        return self.typical_interval() or DEFAULT_INTERVAL

    def _window(self, time: datetime | None, after_zero: bool, measured: float | None = None) -> float | None:
        """The window to credit this line with; None holds the line until a gap tells (the first
        line; a line after an all-zero line while no interval is known yet).

        vLLM hides a window only when it and the window before were both all-zero, so the gap after
        a busy line is one interval (plus timer lateness), but the gap after an all-zero line may
        span hidden windows: it is never taken as an interval. `measured`: the line's print time on
        the monotonic clock when it was read live (None: a backlog line, timed by its stamp)."""
        if self.stats_interval is not None:
            return self.stats_interval
        previous_measured, self._last_measured = self._last_measured, measured
        exact = measured is not None and previous_measured is not None
        if time is None and not exact:
            return self._restart(measured, self.interval())
        previous = self._last_time
        if time is not None:
            self._last_time = time
        gap: float | None
        if exact:
            gap = measured - previous_measured  # type: ignore[operator]
        elif previous is None or time is None:
            return self._restart(measured, self.prior)  # None: hold the first line until a gap tells
        else:
            try:
                gap = (time - previous).total_seconds()
            except TypeError:  # naive next to aware: not comparable
                gap = None
        typical = self.typical_interval()
        # A hidden (idle) window makes a gap of at least two intervals; with exact times anything
        # shorter is a late timer and still this line's own window.
        factor = EXACT_IDLE_GAP_FACTOR if self.exact_times or exact else IDLE_GAP_FACTOR
        limit = MAX_FIRST_GAP if typical is None else factor * typical
        usable = gap is not None and 0 < gap <= limit and not after_zero
        if usable:
            self._gaps.append(gap)  # type: ignore[arg-type]
        if self._held is not None:  # its window, best known now: the next true gap
            held_window = gap if usable and gap is not None else typical or DEFAULT_INTERVAL
            self._credit(*self._held, held_window)
            self._held = None
        if exact and usable:
            return self._measured_window(measured, gap)  # type: ignore[arg-type]
        return self._restart(measured, None if typical is None and not usable else self.interval())

    def _restart(self, measured: float | None, window: float | None) -> float | None:
        """The measured times start over at this line (credited `window`; None: held)."""
        self._credited_to = measured
        self._run_lines = 1
        return window

    def _measured_window(self, measured: float, gap: float) -> float:
        """A live line's own window: from the end of the window credited before it to its print time.

        So the windows of a run add up to the time from its first line to its last: a line read late
        (our scheduling, or vLLM printing late after it read its clock) is over-credited and the next
        line, whose gap is shorter by as much, pays it back. A window under half the interval is not
        believed: half an interval is credited and the rest paid back by the next lines, up to half an
        interval ahead of the clock; beyond that the clocks disagree and the gap itself is the window.
        With a configured interval (run mode), a run's second line read less than one interval after
        its first says the first was read late: it gets one interval, and the times go on from it."""
        start = self._credited_to if self._credited_to is not None else measured - gap
        reference = self.interval()
        window = max(measured - start, MIN_WINDOW_SHARE * reference)
        if start + window - measured > MAX_CARRY * reference:  # far ahead of the clock: restart from it
            self._restart(measured, gap)
            return gap
        self._run_lines += 1
        if self._run_lines == 2 and self.prior is not None and reference == self.prior and gap < self.prior:
            # vLLM sleeps the configured interval between two of its lines, and then some: a run's
            # first gap under it is its first line read late, which no later line would pay back (a
            # later short gap pays back the late read before it). One interval, and the times go on
            # from this line's.
            self._credited_to = measured
            return self.prior
        self._credited_to = start + window
        return window

    def _credit(self, prompt: float | None, generation: float | None, window: float) -> None:
        if prompt is not None:
            self.prompt_tokens.add(prompt * window)
        if generation is not None:
            self.generation_tokens.add(generation * window)
        if prompt or generation:
            self.busy_seconds.add(window)

    # -- events ---------------------------------------------------------------------------------

    def apply_stats(self, stats: EngineStats, arrival: float, measured: float | None = None) -> None:
        """One stats line of this engine, read at wall-clock time `arrival`; `measured`: when it was
        printed, on the monotonic clock, if it was read live (`live/arrival.py`)."""
        prompt, generation = finite(stats.prompt_throughput), finite(stats.generation_throughput)
        last = self.last
        after_zero = last is not None and not last.prompt_throughput and not last.generation_throughput
        window = self._window(stats.time, after_zero, measured)
        if window is None:
            self._held = (prompt, generation)
        else:
            self._credit(prompt, generation, window)
        self.stats_lines += 1
        preemptions = stats.extra.get("preemptions")
        if preemptions is not None:
            self.has_preemptions = True
            self.preemptions.add(preemptions)
        corrupted = stats.extra.get("corrupted")
        if corrupted is not None:
            self.has_corrupted = True
            self.corrupted.add(corrupted)
        self.last = stats
        self.last_arrival = arrival

    def apply_prefix_rates(self, gpu_pct: float, cpu_pct: float) -> None:
        """V0's separate prefix-cache line completes the stats line before it."""
        if self.last is not None:
            self.last = self.last.model_copy(
                update={"prefix_cache_hit_rate_pct": gpu_pct, "prefix_cache_hit_rate_cpu_pct": cpu_pct})

    def apply_spec(self, spec: SpecDecodeStats) -> None:
        """V1 lines count the interval (summed); V0 lines count since engine start (latest wins)."""
        if spec.accepted_tokens is not None or spec.drafted_tokens is not None:
            self.has_spec_counts = True
        if spec.cumulative:
            self.spec_accepted.observe_total(spec.accepted_tokens)
            self.spec_drafted.observe_total(spec.drafted_tokens)
        else:
            self.spec_accepted.add(spec.accepted_tokens)
            self.spec_drafted.add(spec.drafted_tokens)
        self.spec = spec

    def apply_transfer(self, line: TransferStats) -> None:
        """A KV / EC Transfer line of this engine's interval."""
        self.transfer.apply(line)

    def reset(self) -> None:
        """A new launch: forget gauges and spacing; keep the counters (a held first line is credited
        with vLLM's default interval rather than lost)."""
        if self._held is not None:
            self._credit(*self._held, self.interval())
        self._held = None
        self.last = None
        self.last_arrival = None
        self.spec = self.mfu = None
        self.asleep, self.woke_at = False, None
        self.transfer.reset()
        self._last_time = None
        self._last_measured = self._credited_to = None
        self._gaps.clear()
        self.spec_accepted.restart()
        self.spec_drafted.restart()

    # -- reading --------------------------------------------------------------------------------

    def stalled(self, now: float, intervals: float) -> bool:
        """Requests were running and no line came for `intervals` typical intervals.

        An idle engine (last line with nothing running) goes silent by design: not a stall; nor does a
        sleeping one (sleep mode), whose silence counts only from its wake-up.
        """
        last = self.last
        if last is None or self.last_arrival is None or not last.running or self.asleep:
            return False
        since = self.last_arrival if self.woke_at is None else max(self.last_arrival, self.woke_at)
        return now - since > intervals * self.interval()

    def set_asleep(self, asleep: bool, now: float) -> None:
        """A sleep-mode line: asleep, or awake again (at wall time `now`)."""
        self.woke_at, self.asleep = now if self.asleep and not asleep else self.woke_at, asleep

    def state(self, now: float, intervals: float) -> State:
        """`stalled`, `idle` (nothing running and nothing flowing, or silent) or `ok`."""
        if self.stalled(now, intervals):
            return "stalled"
        last = self.last
        if last is not None and last.running == 0 and self.last_arrival is not None:
            quiet = not last.prompt_throughput and not last.generation_throughput
            if quiet or now - self.last_arrival > intervals * self.interval():
                return "idle"
        return "ok"

    def snapshot(self, now: float, intervals: float) -> EngineSnapshot | None:
        """The engine for the status page, values in the log's units; None before its first line."""
        last = self.last
        if last is None or self.last_arrival is None:
            return None
        values = last.model_dump(exclude={"file", "line", "stamp", "level", "process", "kind"},
                                 exclude_none=True, mode="json")
        values["kv_cache_usage_pct"] = last.kv_cache_usage_pct
        transfers = self.transfer.snapshot()
        return EngineSnapshot(
            last=json_safe(values),
            age_seconds=round(now - self.last_arrival, 3),
            state=self.state(now, intervals),
            interval_seconds=finite(self.typical_interval()),
            prompt_tokens=self.prompt_tokens.value,
            generation_tokens=self.generation_tokens.value,
            stats_lines=self.stats_lines,
            transfers={cache: TransferSnapshot(
                transfers=t["transfers"], expired_requests=t["expired_requests"],
                last=None if t["last"] is None else json_safe(t["last"]))
                for cache, t in transfers.items()} or None,
        )

    def gauges(self) -> dict[str, float]:
        """Short metric name -> value, for the values the last lines carried (base units)."""
        out: dict[str, float] = {}
        last, spec = self.last, self.spec
        if last is not None:
            _put(out, "prompt_throughput_tokens_per_second", last.prompt_throughput)
            _put(out, "generation_throughput_tokens_per_second", last.generation_throughput)
            _put(out, "requests_running", last.running)
            _put(out, "requests_waiting", last.waiting)
            _put(out, "requests_swapped", last.swapped)
            _put(out, "requests_deferred", last.extra.get("deferred"))
            _put(out, "kv_cache_usage_ratio", last.kv_cache_usage_pct, 100.0)
            if last.is_v0:
                _put(out, "cpu_swap_kv_cache_usage_ratio", last.cpu_kv_cache_usage_pct, 100.0)
            _put(out, "prefix_cache_hit_ratio", last.prefix_cache_hit_rate_pct, 100.0)
            _put(out, "external_prefix_cache_hit_ratio",
                 last.extra.get("external_prefix_cache_hit_rate_pct"), 100.0)
            _put(out, "mm_cache_hit_ratio", last.mm_cache_hit_rate_pct, 100.0)
            stamp = last.time.timestamp() if last.time is not None else self.last_arrival
            _put(out, "last_stats_timestamp_seconds", stamp)
            _put(out, "stats_interval_seconds", self.typical_interval())
        if spec is not None:
            _put(out, "spec_decode_mean_acceptance_length", spec.mean_acceptance_length)
            ratio: float | None = None
            if spec.draft_acceptance_rate_pct is not None:
                ratio = spec.draft_acceptance_rate_pct / 100.0
            elif spec.accepted_tokens is not None and spec.drafted_tokens:
                ratio = spec.accepted_tokens / spec.drafted_tokens
            _put(out, "spec_decode_acceptance_ratio", ratio)
        out.update(mfu_gauges(self.mfu))
        return out

    def samples(self) -> Iterator[tuple[str, tuple[str, ...], float]]:
        """Every series of this engine but the stall signal: (short name, the labels after `engine` and
        `model_name`, value)."""
        for short, value in self.gauges().items():
            yield short, (), value
        for short, value in self.counters().items():
            yield short, (), value
        if self.last is not None:
            for stage in ("waiting", "in_progress", "completed_waiting"):
                fetch = self.last.extra.get(f"kv_fetch_{stage}")
                if fetch is not None:
                    yield "kv_fetch_requests", (stage,), fetch
        yield from self.transfer.samples()

    def counters(self) -> dict[str, float]:
        """Short metric name -> total, for the counters this engine has data for."""
        out: dict[str, float] = {}
        if self.stats_lines:
            out["prompt_tokens"] = self.prompt_tokens.value
            out["generation_tokens"] = self.generation_tokens.value
            out["busy_seconds"] = self.busy_seconds.value
            out["stats_lines"] = float(self.stats_lines)
        if self.has_preemptions:
            out["preemptions"] = self.preemptions.value
        if self.has_corrupted:
            out["corrupted_requests"] = self.corrupted.value
        if self.has_spec_counts:
            out["spec_decode_accepted_tokens"] = self.spec_accepted.value
            out["spec_decode_drafted_tokens"] = self.spec_drafted.value
        return out


def _put(out: dict[str, float], key: str, value: float | None, divisor: float = 1.0) -> None:
    if value is not None:
        out[key] = value / divisor
