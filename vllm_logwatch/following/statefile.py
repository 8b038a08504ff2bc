"""The follower's state file: where it was in which file, so a restart (even after `kill -9`) skips
no line and counts none again that a scrape showed (docs/design.md, "The state file, exactly once").
Written atomically (temporary file, fsync, rename), never through a path that is not a regular file
(the rename would replace a device node, a pipe or a link with a plain file); read without following
a symbolic link, without blocking (a pipe put in its place must not hang the exporter), and never whole
past `MAX_STATE_BYTES` (then it is not ours).

A many-source watch's state file holds each source's labels and its position, in one file, version 2:

    {"version":2,"saved_at":...,"sources":[{"labels":[["namespace","vllm"],...],"path":...,"offset":...},...]}

It is written only when it fits `MAX_STATE_BYTES` (else a `StateError`, counted, and the last one
written stays), so a restart can always read what was written, and rewritten whole at most
`SAVE_BYTES_PER_SECOND` (`save_spacing`). One with `saved_at` in each source, as written before, is read
too; a version 1 file (one follower's) is ignored as an unreadable one is.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import functools
import hashlib
import json
import os
import stat
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from typing import Any, TypeVar

from pydantic import TypeAdapter

from .layouts import SourceKey
from .openfile import FollowerStats, OpenFile, read_at

T = TypeVar("T")
_STATE_VERSION = 1
MAX_STATE_BYTES = 4 << 20
"""A state file is a few hundred bytes a source; a thousand sources with 4 KiB paths still fit."""
_TOO_BIG = f"larger than a state file can be ({MAX_STATE_BYTES >> 20} MiB)"


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


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """Where the lines the last ``poll()`` returned end, and the follower's totals then.

    ``state`` is what a state file would say (``saved_at`` is set when it is written; None while no
    file is open); ``lines`` and ``bytes`` count what was read up to there."""

    state: Position | None
    lines: int
    bytes: int


@dataclass(frozen=True, slots=True)
class SourcesState:
    """Where every source of a many-source watch is (`following/many.py`): each source's labels and its
    own checkpoint, in a fixed order, so two equal positions compare equal."""

    parts: tuple[tuple[tuple[tuple[str, str], ...], Checkpoint], ...]


Position = SavedState | SourcesState
"""What a state file records: one file's position, or every source's."""


class StateFile:
    """One follower's state file: read once at start, written atomically from any thread (one write at
    a time). Errors are counted in `stats` (`state_errors`, `last_state_error`), never raised."""

    def __init__(self, path: str, stats: FollowerStats) -> None:
        self.path = path
        self.stats = stats
        self._lock = threading.Lock()

    def load(self, read: Callable[[str], T]) -> T | None:
        """What `read` makes of the file (`read_state`, `read_sources`); None if there is none, or it
        cannot be read (counted)."""
        try:
            return read(self.path)
        except StateError as exc:
            self._failed(str(exc))
            return None

    def write(self, state: SavedState, extra: Mapping[str, object] | None = None) -> bool:
        return self.write_with(
            lambda: write_state(self.path, dataclasses.replace(state, saved_at=time.time()), extra))

    def write_with(self, write: Callable[[], None]) -> bool:
        """Run `write` (which writes this state file) one at a time; True if it did, else counted."""
        with self._lock:
            try:
                write()
            except StateError as exc:
                self._failed(str(exc))
                return False
            except OSError as exc:
                self._failed(f"cannot save state: {describe(exc, self.path)}")
                return False
        return True

    def _failed(self, message: str) -> None:
        self.stats.state_errors += 1
        self.stats.last_state_error = message


def position_of(cur: OpenFile) -> SavedState:
    """What a state file would say for the open file now (``saved_at`` left 0)."""
    fingerprint = cur.fingerprint or cur.take_fingerprint()
    return SavedState(
        path=cur.path, dev=cur.dev, ino=cur.ino, offset=cur.committed,
        fingerprint=fingerprint[0], fingerprint_bytes=fingerprint[1],
        number=cur.next_number - 1, cut_pending=cur.discarding, saved_at=0.0,
    )


def resume_at(saved: SavedState | None, fd: int, path: str, st: os.stat_result, *, from_start: bool,
              initial_size: int) -> tuple[int, int, bool]:
    """(offset, next line number, inside a line) in the first file: where the state file says, if it
    names this very file (path, inode, the hash of its first bytes); else its start (`from_start`, or
    a file replaced since the state was saved); else its end as it was at start."""
    if saved is not None:
        if (saved.path, saved.ino) == (path, st.st_ino) and st.st_size >= saved.offset:
            head = read_at(fd, saved.fingerprint_bytes, 0)
            same = len(head) == saved.fingerprint_bytes
            if same and hashlib.sha256(head).hexdigest() == saved.fingerprint:
                return saved.offset, saved.number + 1, saved.cut_pending
        if st.st_mtime > saved.saved_at:
            return 0, 1, False  # replaced since the state was saved: a file we never read
    if from_start:
        return 0, 1, False
    end = min(initial_size, st.st_size)
    # Starting at the end in the middle of a line: skip its tail rather than hand out half a line.
    return end, 1, end > 0 and read_at(fd, 1, end - 1) != b"\n"


class StateError(Exception):
    """A state file that cannot be read: a one-line message, no file content."""


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
    """The saved position, or None when there is no state file yet. Raises `StateError`."""
    def one(raw: Any) -> SavedState:
        if raw.get("version", _STATE_VERSION) != _STATE_VERSION:
            raise ValueError("a state file of another kind")
        return saved_from(raw)

    return _read_json(path, one)


def _read_json(path: str, parse: Callable[[Any], T]) -> T | None:
    """What `parse` makes of the state file's JSON, None when there is none yet. Raises `StateError`."""
    data = read_state_bytes(path)
    if data is None:
        return None
    try:
        return parse(json.loads(data.decode("utf-8")))
    except (ValueError, KeyError, TypeError, AttributeError):
        raise StateError(f"state file unreadable, ignored: {one_line(path)}") from None


