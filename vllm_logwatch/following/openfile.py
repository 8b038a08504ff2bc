"""One open file of the follower and the lines in it: read bytes in, blocks of complete lines out, by
the one framer (`parsing/framing.py` `Framer`). `\\r` and bad UTF-8 (replaced, never fatal) are dealt
with only for the lines that become text. No log text is kept beyond the block being handed over.

A file may be parked, for a watch of more files than it may keep open (`many.py`, `Follower.park`): its
descriptor closed, its place kept (the end of the last line handed out: a partial line held is read
again later). Polling it costs a `stat()` while `Parked.unchanged`; then it is opened again by its
(device, inode) (`open_by_inode`), so what was written to it before a rotation is drained as through a
descriptor kept open; a file gone (compressed, deleted) is left as a rotation leaves it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import stat
from dataclasses import dataclass

from ..parsing.framing import Framer
from ..parsing.framing import LineBlock as LineBlock  # its readers import it from here

FINGERPRINT_BYTES = 1024  # the state file recognises a file by the hash of its first bytes


@dataclass(slots=True)
class FollowerStats:
    """Counters the exporter publishes about itself (no log text, ever: logs hold users' prompts)."""

    lines: int = 0
    bytes: int = 0
    rotations: int = 0
    truncations: int = 0
    read_errors: int = 0
    lines_cut: int = 0
    files_opened: int = 0
    file_switches: int = 0
    state_errors: int = 0
    last_error: str | None = None  # the last read error (counted in read_errors)
    last_state_error: str | None = None  # the last state file error (counted in state_errors)


@dataclass(slots=True)
class OpenFile(Framer):
    """The open file and where we are in it."""

    fd: int
    path: str
    dev: int
    ino: int
    pos: int  # next byte read() returns
    line_start: int  # offset of the first byte in buf (the next line to deliver)
    next_number: int
    discarding: bool = False  # inside a line already delivered cut (or begun before we started)
    buf: bytearray = dataclasses.field(default_factory=bytearray)
    fingerprint: tuple[str, int] | None = None  # (sha256, bytes) of the first bytes, up to FINGERPRINT_BYTES
    start: int = 0  # the offset reading started at

    @classmethod
    def framing(cls, name: str) -> OpenFile:
        """The framing alone, for bytes handed in rather than read (run mode's pipe from vLLM)."""
        return cls(-1, name, 0, 0, 0, 0, 1)

    @property
    def committed(self) -> int:
        """Offset just after the last line delivered: where a restart must resume."""
        return self.pos if self.discarding else self.line_start

    def rewind(self) -> None:
        """Read again from offset 0, line 1 (the file was truncated)."""
        os.lseek(self.fd, 0, os.SEEK_SET)
        self.pos = self.line_start = self.start = 0
        self.next_number = 1
        self.take_fingerprint()

    def take_fingerprint(self) -> tuple[str, int]:
        """The fingerprint of the file's first bytes as they are now, kept."""
        self.fingerprint = fingerprint_of(read_at(self.fd, FINGERPRINT_BYTES, 0))
        return self.fingerprint

    def park(self, files: list[str]) -> Parked | None:
        """Close the descriptor, keeping the place; None (left open) when it cannot be looked at."""
        try:
            st = os.fstat(self.fd)
        except OSError:
            return None
        read = self.pos
        if not self.discarding:
            self.pos = self.line_start
            self.buf.clear()
        os.close(self.fd)
        self.fd = -1
        return Parked(read, st.st_mtime_ns, tuple(files))

    def reopen(self) -> bool:
        """Open the file again by its (device, inode), at its place; False when it is gone."""
        fd = open_by_inode(self.path, self.dev, self.ino)
        if fd is None:
            return False
        os.lseek(fd, self.pos, os.SEEK_SET)
        self.fd = fd
        return True

    def head_changed(self) -> bool:
        """Whether the first bytes differ from those seen before: the file was truncated and written
        again. While the file is shorter than ``FINGERPRINT_BYTES``, the fingerprint grows with it."""
        head = read_at(self.fd, FINGERPRINT_BYTES, 0)
        if self.fingerprint is None:
            self.fingerprint = fingerprint_of(head)
            return False
        digest, size = self.fingerprint
        if len(head) < size or fingerprint_of(head[:size])[0] != digest:
            return True
        if len(head) > size:
            self.fingerprint = fingerprint_of(head)
        return False


def place_of(cur: OpenFile | None) -> dict[str, int | str | None]:
    """Where the follower is in the open file (or parked one), for its status; all None with none."""
    if cur is None:
        return {**dict.fromkeys(("path", "offset", "read_offset", "start_offset", "dev", "inode",
                                 "line_number")), "held_bytes": 0}
    return {"path": cur.path, "offset": cur.committed, "read_offset": cur.pos, "start_offset": cur.start,
            "dev": cur.dev, "inode": cur.ino, "line_number": cur.next_number - 1, "held_bytes": len(cur.buf)}


def open_regular(path: str) -> tuple[int, os.stat_result]:
    """`path` opened read-only, never blocking: a named pipe (or a device) where a file belongs would
    hang `open()` until a writer comes, holding whatever lock the caller holds. Opened with `O_NONBLOCK`
    (which changes nothing for a regular file) and checked with `fstat`; anything but a regular file (a
    pipe, a device, a socket, a folder) raises OSError, its descriptor closed."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        st = os.fstat(fd)
    except OSError:
        os.close(fd)
        raise
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise OSError("not a regular file")
    return fd, st


def fingerprint_of(head: bytes) -> tuple[str, int]:
    """(hash, length) of a file's first bytes."""
    return hashlib.sha256(head).hexdigest(), len(head)


def read_at(fd: int, size: int, offset: int) -> bytes:
    """Read without moving the descriptor's position (the follower's read position lives there)."""
    return os.pread(fd, size, offset) if size > 0 else b""


@dataclass(frozen=True, slots=True)
class Parked:
    """What a parked file was when parked: the bytes read, its mtime, the source's files listed."""

    read: int
    mtime_ns: int
    files: tuple[str, ...]

    def unchanged(self, cur: OpenFile, files: list[str]) -> bool:
        """Whether nothing is new: the same file at the path, as large and as old, the same files."""
        try:
            st = os.stat(cur.path)
        except OSError:
            return False
        return ((st.st_dev, st.st_ino) == (cur.dev, cur.ino) and st.st_size == self.read
                and st.st_mtime_ns == self.mtime_ns and tuple(files) == self.files)


def open_by_inode(path: str, dev: int, ino: int) -> int | None:
    """A descriptor of the file (dev, ino): at `path`, or renamed in its folder (a rotation: kubelet's
    `0.log.<stamp>`, Docker's `-json.log.1`); None when it is in neither place."""
    folder = os.path.dirname(path)
    names = [os.path.basename(path)]
    try:
        with os.scandir(folder) as entries:
            names += [e.name for e in entries if e.inode() == ino and e.name != names[0]]
    except OSError:
        pass
    for name in names:
        try:
            fd, st = open_regular(os.path.join(folder, name))
        except OSError:
            continue
        if (st.st_dev, st.st_ino) == (dev, ino):
            return fd
        os.close(fd)
    return None
