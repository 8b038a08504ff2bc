"""`logwatch parse --kind iterations` and `--kind requests`: the rows of vLLM's detail lines.

An iteration row is one engine step as its line says it. A request row is one request, put together
from its lines (`Received request`, `Added request`, its first streamed output, its end: the stream's
`complete` line, a whole `Generated response`, or `Aborted request(s)`), written when it ends, in the
order of the ends; requests whose end the log does not hold follow at the end of each file, with an
empty end. Times are the lines' own: vLLM's stamps have whole seconds (`time_resolution_s` 1), a
container's stamps a microsecond (`0.000001`); durations are differences of those. No prompt or output
text, nor the request's parameters, is read into a row.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime, tzinfo
from typing import Any

from ...parsing.columns import ITERATION_COLUMNS
from ...parsing.events import Event, IterationStats, RequestLine
from ...parsing.requests import aborted_ids
from ...parsing.stamps import seconds_between
from ...shown import finite
from .events import iter_source_events
from .inputs import Source

__all__ = ["ITERATION_COLUMNS", "REQUEST_COLUMNS", "RequestRows", "iteration_row", "rows_of", "source_rows"]

REQUEST_COLUMNS: tuple[str, ...] = (
    "request_id", "file", "line", "lora", "received", "added", "first_output", "ended", "end",
    "finish_reason", "queue_s", "ttft_s", "e2e_s", "time_resolution_s",
)
_OPEN_CAP = 1 << 20
"""Requests in flight kept per file; beyond it the oldest is written as it stands (its end empty)."""


def iteration_row(e: IterationStats) -> list[Any]:
    """The row of one step, in `ITERATION_COLUMNS` order (None for an empty cell)."""
    return [
        e.time.isoformat() if e.time else None, e.file, e.line, e.engine, e.iteration, e.context_requests,
        e.context_tokens, e.generation_requests, e.generation_tokens, finite(e.elapsed_ms), e.phase, e.dummy,
        finite(e.kv_cache_usage_pct), e.device, e.encoder_inputs, e.encoder_embeddings,
    ]


@dataclass
class _Request:
    rid: str
    file: str | None
    line: int | None
    lora: str | None = None
    received: datetime | None = None
    added: datetime | None = None
    first: datetime | None = None
    ended: datetime | None = None
    end: str | None = None
    reason: str | None = None

    def row(self) -> list[Any]:
        stamps = (self.received, self.added, self.first, self.ended)
        times = [t for t in stamps if t is not None]
        fine = bool(times) and all(t.microsecond for t in times)
        return [
            self.rid, self.file, self.line, self.lora, *(_iso(t) for t in stamps), self.end, self.reason,
            _between(self.received, self.added), _between(self.received, self.first),
            _between(self.received, self.ended), (0.000001 if fine else 1) if times else None,
        ]


def _iso(t: datetime | None) -> str | None:
    return t.isoformat() if t is not None else None


def _between(a: datetime | None, b: datetime | None) -> float | None:
    if a is None or b is None:
        return None
    return round(seconds_between(a, b), 6)


class RequestRows:
    """Request lines in file order -> one row per request (`REQUEST_COLUMNS`), each when it ends."""

    def __init__(self) -> None:
        # Ordered: the oldest goes first in O(1) (a dict walks the slots its evictions left at its front).
        self._open: OrderedDict[str, _Request] = OrderedDict()

    def feed(self, e: RequestLine) -> list[list[Any]]:
        """The rows this line completes (an abort line may end several)."""
        if e.event == "lora_loaded":
            return []
        if e.event == "aborted":
            return [self._finish(rid, e, "aborted", "abort") for rid in aborted_ids(e.aborted, self._open)]
        rid = self._match(e.request_id) if e.event == "added" else e.request_id
        req = self._open.get(rid)
        if req is None:
            req = self._open[rid] = _Request(rid, e.file, e.line)
        out: list[list[Any]] = []
        if len(self._open) > _OPEN_CAP:
            out.append(self._open.popitem(last=False)[1].row())
        if e.event == "received":
            req.received, req.lora, req.line = e.time, e.lora, e.line
        elif e.event == "added":
            req.added = req.added or e.time
        elif e.event == "delta":
            req.first = req.first or e.time
            req.reason = e.finish_reason or req.reason
        else:  # complete: vLLM 0.32 prints `streaming_complete` as its reason; the last delta's is the one
            reason = e.finish_reason if e.event == "response" else req.reason
            out.append(self._finish(e.request_id, e, e.event, reason))
        return out

    def _match(self, rid: str) -> str:
        """The front end's id of an engine's id (vLLM 0.32 adds `-<8 hex>` for the engine)."""
        if rid in self._open:
            return rid
        head = rid.rpartition("-")[0]
        return head if head in self._open else rid

    def _finish(self, rid: str, e: RequestLine, end: str, reason: str | None) -> list[Any]:
        req = self._open.pop(rid, None) or _Request(rid, e.file, e.line)
        req.ended, req.end, req.reason = e.time, end, reason
        return req.row()

    def rest(self) -> list[list[Any]]:
        """The requests whose end was not read (at the end of a file), end empty."""
        rows = [req.row() for req in self._open.values()]
        self._open.clear()
        return rows


def rows_of(kind: str, events: Iterable[Event]) -> Iterator[list[Any]]:
    """The rows of `kind` (`iterations` or `requests`) from one file's events."""
    if kind == "iterations":
        for e in events:
            if isinstance(e, IterationStats):
                yield iteration_row(e)
        return
    requests = RequestRows()
    for e in events:
        if isinstance(e, RequestLine):
            yield from requests.feed(e)
    yield from requests.rest()


def source_rows(
    source: Source, kind: str, zone: tzinfo, year: int | None) -> Iterator[list[Any]]:
    """The rows of `kind` of one source, through the general parser."""
    yield from rows_of(kind, iter_source_events(source, kind, zone, year))
