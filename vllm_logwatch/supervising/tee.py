"""`python -m vllm_logwatch.supervising.tee FILE ECHO_FD PARSE_FD STATS_FD`: run mode's tee, a process
of its own between vLLM's output pipe (its standard input) and where the bytes go: the launch file,
the echo (ECHO_FD, -1 for none) and logwatch's parser (PARSE_FD); why and how in docs/design.md, "Run
mode". It ends when vLLM's pipe does (every writer gone), after writing what its queues hold; a stop
is logwatch's to send, to vLLM. Its totals go to STATS_FD as one JSON line (`[[written, errors,
dropped, last error], ...]` for the file, the echo and the parser) every half second and at the end.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import logging
import os
import queue
import selectors
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

_READ = 1 << 20
_REPORT_EVERY = 0.5


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

    def _write_all(self, fd: int, data: bytes) -> OSError | None:
        """`data` written whole to `fd` and counted; on an error, the bytes left counted dropped and the
        error returned."""
        view = memoryview(data)
        while view:
            try:
                n = os.write(fd, view)
            except OSError as exc:
                self.stats.bytes_dropped += len(view)
                return exc
            self.stats.bytes_written += n
            view = view[n:]
        return None


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
        exc = self._write_all(fd, data)
        if exc is not None:
            self._failed(exc)
            if exc.errno not in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
                self._close_fd()  # EIO, EBADF...: reopen on the next try
        elif data:
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
        exc = self._write_all(self.fd, data)
        if exc is not None:
            self.stats.write_errors += 1
            self.stats.last_error = f"{self.what}: {os.strerror(exc.errno or errno.EIO).lower()}"
            self._broken = exc.errno in (errno.EPIPE, errno.EBADF, errno.EIO, errno.ENXIO)
            if self._broken and self.what is not None:
                log.warning("%s: no more echo of vLLM's output; the log file and the metrics go on "
                            "(bytes not echoed: vllm_logwatch_stdout_bytes_dropped_total)",
                            self.stats.last_error)


class TeeProcess(Protocol):
    """What the supervisor needs of a started tee (a `subprocess.Popen`)."""

    pid: int

    def wait(self, timeout: float | None = None) -> int: ...
    def kill(self) -> None: ...


def spawn_tee(pipe_fd: int, path: str, echo_fd: int | None) -> tuple[TeeProcess, int, int]:
    """Start the tee of one launch on vLLM's pipe (`pipe_fd`, the read end): (the process, the read
    end of the copy for the parser, the read end of its totals)."""
    data_r, data_w = os.pipe()
    stats_r, stats_w = os.pipe()
    with contextlib.suppress(OSError):  # as vLLM's pipe: a burst waits here while the parser catches up
        fcntl.fcntl(data_w, getattr(fcntl, "F_SETPIPE_SZ", 1031), 1 << 20)
    echo = -1 if echo_fd is None else echo_fd
    try:
        tee = subprocess.Popen(
            [sys.executable, "-m", "vllm_logwatch.supervising.tee", path, *map(str, (echo, data_w, stats_w))],
            stdin=pipe_fd, pass_fds=(data_w, stats_w, *((echo,) if echo > 2 else ())),
            start_new_session=True)  # a terminal's signals are for logwatch and vLLM
    finally:
        os.close(data_w)
        os.close(stats_w)
    return tee, data_r, stats_r


def read_stats(line: bytes) -> list[SinkStats] | None:
    """A STATS_FD line back into the sinks' totals (file, echo, parser); None if it is not one."""
    try:
        rows = json.loads(line)
        return [SinkStats(int(w), int(e), int(d), None if err is None else str(err)) for w, e, d, err in rows]
    except (ValueError, TypeError):
        return None


def _report(fd: int, sinks: list[StreamSink | FileSink | None]) -> None:
    rows = [[0, 0, 0, None] if s is None else
            [s.stats.bytes_written, s.stats.write_errors, s.stats.bytes_dropped,
             (s.stats.last_error or "")[:512] or None] for s in sinks]
    try:
        os.write(fd, json.dumps(rows).encode() + b"\n")  # < PIPE_BUF: written whole or not at all
    except BlockingIOError:
        pass  # logwatch has not read the last ones yet: the next says as much
    except OSError:
        pass  # logwatch is gone: the file still gets every byte


def main(argv: list[str]) -> int:
    if len(argv) != 4:
        print("usage: python -m vllm_logwatch.supervising.tee FILE ECHO_FD PARSE_FD STATS_FD",
              file=sys.stderr)
        return 2
    path, echo_fd, parse_fd, stats_fd = argv[0], int(argv[1]), int(argv[2]), int(argv[3])
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # vLLM's end is this one's: a terminal's Ctrl+C is not
    logging.basicConfig(level=logging.INFO, format="%(asctime)s logwatch %(levelname)s %(message)s",
                        stream=sys.stderr)
    os.set_blocking(stats_fd, False)
    file = FileSink(path)
    echo = StreamSink(echo_fd) if echo_fd >= 0 else None
    parse = StreamSink(parse_fd, what=None)
    sinks: list[StreamSink | FileSink | None] = [file, echo, parse]
    for sink in (file, echo, parse):
        if sink is not None:
            sink.start()
    sel = selectors.DefaultSelector()
    sel.register(0, selectors.EVENT_READ)
    reported = time.monotonic()
    while True:
        if sel.select(_REPORT_EVERY):
            data = os.read(0, _READ)
            if not data:
                break
            for sink in (file, echo, parse):
                if sink is not None:
                    sink.put(data)
        if time.monotonic() - reported >= _REPORT_EVERY:
            _report(stats_fd, sinks)
            reported = time.monotonic()
    for sink in (parse, echo, file):
        if sink is not None:
            sink.close(timeout=30.0)
    _report(stats_fd, sinks)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
