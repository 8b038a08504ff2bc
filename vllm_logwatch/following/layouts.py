"""Which sources a folder holds: one per launch script, per Kubernetes container, or per Docker container.

A source is one vLLM server's stream of launches: its key is the labels that tell it from the others
(`SourceKey`), its files the launch files it has now, newest last read. Three layouts:

* ``scripts``: a folder of tee'd launch files. Files whose names differ only in a trailing timestamp
  (`serve_qwen_20250705_112901.log`, `serve_qwen_20250706_080000.log`) are one script's launches:
  label ``script`` (`serve_qwen`). A folder of one script's files is one source, as it always was.
* ``pods``: a kubelet tree (`/var/log/pods/<namespace>_<pod>_<uid>/<container>/<restart>.log`):
  labels ``namespace``, ``pod``, ``container``. A pod recreated under the same name (a StatefulSet)
  is the same source: its newest restart file, under any uid, is the current launch. Rotated files
  (`0.log.20250705-112901`, `.gz`) are not launches: the follower drains a renamed file by its
  descriptor.
* ``docker``: `/var/lib/docker/containers/<id>/<id>-json.log`: label ``container``, the container's
  name from its `config.v2.json` (its short id when that cannot be read). Rotated `-json.log.1` ... are
  not launches.

Listing only, no reading of logs; nothing here raises for I/O (`on_error` is told, the folder is
treated as empty). Names from the file system are shown as valid UTF-8 and bounded in length, so a
label value is never unbounded or undecodable.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from ..shown import shown_path

__all__ = [
    "FOLDED",
    "LAYOUTS",
    "SOURCE_LABELS",
    "Found",
    "SourceKey",
    "detect_layout",
    "discover",
    "folded_key",
    "script_name",
    "source_name",
    "sources_now",
]

SourceKey = tuple[tuple[str, str], ...]
"""The labels of a source, in a fixed order; () for the one source of a file, glob or stream target."""

LAYOUTS = ("scripts", "pods", "docker")
FOLDED = "_folded"
"""The label value of the sources read beyond `--max-sources`, all folded into one set of series."""
LABELS = {"scripts": ("script",), "pods": ("namespace", "pod", "container"), "docker": ("container",)}
SOURCE_LABELS = frozenset(name for names in LABELS.values() for name in names)
MAX_LABEL_CHARS = 128
MAX_CONFIG_BYTES = 1 << 20  # a config.v2.json is a few KiB; a bigger one is not read

_STAMP = re.compile(r"[-_.]\d{4,}[\d\-_.:T+Z]*$")
_ONLY_STAMP = re.compile(r"\d{4,}[\d\-_.:T+Z]*")
_POD_DIR = re.compile(r"([^_]+)_([^_]+)_([^_]+)")
_DOCKER_ID = re.compile(r"[0-9a-f]{64}")
_DOCKER_NAME = re.compile(r"[a-zA-Z0-9][a-zA-Z0-9_.-]*")
OnError = Callable[[OSError, str], None]


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
    if any(_POD_DIR.fullmatch(name) for name in dirs):
        return "pods"
    return "scripts" if files else None


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
    return shown_path(text)[:MAX_LABEL_CHARS]


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
    cached = names.get(config)
    if cached is not None and cached[0] == st.st_mtime_ns:
        return cached[1] or None
    name = ""
    if st.st_size <= MAX_CONFIG_BYTES:
        try:
            with open(config, "rb") as f:
                raw = json.loads(f.read(MAX_CONFIG_BYTES))
            value = raw.get("Name") if isinstance(raw, dict) else None
            if isinstance(value, str) and _DOCKER_NAME.fullmatch(value.lstrip("/")):
                name = value.lstrip("/")
        except (OSError, ValueError):
            pass
    names[config] = (st.st_mtime_ns, name)
    return name or None
