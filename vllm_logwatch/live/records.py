"""The live record stream (`watch --records`, `run --records`): the stats records the live modes read,
as `parse --jsonl` writes them, to a file that rotates or to standard output, for a log shipper
(Fluent Bit, Vector, Grafana Alloy, promtail) to carry to a log store.

A record holds numbers, its time, file and line: never log text. The reader hands each block's
records over without waiting (`put`): a bounded queue (`QUEUED` records) between it and a writer
thread of its own, so a sink that is slow, full or gone never holds up the reading (nor, in run mode,
vLLM): what does not fit, or cannot be written, is dropped, counted (`records_dropped` on /metrics)
and said once on stderr. The file rotates at `ROTATE_BYTES` (`logging.handlers.RotatingFileHandler`:
PATH.1 ... PATH.3, renamed, which shippers follow by inode); `-` writes to standard output.

Once across a restart, `kill -9` included (a file, with `--state-file`): the state file names, with
the position of the lines read, where the records file was after their records (`mark`: its device,
inode and size, flushed and fsync'd before the state is written; and how many of those records the
writer had not written yet, `behind`). A restart reads the lines after that position again; the
records it would write again are those already in the file after the mark (past the `behind` first
ones), so these are not written twice (`_resume`). The file is never cut back (a shipper may have
read it: it would see a truncation), except a record left half written by the kill. Records handed
over but never written (the process killed with them queued) are lost only if the state was saved
past their lines meanwhile: the state keeper waits a little for the writer first
(`live/pipeline.py` `StateKeeper`); what is lost is counted as dropped at the restart. Standard output and
other sinks that are not regular files hold no mark: a restart writes again what was read after the
last save.
"""

from __future__ import annotations

import logging
import logging.handlers
import os
import stat
import sys
import threading
from collections import Counter, deque
from collections.abc import Iterable, Sequence

from prometheus_client.core import CounterMetricFamily, Metric

from ..errors import UsageError
from ..exporting.catalogue import name, spec
from ..following.statefile import saved_extra
from ..parsing.events import EngineStats, Event, event_to_dict, json_line
from ..shown import shown_path

log = logging.getLogger("vllm_logwatch.records")

QUEUED = 1 << 16
"""Records waiting for the writer at most; more are dropped."""
ROTATE_BYTES = 64 << 20
BACKUPS = 3
SYNC_WAIT = 0.1
"""Seconds a mark waits for the writer's file to fsync it (a writer stuck on a hung disk holds it)."""


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

    def __init__(self, path: str, *, resume: object = None) -> None:
        """`path`: the file (made if missing, appended to), or `-` for standard output; OSError if it
        cannot be opened. `resume`: the mark the state file was saved with (`mark`), for a restart."""
        self._handler: _File | _Stdout
        lost = 0
        self._skip: Counter[str] = Counter()  # records already in the file, not to be written again
        if path == "-":
            self._handler = _Stdout(sys.stdout)
        else:
            _cut_half_record(path)
            if isinstance(resume, dict):
                self._skip, lost = _resume(path, resume)
            self._handler = _File(path, maxBytes=ROTATE_BYTES, backupCount=BACKUPS, encoding="utf-8")
        self._handler.setFormatter(logging.Formatter("%(message)s"))
        self._limit = QUEUED
        self._queue: deque[list[EngineStats]] = deque()
        self._queued = 0
        self._handed = 0  # records queued so far (`handed`); the writer has taken `_done` of them
        self._done = 0
        where = self._where()  # a regular file: where it ends after each batch, for `mark`
        self._marks: deque[tuple[int, int, int, int]] = deque([(0, *where)] if where else [], maxlen=QUEUED)
        self._synced: tuple[int, int] | None = None
        self._dropped = 0
        self._written = 0
        self._said = False
        self._closed = False
        lock = threading.Lock()
        self._ready = threading.Condition(lock)  # the writer waits for records
        self._progress = threading.Condition(lock)  # `wait_written` waits for the writer
        self._thread = threading.Thread(target=self._run, name="logwatch-records", daemon=True)
        if lost:
            self._drop(lost, f"{lost} records read before the restart were never written (killed with "
                       "them queued)")

    def start(self) -> None:
        self._thread.start()

    def put(self, events: Sequence[Event]) -> None:
        """Queue the stats records of a block; never waits (drops, counted, when the queue is full)."""
        records = [e for e in events if isinstance(e, EngineStats)]
        if self._skip:
            records = [e for e in records if not self._written_before(e)]
        if not records:
            return
        with self._ready:
            if not self._closed and self._queued + len(records) <= self._limit:
                self._queue.append(records)
                self._queued += len(records)
                self._handed += len(records)
                self._ready.notify()
                return
        self._drop(len(records), "its sink falls behind")

    def _written_before(self, record: EngineStats) -> bool:
        """A record the process before a restart wrote after the state file's mark: not again."""
        line = json_line(event_to_dict(record))
        if not self._skip[line]:
            return False
        self._skip[line] -= 1
        if not self._skip[line]:
            del self._skip[line]  # an empty Counter ends the comparing
        return True

    def handed(self) -> int:
        """Records queued so far: take it with the position of the lines they came from."""
        with self._ready:
            return self._handed

    def wait_written(self, handed: int, timeout: float) -> None:
        """Wait (at most `timeout` seconds) until the writer has taken the first `handed` records."""
        with self._progress:
            self._progress.wait_for(lambda: self._done >= handed or not self._thread.is_alive(), timeout)

    def mark(self, handed: int) -> dict[str, int] | None:
        """Where the file was after the writer took the first `handed` records (or as far as it got:
        `behind` records short), fsync'd; None for a sink that is not a regular file. A state file
        saved with it after the lines of those records lets a restart write each record once."""
        with self._ready:
            marks = self._marks
            if not marks:
                return None
            while len(marks) > 1 and marks[1][0] <= handed:
                marks.popleft()
            done, dev, ino, size = marks[0]
        self._sync(ino, size)
        return {"dev": dev, "ino": ino, "size": size, "behind": max(0, handed - done)}

    def _where(self) -> tuple[int, int, int] | None:
        """(device, inode, size) of the file written to, if it is a regular file."""
        stream = getattr(self._handler, "stream", None) if isinstance(self._handler, _File) else None
        try:
            st = os.fstat(stream.fileno()) if stream is not None else None
        except (OSError, ValueError):
            return None
        return (st.st_dev, st.st_ino, st.st_size) if st is not None and stat.S_ISREG(st.st_mode) else None

    def _sync(self, ino: int, size: int) -> None:
        """fsync the file up to `size` (a power cut must not lose what the state file says is there),
        if the writer lets go of it soon enough (a file rotated since was flushed as it closed)."""
        if self._synced == (ino, size) or not self._handler.lock or not self._handler.lock.acquire(
                timeout=SYNC_WAIT):
            return
        try:
            stream = self._handler.stream
            if stream is not None and os.fstat(stream.fileno()).st_ino == ino:
                os.fsync(stream.fileno())
                self._synced = (ino, size)
        except (OSError, ValueError):
            pass
        finally:
            self._handler.lock.release()

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
            lines = "\n".join(json_line(event_to_dict(e)) for e in batch)
            failed = self._handler.failed
            self._handler.handle(logging.makeLogRecord({"msg": lines}))
            where = self._where() if self._marks else None
            with self._ready:
                self._queued -= len(batch)
                self._done += len(batch)
                if where is not None:
                    self._marks.append((self._done, *where))
                self._progress.notify_all()
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
            row = spec(short)
            yield CounterMetricFamily(row.name, row.help, value=value)


