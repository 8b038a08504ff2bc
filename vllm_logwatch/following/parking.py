"""A followed file parked: its descriptor closed, its place kept, for a watch of more files than it may
keep open (`many.py`, `Follower.park`).

Parking rewinds to the end of the last line handed out (a partial line held is read again later) and
remembers what was read. Polling a parked file costs a `stat()`: while the same file is at the path, no
larger than what was read, with the same mtime, and the source lists the same files, nothing is opened.
Otherwise the file is opened again by its (device, inode): at its path, or renamed in its folder (a
rotation: kubelet's `0.log.<stamp>`, Docker's `-json.log.1`), so what was written to it before the
rotation is drained as through a descriptor kept open; a file gone from both (compressed, deleted) is
left as a rotation leaves it.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from .openfile import OpenFile, open_regular

__all__ = ["OpenFiles", "Parked", "open_by_inode", "park_file", "reopen"]

K = TypeVar("K", bound=Hashable)


class _Parkable(Protocol):
    @property
    def is_open(self) -> bool: ...

    def park(self) -> bool: ...


class OpenFiles(Generic[K]):
    """The followers that hold a file open, the one polled longest ago first: past `most`, it is parked."""

    def __init__(self, most: int) -> None:
        self.most = max(1, most)
        self._open: OrderedDict[K, _Parkable] = OrderedDict()

    def __len__(self) -> int:
        return len(self._open)

    def polled(self, key: K, follower: _Parkable) -> None:
        """`follower` (of source `key`) was just polled."""
        if not follower.is_open:
            self._open.pop(key, None)
            return
        self._open[key] = follower
        self._open.move_to_end(key)
        while len(self._open) > self.most:
            _, oldest = self._open.popitem(last=False)
            oldest.park()

    def forget(self, key: K) -> None:
        self._open.pop(key, None)


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


def park_file(cur: OpenFile, files: list[str]) -> Parked | None:
    """Close `cur`'s descriptor, keeping its place; None (left open) when it cannot be looked at."""
    try:
        st = os.fstat(cur.fd)
    except OSError:
        return None
    read = cur.pos
    if not cur.discarding:
        cur.pos = cur.line_start
        cur.buf.clear()
    os.close(cur.fd)
    cur.fd = -1
    return Parked(read, st.st_mtime_ns, tuple(files))


def reopen(cur: OpenFile) -> bool:
    """Open `cur`'s file again by its (device, inode), at its place; False when it is gone."""
    fd = open_by_inode(cur.path, cur.dev, cur.ino)
    if fd is None:
        return False
    os.lseek(fd, cur.pos, os.SEEK_SET)
    cur.fd = fd
    return True


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

