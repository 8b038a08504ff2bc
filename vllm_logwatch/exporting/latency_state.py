"""Latency from vLLM's detail lines: engine steps (`--enable-logging-iteration-details`) and requests
(`--enable-log-requests`, `--enable-log-outputs`), for the live exporter; what each series measures and
how it compares with vLLM's own: docs/metrics.md ("Latency").

Labels stay bounded: a step's batch is bucketed, adapters are those the log loaded (at most
`MAX_ADAPTERS`, then `other`), and no request id, prompt or output is ever a label. Times come from
when the lines were read live (monotonic), else from stamps finer than a second (a container's): a
request read only by vLLM's whole-second stamps is counted, not timed.
"""

from __future__ import annotations

import bisect
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

from ..parsing.events import Event, IterationStats, RequestLine
from ..parsing.requests import aborted_ids
from .engine_state import engine_label
from .families import Families

DETAIL_EVENTS = (IterationStats, RequestLine)
"""The events this state takes (`LatencyState.apply`)."""

STEP_BOUNDS = (0.001, 0.0025, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.03, 0.05, 0.075, 0.1, 0.15, 0.25, 0.5, 1.0,
               2.5)
REQUEST_BOUNDS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 40.0, 80.0, 160.0, 320.0)
TTFT_BOUNDS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 40.0)
_BATCH_EDGES = (0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
FINISH_REASONS = frozenset({"stop", "length", "abort", "error", "repetition", "tool_calls", "unknown"})
"""The finish reasons kept as label values (vLLM's, plus `unknown`: a stream whose end was logged
without one); any other is `other`."""
MAX_ADAPTERS = 16
MAX_PENDING = 65536
"""Requests in flight remembered; past it the oldest is forgotten (counted as `untimed` if it ends)."""


def batch_bucket(n: int) -> str:
    """The bounded label of a step's generation requests.

    >>> [batch_bucket(n) for n in (0, 1, 2, 3, 4, 5, 9, 600)]
    ['0', '1', '2', '3-4', '3-4', '5-8', '9-16', '513+']
    """
    i = bisect.bisect_left(_BATCH_EDGES, n)
    if i >= len(_BATCH_EDGES):
        return f"{_BATCH_EDGES[-1] + 1}+"
    hi = _BATCH_EDGES[i]
    lo = _BATCH_EDGES[i - 1] + 1 if i else 0
    return str(hi) if lo >= hi else f"{lo}-{hi}"


def timing(event: Event, measured: float | None) -> tuple[float, str] | None:
    """(seconds, clock) of a detail line: its own time when finer than a second (a container's stamp),
    else when it was printed as measured live (monotonic), else None (vLLM's whole-second stamps)."""
    if event.time is not None and event.time.microsecond:
        return event.time.timestamp(), "wall"
    return None if measured is None else (measured, "monotonic")


@dataclass
class Histogram:
    """Cumulative-ready counts over fixed upper bounds (seconds), and their sum."""

    bounds: tuple[float, ...]
    counts: list[int] = field(default_factory=list)
    total: float = 0.0

    def observe(self, value: float, times: int = 1) -> None:
        """Count `value` `times` times."""
        if not self.counts:
            self.counts = [0] * (len(self.bounds) + 1)
        self.counts[bisect.bisect_left(self.bounds, value)] += times
        self.total += value * times

    def buckets(self) -> list[tuple[str, float]]:
        """(`le`, cumulative count) pairs, `+Inf` last."""
        out, running = [], 0
        for bound, count in zip((*map(repr, self.bounds), "+Inf"), self.counts, strict=True):
            running += count
            out.append((bound, float(running)))
        return out


@dataclass
class _Pending:
    start: float | None
    clock: str
    lora: str
    first: float | None = None
    reason: str | None = None


class LatencyState:
    """The exporter's latency state: fed under its lock, read at scrape time. Counters and
    histograms survive a new launch; the requests in flight, the last step lines and the gauge do not."""

    def __init__(self, bound: Callable[[str], str] = str) -> None:
        """`bound`: an engine label -> the bounded label its series use (the exporter's cap)."""
        self._bound = bound
        self.steps: dict[tuple[str, str, str], Histogram] = {}
        self.between: dict[tuple[str, str], Histogram] = {}
        self.last_decode: dict[str, float] = {}
        self.requests: dict[tuple[str, str], int] = {}
        self.e2e = Histogram(REQUEST_BOUNDS)
        self.ttft = Histogram(TTFT_BOUNDS)
        self.untimed = 0
        self.adapters: set[str] = set()
        self.overflow = 0
        self._pending: OrderedDict[str, _Pending] = OrderedDict()
        self._last_line: dict[str, tuple[float, str]] = {}

    def reset(self) -> None:
        """A new launch: requests in flight, the step cadence and the last decode step's gauge start over
        (as every per-engine gauge does)."""
        self._pending.clear()
        self._last_line.clear()
        self.last_decode.clear()

    def apply(self, event: IterationStats | RequestLine, measured: float | None) -> None:
        """One detail line; `measured`: when it was printed, if read live (monotonic)."""
        when = timing(event, measured)
        if isinstance(event, IterationStats):
            self.apply_iteration(self._bound(engine_label(event.engine)), event, when)
        else:
            self.apply_request(event, when)

    def apply_iteration(self, engine: str, step: IterationStats, when: tuple[float, str] | None) -> None:
        """One step of `engine` (its bounded label); `when`: (seconds, clock) of its line, if timed."""
        phase = step.phase
        if phase == "idle" or step.dummy:
            return
        batch = batch_bucket(step.generation_requests)
        seconds = step.elapsed_ms / 1000.0
        self.steps.setdefault((engine, phase, batch), Histogram(STEP_BOUNDS)).observe(seconds)
        if phase == "decode":
            self.last_decode[engine] = seconds
        last = self._last_line.get(engine)
        if when is not None:
            streams = step.generation_requests
            if streams and last is not None and last[1] == when[1] and when[0] >= last[0]:
                # one token gap per running stream, as vLLM's inter-token latency counts them
                gaps = self.between.setdefault((engine, batch), Histogram(STEP_BOUNDS))
                gaps.observe(when[0] - last[0], streams)
            self._last_line[engine] = when

    def apply_request(self, line: RequestLine, when: tuple[float, str] | None) -> None:
        """One request line; `when`: (seconds, clock) of the line when timed finely enough."""
        event = line.event
        if event == "lora_loaded":
            if line.lora is not None and line.lora not in self.adapters:
                if len(self.adapters) < MAX_ADAPTERS:
                    self.adapters.add(line.lora)
                else:
                    self.overflow += 1
            return
        if event == "received":
            lora = "" if line.lora is None else line.lora if line.lora in self.adapters else "other"
            start, clock = when or (None, "")
            self._pending[line.request_id] = _Pending(start, clock, lora)
            self._pending.move_to_end(line.request_id)
            while len(self._pending) > MAX_PENDING:
                self._pending.popitem(last=False)
            return
        if event == "added":
            return
        if event == "delta":
            pending = self._pending.get(line.request_id)
            if pending is not None:
                if pending.first is None and when is not None and pending.start is not None \
                        and when[1] == pending.clock:
                    pending.first = when[0]
                    self.ttft.observe(max(0.0, when[0] - pending.start))
                if line.finish_reason is not None:  # kept for the stream's complete line
                    pending.reason = line.finish_reason
            return
        if event == "aborted":
            for rid in aborted_ids(line.aborted, self._pending):
                self._end(rid, "abort", when)
            return
        if event == "response":
            reason = line.finish_reason
        else:  # vLLM 0.32 prints `streaming_complete` here: the reason is the last delta's
            pending = self._pending.get(line.request_id)
            reason = pending.reason if pending is not None else None
        self._end(line.request_id, reason or "unknown", when)

    def _end(self, rid: str, reason: str, when: tuple[float, str] | None) -> None:
        pending = self._pending.pop(rid, None)
        lora = pending.lora if pending is not None else ""
        reason = reason if reason in FINISH_REASONS else "other"
        key = (reason, lora)
        self.requests[key] = self.requests.get(key, 0) + 1
        same_clock = pending is not None and when is not None and when[1] == pending.clock
        start = pending.start if pending is not None and same_clock else None
        if start is None or when is None:
            self.untimed += 1
        elif reason != "abort":  # as vLLM's own e2e_request_latency: finished requests only
            self.e2e.observe(max(0.0, when[0] - start))

    def add_to(self, out: Families, model: str) -> None:
        """Every series of this state into a scrape's families; per-engine ones lead with the engine
        label and `model`."""
        for (engine, phase, batch), hist in self.steps.items():
            out.histogram("step_duration_seconds", (engine, model, phase, batch), hist.buckets(), hist.total)
        for engine, seconds in self.last_decode.items():
            out.add("decode_step_seconds", (engine, model), seconds)
        for (engine, batch), hist in self.between.items():
            out.histogram("time_between_tokens_seconds", (engine, model, batch), hist.buckets(), hist.total)
        for (reason, lora), count in self.requests.items():
            out.add("requests", (model, reason, lora), count)
        if self.e2e.counts:
            out.histogram("request_duration_seconds", (model,), self.e2e.buckets(), self.e2e.total)
        if self.ttft.counts:
            out.histogram("time_to_first_token_seconds", (model,), self.ttft.buckets(), self.ttft.total)
        if self.requests:
            out.add("requests_untimed", (model,), self.untimed)