def _cut_half_record(path: str) -> None:
    """A record left half written (`kill -9` in the middle of a write) is cut off the file's end: the
    next record would be glued to it."""
    try:
        with open(path, "r+b") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                return
            end = f.seek(0, os.SEEK_END)
            at = end
            while at > 0:
                start = max(0, at - 65536)
                f.seek(start)
                newline = f.read(at - start).rfind(b"\n")
                if newline >= 0:
                    at = start + newline + 1
                    break
                at = start
            if at < end:
                f.truncate(at)
                log.warning("record stream: %d bytes of a record left half written cut off %s", end - at,
                            shown_path(path))
    except OSError:
        return  # missing (made by the handler), or not readable: the handler says so


def _resume(path: str, mark: dict[str, object]) -> tuple[Counter[str], int]:
    """After a restart: the records already written after the state file's `mark` for lines that will be
    read again (not to be written twice), and how many records before them were lost. The mark's file
    is PATH or, rotated since, PATH.1 ... PATH.3; records after it are in it and in the newer ones."""
    try:
        dev, ino, size, behind = (int(mark[k]) for k in ("dev", "ino", "size", "behind"))  # type: ignore[call-overload]
    except (KeyError, TypeError, ValueError):
        return Counter(), 0
    family = [path] + [f"{path}.{n}" for n in range(1, BACKUPS + 1)]
    newer: list[bytes] = []
    for part in family:
        try:
            with open(part, "rb") as f:
                st = os.fstat(f.fileno())
                if (st.st_dev, st.st_ino) != (dev, ino):
                    newer.append(f.read())
                    continue
                if st.st_size < size:
                    break  # cut by someone else: not the file the mark was taken on
                f.seek(size)
                after = f.read()
        except OSError:
            break
        lines = [line.decode("utf-8", "replace") for text in [after, *reversed(newer)]
                 for line in text.splitlines()]
        log.info("record stream: %d records already in %s after the state file's mark are not written "
                 "again", max(0, len(lines) - behind), shown_path(path))
        return Counter(lines[behind:]), max(0, behind - len(lines))
    log.warning("record stream: %s is not the file the state file names: the records of lines read again "
                "may be written twice", shown_path(path))
    return Counter(), 0


def open_records(path: str | None, *, stdout: bool = True,
                 state_file: str | None = None) -> RecordStream | None:
    """The record stream of `--records PATH` (None without it); UsageError for a file that cannot be
    opened, or for `-` where standard output is taken (`stdout=False`: run mode echoes vLLM there).
    `state_file`: the watch's, whose mark a restart resumes the file at (`RecordStream.mark`)."""
    if path is None:
        return None
    if path == "-" and not stdout:
        raise UsageError("--records -: standard output carries vLLM's output; give a file")
    try:
        mode = os.stat(path).st_mode
    except OSError:
        mode = stat.S_IFREG  # missing: made as a file (or said below)
    if path != "-" and not stat.S_ISREG(mode):
        raise UsageError(f"--records {shown_path(path)}: not a regular file (a FIFO or device would block or "
                         "not rotate): give a file, or - for standard output")
    try:
        return RecordStream(path, resume=saved_extra(state_file, "records") if state_file else None)
    except OSError as exc:
        raise UsageError(f"--records {shown_path(path)}: cannot open it ({exc.strerror or exc})") from None
