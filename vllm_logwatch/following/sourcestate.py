"""The state file of a many-source watch: each source's labels and its position, in one file.

The same file rules as one follower's state file (`statefile.py`: bounded, never through a link or
a device, written atomically), version 2:

    {"version": 2, "sources": [{"labels": [["namespace", "vllm"], ...], "path": ..., "offset": ...}, ...]}

A version 1 file (one follower's) is not a many-source state: it is said to be of another kind and
ignored, as an unreadable one is (the sources start as without a state file).
"""

from __future__ import annotations

import dataclasses
import json
import time
from dataclasses import asdict

from .layouts import SourceKey
from .statefile import (
    SavedState,
    SourcesState,
    StateError,
    one_line,
    read_state_bytes,
    saved_from,
    write_atomically,
)

__all__ = ["read_sources", "write_sources"]

_VERSION = 2


def read_sources(path: str) -> dict[SourceKey, SavedState] | None:
    """Each source's saved position (None when there is no state file yet). Raises `StateError`."""
    data = read_state_bytes(path)
    if data is None:
        return None
    try:
        raw = json.loads(data.decode("utf-8"))
        if raw.get("version") != _VERSION:
            raise StateError(f"state file of one file, not of many sources, ignored: {one_line(path)}")
        out: dict[SourceKey, SavedState] = {}
        for item in raw["sources"]:
            key = tuple((str(name), str(value)) for name, value in item["labels"])
            out[key] = saved_from(item)
        return out
    except (ValueError, KeyError, TypeError, AttributeError):
        raise StateError(f"state file unreadable, ignored: {one_line(path)}") from None


def write_sources(path: str, state: SourcesState) -> None:
    """Save every source that has a file open, atomically. Raises OSError or `StateError`."""
    now = time.time()
    sources = []
    for key, checkpoint in state.parts:
        saved = checkpoint.state
        if isinstance(saved, SavedState):
            sources.append({"labels": [list(pair) for pair in key],
                            **asdict(dataclasses.replace(saved, saved_at=now))})
    write_atomically(path, json.dumps({"version": _VERSION, "sources": sources}, indent=1) + "\n")
