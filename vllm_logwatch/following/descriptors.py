"""How many files a many-source watch may keep open: raise the soft limit on descriptors to the hard one,
then keep half of it (at most `MAX_OPEN_FILES`) for log files, the rest for the server's sockets, the
state file, file notifications and Python's own.

A thousand sources with a file open each would exhaust the default soft limit of 1024: the server could
no longer accept a connection. `ManyFollower(open_files=...)` keeps at most this many open.
"""

from __future__ import annotations

import resource

__all__ = ["MAX_OPEN_FILES", "MIN_OPEN_FILES", "open_files_budget", "raise_open_files_limit"]

MAX_OPEN_FILES = 4096
MIN_OPEN_FILES = 16


def raise_open_files_limit() -> int:
    """Raise the soft RLIMIT_NOFILE to the hard limit (when it can be raised); the soft limit then."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != soft:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError):  # an infinite hard limit above the kernel's nr_open, a sandbox
            pass
    return soft


def open_files_budget(limit: int) -> int:
    """The log files a watch keeps open under a limit of `limit` descriptors: half of it, between
    `MIN_OPEN_FILES` and `MAX_OPEN_FILES`.

    >>> open_files_budget(1024), open_files_budget(1 << 20), open_files_budget(resource.RLIM_INFINITY)
    (512, 4096, 4096)
    """
    if limit == resource.RLIM_INFINITY or limit < 0:
        return MAX_OPEN_FILES
    return max(MIN_OPEN_FILES, min(MAX_OPEN_FILES, limit // 2))
