"""The token rule: an engine's prompt and generation tokens integrated from its stats lines'
throughputs, each line credited with the engine's stats interval (`TokenWindows`). Pure given the
lines' times; the one place the offline summary, the backfill and the live exporter count tokens
(`EngineState.tokens`), so watch, run and parse give the same counters for the same lines. Every
counter of the exporter is a `RunningTotal` (never down, read without float noise).

Why (from vLLM's `v1/metrics/loggers.py`): a throughput is the average over one window that ends at
the line, windows are back-to-back, and vLLM hides a window only when it and the one before both had
zero throughput. So `tokens = throughput x interval`, where the interval is the configured one
(`--stats-interval`; in run mode `VLLM_LOG_STATS_INTERVAL` from vLLM's environment), else the mean
spacing of the engine's stamps (whole seconds: 9 gaps resolve 0.11 s); a long gap is hidden zero
windows, never a long window. vLLM's window is the time between two runs of its logging loop, which
runs late when vLLM is busy, so the counters run low by that lateness: a percent or two on a loaded
host (docs/metrics.md has the figures). With iteration lines (`--enable-logging-iteration-details`)
the engine's own step lines count its tokens exactly (`StepTokens`, `EngineState.apply_step`).

What a step line counts, and how it compares with vLLM's counters: docs/metrics.md ("Token counters
from the steps"); the step budget (`max_num_batched_tokens`) keeps a prompt cut between two steps from
yielding two first tokens.
"""

from __future__ import annotations

import math
from collections import deque
from datetime import datetime
from statistics import fmean

from ..parsing.events import IterationStats

DEFAULT_INTERVAL = 10.0
"""vLLM's default `VLLM_LOG_STATS_INTERVAL`, used until an engine's own spacing is known."""
IDLE_GAP_FACTOR = 1.5
"""A gap longer than this many typical intervals held hidden all-zero windows (an idle silence)."""
MAX_FIRST_GAP = 60.0
"""The first gap of an engine is believed as its interval only up to this (nothing to compare with)."""
MAX_TOKENS_PER_SECOND = 1e9
"""No engine computes a billion tokens a second (a whole 8-GPU node prefills about a million): a line
saying more (a throughput, or a step's tokens over its time) is unreadable, and counts no token."""
GAP_HISTORY = 9
"""Gaps kept for the interval: their mean resolves 1/9 s from whole-second stamps."""
DECIMALS = 6
"""The decimals a running total is read with: finer than any count it holds, coarser than float noise."""


class RunningTotal:
    """A counter that never goes down, fed increments (`add`) or a source's cumulative readings
    (`observe_total`, e.g. V0's spec-decode counts or the tailer's line count).

    A cumulative reading below the previous one means the source started over (vLLM or the tailer
    restarted): the old total is kept as a base, so the exported counter stays monotonic.

    Increments are summed with compensation (Neumaier), and the value is read rounded to
    `DECIMALS` decimals: token counts made of `rate x window` read `297518.0`, not
    `297517.99999999994` (rounding never makes a counter go down: it is monotonic).

    >>> t = RunningTotal()
    >>> t.observe_total(5); t.observe_total(2); t.value
    7.0
    >>> t = RunningTotal()
    >>> for _ in range(10): _ = t.add(0.1)
    >>> t.value
    1.0
    """

    __slots__ = ("_base", "_compensation", "_raw")

    def __init__(self) -> None:
        self._base = 0.0
        self._compensation = 0.0
        self._raw = 0.0

    @property
    def value(self) -> float:
        return round(self._base + self._compensation + self._raw, DECIMALS) + 0.0

    def add(self, amount: float | None) -> bool:
        """Count `amount` more (a missing, negative or zero amount adds nothing). False: refused, as an
        amount not finite, or one that would take the total past a float's range, would corrupt the
        counter for good (inf, then NaN); the caller counts the line it came from as unreadable."""
        if amount is None:
            return True
        if not math.isfinite(amount):
            return False
        return amount <= 0 or self._accumulate(amount, self._raw)

    def _accumulate(self, amount: float, raw: float) -> bool:
        """Add `amount` to the base; False (nothing added) when the total with the source's `raw` reading
        it will hold would not be finite."""
        total = self._base + amount
        if not math.isfinite(total + self._compensation + raw):
            return False
        if abs(self._base) >= abs(amount):
            self._compensation += (self._base - total) + amount
        else:
            self._compensation += (amount - total) + self._base
        self._base = total
        return True

    def observe_total(self, raw: float | None) -> None:
        """The source's own cumulative value now."""
        if raw is None or not math.isfinite(raw) or raw < 0:
            return
        if raw < self._raw and not self._accumulate(self._raw, raw):
            return  # the old total and this one do not fit a float together: refused
        if math.isfinite(self._base + self._compensation + raw):
            self._raw = float(raw)

    def restart(self) -> None:
        """The source starts over from zero (a new vLLM launch)."""
        if self._accumulate(self._raw, 0.0):
            self._raw = 0.0


