"""Who else holds vLLM's output pipe: the processes a stop must reach beyond vLLM's process group.

A process vLLM started that called `setsid()` (a daemonised helper) leaves vLLM's group, so a signal
to the group misses it; if it kept the pipe it would keep the pipe open after vLLM is gone, and run
on, orphaned, after logwatch exits. The pipe itself names them: every process with a descriptor on
it (Linux `/proc/PID/fd`; processes of another user are not visible and not ours to stop).
"""

from __future__ import annotations

import contextlib
import os

__all__ = ["pipe_holders"]


def pipe_holders(pipe: int, proc: str = "/proc") -> set[int]:
    """The pids of the other processes that hold the pipe with inode `pipe` open (empty where /proc is
    not)."""
    try:
        target = f"pipe:[{pipe}]"
        entries = [e.name for e in os.scandir(proc) if e.name.isdigit()]
    except OSError:
        return set()
    me = os.getpid()
    found: set[int] = set()
    for name in entries:
        pid = int(name)
        if pid == me:
            continue
        with contextlib.suppress(OSError):  # gone meanwhile, or not ours to look at
            for link in os.scandir(f"{proc}/{name}/fd"):
                with contextlib.suppress(OSError):
                    if os.readlink(link.path) == target:
                        found.add(pid)
                        break
    return found
