"""The live record stream (`watch --records`, `run --records`): the stats records the live modes read,
as `parse --jsonl` writes them, to a file that rotates or to standard output, for a log shipper
(Fluent Bit, Vector, Grafana Alloy, promtail) to carry to a log store.

A record holds numbers, its time, file and line: never log text. The reader hands each block's
records over without waiting (`put`): a bounded queue (`QUEUED` records) between it and a writer
thread of its own, so a sink that is slow, full or gone never holds up the reading (nor, in run mode,
vLLM): what does not fit, or cannot be written, is dropped, counted (`records_dropped` on /metrics)
and said once on stderr. The file rotates at `ROTATE_BYTES` (`logging.handlers.RotatingFileHandler`:
PATH.1 ... PATH.3, renamed, which shippers follow by inode); `-` writes to standard output.
"""

from __future__ import annotations

import json
import logging
import logging.handlers
import sys
import threading
from collections import deque
from collections.abc import Iterable, Sequence

from prometheus_client.core import CounterMetricFamily, Metric

from ..errors import UsageError
from ..exporting.catalogue import METRICS, name
from ..parsing.events import EngineStats, Event, event_to_dict
from ..shown import shown_path

__all__ = ["QUEUED", "ROTATE_BYTES", "RecordStream", "open_records"]

log = logging.getLogger("vllm_logwatch.records")

QUEUED = 1 << 16
"""Records waiting for the writer at most; more are dropped."""
ROTATE_BYTES = 64 << 20
BACKUPS = 3
_SPECS = {m.name: m for m in METRICS}


class _Quiet:
    """A handler whose failed write (full disk, a reader gone) is counted, not printed with a traceback."""

    failed = 0

    def handleError(self, record: logging.LogRecord) -> None:  # logging.Handler names it so
        self.failed += 1


class _File(_Quiet, logging.handlers.RotatingFileHandler):
    pass


class _Stdout(_Quiet, logging.StreamHandler):  # type: ignore[type-arg]
    pass


class RecordStream:
    """`put` each block's events (any kinds: the stats records are kept); `start` the writer, `close`
    at the end (what is queued is written first). A prometheus_client collector of its two counters
    (no `describe`: the exporter's own describes every name of the catalogue, these two included)."""

    def __init__(self, path: str, *, rotate_bytes: int = ROTATE_BYTES, queued: int = QUEUED) -> None:
        """`path`: the file (made if missing, appended to), or `-` for standard output; OSError if it
        cannot be opened."""
        self._handler: _File | _Stdout
        if path == "-":
            self._handler = _Stdout(sys.stdout)
        else:
            self._handler = _File(path, maxBytes=rotate_bytes, backupCount=BACKUPS, encoding="utf-8")
        self._handler.setFormatter(logging.Formatter("%(message)s"))
        self._limit = queued
        self._queue: deque[list[EngineStats]] = deque()
        self._queued = 0
        self._dropped = 0
        self._written = 0
        self._said = False
        self._closed = False
        self._ready = threading.Condition()
        self._thread = threading.Thread(target=self._run, name="logwatch-records", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def put(self, events: Sequence[Event]) -> None:
        """Queue the stats records of a block; never waits (drops, counted, when the queue is full)."""
        records = [e for e in events if isinstance(e, EngineStats)]
        if not records:
            return
        with self._ready:
            if not self._closed and self._queued + len(records) <= self._limit:
                self._queue.append(records)
                self._queued += len(records)
                self._ready.notify()
                return
        self._drop(len(records), "its sink falls behind")

    def _drop(self, count: int, why: str) -> None:
        with self._ready:
            self._dropped += count
            say, self._said = not self._said, True
        if say:
            log.warning("record stream: %s; records dropped are counted in %s", why,
                        name("records_dropped") + "_total")

    def _run(self) -> None:
        while True:
            with self._ready:
                while not self._queue and not self._closed:
                    self._ready.wait()
                if not self._queue:
                    return
                batch = self._queue.popleft()
            lines = "\n".join(json.dumps(event_to_dict(e), separators=(", ", ": ")) for e in batch)
            failed = self._handler.failed
            self._handler.handle(logging.makeLogRecord({"msg": lines}))
            with self._ready:
                self._queued -= len(batch)
                if self._handler.failed == failed:
                    self._written += len(batch)
            if self._handler.failed != failed:
                self._drop(len(batch), "a write failed")

    def close(self, timeout: float = 5.0) -> None:
        """Write what is queued (at most `timeout` seconds), then close the file."""
        with self._ready:
            self._closed = True
            self._ready.notify()
        if self._thread.is_alive():
            self._thread.join(timeout)
        if not self._thread.is_alive():
            self._handler.close()

    def counts(self) -> tuple[int, int]:
        """(records written, records dropped)."""
        with self._ready:
            return self._written, self._dropped

    def collect(self) -> Iterable[Metric]:
        written, dropped = self.counts()
        for short, value in (("records_written", written), ("records_dropped", dropped)):
            spec = _SPECS[name(short)]
            yield CounterMetricFamily(spec.name, spec.help, value=value)


def open_records(path: str | None, *, stdout: bool = True) -> RecordStream | None:
    """The record stream of `--records PATH` (None without it); UsageError for a file that cannot be
    opened, or for `-` where standard output is taken (`stdout=False`: run mode echoes vLLM there)."""
    if path is None:
        return None
    if path == "-" and not stdout:
        raise UsageError("--records -: standard output carries vLLM's output; give a file")
    try:
        return RecordStream(path)
    except OSError as exc:
        raise UsageError(f"--records {shown_path(path)}: cannot open it ({exc.strerror or exc})") from None