def saved_from(raw: dict[str, object]) -> SavedState:
    """A `SavedState` from its JSON object, checked by pydantic; raises ValueError."""
    return _saved_state().validate_python({"cut_pending": False, **raw})


@functools.cache
def _saved_state() -> TypeAdapter[SavedState]:
    return TypeAdapter(SavedState)


def read_state_bytes(path: str) -> bytes | None:
    """A state file's bytes, or None when there is none yet. Raises `StateError`.

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
    return data


def write_state(path: str, state: SavedState, extra: Mapping[str, object] | None = None) -> None:
    """Save atomically, with `extra`'s keys beside the position's (the record stream's mark, `saved_extra`).
    Raises OSError, or `StateError` when ``path`` exists and is not a regular file (it is left as it is)."""
    document = {"version": _STATE_VERSION, **asdict(state), **(extra or {})}
    write_atomically(path, json.dumps(document, indent=1) + "\n")


def saved_extra(path: str, key: str) -> object:
    """The value of `key` a state file of either kind was written with (`extra`), None if it has none or
    cannot be read (its position's reader says why)."""
    try:
        return _read_json(path, lambda raw: raw.get(key) if isinstance(raw, dict) else None)
    except StateError:
        return None


def write_atomically(path: str, text: str) -> None:
    """Write a temporary file in the same folder, fsync it, rename it over ``path``: all or nothing."""
    folder = os.path.dirname(path) or "."
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        try:  # never opened: a pipe would block
            why = _not_a_state_file(os.lstat(path))
        except FileNotFoundError:
            why = None
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


# -- the state file of a many-source watch ----------------------------------------------------

_SOURCES_VERSION = 2


def read_sources(path: str) -> dict[SourceKey, SavedState] | None:
    """Each source's saved position (None when there is no state file yet). Raises `StateError`."""
    def sources(raw: Any) -> dict[SourceKey, SavedState]:
        if raw.get("version") != _SOURCES_VERSION:
            raise StateError(f"state file of one file, not of many sources, ignored: {one_line(path)}")
        out: dict[SourceKey, SavedState] = {}
        saved_at = raw.get("saved_at")
        for item in raw["sources"]:
            key = tuple((str(name), str(value)) for name, value in item["labels"])
            out[key] = saved_from(item if saved_at is None else {"saved_at": saved_at, **item})
        return out

    return _read_json(path, sources)


def encode_sources(state: SourcesState, now: float, extra: Mapping[str, object] | None = None) -> str:
    """The state file's text for `state`: every source that has a file open (and `extra`'s keys)."""
    sources = []
    for key, checkpoint in state.parts:
        saved = checkpoint.state
        if isinstance(saved, SavedState):
            item = asdict(saved)
            del item["saved_at"]
            sources.append({"labels": [list(pair) for pair in key], **item})
    document = {"version": _SOURCES_VERSION, "saved_at": now, "sources": sources, **(extra or {})}
    return json.dumps(document, separators=(",", ":")) + "\n"


SAVE_BYTES_PER_SECOND = 64 * 1024
SAVE_SECONDS_MIN = 0.1
SAVE_SECONDS_MAX = 1.0


def save_spacing(state_bytes: int) -> float:
    """Seconds between two writes of a state of `state_bytes` (see the module's docstring)."""
    return min(SAVE_SECONDS_MAX, max(SAVE_SECONDS_MIN, state_bytes / SAVE_BYTES_PER_SECOND))


def write_sources(path: str, state: SourcesState, extra: Mapping[str, object] | None = None) -> int:
    """Save every source that has a file open, atomically; the bytes written. Raises OSError, or
    `StateError` when the state is over `MAX_STATE_BYTES` (then the file is left as it is: a restart
    could not read it)."""
    text = encode_sources(state, time.time(), extra)
    size = len(text.encode("utf-8"))
    if size > MAX_STATE_BYTES:
        raise StateError(f"cannot save state: {len(state.parts)} sources take {size} bytes, over the "
                         f"{MAX_STATE_BYTES >> 20} MiB a state file may be (the last one written is kept): "
                         f"{one_line(path)}")
    write_atomically(path, text)
    return size
