"""Per-engine state of the live exporter: the last stats values, and the token counters of the token
rule (`tokens.py`). Two servers writing one log (`>>` from two launches, `kubectl logs --prefix`, one
journald stream) both print `Engine 000`: their lines' windows are kept per writing process
(`Writers`), the gauges hold the last line's values, of whichever process wrote it (docs/design.md).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import replace
from typing import Any, Literal, TypedDict

from ..parsing.events import (
    EngineStats,
    IterationStats,
    MfuStats,
    SpecDecodeStats,
    json_fields,
)
from ..shown import finite, json_safe
from .tokens import RunningTotal, StepTokens, TokenWindows, readable
from .transfer_state import TransferSnapshot, TransferState

MAX_POSITIONS = 32
"""Draft positions exported from a spec line's per-position rates (the `position` label's bound)."""

MAX_WRITERS = 8
"""Processes an engine label keeps windows for in a launch; one more forgets the one silent longest
(its held first line credited). Restarts without a banner change the pid: the map stays bounded."""


EngineStateName = Literal["ok", "idle", "stalled", "dead", "ended"]


class EngineSnapshot(TypedDict):
    """One engine: the fields of its last stats line (log units), their age, its state, the token
    counters and transfers."""

    last: dict[str, Any]
    age_seconds: float
    state: EngineStateName
    interval_seconds: float | None
    prompt_tokens: float
    generation_tokens: float
    stats_lines: int
    transfers: dict[str, TransferSnapshot] | None


def engine_label(engine: int | None, aggregated: int | None = None) -> str:
    """The `engine` label of a line's engine: its number, `0` for a line without one (the Rust front
    end, V0), `aggregated` for an aggregated line."""
    if aggregated is not None:
        return "aggregated"
    return "0" if engine is None else str(engine)


class Writers:
    """The processes writing one engine label's stats lines in a launch, by pid (None: lines without
    one): each one's token windows (`TokenWindows.sibling`: the same counters), and which of them
    wrote at once. A process whose lines come back after another's
    wrote in between writes at once with it (two servers); one that takes over and never comes back is
    a restart, not a second server."""

    def __init__(self, first: TokenWindows) -> None:
        self.template = first
        self.windows: dict[int | None, TokenWindows] = {}
        self.seen: dict[int | None, int] = {}  # the writer's last line, as a count of lines
        self.lines = 0
        self.current: int | None = None
        self.together: set[int | None] = set()
        """The processes seen writing at once in this launch (empty: one at a time)."""

    def take(self, pid: int | None, lines: int = 1) -> TokenWindows:
        """The windows of writer `pid` for its next `lines` lines."""
        windows = self.windows.get(pid)
        if windows is None:
            windows = self.template if not self.windows else self.template.sibling()
            if len(self.windows) >= MAX_WRITERS:
                oldest = min(self.seen, key=self.seen.__getitem__)
                self.windows.pop(oldest).restart()
                del self.seen[oldest]
                self.together.discard(oldest)
            self.windows[pid] = windows
        elif pid != self.current:  # its lines again, after another's: did that one write in between?
            since = self.seen[pid]
            between = {other for other, at in self.seen.items() if at > since}
            if between:
                self.together |= between | {pid}
        self.current = pid
        self.lines += lines
        self.seen[pid] = self.lines
        return windows

    def set_counting(self, counting: bool) -> None:
        for windows in (self.template, *self.windows.values()):
            windows.counting = counting

    def restart(self) -> None:
        """A new launch: every writer's windows start over (held lines credited); the template stays."""
        for windows in {id(w): w for w in (self.template, *self.windows.values())}.values():
            windows.restart()
        self.windows.clear()
        self.seen.clear()
        self.lines, self.current = 0, None
        self.together.clear()


