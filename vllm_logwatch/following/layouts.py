"""What a target holds: the sources of a folder of many, and the launch files of one source.

Which sources a folder holds, one per launch script, Kubernetes container or Docker container, and
their labels: the layouts of docs/watch.md, "Many sources". A source is one vLLM server's stream of
launches: its key is the labels that tell it from the others (`SourceKey`), its files the launch files
it has now (rotated files are not launches: the follower drains a renamed file by its descriptor).
Listing only, no reading of logs; nothing here raises for I/O (`on_error` is told, the folder is
treated as empty). Names from the file system are shown as valid UTF-8 and bounded in length, so a
label value is never unbounded or undecodable.

Which file a follower reads (`LaunchFiles`): the target file, or the newest launch file of a folder or a
glob. vLLM launch scripts write one timestamped file per launch, so a folder (or glob) target means "the
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
import hashlib
import json
import os
import re
import stat
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import NamedTuple

from ..shown import shown_path
from .openfile import fingerprint_of, open_regular, read_at

SourceKey = tuple[tuple[str, str], ...]
"""The labels of a source, in a fixed order; () for the one source of a file, glob or stream target."""

FOLDED = "_folded"
"""The label value of the sources read beyond `--max-sources`, all folded into one set of series."""
LABELS = {"scripts": ("script",), "pods": ("namespace", "pod", "container"), "docker": ("container",)}
SOURCE_LABELS = frozenset(name for names in LABELS.values() for name in names)
MAX_LABEL_CHARS = 128
MAX_CONFIG_BYTES = 1 << 20  # a config.v2.json is a few KiB; a bigger one is not read

_STAMP = re.compile(r"[-_.]\d{4,}[\d\-_.:T+Z]*$")
_ONLY_STAMP = re.compile(r"\d{4,}[\d\-_.:T+Z]*")
_POD_DIR = re.compile(r"([^_]+)_([^_]+)_([^_]+)")
_POD_UID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|[0-9a-f]{32}")
"""A pod's uid as kubelet names its log folder: a UUID, or a static pod's 32-hex hash."""
_RESTART_LOG = re.compile(r"\d+\.log")
_PROBE_PODS = 64  # pod-like folders looked into when telling the layout
_DOCKER_ID = re.compile(r"[0-9a-f]{64}")
_DOCKER_NAME = re.compile(r"[a-zA-Z0-9][a-zA-Z0-9_.-]*")
OnError = Callable[[OSError, str], None]
"""How a listing error is reported (the follower counts it); never raised."""


@dataclass(frozen=True, slots=True)
class Found:
    """A source as the folder shows it now: its labels, its name (what `--select` matches) and files."""

    key: SourceKey
    name: str
    files: tuple[str, ...]
    dirs: tuple[str, ...]  # the folders its files are in (watched for changes)


def script_name(filename: str) -> str:
    """The launch script a file belongs to: its name without the extension and a trailing timestamp.

    >>> script_name("serve_qwen2.5_20250705_112901.log"), script_name("vllm.log")
    ('serve_qwen2.5', 'vllm')
    >>> script_name("20250705_112901.log")  # nothing but a timestamp: every such file is one script's
    'launch'
    """
    stem = os.path.splitext(filename)[0]
    if _ONLY_STAMP.fullmatch(stem):
        return "launch"
    return _STAMP.sub("", stem) or stem


def source_name(key: SourceKey) -> str:
    """What `--select` matches: the label values joined by `/` (pods: namespace/pod/container)."""
    return "/".join(value for _, value in key)


def folded_key(layout: str) -> SourceKey:
    """The labels every source beyond the cap is read under."""
    return tuple((name, FOLDED) for name in LABELS[layout])


def detect_layout(root: str) -> str | None:
    """What a folder holds, from its entries; None while it tells nothing yet (empty, or missing)."""
    try:
        with os.scandir(root) as entries:
            dirs, files = [], 0
            for entry in entries:
                if entry.is_dir():
                    dirs.append(entry.name)
                elif entry.is_file():
                    files += 1
    except OSError:
        return None
    if any(_DOCKER_ID.fullmatch(name) for name in dirs):
        return "docker"
    if _is_kubelet_tree(root, dirs):
        return "pods"
    return "scripts" if files else None


def _is_kubelet_tree(root: str, dirs: list[str]) -> bool:
    """Whether a folder holds kubelet's pod log folders: one named `<namespace>_<pod>_<uid>` with a
    uid-shaped last part, holding a container folder with a restart file `<N>.log`. A folder of launch
    files with a dated archive folder (`logs_2025_07`) is not one."""
    pods = [name for name in dirs if (m := _POD_DIR.fullmatch(name)) and _POD_UID.fullmatch(m.group(3))]
    for name in pods[:_PROBE_PODS]:
        for container in _list(os.path.join(root, name), lambda exc, path: None):
            if _is_dir(container) and any(
                    _RESTART_LOG.fullmatch(e.name) and _is_file(e)
                    for e in _list(container.path, lambda exc, path: None)):
                return True
    return False


def sources_now(root: str, layout: str | None, pattern: str,
                select: Iterable[str] = ()) -> tuple[str | None, int]:
    """(the layout, told from the folder when None; how many sources it holds now), listing errors
    ignored: a look before following starts, which reads nothing."""
    layout = layout or detect_layout(root)
    if layout is None:
        return None, 0
    return layout, len(discover(root, layout, pattern, select, lambda exc, path: None))


def discover(root: str, layout: str, pattern: str, select: Iterable[str], on_error: OnError,
             names: dict[str, tuple[int, str]] | None = None, listed: set[str] | None = None,
             ) -> dict[SourceKey, Found]:
    """The sources in `root` now that `select` keeps (every one when it is empty). `names`: a cache of
    Docker container names by config path (mtime, name), kept by the caller between calls; `listed`
    gets every folder listed (a new pod's folders, still without a file, are worth watching)."""
    globs = tuple(select)
    listed = set() if listed is None else listed
    listed.add(root)
    if layout == "pods":
        found = _pods(root, on_error, listed)
    elif layout == "docker":
        found = _docker(root, on_error, {} if names is None else names, listed)
    else:
        found = _scripts(root, pattern, on_error)
    return {key: f for key, f in found.items()
            if not globs or any(fnmatch.fnmatchcase(f.name, g) for g in globs)}


def _label(text: str) -> str:
    """A folder or file name as a label value: itself when it is short, valid UTF-8 without control
    characters and not `FOLDED`; else what can be shown of it, cut, then `~` and 8 hex digits of a hash
    of the whole name, so that two names never become one source (nor a real source the folded one).

    >>> _label("serve"), _label("_folded"), len(_label("x" * 200)), _label("x" * 200) == _label("x" * 201)
    ('serve', '_folded~9ba58269', 128, False)
    """
    shown = shown_path(text)
    if shown == text and len(text) <= MAX_LABEL_CHARS and text != FOLDED:
        return text
    digest = hashlib.sha256(os.fsencode(text)).hexdigest()[:8]
    return f"{shown[:MAX_LABEL_CHARS - 9]}~{digest}"


def _list(folder: str, on_error: OnError) -> list[os.DirEntry[str]]:
    try:
        with os.scandir(folder) as entries:
            return list(entries)
    except FileNotFoundError:
        return []
    except OSError as exc:
        on_error(exc, folder)
        return []


def _is_file(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_file()
    except OSError:
        return False


def _is_dir(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir()
    except OSError:
        return False


def _add(found: dict[SourceKey, Found], key: SourceKey, files: list[str], folder: str) -> None:
    old = found.get(key)
    if old is None:
        found[key] = Found(key, source_name(key), tuple(sorted(files)), (folder,))
    else:
        found[key] = Found(key, old.name, tuple(sorted({*old.files, *files})),
                           tuple(sorted({*old.dirs, folder})))


def _scripts(root: str, pattern: str, on_error: OnError) -> dict[SourceKey, Found]:
    found: dict[SourceKey, Found] = {}
    for entry in _list(root, on_error):
        if fnmatch.fnmatch(entry.name, pattern) and _is_file(entry):
            _add(found, (("script", _label(script_name(entry.name))),), [entry.path], root)
    return found


def _pods(root: str, on_error: OnError, listed: set[str]) -> dict[SourceKey, Found]:
    found: dict[SourceKey, Found] = {}
    for pod in _list(root, on_error):
        match = _POD_DIR.fullmatch(pod.name)
        if match is None or not _is_dir(pod):
            continue
        namespace, name, _uid = match.groups()
        listed.add(pod.path)
        for container in _list(pod.path, on_error):
            if not _is_dir(container):
                continue
            listed.add(container.path)
            files = [e.path for e in _list(container.path, on_error)
                     if e.name.endswith(".log") and _is_file(e)]
            if files:
                key = (("namespace", _label(namespace)), ("pod", _label(name)),
                       ("container", _label(container.name)))
                _add(found, key, files, container.path)
    return found


def _docker(root: str, on_error: OnError, names: dict[str, tuple[int, str]],
            listed: set[str]) -> dict[SourceKey, Found]:
    found: dict[SourceKey, Found] = {}
    for entry in _list(root, on_error):
        if not _is_dir(entry) or not _DOCKER_ID.fullmatch(entry.name):
            continue
        listed.add(entry.path)
        log = os.path.join(entry.path, f"{entry.name}-json.log")
        if not os.path.isfile(log):
            continue
        name = _container_name(os.path.join(entry.path, "config.v2.json"), names) or entry.name[:12]
        _add(found, (("container", _label(name)),), [log], entry.path)
    return found


def _container_name(config: str, names: dict[str, tuple[int, str]]) -> str | None:
    """The container's name (`Name` in its config.v2.json, without Docker's leading `/`), cached by the
    file's mtime; None when the file is missing, too big, not JSON or the name is not a Docker name."""
    try:
        st = os.stat(config)
    except OSError:
        return None
    if not stat.S_ISREG(st.st_mode):
        return None  # a pipe there would block the listing in open(): never opened
    cached = names.get(config)
    if cached is not None and cached[0] == st.st_mtime_ns:
        return cached[1] or None
    name = ""
    if st.st_size <= MAX_CONFIG_BYTES:
        try:
            fd, _ = open_regular(config)
            with os.fdopen(fd, "rb") as f:
                raw = json.loads(f.read(MAX_CONFIG_BYTES))
            value = raw.get("Name") if isinstance(raw, dict) else None
            if isinstance(value, str) and _DOCKER_NAME.fullmatch(value.lstrip("/")):
                name = value.lstrip("/")
        except (OSError, ValueError):
            pass
    names[config] = (st.st_mtime_ns, name)
    return name or None


# -- one source's launch files ------------------------------------------------------------------


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
        elif glob.has_magic(target):
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
        fixed = os.sep.join(parts[: next(i for i, p in enumerate(parts) if glob.has_magic(p))]) or os.sep
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
