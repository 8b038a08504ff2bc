"""The state file of a many-source watch: each source's labels and its position, in one file.

The same file rules as one follower's state file (`statefile.py`: bounded, never through a link or
a device, written atomically), version 2:

    {"version":2,"saved_at":...,"sources":[{"labels":[["namespace","vllm"],...],"path":...,"offset":...},...]}

Compact (no spaces, `saved_at` once), about 250 bytes a source with kubelet's paths. It is written
only when it fits the bound a state file is read with (`MAX_STATE_BYTES`): one that would not is not
written (a `StateError`, counted; the last one written stays), so a restart can always read what was
written. (A file with `saved_at` in each source, as written before, is read too.)

A version 1 file (one follower's) is not a many-source state: it is said to be of another kind and
ignored, as an unreadable one is (the sources start as without a state file).

It is rewritten whole, so its writes are spaced by its size (`save_spacing`): at most
`SAVE_BYTES_PER_SECOND`, 0.1 s to 1 s apart, scrapes included. A scrape that finds the file behind
waits its turn, so the spacing is also how long a scrape may wait: 0.1 s up to ~20 sources, as a
one-source watch; 1 s from ~220.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import asdict

from .layouts import SourceKey
from .statefile import (
    MAX_STATE_BYTES,
    SavedState,
    SourcesState,
    StateError,
    one_line,
    read_state_bytes,
    saved_from,
    write_atomically,
)

__all__ = ["encode_sources", "read_sources", "write_sources"]

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
        saved_at = raw.get("saved_at")
        for item in raw["sources"]:
            key = tuple((str(name), str(value)) for name, value in item["labels"])
            out[key] = saved_from(item if saved_at is None else {"saved_at": saved_at, **item})
        return out
    except (ValueError, KeyError, TypeError, AttributeError):
        raise StateError(f"state file unreadable, ignored: {one_line(path)}") from None


def encode_sources(state: SourcesState, now: float, extra: Mapping[str, object] | None = None) -> str:
    """The state file's text for `state`: every source that has a file open (and `extra`'s keys)."""
    sources = []
    for key, checkpoint in state.parts:
        saved = checkpoint.state
        if isinstance(saved, SavedState):
            item = asdict(saved)
            del item["saved_at"]
            sources.append({"labels": [list(pair) for pair in key], **item})
    document = {"version": _VERSION, "saved_at": now, "sources": sources, **(extra or {})}
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
