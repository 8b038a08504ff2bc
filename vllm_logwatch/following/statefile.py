"""The follower's state file: where it was in which file, so a restart (even after `kill -9`)
skips no line and counts none again that was counted before the last save (under the pipeline: none
that a scrape showed). Written atomically (temporary file, fsync, rename).

A state file is small (a path and a few numbers): one larger than `MAX_STATE_BYTES` is not ours, and
never read whole. It is read without following a symbolic link and without blocking (a pipe put in its
place must not hang the exporter), and never written through a path that is not a regular file: the
rename would replace a device node, a pipe or a link with a plain file.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import stat
import tempfile
from dataclasses import asdict, dataclass

__all__ = [
    "MAX_STATE_BYTES", "SavedState", "StateError", "check_state_path", "describe", "one_line", "read_state",
    "write_state",
]

_STATE_VERSION = 1
MAX_STATE_BYTES = 64 << 10
"""A state file is a few hundred bytes; a path of 4 KiB still fits many times."""
_TOO_BIG = f"larger than a state file can be ({MAX_STATE_BYTES >> 10} KiB)"


@dataclass(frozen=True, slots=True)
class SavedState:
    """The position after the last line handed out: the file (path, inode, a hash of its first
    bytes, which tells a replaced file from the same one), the byte offset and the line number."""

    path: str
    ino: int
    offset: int
    fingerprint: str
    fingerprint_bytes: int
    number: int
    cut_pending: bool
    saved_at: float
    dev: int = 0


class StateError(Exception):
    """A state file that cannot be read: a one-line message, no file content."""


def check_state_path(path: str) -> str | None:
    """Why ``path`` cannot be a state file (it exists and is not a regular file, or is too big), or None.
    Never opens it: a pipe would block."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    return _not_a_state_file(st)


def _not_a_state_file(st: os.stat_result) -> str | None:
    if stat.S_ISLNK(st.st_mode):
        return "a symbolic link, not the file itself"
    if stat.S_ISDIR(st.st_mode):
        return "a folder, not a file"
    if not stat.S_ISREG(st.st_mode):
        return "not a regular file"
    if st.st_size > MAX_STATE_BYTES:
        return _TOO_BIG
    return None


def read_state(path: str) -> SavedState | None:
    """The saved position, or None when there is no state file yet. Raises `StateError`.

    Reads at most `MAX_STATE_BYTES` + 1 bytes, never blocks (``O_NONBLOCK``: a pipe is seen as one, not
    waited on) and never follows a symbolic link (``O_NOFOLLOW``)."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # O_NOFOLLOW on a link (or a loop of them)
            link = "a symbolic link, not the file itself"
            raise StateError(f"cannot read state: {link}: {one_line(path)}") from None
        raise StateError(f"cannot read state: {describe(exc, path)}") from None
    try:
        why = _not_a_state_file(os.fstat(fd))
        if why is not None:
            raise StateError(f"cannot read state: {why}: {one_line(path)}")
        data = os.read(fd, MAX_STATE_BYTES + 1)
        if len(data) > MAX_STATE_BYTES:  # it grew since fstat
            raise StateError(f"cannot read state: {_TOO_BIG}: {one_line(path)}")
    except OSError as exc:
        raise StateError(f"cannot read state: {describe(exc, path)}") from None
    finally:
        os.close(fd)
    try:
        raw = json.loads(data.decode("utf-8"))
        return SavedState(
            path=str(raw["path"]),
            ino=int(raw["ino"]),
            offset=int(raw["offset"]),
            fingerprint=str(raw["fingerprint"]),
            fingerprint_bytes=int(raw["fingerprint_bytes"]),
            number=int(raw["number"]),
            cut_pending=bool(raw.get("cut_pending", False)),
            saved_at=float(raw["saved_at"]),
            dev=int(raw.get("dev", 0)),
        )
    except (ValueError, KeyError, TypeError, AttributeError):
        raise StateError(f"state file unreadable, ignored: {one_line(path)}") from None


def write_state(path: str, state: SavedState) -> None:
    """Save atomically. Raises OSError, or `StateError` when ``path`` exists and is not a regular file
    (it is left as it is)."""
    _write_atomically(path, json.dumps({"version": _STATE_VERSION, **asdict(state)}, indent=1) + "\n")


def _write_atomically(path: str, text: str) -> None:
    """Write a temporary file in the same folder, fsync it, rename it over ``path``: all or nothing."""
    folder = os.path.dirname(path) or "."
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        why = check_state_path(path)
        if why is not None and why != _TOO_BIG:  # a big regular file may be replaced
            raise StateError(f"cannot save state: {why}: {one_line(path)}")
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    try:  # make the rename itself durable; not every file system allows fsync on a folder
        dir_fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
    except OSError:
        pass


def one_line(text: str) -> str:
    return " ".join(text.split())


def describe(exc: OSError, path: str) -> str:
    """A one-line message naming the file and the reason, never any file content."""
    if exc.errno in (errno.EACCES, errno.EPERM):
        reason = "permission denied"
    elif exc.errno is not None:
        reason = os.strerror(exc.errno).lower()
    else:
        reason = one_line(str(exc)) or type(exc).__name__
    return f"{reason}: {one_line(path)}"
