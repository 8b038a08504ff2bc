"""Which file a follower reads: the target file, or the newest launch file of a folder or a glob.

vLLM launch scripts write one timestamped file per launch, so a folder (or glob) target means "the
current launch": its newest matching file. The rules, kept here so `following/follower.py` only reads bytes:

* The first file is the one a state file names (when it is still there), else the newest by mtime,
  then by name (launch files carry a timestamp in their name).
* Files no newer than the first one are old launches and are never read. A file that appears later, or
  is newer than the first one, is a new launch, read from its start.
* A file read once is never read again from its start, even under another name; files that are gone
  are forgotten, so a reused inode number is not mistaken for one of them. A file removed and another
  created on its inode between two listings (ext4 and xfs reuse inode numbers at once) is told apart
  by its first bytes.
* A target that does not exist yet may turn out to be a folder: the mode is settled when it appears.
"""

from __future__ import annotations

import fnmatch
import glob
import os
import stat
from collections.abc import Callable
from typing import NamedTuple

from .openfile import fingerprint_of, open_regular, read_at

__all__ = ["Candidate", "LaunchFiles", "candidate", "has_magic"]

OnError = Callable[[OSError, str], None]
"""How a listing error is reported (the follower counts it); never raised."""


class Candidate(NamedTuple):
    """A regular file that matches the target, as `stat` saw it."""

    path: str
    dev: int
    ino: int
    size: int
    mtime_ns: int

    @property
    def key(self) -> tuple[int, str]:
        """Newest first by mtime, then by name (launch files carry a timestamp in their name)."""
        return (self.mtime_ns, os.path.basename(self.path))

    @property
    def ident(self) -> tuple[str, int, int]:
        return (self.path, self.dev, self.ino)


