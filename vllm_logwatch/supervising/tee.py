"""`python -m vllm_logwatch.supervising.tee FILE ECHO_FD PARSE_FD STATS_FD`: run mode's tee, a process
of its own between vLLM's output pipe (its standard input) and where the bytes go: the launch file,
the echo (ECHO_FD, -1 for none) and logwatch's parser (PARSE_FD).

A process, not a thread of logwatch's: there the reader shared the interpreter lock with the parser,
and on a host whose cores were busy the parser's thread, preempted while holding it, held vLLM's
writes for one or two seconds. Here nothing parses: one reader and three writers (`sinks.py`), each
behind a bounded queue and waiting in its own system call, so a slow disk, stdout or parser costs
only their own bytes (dropped, counted). It ends when vLLM's pipe does (every writer gone), after
writing what its queues hold; a stop is logwatch's to send, to vLLM. Its totals go to STATS_FD as one
JSON line (`[[written, errors, dropped, last error], ...]` for the file, the echo and the parser)
every half second and at the end.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import selectors
import signal
import subprocess
import sys
import time
from typing import Protocol

from .sinks import FileSink, SinkStats, StreamSink

_READ = 1 << 20
_REPORT_EVERY = 0.5


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
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s logwatch %(levelname)s %(message)s"))
    logging.basicConfig(level=logging.INFO, handlers=[handler])
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
