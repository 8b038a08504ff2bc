"""Job control passed through to vLLM: Ctrl+Z on `logwatch run` stops vLLM too, `fg` resumes both.

vLLM runs in a session of its own (so a Ctrl+C reaches only logwatch, which stops it well), which
also keeps it out of the terminal's job control: a Ctrl+Z (SIGTSTP), or SIGTTIN / SIGTTOU to a
background job, would stop logwatch alone, and vLLM would block in `write()` once the 1 MiB pipe
nobody drains is full, in the middle of serving. As a shell does for its jobs, logwatch passes the
stop on: SIGSTOP to vLLM's process group, then it stops itself with the signal it got; when it is
continued (SIGCONT: `fg`, `bg`, `kill -CONT`), SIGCONT to vLLM's group. A stopped logwatch is then a
stopped vLLM, never a blocked one, and not a byte is lost.

SIGSTOP itself cannot be caught: a `kill -STOP` of logwatch stops logwatch alone, and vLLM runs on
until the pipe is full, then waits in `write()` until logwatch is continued (docs/run.md).
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Callable
from types import FrameType
from typing import Any

__all__ = ["JOB_STOP_SIGNALS", "JobControl"]

JOB_STOP_SIGNALS = (signal.SIGTSTP, signal.SIGTTIN, signal.SIGTTOU)


def _signal_group(pgid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signum)


class JobControl:
    """`install()` in the main thread; `group()` names the child's process group (None: no child)."""

    def __init__(self, group: Callable[[], int | None]) -> None:
        self.group = group
        self._previous: dict[int, Any] = {}

    def install(self) -> None:
        for signum in JOB_STOP_SIGNALS:
            self._previous[signum] = signal.signal(signum, self._on_stop)

    def restore(self) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous.clear()

    def _on_stop(self, signum: int, frame: FrameType | None) -> None:
        pgid = self.group()
        if pgid is not None:
            _signal_group(pgid, signal.SIGSTOP)
        signal.signal(signum, signal.SIG_DFL)
        try:
            os.kill(os.getpid(), signum)  # stops here until SIGCONT (or at once, in an orphaned group,
        finally:                          # where the kernel discards a terminal stop signal)
            signal.signal(signum, self._on_stop)
            if pgid is not None:
                _signal_group(pgid, signal.SIGCONT)
