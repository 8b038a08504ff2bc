"""A stream of lines: standard input (`logwatch watch -`) or a named pipe, read to its end, never
blocking, framed as a file is: how and why in docs/design.md, "Following files". The whole stream is
one launch named `<stdin>` (a version banner inside it is a new launch), with no position to resume at
(no state file). A read error ends it too (a stream cannot be read again). A named pipe with no writer
connected gives no sign of its removal: a poll that read nothing checks that its path still names the
pipe it holds, and if not, ends it (a pipe made again at the path is then the one read).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import select
import stat
import time
from collections.abc import Callable
from typing import Any

from ..parsing.framing import MAX_LINE_BYTES
from .openfile import LineBlock, OpenFile, place_of
from .source import MAX_POLL_BYTES, READ_CHUNK_BYTES, LineSource
from .statefile import Checkpoint

STDIN_NAME = "<stdin>"
_READY = select.POLLIN | select.POLLPRI | select.POLLHUP | select.POLLERR | select.POLLNVAL


def _open_pipe(path: str) -> int:
    return os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))


class StreamSource(LineSource):
    """Reads the stream on `fd` (closed by `close()`), named `name`. Nothing to resume at: no state file,
    read from its start (no start-up facts before it)."""

    def __init__(
        self,
        fd: int,
        name: str = STDIN_NAME,
        *,
        max_line_bytes: int = MAX_LINE_BYTES,
        poll_interval: float = 1.0,
        poll_bytes: int = MAX_POLL_BYTES,
        read_bytes: int = READ_CHUNK_BYTES,
        reopen: bool = False,
    ) -> None:
        """`reopen`: `name` is a named pipe's path, opened again for its next writer (`open_fifo`)."""
        super().__init__(poll_interval, poll_bytes, None, max_line_bytes, read_bytes)
        self.target = name
        self._reopen = reopen
        self.ended_at: float | None = None  # Unix time of the end
        self._cur = OpenFile(fd, name, 0, 0, 0, 0, 1)  # the framing of a file read from its start
        self._wake_r, self._wake_w = os.pipe()
        for end in (self._wake_r, self._wake_w):
            os.set_blocking(end, False)
        self._ready = select.poll()
        self._ready.register(fd, _READY)
        self._waits = select.poll()
        self._waits.register(fd, _READY)
        self._waits.register(self._wake_r, select.POLLIN)

    @classmethod
    def open_fifo(cls, path: str, **options: Any) -> StreamSource:
        """A named pipe, opened without waiting for its writer, and again for each next one. Raises
        OSError."""
        fd = _open_pipe(path)
        try:
            return cls(fd, path, reopen=True, **options)
        except BaseException:
            os.close(fd)
            raise

    @property
    def ended(self) -> bool:
        """Every writer is gone (or reading failed): nothing more will come."""
        return self.ended_at is not None

    def _poll(self, out: list[LineBlock]) -> None:
        """What is ready now; at the end, the held partial line too (a read error ends the stream)."""
        budget = self.poll_bytes
        while budget > 0:
            if not self._ready.poll(0):
                break
            try:
                data = os.read(self._cur.fd, min(self.read_bytes, budget))
            except BlockingIOError:
                break  # a named pipe with no writer yet, or another reader was quicker
            except OSError as exc:
                self._error(exc, self.target)
                data = b""
            if not data:
                self._end(out)
                break
            budget -= len(data)
            self.stats.bytes += len(data)
            self._cur.consume(data, out, self.max_line_bytes, self.stats)
        else:
            self._more = True
        if self._reopen and budget == self.poll_bytes and not self.ended and not self._still_named():
            self._end(out)  # removed (or replaced) while no writer was connected
        self._checkpoint = Checkpoint(None, self.stats.lines, self.stats.bytes)

    def _end(self, out: list[LineBlock]) -> None:
        self._cur.flush_partial(out, self.stats)  # the writer will never finish that line
        if self._reopen and self._next_writer():
            return
        self.ended_at = time.time()
        self._ready.unregister(self._cur.fd)
        self._waits.unregister(self._cur.fd)

    def _still_named(self) -> bool:
        """The pipe's path still names the pipe this stream holds open."""
        try:
            here, held = os.stat(self.target), os.fstat(self._cur.fd)
        except OSError:
            return False
        return (here.st_dev, here.st_ino) == (held.st_dev, held.st_ino)

    def _next_writer(self) -> bool:
        """The named pipe opened again for its next writer (True), the old end closed after, so the pipe
        always has a reader; False if it cannot be (the stream has ended)."""
        try:
            fd = _open_pipe(self.target)
        except OSError as exc:
            self._error(exc, self.target)
            return False
        if not stat.S_ISFIFO(os.fstat(fd).st_mode):  # replaced by a file: not this stream any more
            os.close(fd)
            return False
        old = self._cur
        for waiter in (self._ready, self._waits):
            waiter.unregister(old.fd)
            waiter.register(fd, _READY)
        os.close(old.fd)
        self._cur = OpenFile(fd, self.target, 0, 0, 0, 0, old.next_number)  # one stream: numbers go on
        self.stats.files_opened += 1
        return True

    def _waiter(self) -> Callable[[float], object]:
        """A wait ends as soon as the stream has bytes or its end, or `stop()` is called; after the end,
        the run loop goes on at the poll interval (for `on_poll`)."""
        return self._wait

    def _wait(self, timeout: float) -> None:
        with self._lock:
            if self._closed:
                return
        self._waits.poll(timeout * 1000)
        with contextlib.suppress(OSError):  # empty (BlockingIOError), or closed meanwhile
            while os.read(self._wake_r, 4096):
                pass

    def _wake(self) -> None:
        with self._lock:
            if not self._closed:
                with contextlib.suppress(BlockingIOError):  # full: a wake-up is pending anyway
                    os.write(self._wake_w, b"\0")

    def status(self) -> dict[str, Any]:
        """A snapshot for the status endpoint, shaped as the follower's, with `ended` and `ended_at`."""
        return {
            "target": self.target, "mode": "stream", **place_of(self._cur), "dev": None, "inode": None,
            "waiting_for_path": False, "waker_degraded_reason": None, "ended": self.ended,
            "ended_at": self.ended_at, "stats": dataclasses.asdict(self.stats),
        }

    def _release(self) -> None:
        """Close the stream (its writer then gets EPIPE) and the wake-up pipe."""
        for fd in (self._cur.fd, self._wake_r, self._wake_w):
            with contextlib.suppress(OSError):
                os.close(fd)
