"""The follower's state file: where it was in which file, so a restart (even after `kill -9`)
neither skips nor counts a line twice. Written atomically (temporary file, fsync, rename)."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import tempfile
from dataclasses import asdict, dataclass

__all__ = ["SavedState", "StateError", "describe", "one_line", "read_state", "write_state"]

_STATE_VERSION = 1


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


def read_state(path: str) -> SavedState | None:
    """The saved position, or None when there is no state file yet. Raises `StateError`."""
    try:
        with open(path, encoding="utf-8") as f:
            raw = json.load(f)
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
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise StateError(f"cannot read state: {describe(exc, path)}") from None
    except (ValueError, KeyError, TypeError):
        raise StateError(f"state file unreadable, ignored: {one_line(path)}") from None


def write_state(path: str, state: SavedState) -> None:
    """Save atomically. Raises OSError."""
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