class LaunchFiles:
    """The files of a target (a file, a folder with a name pattern, or a glob), and which one is next.

    ``mode`` is ``"file"``, ``"dir"``, ``"glob"`` or ``"list"``. The follower tells it what it opened
    (``opened``); it answers which file to open first (``first``), which to open when none is open
    (``next_to_open``) and whether a newer launch supersedes the current file (``newer_launch``).
    """

    def __init__(self, target: str, pattern: str, state_file: str | None, on_error: OnError,
                 lister: Callable[[], list[str]] | None = None) -> None:
        """``lister``: the candidate paths, given by the caller (mode ``"list"``: one source of a folder
        of many, `following/many.py`); ``target`` then only names it."""
        self.target = target if lister is not None else os.path.abspath(target)
        self._lister = lister
        if lister is not None:
            self.mode = "list"
        elif os.path.isdir(self.target) or target.endswith(os.sep):
            self.mode = "dir"
        elif has_magic(target):
            self.mode = "glob"
        else:
            self.mode = "file"
        # A target that does not exist yet may turn out to be a folder: decide when it appears.
        self._mode_open = self.mode == "file" and not os.path.exists(self.target)
        self.pattern = pattern
        self.state_file = state_file
        self._on_error = on_error
        self.initial: Candidate | None = None  # the first file, until it is opened
        self._seen: set[tuple[str, int, int]] = set()  # folder files that are not new launches
        # (dev, ino) we have read, never again from 0: the fingerprint of its first bytes, if known
        self._followed: dict[tuple[int, int], tuple[str, int] | None] = {}
        self._scanned: list[Candidate] = []

    def choose_first(self, saved: tuple[str, int] | None) -> None:
        """Pick the first file once (``saved``: the state file's (path, inode)), and mark the folder
        files no newer than it as old launches."""
        candidates = self.scan()
        choice = None
        if saved is not None:
            choice = next((c for c in candidates if (c.path, c.ino) == saved), None)
        if choice is None and candidates:
            choice = max(candidates, key=lambda c: c.key)
        self.initial = choice
        if choice is not None and self.mode != "file":
            # Files newer than the first one (only when resuming an older file from state) are
            # launches we must still read.
            self._seen = {c.ident for c in candidates if c.key <= choice.key}

    def listed(self) -> list[str]:
        """The caller's candidate paths now (mode ``"list"``), else []: a parked follower compares them."""
        return self._lister() if self._lister is not None else []

    def next_to_open(self) -> list[Candidate]:
        """The files to try, in order, when none is open: the first file while it has not been
        opened, then the newest new launch (at most one of each)."""
        candidates = self.scan()
        if self.mode == "file":
            return candidates[:1]
        ids = self._prune(candidates, None)
        order = sorted((c for c in candidates if self._is_new(c)), key=lambda c: c.key, reverse=True)[:1]
        initial = self.initial
        if initial is not None and initial.ident in ids:
            order.insert(0, initial)
        return order

    def newer_launch(self, current: Candidate) -> Candidate | None:
        """The newest new launch newer than ``current`` (a folder or glob target only), or None."""
        if self.mode == "file":
            return None
        candidates = self.scan()
        self._prune(candidates, (current.dev, current.ino))
        newer = [c for c in candidates if self._is_new(c) and c.key > current.key]
        return max(newer, key=lambda c: c.key) if newer else None

    def opened(self, path: str, dev: int, ino: int, fingerprint: tuple[str, int] | None = None) -> None:
        """The follower opened this file (`fingerprint`: of its first bytes): it is no longer new, and
        never read from 0 again."""
        self.initial = None
        self._seen.add((path, dev, ino))
        self._followed[(dev, ino)] = fingerprint

    def left(self, dev: int, ino: int, fingerprint: tuple[str, int] | None) -> None:
        """The follower left this file; `fingerprint`: of its first bytes as last read."""
        if (dev, ino) in self._followed and fingerprint is not None:
            self._followed[(dev, ino)] = fingerprint

    def is_initial(self, path: str, dev: int, ino: int) -> bool:
        """Whether this is the first file (where the start position rules apply), not yet opened."""
        return self.initial is not None and self.initial.ident == (path, dev, ino)

    def scan(self) -> list[Candidate]:
        """The regular files matching the target now (never the state file or its temporary files)."""
        if self._mode_open and os.path.exists(self.target):
            self._mode_open = False
            self.mode = "dir" if os.path.isdir(self.target) else "file"
        if self.mode == "file":
            found = candidate(self.target)
            return [found] if found else []
        if self.mode == "dir":
            try:
                names = [os.path.join(self.target, n) for n in os.listdir(self.target)]
            except FileNotFoundError:
                names = []
            except OSError as exc:
                self._on_error(exc, self.target)
                names = []
            names = [p for p in names if fnmatch.fnmatch(os.path.basename(p), self.pattern)]
        elif self._lister is not None:
            names = self._lister()
        else:
            names = glob.glob(self.target)
        found_all = [candidate(p) for p in names if not self._is_state_file(p)]
        self._scanned = [c for c in found_all if c is not None]
        return self._scanned

    def watch_dirs(self) -> list[str]:
        """The folders whose changes may matter: the target's, or for a glob its fixed prefix and the
        folders of the files it matched last time."""
        if self.mode == "dir":
            return [self.target]
        if self.mode == "file":
            return [os.path.dirname(self.target)]
        if self.mode == "list":
            return sorted({os.path.dirname(c.path) for c in self._scanned})
        parts = self.target.split(os.sep)
        fixed = os.sep.join(parts[: next(i for i, p in enumerate(parts) if has_magic(p))]) or os.sep
        return sorted({fixed} | {os.path.dirname(c.path) for c in self._scanned})

    def _is_new(self, c: Candidate) -> bool:
        """Not an old launch seen at start, and not a file we read already (maybe renamed since)."""
        if c.ident in self._seen:
            return False
        if (c.dev, c.ino) not in self._followed:
            return True
        known = self._followed[(c.dev, c.ino)]
        if known is None or known[1] == 0 or _head_is(c.path, known):
            return False  # the file we read (maybe renamed), or no way to tell
        del self._followed[(c.dev, c.ino)]  # another file, on the inode of one removed since
        return True

    def _prune(
        self, candidates: list[Candidate], current: tuple[int, int] | None
    ) -> set[tuple[str, int, int]]:
        """Forget files that are gone, so the sets stay small and a reused inode number is not blocked."""
        ids = {c.ident for c in candidates}
        self._seen &= ids
        keep = {(dev, ino) for _, dev, ino in ids}
        if current is not None:
            keep.add(current)
        self._followed = {k: v for k, v in self._followed.items() if k in keep}
        return ids

    def _is_state_file(self, path: str) -> bool:
        if not self.state_file:
            return False
        base = os.path.basename(self.state_file)
        return path == self.state_file or os.path.basename(path).startswith(f".{base}.")


def candidate(path: str) -> Candidate | None:
    """The file at ``path`` if it is a regular file (following links), else None."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    if not stat.S_ISREG(st.st_mode):
        return None
    return Candidate(path, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def _head_is(path: str, fingerprint: tuple[str, int]) -> bool:
    """Whether the file at `path` begins with the bytes of `fingerprint` (True when it cannot be read:
    then nothing tells it from the file we read)."""
    try:
        fd, _ = open_regular(path)
    except OSError:
        return True
    try:
        return fingerprint_of(read_at(fd, fingerprint[1], 0)) == fingerprint
    except OSError:
        return True
    finally:
        os.close(fd)


def has_magic(text: str) -> bool:
    """Whether ``text`` is a glob pattern."""
    return any(ch in text for ch in "*?[")