class EngineState:
    """What one engine label knows. Counters survive `reset()` (a new launch): Prometheus counters
    must not go down within our process. Gauges, intervals and the held first line do not."""

    def __init__(self, stats_interval: float | None = None) -> None:
        """`stats_interval`: the token rule's (`TokenWindows`)."""
        self.tokens = TokenWindows(stats_interval)
        """The token windows of the process that wrote the last stats line (`Writers`)."""
        self.writers = Writers(self.tokens)
        self.steps = StepTokens()  # the step lines' counts, once the engine prints them
        self.step_lines = 0
        self.summed: dict[str, RunningTotal] = {}  # preemptions, corrupted_requests: once a line has them
        self.asleep = False  # sleep mode (the exporter sets it): a sleeping engine is never stalled
        self.woke_at: float | None = None  # when it woke up: its silence counts from then
        self.spec_accepted = RunningTotal()
        self.spec_drafted = RunningTotal()
        self.stats_lines = 0
        self.has_spec_counts = False
        self.last: EngineStats | None = None
        self.last_arrival: float | None = None
        self.spec: SpecDecodeStats | None = None
        self.positions_folded = 0  # draft positions past MAX_POSITIONS (label_overflow{label="position"})
        self.transfer = TransferState()
        self.mfu: MfuStats | None = None  # the last MFU line (--enable-mfu-metrics)

    def processes(self) -> int:
        """How many processes wrote this engine label's stats lines at once in this launch (1: one at a
        time, or none yet)."""
        return max(1, len(self.writers.together))

    # -- events ---------------------------------------------------------------------------------

    def apply_stats(self, stats: EngineStats, arrival: float) -> bool:
        """One stats line of this engine, read at wall-clock time `arrival`. False: its throughputs are
        unreadable (infinite, or past any engine's: `tokens.readable`), and count no token."""
        prompt, generation = stats.prompt_throughput, stats.generation_throughput
        ok = readable(prompt, generation)
        self.tokens = tokens = self.writers.take(stats.pid)
        if ok:
            tokens.add(stats.time, finite(prompt), finite(generation), not prompt and not generation)
        else:
            tokens.add(stats.time, None, None, False)
        self.stats_lines += 1
        extra = stats.extra
        if extra:  # most lines have no field without a column
            for field, short in (("preemptions", "preemptions"), ("corrupted", "corrupted_requests")):
                value = extra.get(field)
                if value is not None:
                    self.summed.setdefault(short, RunningTotal()).add(value)
        self.last = stats
        self.last_arrival = arrival
        return ok

    def apply_step(self, step: IterationStats, budget: int | None = None) -> None:
        """One step line of this engine (`--enable-logging-iteration-details`); `budget`: the launch's
        `max_num_batched_tokens` when known. From the first one on, the token counters are the steps'
        own counts (`StepTokens`), and the stats lines' throughputs no longer add to them."""
        prompt, generation = self.steps.add(
            step.context_requests, step.context_tokens, step.generation_requests, step.generation_tokens,
            dummy=step.dummy, budget=budget if isinstance(budget, int) and budget > 0 else None)
        if not self.steps.started:
            return
        self.step_lines += 1
        self.writers.set_counting(False)
        self.tokens.prompt_tokens.add(prompt)
        self.tokens.generation_tokens.add(generation)

    def apply_prefix_rates(self, gpu_pct: float, cpu_pct: float) -> None:
        """V0's separate prefix-cache line completes the stats line before it."""
        if self.last is not None:
            self.last = replace(self.last, prefix_cache_hit_rate_pct=gpu_pct,
                                prefix_cache_hit_rate_cpu_pct=cpu_pct)

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
            if self.steps.started and spec.format == "v1":  # generated tokens no step line shows
                self.tokens.generation_tokens.add(spec.accepted_tokens)
        self.spec = spec
        rates = spec.per_position_acceptance_rate or ()
        self.positions_folded += max(0, len(rates) - MAX_POSITIONS)

    def reset(self) -> None:
        """A new launch: forget gauges and spacing; keep the counters (a held first line is credited
        with vLLM's default interval rather than lost)."""
        self.writers.restart()
        self.tokens = self.writers.template
        self.writers.set_counting(True)
        self.steps.restart()
        self.last = None
        self.last_arrival = None
        self.spec = self.mfu = None
        self.asleep, self.woke_at = False, None
        self.transfer.reset()
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
        return now - since > intervals * self.tokens.interval()

    def set_asleep(self, asleep: bool, now: float) -> None:
        """A sleep-mode line: asleep, or awake again (at wall time `now`)."""
        self.woke_at, self.asleep = now if self.asleep and not asleep else self.woke_at, asleep

    def state(self, now: float, intervals: float) -> EngineStateName:
        """`stalled`, `idle` (nothing running and nothing flowing, or silent) or `ok`."""
        if self.stalled(now, intervals):
            return "stalled"
        last = self.last
        if last is not None and last.running == 0 and self.last_arrival is not None:
            quiet = not last.prompt_throughput and not last.generation_throughput
            if quiet or now - self.last_arrival > intervals * self.tokens.interval():
                return "idle"
        return "ok"

    def snapshot(self, now: float, intervals: float) -> EngineSnapshot | None:
        """The engine for the status page, values in the log's units; None before its first line."""
        last = self.last
        if last is None or self.last_arrival is None:
            return None
        values = json_fields(last, {"file", "line", "stamp", "level", "process", "pid", "kind"})
        values["kv_cache_usage_pct"] = last.kv_cache_usage_pct
        return EngineSnapshot(
            last=json_safe(values),
            age_seconds=round(now - self.last_arrival, 3),
            state=self.state(now, intervals),
            interval_seconds=finite(self.tokens.typical_interval()),
            prompt_tokens=self.tokens.prompt_tokens.value,
            generation_tokens=self.tokens.generation_tokens.value,
            stats_lines=self.stats_lines,
            transfers=self.transfer.snapshot() or None,
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
            _put(out, "stats_interval_seconds", self.tokens.typical_interval())
        if spec is not None:
            _put(out, "spec_decode_mean_acceptance_length", spec.mean_acceptance_length)
            ratio: float | None = None
            if spec.draft_acceptance_rate_pct is not None:
                ratio = spec.draft_acceptance_rate_pct / 100.0
            elif spec.accepted_tokens is not None and spec.drafted_tokens:
                ratio = spec.accepted_tokens / spec.drafted_tokens
            _put(out, "spec_decode_acceptance_ratio", ratio)
        if self.mfu is not None:
            for short, value in (("mfu_flops_per_second", self.mfu.tflops_per_device * 1e12),
                                 ("mfu_memory_bytes_per_second", self.mfu.gbps_per_device * 1e9)):
                if math.isfinite(value):
                    out[short] = value
        if self.writers.together:
            out["stats_processes"] = float(len(self.writers.together))
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
        if self.spec is not None:
            for position, rate in enumerate((self.spec.per_position_acceptance_rate or ())[:MAX_POSITIONS]):
                if math.isfinite(rate):
                    yield "spec_decode_position_acceptance_ratio", (str(position),), rate
        yield from self.transfer.samples()

    def counters(self) -> dict[str, float]:
        """Short metric name -> total, for the counters this engine has data for."""
        out: dict[str, float] = {}
        if self.stats_lines or self.step_lines:
            out["prompt_tokens"] = self.tokens.prompt_tokens.value
            out["generation_tokens"] = self.tokens.generation_tokens.value
        if self.stats_lines:
            out["busy_seconds"] = self.tokens.busy_seconds.value
            out["stats_lines"] = float(self.stats_lines)
        out.update((short, total.value) for short, total in self.summed.items())
        if self.has_spec_counts:
            out["spec_decode_accepted_tokens"] = self.spec_accepted.value
            out["spec_decode_drafted_tokens"] = self.spec_drafted.value
        return out


def _put(out: dict[str, float], key: str, value: float | None, divisor: float = 1.0) -> None:
    if value is not None:
        out[key] = value / divisor

