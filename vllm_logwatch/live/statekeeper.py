"""The state file in step with what scrapes show: a line a scrape shows is never counted again after
a restart, even after `kill -9`.

The pipeline applies each poll's lines holding the `gate`, and hands the position after them
(`Follower.checkpoint()`) to `pend` in the same breath. A scrape (or a status read) enters
`published()`, which takes the gate, so no line is applied meanwhile, and if the pending position is
not on disk yet writes it (fsync'd) before the scrape collects: whatever it shows is on disk. A
thread of its own (`start`) writes the pending position without the gate, so the worker never waits
for a disk, at most `save_interval` after the previous write: the file is never more than about that
behind the applied lines. Writes, whoever makes them, are at least `save_interval` apart (a scrape
that finds the file behind waits its turn, holding the gate), so at most ten a second by default (a
many-source state file: fewer as it grows, `following/statefile.py`). A
`kill -9` between an apply and its write loses nothing: no scrape saw those lines, and the restart
reads them again. If the state file cannot be written, scrapes are answered anyway (the guarantee
cannot hold then) and the failure is counted by the follower; it is retried every `save_retry`.

With a record stream to a file (`records.py`), each write also names where the records file was after
the records of the lines written as read (`RecordStream.mark`, fsync'd first), so a restart writes
each record once. The records are handed over with the lines (`pend` takes their count), and a write
first waits for the records' writer to have taken them: the writer thread up to `RECORDS_WAIT`, a
scrape (holding the gate) up to the follower's save interval; a sink slower than that is not waited for longer
(the mark then says how many it lacked, and a restart counts those as dropped if they never came).
"""

from __future__ import annotations

import contextlib
import math
import threading
import time
from collections.abc import Iterator

from ..following.source import LineSource
from ..following.statefile import Checkpoint, Position
from .records import RecordStream

SAVE_RETRY = 1.0  # after a failed write
RECORDS_WAIT = 1.0  # the writer thread waits this long at most for the records' writer


class StateKeeper:
    """Keeps `follower`'s state file no further behind the applied lines than `save_interval`, and
    never behind what a scrape inside `published()` shows."""

    def __init__(self, follower: LineSource, *, save_retry: float = SAVE_RETRY) -> None:
        """Writes are at least `follower.save_interval()` apart, asked before each (a many-source
        follower's grows with its state's size)."""
        self.follower = follower
        self.save_retry = save_retry
        self.gate = threading.Lock()  # held to apply a poll's lines, and to collect a scrape
        self.pending: Checkpoint = follower.checkpoint()  # after the lines applied so far
        self.records: RecordStream | None = None  # set before `start`
        self._latest: tuple[Checkpoint, int] = (self.pending, 0)  # `pending` and the records handed
        # over with its lines, in one: the writer thread reads it without the gate
        self.writes = 0
        self._write_lock = threading.Lock()  # one write at a time, each of the newest pending position
        self._saved: Position | None = None  # the position last written
        self._last_write = float("-inf")  # monotonic time of the last write attempt
        self._failing = False  # the last write failed: retried after save_retry; scrapes do not wait
        self.failing_since: float | None = None  # Unix time of the first of the failed writes in a row
        self._due = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start the writer thread (only when there is a state file)."""
        if self.follower.state_file is not None:
            self._thread = threading.Thread(target=self._keep_saved, name="logwatch-state", daemon=True)
            self._thread.start()

    def pend(self, checkpoint: Checkpoint) -> None:
        """The position after the lines just applied (the gate is held by the caller, or not needed)."""
        self._latest = (checkpoint, self.records.handed() if self.records is not None else 0)
        self.pending = checkpoint
        self._due.set()

    def moved(self, checkpoint: Checkpoint) -> None:
        """A position that moved without a line (a file opened, rotated, truncated; a cut line's tail
        skipped) is pending too."""
        if checkpoint.state != self.pending.state:
            with self.gate:
                self.pend(checkpoint)

    @contextlib.contextmanager
    def published(self) -> Iterator[None]:
        """Hold the gate with every applied line's position on disk: what is read inside may be shown.

        Writes the pending position first if it is not on disk yet, after waiting for its turn (at most
        `save_interval`); does not wait, nor write, while writes fail and their retry is not due."""
        with self.gate:
            with self._write_lock:
                wait = self._wait_before_write()
                if wait != math.inf and not self._failing:
                    time.sleep(wait)  # holding the gate: nothing new is applied meanwhile
                    wait = 0.0
                if wait <= 0:
                    self._write_pending()
            yield

    def stop(self, timeout: float) -> None:
        """Stop the writer thread and write the last pending position."""
        self._stop.set()
        self._due.set()
        if self._thread is not None:
            self._thread.join(timeout)
        with self.gate, self._write_lock:
            self._write_pending()

    def _unsaved(self) -> bool:
        state = self.pending.state
        return self.follower.state_file is not None and state is not None and state != self._saved

    def _wait_before_write(self) -> float:
        """Seconds before the pending position may be written (0: now; inf: nothing to write)."""
        if not self._unsaved():
            return math.inf
        pause = self.save_retry if self._failing else self.follower.save_interval()
        return max(0.0, self._last_write + pause - time.monotonic())

    def _write_pending(self) -> None:
        """Write the newest pending position if it is not on disk yet (`_write_lock` is held)."""
        checkpoint, handed = self._latest
        state = checkpoint.state
        if self.follower.state_file is None or state is None or state == self._saved:
            return
        extra = None
        if self.records is not None:
            self.records.wait_written(handed, self.follower.save_interval())
            mark = self.records.mark(handed)
            extra = {"records": mark} if mark is not None else None
        self._last_write = time.monotonic()
        self.writes += 1
        self._failing = not self.follower.write_checkpoint(state, extra)
        if not self._failing:
            self._saved = state
            self.failing_since = None
        elif self.failing_since is None:
            self.failing_since = time.time()

    def saving(self) -> dict[str, object]:
        """For the status: whether the state file is being saved (the exactly-once promise holds only
        then), and since when it is not."""
        return {"path": self.follower.state_file, "saved": self.failing_since is None,
                "failing_since": self.failing_since}

    def _keep_saved(self) -> None:
        """The writer: the pending position reaches the disk within `save_interval` of the previous
        write, with or without scrapes; the worker goes on applying meanwhile."""
        while not self._stop.is_set():
            self._due.wait()
            if self._stop.is_set():
                return
            if self.records is not None:  # not holding the lock: a scrape meanwhile does not wait
                self.records.wait_written(self._latest[1], RECORDS_WAIT)
            with self._write_lock:
                self._due.clear()  # before reading the pending position: a newer one sets it again
                wait = self._wait_before_write()
                if wait <= 0:
                    self._write_pending()
            if wait == math.inf:
                continue
            if wait > 0:
                self._due.set()
                if self._stop.wait(wait):
                    return
