"""Follow a log file, the newest file of a folder, or of a glob, the way ``tail -F`` should: how and
why in docs/design.md, "Following files" (google/mtail's ``filestream.go`` is the model)."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping
from typing import Any

from ..parsing.framing import MAX_LINE_BYTES
from .layouts import Candidate, LaunchFiles
from .openfile import LineBlock, OpenFile, Parked, open_regular, place_of, read_at
from .source import MAX_POLL_BYTES, READ_CHUNK_BYTES, LineSource, Start
from .statefile import Checkpoint, Position, SavedState, StateFile, position_of, read_state, resume_at
from .wakers import Waker

_MAX_HOPS = 8  # file changes handled in one poll; the rest waits for the next one


class Follower(LineSource):
    """Follows ``target`` (a file, a folder, or a glob) and hands out blocks of complete lines.

    Start position of the first file: its end (only new lines), or its start with ``from_start=True``,
    or where a matching state file says. Every file that appears later is new and read from its start.
    """

    def __init__(
        self, target: str, *, pattern: str = "*.log", from_start: bool = False,
        max_line_bytes: int = MAX_LINE_BYTES, state_file: str | None = None, waker: Waker | None = None,
        poll_interval: float = 1.0, poll_bytes: int = MAX_POLL_BYTES, read_bytes: int = READ_CHUNK_BYTES,
        lister: Callable[[], list[str]] | None = None, saved: SavedState | None = None,
    ) -> None:
        """``state_file``: read at the first poll, written by the caller (``write_checkpoint``).
        ``lister``, ``saved``: one source of many (`many.py`): its files and saved position, from the caller
        (``target`` names it)."""
        super().__init__(poll_interval, poll_bytes, waker, max_line_bytes, read_bytes)
        self.state_file = os.path.abspath(state_file) if state_file else None
        self._files = LaunchFiles(target, pattern, self.state_file, self._error, lister)
        self.from_start = from_start
        self._cur: OpenFile | None = None
        self._parked: Parked | None = None  # the descriptor closed, the place kept (`openfile.py`)
        self._begun = self._waiting_for_path = False
        self._saved: SavedState | None = saved
        self._budget = 0
        self._state = StateFile(self.state_file, self.stats) if self.state_file else None

    @property
    def target(self) -> str:
        """The absolute path (or glob) followed."""
        return self._files.target

    @property
    def is_open(self) -> bool:
        """Whether a descriptor is held now (not while parked: `park()`)."""
        return self._cur is not None and self._parked is None

    def park(self) -> bool:
        """Close the descriptor, keeping the place (`openfile.py`); True if one was closed."""
        with self._lock:
            if self._cur is None or self._parked is not None or self._closed:
                return False
            self._parked = self._cur.park(self._files.listed())
            return self._parked is not None

    @property
    def mode(self) -> str:
        """``"file"``, ``"dir"`` (the newest matching file of a folder) or ``"glob"``."""
        return self._files.mode

    def _poll(self, out: list[LineBlock]) -> None:
        """About one block a read; errors are retried at the next poll."""
        self._budget = self.poll_bytes
        try:
            self._step(out)
        except OSError as exc:
            self._error(exc, self._cur.path if self._cur else self.target)
        position: Position | None
        try:
            position = None if self._cur is None else position_of(self._cur)
        except OSError as exc:
            self._error(exc, self._cur.path if self._cur else self.target)
            position = self._checkpoint.state
        self._checkpoint = Checkpoint(position, self.stats.lines, self.stats.bytes)
        if self._waker is not None:
            self._waker.watch(self._files.watch_dirs())

    def write_checkpoint(self, state: Position, extra: Mapping[str, object] | None = None) -> bool:
        assert isinstance(state, SavedState)
        return self._state is not None and self._state.write(state, extra)

    def starts(self) -> list[Start] | None:
        """Where reading began in the file open now (None: none open yet; []: ``from_start``)."""
        if self.from_start:
            return []
        cur = self._cur
        return None if cur is None else [((), cur.path, cur.start)]

    def status(self) -> dict[str, Any]:
        """A snapshot for the status endpoint: what we follow, where we are, the counters."""
        return {
            "target": self.target, "mode": self.mode, **place_of(self._cur),
            "waiting_for_path": self._waiting_for_path,
            "waker_degraded_reason": self._waker and self._waker.degraded_reason,
            "stats": dataclasses.asdict(self.stats),
        }

    def _release(self) -> None:
        if self._cur is not None and self._parked is None:
            os.close(self._cur.fd)
            self._cur = None

    # -- one step ----------------------------------------------------------------------------------

    def _step(self, out: list[LineBlock]) -> None:
        if not self._begun:
            self._begin()
        if self._parked is not None and not self._unpark():
            return
        if self._cur is not None and self._cur.head_changed():
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
        if self._state is not None:
            self._saved = self._state.load(read_state)
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

    def _drain(self, cur: OpenFile, out: list[LineBlock]) -> bool:
        """Read to end of file or to the poll budget; False on a read error (retried next poll)."""
        while self._budget > 0:
            try:
                data = os.read(cur.fd, min(self.read_bytes, self._budget))
            except OSError as exc:
                self._error(exc, cur.path)
                return False
            if not data:
                return True
            self._budget -= len(data)
            if cur.head_changed():  # truncated and written again since the check before this read:
                if read_at(cur.fd, len(data), cur.pos) != data:  # `data` is the old content's
                    self.stats.bytes += len(data)
                    cur.consume(data, out, self.max_line_bytes, self.stats)
                self._from_zero(cur, out)  # else the new one's, at the old offset: read it from 0
                continue
            self.stats.bytes += len(data)
            cur.consume(data, out, self.max_line_bytes, self.stats)
        self._more = True
        return True

    def _at_eof(self, cur: OpenFile, out: list[LineBlock]) -> bool:
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

    def _from_zero(self, cur: OpenFile, out: list[LineBlock]) -> None:
        """Copytruncate: the file starts over; read it again from 0."""
        cur.flush_partial(out, self.stats)  # the writer will not finish that line in this file
        cur.rewind()
        self.stats.truncations += 1

    def _switch(self, cur: OpenFile, path: str, out: list[LineBlock], *, rotation: bool) -> bool:
        if not self._drain(cur, out) or self._more:
            return False  # still draining the old file; the switch happens at a later end of file
        # If the path was replaced again since the stat, the file opened now is newer still: fine.
        new = self._open(path)
        if new is None:
            return False  # keep the old descriptor; try again at the next poll
        cur.flush_partial(out, self.stats)
        self._files.left(cur.dev, cur.ino, cur.fingerprint)
        os.close(cur.fd)
        self._cur = new
        if rotation:
            self.stats.rotations += 1
        else:
            self.stats.file_switches += 1
        return True

    # -- files ---------------------------------------------------------------------------------------

    def _unpark(self) -> bool:
        """A parked file: False while unchanged; else open it again at its place (or, gone, leave it as a
        rotation would: the next file is opened), and True."""
        cur, parked = self._cur, self._parked
        assert cur is not None and parked is not None
        if parked.unchanged(cur, self._files.listed()):
            return False
        self._parked = None
        if not cur.reopen():  # rotated away and gone (compressed, deleted): what it held unread is lost
            self._files.left(cur.dev, cur.ino, cur.fingerprint)
            self._cur = None
            self.stats.rotations += 1
        return True

    def _open(self, path: str) -> OpenFile | None:
        """`path` opened at its start position, with its first bytes' fingerprint; None if it is not
        there, or cannot be opened (counted)."""
        fd = -1
        try:
            fd, st = open_regular(path)
            start, number, discarding = self._start_position(fd, path, st)
            os.lseek(fd, start, os.SEEK_SET)
            cur = OpenFile(fd, path, st.st_dev, st.st_ino, start, start, number, discarding, start=start)
            cur.take_fingerprint()
        except OSError as exc:
            if fd >= 0:
                os.close(fd)
            if not isinstance(exc, FileNotFoundError):
                self._error(exc, path)
            return None
        self._waiting_for_path = False
        self._files.opened(path, st.st_dev, st.st_ino, cur.fingerprint)
        self.stats.files_opened += 1
        return cur

    def _start_position(self, fd: int, path: str, st: os.stat_result) -> tuple[int, int, bool]:
        """(offset, next line number, inside a line) for a freshly opened file."""
        initial = self._files.initial
        if initial is None or not self._files.is_initial(path, st.st_dev, st.st_ino):
            return 0, 1, False  # appeared after we started: all of it is new
        return resume_at(self._saved, fd, path, st, from_start=self.from_start, initial_size=initial.size)

