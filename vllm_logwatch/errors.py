"""One error family; `cli.py` maps each to a one-line message and an exit code."""

from __future__ import annotations

EXIT_OK = 0
EXIT_NO_STATS = 1
EXIT_USAGE = 2


class LogwatchError(Exception):
    """Base: a message for the user (one line) and the exit code that goes with it."""

    exit_code = EXIT_USAGE


class UsageError(LogwatchError):
    """Bad flags or arguments."""


class InputError(LogwatchError):
    """A file that cannot be read: missing, a directory, permission denied, a corrupt .gz."""


class OutputError(LogwatchError):
    """The output cannot be written: a full disk, a file system gone read-only, a closed terminal."""


class NoStatsError(LogwatchError):
    """The inputs were read but held no stats line (or, with `parse --kind`, no record of that kind)."""

    exit_code = EXIT_NO_STATS
