"""The token rule: an engine's prompt and generation tokens integrated from its stats lines'
throughputs, each line credited with its window (`TokenWindows`). Pure given the lines' times; the one
place the offline summary, the backfill and the live exporter count tokens (`EngineState.tokens`).

Why the rules are what they are (from vLLM's `v1/metrics/loggers.py`): a throughput is the
average over one window that ends at the line, windows are back-to-back, and vLLM hides a window
only when it and the one before both had zero throughput. So `tokens = throughput x window`, where
the window is the engine's typical interval; a long gap is hidden zero windows, never a long window.

vLLM's window is the time between two calls of its logging loop (`now - last_log_time`, monotonic),
which runs late when its event loop is busy (prefill-heavy intervals the most): 5.06 s for a 5 s
interval is common. Whole-second stamps cannot show that line by line, so the interval from stamps
is the mean of the last gaps (their sum telescopes: 9 gaps resolve 0.11 s, and the truncation errors
average out over a run), not their median. Lines timed when they were read (`measured`, on the
monotonic clock): each gap between two is vLLM's window plus the difference of two of our read
delays. In run mode (a configured interval) a line is credited the mean of the last measured gaps,
when they agree (`MAX_MEAN_ERROR`), else the configured interval: crediting each line its own gap
carried a late read into the tokens wherever two lines' throughputs differ (reads up to 0.9 s late, on
a 2-core machine vLLM kept busy, made 5.8% too many tokens in a 20 s run), and where reads scatter
that much even the mean of 9 gaps is off by a few percent. Without one (watch) a line is credited the
time since the window credited before it, so a run's windows add up to its measured span.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence
from datetime import datetime
from statistics import fmean, pstdev

from ..parsing.events import IterationStats
from .totals import RunningTotal

__all__ = [
    "DEFAULT_INTERVAL", "EXACT_IDLE_GAP_FACTOR", "GAP_HISTORY", "IDLE_GAP_FACTOR", "MAX_CARRY",
    "MAX_FIRST_GAP", "MAX_MEAN_ERROR", "MAX_TOKENS_PER_SECOND", "MIN_WINDOW_SHARE", "TokenWindows",
    "readable", "readable_step",
]

DEFAULT_INTERVAL = 10.0
"""vLLM's default `VLLM_LOG_STATS_INTERVAL`, used until an engine's own spacing is known."""
IDLE_GAP_FACTOR = 1.5
"""A gap longer than this many typical intervals held hidden all-zero windows (an idle silence)."""
EXACT_IDLE_GAP_FACTOR = 1.9
"""The same with exact times: a hidden window makes a gap of two intervals or more, so up to that
a longer gap is vLLM's timer running late (under load), and still the line's own window."""
MAX_MEAN_ERROR = 0.01
"""With a configured interval, the mean of the measured gaps is a line's window only when its standard
error is within this share of it: our reads then time vLLM's spacing to better than the configured
interval might be off. Reads that scatter more (a machine kept busy by vLLM: 0.1-0.9 s late on a 2 s
interval) leave the configured interval, which vLLM keeps within 0.1% where it is not itself late."""
MIN_WINDOW_SHARE = 0.5
"""Without a configured interval, a measured window is at least this share of the interval (a shorter
gap pays back a late read)."""
MAX_CARRY = 0.5
"""The windows credited without a configured interval may run ahead of the measured times by up to
this many intervals (a late read paid back over the next lines); beyond, the measured time wins."""
MAX_FIRST_GAP = 60.0
"""The first gap of an engine is believed as its interval only up to this (nothing to compare with)."""
MAX_TOKENS_PER_SECOND = 1e9
"""No engine computes a billion tokens a second (a whole 8-GPU node prefills about a million): a line
saying more (a throughput, or a step's tokens over its time) is unreadable, and counts no token."""
_MIN_GAPS = 3
GAP_HISTORY = 9
"""Gaps kept for the interval: their mean resolves 1/9 s from whole-second stamps."""


class TokenWindows:
    """One engine's token counters and the spacing of its lines. The counters survive `restart()` (a
    new launch): Prometheus counters must not go down within our process; the spacing does not."""

    def __init__(
        self, stats_interval: float | None = None, *, exact_times: bool = False, prior: float | None = None
    ) -> None:
        """`stats_interval`: the configured interval, always the window. `prior`: the interval vLLM was
        configured with (run mode reads VLLM_LOG_STATS_INTERVAL from the child's environment): the
        window, unless 3+ measured gaps disagree by more than 25%. Without either the window is the mean
        gap (log stamps have whole seconds). `exact_times`: the lines' times are precise, so gaps up to
        1.9 intervals are samples (a line given a `measured` time in `add` is treated so on its own)."""
        self.stats_interval = stats_interval
        self.exact_times = exact_times
        self.prior = prior
        self.prompt_tokens = RunningTotal()
        self.generation_tokens = RunningTotal()
        self.busy_seconds = RunningTotal()  # the windows in which tokens were computed
        self.counting = True
        """False: the lines' throughputs add no tokens, only their busy windows (the engine's step lines
        count its tokens, `EngineState.apply_step`)."""
        self._last_time: datetime | None = None
        self._gaps: deque[float] = deque(maxlen=GAP_HISTORY)
        self._held: tuple[float | None, float | None] | None = None
        self._last_measured: float | None = None
        self._measured: deque[float] = deque(maxlen=GAP_HISTORY)  # the last gaps between measured times
        self._credited_to: float | None = None  # without a prior: the end of the last window credited
        self._run_lines = 0  # lines since the measured times last started over
        # Without a configured interval (watch), a run's first measured gap, given to its second line
        # (and to its first, when that was held): (that gap, their summed throughputs, the gaps after it).
        self._first_gap: tuple[float, float | None, float | None, list[float]] | None = None

    def add(self, time: datetime | None, prompt: float | None, generation: float | None, after_zero: bool,
            measured: float | None = None) -> None:
        """One line's throughputs (None: absent or not finite), stamped `time`; `after_zero`: the line
        before was all-zero; `measured`: its print time on the monotonic clock when read live."""
        held = self._held
        window = self._window(time, after_zero, measured)
        if window is None:
            self._held = (prompt, generation)
            return
        self._credit(prompt, generation, window)
        if self._run_lines == 2 and self.prior is None and measured is not None:  # credited the first gap
            if held is not None:  # and so was the held first line
                prompt, generation = _plus(held[0], prompt), _plus(held[1], generation)
            self._first_gap = (window, prompt, generation, [])

    def add_run(self, times: Sequence[datetime | None], prompts: Sequence[float],
                generations: Sequence[float], after_zero: bool) -> None:
        """`add` for each line of a run of backlog lines given as columns (NaN for a missing
        throughput); `after_zero`: the line before the run was all-zero."""
        if self.stats_interval is not None or self.prior is not None or not self.counting:
            for time, p, g in zip(times, prompts, generations, strict=True):
                self.add(time, _finite(p), _finite(g), after_zero)
                after_zero = not p and not g
        else:
            self._default_run(times, prompts, generations, after_zero)

    def restart(self) -> None:
        """A new launch: the spacing starts over; a held first line is credited with the typical
        interval rather than lost."""
        if self._held is not None:
            self._credit(*self._held, self.interval())
        self._held = None
        self._last_time = None
        self._last_measured = self._credited_to = None
        self._gaps.clear()
        self._measured.clear()

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
            if exact:
                self._check_first_gap(gap)  # type: ignore[arg-type]
        if self._held is not None:  # its window, best known now: the next true gap
            held_window = gap if usable and gap is not None else typical or DEFAULT_INTERVAL
            self._credit(*self._held, held_window)
            self._held = None
        if exact and usable:
            if self.prior is None:
                return self._spanned_window(measured, gap)  # type: ignore[arg-type]
            return self._measured_window(gap)  # type: ignore[arg-type]
        return self._restart(measured, None if typical is None and not usable else self.interval())

    def _restart(self, measured: float | None, window: float | None) -> float | None:
        """The measured times start over at this line (credited `window`; None: held)."""
        self._credited_to = measured
        self._run_lines = 1
        self._first_gap = None
        return window

    def _check_first_gap(self, gap: float) -> None:
        """Without a configured interval (watch), a run's first gap under the shortest of the 3 measured
        gaps after it was its first line read late: vLLM sleeps the same interval before every line, and
        the gaps after it pay back only their own lines' late reads. The lines given that gap (the
        second, and the first when it was held) get the time it fell short (the counters go up late,
        never down)."""
        if self._first_gap is None:
            return
        window, prompt, generation, later = self._first_gap
        later.append(gap)
        if len(later) < _MIN_GAPS:
            return
        self._first_gap = None
        if (short := min(later) - window) > 0:
            self._credit(prompt, generation, short)

    def _measured_window(self, gap: float) -> float:
        """With a configured interval (run mode), a live line's window: the mean of the last measured
        gaps (up to `GAP_HISTORY`, this line's included) once there are 3 and they agree
        (`MAX_MEAN_ERROR`), else the configured interval.

        A run's first gap does not enter the mean: a late read of its first line makes it short with no
        gap before it to pay that back (the load's first line, a prompt burst, read late). Nor does the
        short gap after a long one that was not taken (a block of lines read at once): it is the next
        run's first."""
        self._run_lines += 1
        if self._run_lines > 2:
            self._measured.append(gap)
        gaps = self._measured
        if len(gaps) >= _MIN_GAPS:
            mean = fmean(gaps)
            if pstdev(gaps, mean) <= MAX_MEAN_ERROR * mean * math.sqrt(len(gaps)):
                return mean
        return self.interval()

    def _spanned_window(self, measured: float, gap: float) -> float:
        """Without a configured interval (watch), a live line's window: from the end of the window
        credited before it to its print time, so a run's windows add up to the time from its first line
        to its last (a late read over-credits one line and the next pays it back). There is no interval
        to fall back on: the measured span is the best measure, and its errors stay at the run's ends
        (`_check_first_gap` pays back the first). A window under half the typical interval is not
        believed: half is credited and the rest paid back by the next lines, up to half an interval
        ahead of the clock; beyond that the clocks disagree and the gap itself is the window."""
        start = self._credited_to if self._credited_to is not None else measured - gap
        reference = self.interval()
        window = max(measured - start, MIN_WINDOW_SHARE * reference)
        if start + window - measured > MAX_CARRY * reference:  # far ahead of the clock: restart from it
            self._restart(measured, gap)
            return gap
        self._run_lines += 1
        self._credited_to = start + window
        return window

    def _credit(self, prompt: float | None, generation: float | None, window: float) -> None:
        busy = False
        if prompt is not None:
            busy = 0 < prompt * window < math.inf
            if self.counting:
                self.prompt_tokens.add(prompt * window)
        if generation is not None:
            busy = busy or 0 < generation * window < math.inf
            if self.counting:
                self.generation_tokens.add(generation * window)
        if busy:
            self.busy_seconds.add(window)

    def _default_run(self, times: Sequence[datetime | None], prompts: Sequence[float],
                     generations: Sequence[float], zero: bool) -> None:
        """`add_run` without a configured interval or prior, and without measured times: `_window`'s
        rules for that case with the typical interval kept as it changes instead of recomputed per
        line (the summary of months of logs; tests/unit/exporting/test_tokens.py holds it equal to
        `add` line by line)."""
        inf, gaps, full = math.inf, self._gaps, self._gaps.maxlen
        factor = EXACT_IDLE_GAP_FACTOR if self.exact_times else IDLE_GAP_FACTOR
        typical = fmean(gaps) if gaps else None
        last_time, held = self._last_time, self._held
        add_prompt, add_generation, add_busy = (self.prompt_tokens.add, self.generation_tokens.add,
                                                self.busy_seconds.add)
        for time, p, g in zip(times, prompts, generations, strict=True):
            window: float | None
            if time is None:
                window = typical or DEFAULT_INTERVAL
            else:
                previous, last_time = last_time, time
                if previous is None:
                    window = None  # hold the first line until a gap tells its window
                else:
                    try:
                        gap: float | None = (time - previous).total_seconds()
                    except TypeError:  # naive next to aware: not comparable
                        gap = None
                    limit = MAX_FIRST_GAP if typical is None else factor * typical
                    usable = gap is not None and 0 < gap <= limit and not zero
                    same = False
                    if usable:
                        same = len(gaps) == full and gaps[0] == gap  # the same gaps, the same mean (fsum)
                        gaps.append(gap)  # type: ignore[arg-type]
                    if held is not None:
                        held_window = gap if usable and gap is not None else typical or DEFAULT_INTERVAL
                        busy = False
                        if held[0] is not None:
                            busy = 0 < held[0] * held_window < inf
                            add_prompt(held[0] * held_window)
                        if held[1] is not None:
                            busy = busy or 0 < held[1] * held_window < inf
                            add_generation(held[1] * held_window)
                        if busy:
                            add_busy(held_window)
                        held = None
                    unknown = typical is None
                    if usable and not same:
                        typical = fmean(gaps)
                    window = None if unknown and not usable else typical or DEFAULT_INTERVAL
            if window is None:
                held = (_finite(p), _finite(g))
            else:  # a NaN or infinite throughput adds nothing, as `_credit` of a None does
                busy = False
                if 0 < (amount := p * window) < inf:
                    add_prompt(amount)
                    busy = True
                if 0 < (amount := g * window) < inf:
                    add_generation(amount)
                    busy = True
                if busy:
                    add_busy(window)
            zero = not p and not g
        self._last_time, self._held = last_time, held


def readable(*throughputs: float | None) -> bool:
    """None of a line's throughputs is past what an engine can compute (NaN, like None, is missing).

    >>> readable(None, 0.0, 2198.7, float("nan")), readable(float("inf")), readable(2e9)
    (True, False, False)
    """
    return not any(t is not None and t > MAX_TOKENS_PER_SECOND for t in throughputs)


def readable_step(step: IterationStats) -> bool:
    """A step line's elapsed time is finite and its tokens fit `MAX_TOKENS_PER_SECOND` over it (a step
    timed under a millisecond as one of a millisecond).

    >>> from vllm_logwatch.parsing.events import IterationStats
    >>> def step(tokens, ms): return IterationStats(iteration=1, context_requests=1, context_tokens=tokens,
    ...     generation_requests=0, generation_tokens=0, elapsed_ms=ms)
    >>> [readable_step(step(tokens, ms)) for tokens, ms in ((8192, 40.0), (10**15 - 1, 7.5), (1, math.inf))]
    [True, False, False]
    """
    seconds = step.elapsed_ms / 1000.0
    tokens = step.context_tokens + step.generation_tokens
    return math.isfinite(seconds) and tokens <= MAX_TOKENS_PER_SECOND * max(seconds, 0.001)


def _plus(a: float | None, b: float | None) -> float | None:
    return b if a is None else a if b is None else a + b


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None
