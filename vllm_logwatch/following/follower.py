"""Follow a log file, the newest file of a folder, or of a glob, the way ``tail -F`` should.

Why it is built like this (docs/design.md, "Following files"; google/mtail's ``filestream.go`` is the model):

* ``stat`` is the truth, notifications are only a hint. At end of file: another ``(st_dev, st_ino)`` at
  the path means rotation (drain the old descriptor, then read the new file from 0); a size below our
  offset means copytruncate (read again from 0); a missing path means wait for it. Each poll first
  compares the file's first bytes with those seen before: changed, the file was truncated and written
  again (maybe past our offset) since the last poll, so it is read again from 0 too.
* vLLM launch scripts write one timestamped file per launch, so a folder target follows the newest
  matching file and moves to a newer one, read from its start, once the current one is drained
  (which file is next: ``following/targets.py``).
* A half-written last line waits for its newline; a line longer than the cap is cut and counted, so
  memory stays bounded whatever the file holds; bad UTF-8 is replaced, never fatal (``openfile.py``).
* The state file records the offset just after the last line handed out, so a restart (even after
  ``kill -9``) skips no line and repeats none that was handled before the last save. Standalone, the
  follower writes it itself (at most once
  a second, before reading, so it covers only lines the caller has handled). The pipeline takes this
  over (``autosave = False``): it writes each poll's ``checkpoint()`` once that poll's lines are applied,
  before a scrape may see them (``live/pipeline.py``).
* Waiting is injected (``wake.Waker``): tests step ``poll()`` explicitly; production wakes on watchdog
  events and polls every ``poll_interval`` regardless.

Example::

    follower = Follower("/mnt/sdb/vllm/logs", state_file="/var/lib/logwatch/state.json")
    stop = threading.Event()
    follower.run(lambda lines: print(len(lines)), stop)   # until follower.stop() or stop.set()
    follower.close()
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .openfile import FollowerStats, LogLine, OpenFile, read_at
from .statefile import SavedState, StateError, describe, read_state, write_state
from .targets import Candidate, LaunchFiles
from .wakers import Waker, WatchdogWaker

__all__ = ["Checkpoint", "Follower", "FollowerStats", "LogLine"]

READ_CHUNK_BYTES = 1 << 20  # one read() call
MAX_POLL_BYTES = 16 << 20  # per poll(): a huge backlog must not starve the caller
FINGERPRINT_BYTES = 1024  # the state file recognises a file by the hash of its first bytes
AUTOSAVE_SECONDS = 1.0
_MAX_HOPS = 8  # file changes handled in one poll(); the rest waits for the next one


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """Where the lines the last ``poll()`` returned end, and the follower's totals then.

    ``state`` is what a state file would say (``saved_at`` is set when it is written; None while no
    file is open); ``lines`` and ``bytes`` count what was read up to there."""

    state: SavedState | None
    lines: int
    bytes: int


class Follower:
    """Follows ``target`` (a file, a folder, or a glob) and hands out complete lines.

    ``poll()`` is one non-blocking step, ``run()`` loops until ``stop()``. Start position of the first
    file: its end (only new lines), or its start with ``from_start=True``, or where a matching state
    file says. Every file that appears later is new and read from its start. Errors are counted in
    ``stats`` and shown in ``stats.last_error``; they are never raised out of ``poll()`` or ``run()``.

    Example::

        with Follower("serve.log", from_start=True, waker=ManualWaker()) as follower:
            for line in follower.poll():
                print(line.number, line.text)
    """

    def __init__(
        self,
        target: str,
        *,
        pattern: str = "*.log",
        from_start: bool = False,
        max_line_bytes: int = 1 << 20,
        state_file: str | None = None,
        waker: Waker | None = None,
        poll_interval: float = 1.0,
        autosave: bool = True,
    ) -> None:
        """``autosave=False``: the caller writes the state file (``write_checkpoint``); ``poll()``,
        ``run()`` and ``close()`` never do."""
        if max_line_bytes < 1:
            raise ValueError(f"max_line_bytes must be at least 1, got {max_line_bytes}")
        if poll_interval <= 0:
            raise ValueError(f"poll_interval must be positive, got {poll_interval}")
        self.state_file = os.path.abspath(state_file) if state_file else None
        self._files = LaunchFiles(target, pattern, self.state_file, self._error)
        self.from_start = from_start
        self.max_line_bytes = max_line_bytes
        self.poll_interval = poll_interval
        self.stats = FollowerStats()
        self._waker = waker
        self._owns_waker = False
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._cur: OpenFile | None = None
        self._begun = False
        self._saved: SavedState | None = None
        self._budget = 0
        self._more = False
        self._waiting_for_path = False
        self._dirty = False
        self._last_save = float("-inf")
        self._closed = False
        self.autosave = autosave
        self.poll_bytes: int | None = None  # bytes one poll() reads at most (None: MAX_POLL_BYTES)
        self._checkpoint = Checkpoint(None, 0, 0)
        self._state_lock = threading.Lock()  # one state write at a time, whichever thread writes

    @property
    def target(self) -> str:
        """The absolute path (or glob) followed."""
        return self._files.target

    @property
    def mode(self) -> str:
        """``"file"``, ``"dir"`` (the newest matching file of a folder) or ``"glob"``."""
        return self._files.mode

    # -- public ------------------------------------------------------------------------------------

    def poll(self) -> list[LogLine]:
        """Read what is new (at most ``poll_bytes``, default ``MAX_POLL_BYTES``) and return the complete
        lines, in order.

        Never blocks on a writer and never raises for I/O: errors are counted and retried next time.
        """
        out: list[LogLine] = []
        with self._lock:
            if self._closed:
                return out
            # Autosave before reading: it covers the lines the previous poll() returned, which the
            # caller has handled by now (run() calls on_lines before polling again). Saving after
            # reading would record lines the caller has not seen yet, and a crash would skip them.
            if (self.autosave and self._dirty and self.state_file
                    and time.monotonic() - self._last_save >= AUTOSAVE_SECONDS):
                self._save_locked()
            self._budget = self.poll_bytes or MAX_POLL_BYTES
            self._more = False
            try:
                self._step(out)
            except OSError as exc:
                self._error(exc, self._cur.path if self._cur else self.target)
            try:
                position = self._position_locked()
            except OSError as exc:
                self._error(exc, self._cur.path if self._cur else self.target)
                position = self._checkpoint.state
            self._checkpoint = Checkpoint(position, self.stats.lines, self.stats.bytes)
            if self._waker is not None:
                self._waker.watch(self._files.watch_dirs())
        return out

    def checkpoint(self) -> Checkpoint:
        """The position just after the lines the last ``poll()`` returned (and the totals then).

        Take it in the polling thread once those lines are handled, before polling again; writing it
        (``write_checkpoint``) then records exactly the handled lines, whatever the follower reads next.
        """
        return self._checkpoint

    def write_checkpoint(self, state: SavedState) -> bool:
        """Write ``state`` (from ``checkpoint()``) to the state file, atomically; True if written.

        Safe from any thread (one write at a time). Errors are counted in ``stats.state_errors`` and
        shown in ``stats.last_state_error``, never raised."""
        path = self.state_file
        if path is None:
            return False
        with self._state_lock:
            try:
                write_state(path, dataclasses.replace(state, saved_at=time.time()))
            except StateError as exc:
                self._state_error(str(exc))
                return False
            except OSError as exc:
                self._state_error(f"cannot save state: {describe(exc, path)}")
                return False
        return True

    def run(
        self, on_lines: Callable[[list[LogLine]], None], stop: threading.Event | None = None, *,
        on_poll: Callable[[], None] | None = None,
    ) -> None:
        """Poll and deliver until ``stop()`` is called or ``stop`` is set; saves state when leaving
        (unless ``autosave`` is off).

        ``on_poll()`` is called after every poll (after ``on_lines``, if lines came): the moment to take
        ``checkpoint()``. Without an injected waker, a ``WatchdogWaker(poll_interval)`` is made here (and
        closed by ``close()``). Exceptions from ``on_lines`` and ``on_poll`` are the caller's and propagate.
        """
        waker = self._waker
        if waker is None:
            waker = self._waker = WatchdogWaker(self.poll_interval)
            self._owns_waker = True

        def stopping() -> bool:
            return self._stop.is_set() or (stop is not None and stop.is_set())

        while not stopping():
            lines = self.poll()
            if lines:
                on_lines(lines)
            if on_poll is not None:
                on_poll()
            if stopping():
                break
            if not lines and not self._more:
                waker.wait(self.poll_interval)
        with self._lock:
            if self.autosave and self._dirty and not self._closed:
                self._save_locked()

    def stop(self) -> None:
        """Make ``run()`` return soon; safe to call from any thread."""
        self._stop.set()
        if self._waker is not None:
            self._waker.wake()

    def save_state(self) -> bool:
        """Record the offset just after the last line ``poll()`` returned; True if written.

        Call it once those lines are handled: a restart then resumes exactly after them. The write
        is atomic (temporary file, fsync, rename); errors are counted in ``stats``, never raised.
        A path that is not a regular file (a pipe, a device, a link) is never written through.
        """
        with self._lock:
            return self._save_locked()

    def status(self) -> dict[str, Any]:
        """A snapshot for the status endpoint: what we follow, where we are, the counters."""
        cur = self._cur
        return {
            "target": self.target,
            "mode": self.mode,
            "path": cur.path if cur else None,
            "offset": cur.committed if cur else None,
            "read_offset": cur.pos if cur else None,
            "start_offset": cur.start if cur else None,
            "dev": cur.dev if cur else None,
            "inode": cur.ino if cur else None,
            "line_number": cur.next_number - 1 if cur else None,
            "held_bytes": len(cur.buf) if cur else 0,
            "waiting_for_path": self._waiting_for_path,
            "waker_degraded_reason": getattr(self._waker, "degraded_reason", None),
            "stats": dataclasses.asdict(self.stats),
        }

    def close(self) -> None:
        """Stop ``run()``, save state, close the file and the waker we made. Idempotent."""
        self.stop()
        with self._lock:
            if self._closed:
                return
            if self.autosave:
                self._save_locked()
            self._closed = True
            if self._cur is not None:
                os.close(self._cur.fd)
                self._cur = None
        if self._owns_waker and self._waker is not None:
            self._waker.close()

    def __enter__(self) -> Follower:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- one step ----------------------------------------------------------------------------------

    def _step(self, out: list[LogLine]) -> None:
        if not self._begun:
            self._begin()
        if self._cur is not None and self._head_changed(self._cur):
            self._from_zero(self._cur, out)  # truncated and written again since the last poll
        for _ in range(_MAX_HOPS):
            if self._cur is None:
                self._cur = self._open_next()
                if self._cur is None:
                    return
            if not self._drain(self._cur, out) or self._more:
                return
            if not self._at_eof(self._cur, out):
                return
        self._more = True  # a storm of rotations: carry on at the next poll

    def _begin(self) -> None:
        """Pick the first file once (the state file's, if it is still there)."""
        self._begun = True
        if self.state_file:
            self._saved = self._load_state()
        saved = self._saved
        self._files.choose_first((saved.path, saved.ino) if saved is not None else None)

    def _open_next(self) -> OpenFile | None:
        order = self._files.next_to_open()
        self._waiting_for_path = not order
        for candidate in order:
            reader = self._open(candidate.path)
            if reader is not None:
                return reader
        return None

    def _drain(self, cur: OpenFile, out: list[LogLine]) -> bool:
        """Read to end of file or to the poll budget; False on a read error (retried next poll)."""
        while self._budget > 0:
            try:
                data = os.read(cur.fd, min(READ_CHUNK_BYTES, self._budget))
            except OSError as exc:
                self._error(exc, cur.path)
                return False
            if not data:
                return True
            self._budget -= len(data)
            self.stats.bytes += len(data)
            cur.consume(data, out, self.max_line_bytes, self.stats)
            self._dirty = True
        self._more = True
        return True

    def _at_eof(self, cur: OpenFile, out: list[LogLine]) -> bool:
        """Decide what end of file means; True when we moved to another file or offset."""
        try:
            st: os.stat_result | None = os.stat(cur.path)
        except FileNotFoundError:
            st = None
        except OSError as exc:
            self._error(exc, cur.path)
            return False
        if st is not None and (st.st_dev, st.st_ino) != (cur.dev, cur.ino):
            # Rotation, or delete and recreate: drain what was written to the old file meanwhile.
            return self._switch(cur, cur.path, out, rotation=True)
        if st is not None and st.st_size < cur.pos:
            self._from_zero(cur, out)
            return True
        if self.mode != "file":
            now = os.fstat(cur.fd)
            current = Candidate(cur.path, cur.dev, cur.ino, now.st_size, now.st_mtime_ns)
            newer = self._files.newer_launch(current)
            if newer is not None:
                return self._switch(cur, newer.path, out, rotation=False)
        self._waiting_for_path = st is None
        return False

    def _from_zero(self, cur: OpenFile, out: list[LogLine]) -> None:
        """Copytruncate: the file starts over; read it again from 0."""
        cur.flush_partial(out, self.stats)  # the writer will not finish that line in this file
        os.lseek(cur.fd, 0, os.SEEK_SET)
        cur.pos = cur.line_start = cur.start = 0
        cur.next_number = 1
        cur.fingerprint = _fingerprint(read_at(cur.fd, FINGERPRINT_BYTES, 0))
        self.stats.truncations += 1
        self._dirty = True

    def _head_changed(self, cur: OpenFile) -> bool:
        """Whether the first bytes differ from those seen before: the file was truncated and written
        again. While the file is shorter than ``FINGERPRINT_BYTES``, the fingerprint grows with it."""
        head = read_at(cur.fd, FINGERPRINT_BYTES, 0)
        if cur.fingerprint is None:
            cur.fingerprint = _fingerprint(head)
            return False
        digest, size = cur.fingerprint
        if len(head) < size or _fingerprint(head[:size])[0] != digest:
            return True
        if len(head) > size:
            cur.fingerprint = _fingerprint(head)
        return False

    def _switch(self, cur: OpenFile, path: str, out: list[LogLine], *, rotation: bool) -> bool:
        if not self._drain(cur, out) or self._more:
            return False  # still draining the old file; the switch happens at a later end of file
        # If the path was replaced again since the stat, the file opened now is newer still: fine.
        new = self._open(path)
        if new is None:
            return False  # keep the old descriptor; try again at the next poll
        cur.flush_partial(out, self.stats)
        os.close(cur.fd)
        self._cur = new
        if rotation:
            self.stats.rotations += 1
        else:
            self.stats.file_switches += 1
        return True

    # -- files ---------------------------------------------------------------------------------------

    def _open(self, path: str) -> OpenFile | None:
        try:
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        except FileNotFoundError:
            return None
        except OSError as exc:
            self._error(exc, path)
            return None
        try:
            st = os.fstat(fd)
            start, number, discarding = self._start_position(fd, path, st)
            if start:
                os.lseek(fd, start, os.SEEK_SET)
            fingerprint = _fingerprint(read_at(fd, FINGERPRINT_BYTES, 0))
        except OSError as exc:
            os.close(fd)
            self._error(exc, path)
            return None
        self._waiting_for_path = False
        self._files.opened(path, st.st_dev, st.st_ino)
        self.stats.files_opened += 1
        self._dirty = True
        return OpenFile(fd, path, st.st_dev, st.st_ino, start, start, number, discarding,
                        fingerprint=fingerprint, start=start)

    def _start_position(self, fd: int, path: str, st: os.stat_result) -> tuple[int, int, bool]:
        """(offset, next line number, inside a line) for a freshly opened file."""
        initial = self._files.initial
        if initial is None or not self._files.is_initial(path, st.st_dev, st.st_ino):
            return 0, 1, False  # appeared after we started: all of it is new
        saved = self._saved
        if saved is not None:
            if (saved.path, saved.ino) == (path, st.st_ino) and st.st_size >= saved.offset:
                head = read_at(fd, saved.fingerprint_bytes, 0)
                same = len(head) == saved.fingerprint_bytes
                if same and hashlib.sha256(head).hexdigest() == saved.fingerprint:
                    return saved.offset, saved.number + 1, saved.cut_pending
            if st.st_mtime > saved.saved_at:
                return 0, 1, False  # replaced since the state was saved: a file we never read
        if self.from_start:
            return 0, 1, False
        end = min(initial.size, st.st_size)
        # Starting at the end in the middle of a line: skip its tail rather than hand out half a line.
        return end, 1, end > 0 and read_at(fd, 1, end - 1) != b"\n"

    # -- state file ----------------------------------------------------------------------------------

    def _position_locked(self) -> SavedState | None:
        """What a state file would say now (``saved_at`` left 0), or None with no file open."""
        cur = self._cur
        if cur is None:
            return None
        if cur.fingerprint is None:
            cur.fingerprint = _fingerprint(read_at(cur.fd, FINGERPRINT_BYTES, 0))
        return SavedState(
            path=cur.path, dev=cur.dev, ino=cur.ino, offset=cur.committed,
            fingerprint=cur.fingerprint[0], fingerprint_bytes=cur.fingerprint[1],
            number=cur.next_number - 1, cut_pending=cur.discarding, saved_at=0.0,
        )

    def _save_locked(self) -> bool:
        if self.state_file is None or self._cur is None:
            return False
        self._last_save = time.monotonic()
        try:
            state = self._position_locked()
        except OSError as exc:
            self._state_error(f"cannot save state: {describe(exc, self._cur.path)}")
            return False
        if state is None or not self.write_checkpoint(state):
            return False
        self._dirty = False
        return True

    def _load_state(self) -> SavedState | None:
        assert self.state_file is not None
        try:
            return read_state(self.state_file)
        except StateError as exc:
            self._state_error(str(exc))
            return None

    def _state_error(self, message: str) -> None:
        self.stats.state_errors += 1
        self.stats.last_state_error = message

    def _error(self, exc: OSError, path: str) -> None:
        self.stats.read_errors += 1
        self.stats.last_error = describe(exc, path)


def _fingerprint(head: bytes) -> tuple[str, int]:
    return hashlib.sha256(head).hexdigest(), len(head)