class TokenWindows:
    """One engine's token counters and the spacing of its lines. The counters survive `restart()` (a
    new launch): Prometheus counters must not go down within our process; the spacing does not."""

    def __init__(self, stats_interval: float | None = None) -> None:
        """`stats_interval`: the configured interval, always the window; without it, the mean gap."""
        self.stats_interval = stats_interval
        self.prompt_tokens = RunningTotal()
        self.generation_tokens = RunningTotal()
        self.busy_seconds = RunningTotal()  # the windows in which tokens were computed
        self.counting = True
        """False: the lines' throughputs add no tokens, only their busy windows (the engine's step lines
        count its tokens, `EngineState.apply_step`)."""
        self._last_time: datetime | None = None
        self._gaps: deque[float] = deque(maxlen=GAP_HISTORY)
        self._mean: float | None = None  # of `_gaps`, kept as they change
        self._held: tuple[float | None, float | None] | None = None
        self._after_zero = False  # the line before printed no throughput

    def add(self, time: datetime | None, prompt: float | None, generation: float | None, zero: bool) -> None:
        """One line's throughputs (None: absent or not finite), stamped `time`; `zero`: the line printed
        no throughput (both zero or absent)."""
        window = self._window(time, self._after_zero)
        self._after_zero = zero
        if window is None:
            self._held = (prompt, generation)
            return
        self._credit(prompt, generation, window)

    def sibling(self) -> TokenWindows:
        """Windows of their own (spacing, held line) with the same settings, adding to the same counters:
        another process's lines under the same engine label (two servers writing one log)."""
        twin = TokenWindows(self.stats_interval)
        twin.prompt_tokens, twin.generation_tokens = self.prompt_tokens, self.generation_tokens
        twin.busy_seconds, twin.counting = self.busy_seconds, self.counting
        return twin

    def restart(self) -> None:
        """A new launch: the spacing starts over; a held first line is credited with the typical
        interval rather than lost."""
        if self._held is not None:
            self._credit(*self._held, self.interval())
        self._held = None
        self._last_time = None
        self._gaps.clear()
        self._mean = None
        self._after_zero = False

    def typical_interval(self) -> float | None:
        """The configured interval, else the mean gap, else None."""
        return self.stats_interval if self.stats_interval is not None else self._mean

    def interval(self) -> float:
        """The typical interval, or vLLM's default before one is known."""
        return self.typical_interval() or DEFAULT_INTERVAL

    def _window(self, time: datetime | None, after_zero: bool) -> float | None:
        """The window to credit this line with; None holds the line until a gap tells (the first
        line, while no interval is known yet).

        vLLM hides a window only when it and the window before were both all-zero, so the gap after
        a busy line is one interval (plus timer lateness), but the gap after an all-zero line may
        span hidden windows: it is never taken as an interval."""
        if self.stats_interval is not None:
            return self.stats_interval
        if time is None:
            return self.interval()
        previous, self._last_time = self._last_time, time
        if previous is None:
            return None  # hold the first line until a gap tells
        try:
            gap: float | None = (time - previous).total_seconds()
        except TypeError:  # naive next to aware: not comparable
            gap = None
        typical = before = self._mean
        limit = MAX_FIRST_GAP if typical is None else IDLE_GAP_FACTOR * typical
        usable = gap is not None and 0 < gap <= limit and not after_zero
        if usable:
            gaps = self._gaps
            same = len(gaps) == gaps.maxlen and gaps[0] == gap  # the same gaps after it: the same mean
            gaps.append(gap)  # type: ignore[arg-type]
            if not same:
                self._mean = typical = fmean(gaps)
        if self._held is not None:  # its window, best known now: the next true gap
            self._credit(*self._held, gap if usable and gap is not None else before or DEFAULT_INTERVAL)
            self._held = None
        return None if before is None and not usable else typical or DEFAULT_INTERVAL

    def _credit(self, prompt: float | None, generation: float | None, window: float) -> None:
        busy = False
        if prompt is not None:
            tokens = prompt * window
            busy = 0 < tokens < math.inf
            if self.counting:
                self.prompt_tokens.add(tokens)
        if generation is not None:
            tokens = generation * window
            busy = busy or 0 < tokens < math.inf
            if self.counting:
                self.generation_tokens.add(tokens)
        if busy:
            self.busy_seconds.add(window)


def readable(*throughputs: float | None) -> bool:
    """None of a line's throughputs is past what an engine can compute (NaN, like None, is missing).

    >>> readable(None, 0.0, 2198.7, float("nan")), readable(float("inf")), readable(2e9)
    (True, False, False)
    """
    for t in throughputs:  # noqa: SIM110 - a loop: no generator a stats line
        if t is not None and t > MAX_TOKENS_PER_SECOND:
            return False
    return True


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


class StepTokens:
    """One engine's token counts from its step lines, since its first one (`started`)."""

    __slots__ = ("_cut", "steps")

    def __init__(self) -> None:
        self.steps = 0
        self._cut = False  # the last step's last context request was cut by the step budget

    @property
    def started(self) -> bool:
        """A step line was counted: the counters are the steps' from here on."""
        return self.steps > 0

    def add(self, context_requests: int, context_tokens: int, generation_requests: int,
            generation_tokens: int, *, dummy: bool = False, budget: int | None = None) -> tuple[int, int]:
        """One step line; `budget`: vLLM's `max_num_batched_tokens` when known. Returns the (prompt,
        generation) tokens it adds.

        >>> s = StepTokens()
        >>> s.add(2, 960, 0, 0), s.add(0, 0, 2, 2)  # two prefills (a first token each), one decode step
        ((960, 2), (0, 2))
        >>> s.add(1, 2048, 0, 0, budget=2048), s.add(1, 400, 0, 0, budget=2048)  # one prompt in 2 chunks
        ((2048, 1), (400, 0))
        """
        if dummy or min(context_requests, context_tokens, generation_requests, generation_tokens) < 0:
            return 0, 0
        self.steps += 1
        continued = 1 if self._cut and context_requests else 0  # the cut request of the step before
        self._cut = (budget is not None and context_requests > 0
                     and context_tokens + generation_tokens >= budget)
        return context_tokens, generation_requests + context_requests - continued

    def restart(self) -> None:
        """A new launch: its steps decide again (the counts so far stay in the counters)."""
        self.steps = 0
        self._cut = False
