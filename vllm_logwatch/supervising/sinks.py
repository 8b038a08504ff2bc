"""Where the child's bytes go in run mode: the log file and our stdout, each from its own thread.

The reader (the supervisor's main loop) only hands chunks over and never waits: a full or slow log
disk, or a slow stdout, must not stall vLLM. Each sink has a bounded queue; what does not fit, or
cannot be written (ENOSPC, EIO, ...), is dropped and counted, and the file is retried later.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

log = logging.getLogger("vllm_logwatch.run")

QUEUE_BYTES = 64 << 20
"""Each queue's bound (the file's, stdout's and the parser's): what does not fit is dropped, counted."""
_RETRY_SECONDS = 1.0


@dataclass
class SinkStats:
    """Totals of one sink, read by the metrics at scrape time."""

    bytes_written: int = 0
    write_errors: int = 0
    bytes_dropped: int = 0
    last_error: str | None = None


@dataclass(frozen=True)
class _Marker:
    value: str | None


class QueuedWorker:
    """A worker thread behind a queue bounded in bytes; subclasses say what `_write` does.

    `put` may be called before `start` (the chunks wait in the queue); `close` writes what is
    queued, then ends the thread."""

    def __init__(self, name: str, max_bytes: int = QUEUE_BYTES) -> None:
        self.stats = SinkStats()
        self._queue: queue.SimpleQueue[bytes | _Marker | None] = queue.SimpleQueue()
        self._queued = 0
        self._max = max_bytes
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)

    def start(self) -> None:
        """Start the worker thread."""
        self._thread.start()

    def put(self, data: bytes) -> None:
        """Hand a chunk over; never blocks. A full queue drops the chunk (counted)."""
        with self._lock:
            if self._queued + len(data) > self._max:
                self.stats.bytes_dropped += len(data)
                return
            self._queued += len(data)
        self._queue.put(data)

    def put_marker(self, value: str | None) -> None:
        """Queue a call of `_marker(value)` between the chunks before and after it."""
        self._queue.put(_Marker(value))

    def close(self, timeout: float = 5.0) -> None:
        """Write what is queued (within `timeout`), then stop the thread (started if it was not)."""
        self._queue.put(None)
        if not self._thread.is_alive() and self._thread.ident is None:
            self._thread.start()
        self._thread.join(timeout)

    def _loop(self) -> None:
        while True:
            data = self._queue.get()
            if data is None:
                self._finish()
                return
            if isinstance(data, _Marker):
                self._marker(data.value)
                continue
            with self._lock:
                self._queued -= len(data)
            self._write(data)

    def _write(self, data: bytes) -> None:
        raise NotImplementedError

    def _marker(self, value: str | None) -> None:
        """A marker passed the queue (default: nothing to do)."""

    def _finish(self) -> None:
        """The queue is closed (default: nothing to do)."""


class FileSink(QueuedWorker):
    """Appends every byte, unchanged and in order, to one log file; on a write error the rest of the
    chunk is dropped (counted) and the file is tried again after a second."""

    def __init__(self, path: str, max_bytes: int = QUEUE_BYTES, clock: Callable[[], float] = time.monotonic):
        self.path = path
        self._fd: int | None = None
        self._retry_at = 0.0
        self._clock = clock
        self._failing = False
        super().__init__("logwatch-file", max_bytes)
        self.put(b"")  # create the file at launch, as `tee -a` does, even if the child prints nothing

    def _open(self) -> int | None:
        if self._fd is not None:
            return self._fd
        if self._clock() < self._retry_at:
            return None
        try:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        except OSError as exc:
            self._failed(exc)
        return self._fd

    def _failed(self, exc: OSError) -> None:
        self.stats.write_errors += 1
        self.stats.last_error = f"{os.strerror(exc.errno or errno.EIO).lower()}: {self.path}"
        self._retry_at = self._clock() + _RETRY_SECONDS
        if not self._failing:  # said once per episode, not once a second
            self._failing = True
            log.warning("cannot write the log file (%s); vLLM goes on, its output still reaches stdout; "
                        "dropped bytes are counted in vllm_logwatch_log_file_bytes_dropped_total; retrying "
                        "every %.0f s", self.stats.last_error, _RETRY_SECONDS)

    def _recovered(self) -> None:
        if self._failing:
            self._failing = False
            log.info("writing the log file again (%d bytes dropped so far): %s", self.stats.bytes_dropped,
                     self.path)

    def _write(self, data: bytes) -> None:
        fd = self._open()
        if fd is None:
            self.stats.bytes_dropped += len(data)
            return
        view = memoryview(data)
        while view:
            try:
                n = os.write(fd, view)
            except OSError as exc:
                self._failed(exc)
                self.stats.bytes_dropped += len(view)
                if exc.errno not in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
                    self._close_fd()  # EIO, EBADF...: reopen on the next try
                return
            self.stats.bytes_written += n
            view = view[n:]
        if data:
            self._recovered()

    def _close_fd(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None

    def _finish(self) -> None:
        self._close_fd()


class StreamSink(QueuedWorker):
    """Echoes the child's output to a file descriptor (our stdout), so journald keeps it too.

    When the reader goes away (EPIPE: `logwatch run ... | head`; EIO: the terminal hung up; EBADF), the
    echo stops for good, said once on stderr; what it would have written is counted in `stats`. The
    log file, the parser and vLLM go on."""

    def __init__(self, fd: int, max_bytes: int = QUEUE_BYTES, what: str | None = "stdout") -> None:
        """`what`: the name its errors are said under; None: a pipe to logwatch's parser, whose end
        (logwatch gone) is said by nothing."""
        self.fd = fd
        self.what = what
        self._broken = False
        super().__init__("logwatch-echo", max_bytes)

    def _write(self, data: bytes) -> None:
        if self._broken:
            self.stats.bytes_dropped += len(data)
            return
        view = memoryview(data)
        while view:
            try:
                n = os.write(self.fd, view)
            except OSError as exc:
                self.stats.write_errors += 1
                self.stats.bytes_dropped += len(view)
                self.stats.last_error = f"{self.what}: {os.strerror(exc.errno or errno.EIO).lower()}"
                self._broken = exc.errno in (errno.EPIPE, errno.EBADF, errno.EIO, errno.ENXIO)
                if self._broken and self.what is not None:
                    log.warning("%s: no more echo of vLLM's output; the log file and the metrics go on "
                                "(bytes not echoed: vllm_logwatch_stdout_bytes_dropped_total)",
                                self.stats.last_error)
                return
            self.stats.bytes_written += n
            view = view[n:]
