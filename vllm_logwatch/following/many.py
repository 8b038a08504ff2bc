"""Follow many sources of one folder at once (launch scripts, Kubernetes containers, Docker containers),
each by a `Follower` of its own whose files `layouts.py` lists, all polled from one thread: how and why
in docs/design.md, "Many sources in one watch". One poll reads at most `poll_bytes` over all sources,
in turn. Half the descriptor limit is kept for the server: a thousand sources with a file open each
would exhaust the default soft limit of 1024, and the server could no longer accept a connection.
"""

from __future__ import annotations

import bisect
import dataclasses
import os
import resource
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from .follower import Follower
from .layouts import Found, SourceKey, detect_layout, discover, folded_key, sources_now
from .openfile import FollowerStats, LineBlock
from .source import MAX_POLL_BYTES, LineSource, Start
from .statefile import (
    Checkpoint,
    Position,
    SavedState,
    SourcesState,
    StateFile,
    read_sources,
    save_spacing,
    write_sources,
)
from .wakers import Waker

RESCAN_SECONDS = 10.0
SOURCES_PER_POLL = 256
"""A poll visits at most this many sources (the rest are due at once, in the next): a poll over
thousands of files stays short, so a completed poll keeps meaning the reader is alive (/healthz)."""
_SUMMED = ("lines", "bytes", "rotations", "truncations", "read_errors", "lines_cut", "files_opened",
           "file_switches", "state_errors")


@dataclass
class _Source:
    follower: Follower
    found: Found
    folded: bool


class ManyFollower(LineSource):
    """The sources of the folder `target` (`layout`: scripts, pods, docker, or auto), as one source.

    Blocks carry their source's labels in `LineBlock.key`; `labels_of(key)` gives the labels its series
    get (the folded ones beyond the cap). Its own `stats` count listing and state file errors."""

    def __init__(
        self, target: str, *, layout: str = "auto", pattern: str = "*.log", select: Iterable[str] = (),
        max_sources: int = 100, grace: float = 300.0, from_start: bool = False, state_file: str | None = None,
        waker: Waker | None = None, poll_interval: float = 1.0, rescan_seconds: float = RESCAN_SECONDS,
        poll_bytes: int = MAX_POLL_BYTES, clock: Callable[[], float] = time.monotonic, open_files: int = 512,
    ) -> None:
        self.target = os.path.abspath(target)
        self.layout: str | None = None if layout == "auto" else layout
        self.pattern = pattern
        self.select = tuple(select)
        self.max_sources = max_sources
        self.grace = grace
        self.from_start = from_start
        super().__init__(poll_interval, poll_bytes, waker)
        self.state_file = os.path.abspath(state_file) if state_file else None
        self.rescan_seconds = rescan_seconds
        self._open: OrderedDict[SourceKey, Follower] = OrderedDict()  # those open, polled longest ago first
        self._open_most = max(1, open_files)
        self._state_bytes = 0  # the size of the last state written
        self._clock = clock
        self._sources: dict[SourceKey, _Source] = {}
        self._found: dict[SourceKey, Found] = {}
        self._listed: set[str] = {self.target}
        self._gone: dict[SourceKey, float] = {}  # since when a source's files are gone
        self._dropped: list[SourceKey] = []
        self._names: dict[str, tuple[int, str]] = {}  # Docker container names by config path
        self._saved: dict[SourceKey, SavedState] = {}
        self._resumed = False  # a state file was read: a source it does not name is new
        self._due: set[SourceKey] = set()
        self._last: SourceKey | None = None  # the source polled last
        self._begun = False
        self._last_sweep = float("-inf")
        self._parts: dict[SourceKey, Checkpoint] = {}  # each source's checkpoint after its last poll
        self._keys: list[SourceKey] = []  # the sources in order
        self._by_dir: dict[str, list[SourceKey]] = {}  # which sources a folder's files belong to
        self._totals = dict.fromkeys(_SUMMED, 0)  # over the sources (those dropped too: counters go on)
        self._counted: dict[SourceKey, tuple[int, ...]] = {}  # each source's counters, as in _totals
        self._last_error: str | None = None
        self._watch_due = True
        self._checkpoint_due = False
        self._relist_due = False
        self._state = StateFile(self.state_file, self._stats) if self.state_file else None

    # -- what the pipeline reads ------------------------------------------------------------------

    @property
    def mode(self) -> str:
        return self.layout or "auto"

    @property
    def stats(self) -> FollowerStats:
        """The totals over every source (kept as the sources are polled), and the watch's own errors."""
        total = dataclasses.replace(self._stats)
        for name in _SUMMED:
            setattr(total, name, getattr(total, name) + self._totals[name])
        total.last_error = self._last_error or self._stats.last_error
        return total

    def source_stats(self) -> tuple[FollowerStats, dict[SourceKey, FollowerStats]]:
        """The watch's own counters (listing and state file errors), and each source's."""
        return self._stats, {key: source.follower.stats for key, source in list(self._sources.items())}

    def starts(self) -> list[Start] | None:
        """Where each followed source began reading, once every source due was read to its end (None
        before; [] with `from_start`)."""
        with self._lock:
            if self.from_start:
                return []
            if not self._begun or self._due:
                return None
            sources = [(key, s.follower) for key, s in self._sources.items() if not s.folded]
        return [(key, path, start) for key, follower in sources for _, path, start in follower.starts() or ()]

    def labels_of(self, key: SourceKey) -> SourceKey:
        """The labels the series of source `key` get: its own, or the folded ones."""
        source = self._sources.get(key)
        if source is not None and source.folded and self.layout is not None:
            return folded_key(self.layout)
        return key

    def source_counts(self) -> dict[str, int]:
        """Sources by state: followed (series of their own), folded (beyond the cap), gone (in grace)."""
        with self._lock:
            folded = sum(1 for key, s in self._sources.items() if s.folded and key not in self._gone)
            gone = len(self._gone)
            return {"followed": len(self._sources) - folded - gone, "folded": folded, "gone": gone}

    def found_now(self) -> int:
        """How many sources the folder holds now (what the first poll will find); reads nothing."""
        layout, count = sources_now(self.target, self.layout, self.pattern, self.select)
        with self._lock:
            self.layout = self.layout or layout
        return count

    def take_dropped(self) -> list[SourceKey]:
        """The sources dropped (gone past the grace) since the last call."""
        with self._lock:
            dropped, self._dropped = self._dropped, []
        return dropped

    def write_checkpoint(self, state: Position, extra: Mapping[str, object] | None = None) -> bool:
        """Write every source's position (from `checkpoint()`) at once, and `extra`'s keys; errors
        counted, never raised."""
        assert isinstance(state, SourcesState)
        return self._state is not None and self._state.write_with(lambda: self._write(state, extra))

    def _write(self, state: SourcesState, extra: Mapping[str, object] | None) -> None:
        assert self.state_file is not None  # a StateFile is made only with one
        self._state_bytes = write_sources(self.state_file, state, extra)

    def save_interval(self) -> float:
        """Seconds the pipeline's state writes are at least apart (`statefile.save_spacing`)."""
        return save_spacing(self._state_bytes)

    def status(self) -> dict[str, Any]:
        sources = list(self._sources.items())
        return {
            "target": self.target, "mode": self.mode, "path": None, "offset": None, "start_offset": None,
            "sources": len(sources), "folded": sum(1 for _, s in sources if s.folded),
            "gone": len(self._gone), "open_files": len(self._open), "open_files_max": self._open_most,
            "select": list(self.select), "max_sources": self.max_sources,
            "waker_degraded_reason": self._waker and self._waker.degraded_reason,
            "per_source": [_brief(key, s) for key, s in sources],
            "stats": dataclasses.asdict(self.stats),
        }

    # -- polling ----------------------------------------------------------------------------------

    def _poll(self, out: list[LineBlock]) -> None:
        """What is new in the sources due now (at most `poll_bytes` in all)."""
        now = self._clock()
        if not self._begun:
            self._begin()
        told = None if self._waker is None else self._waker.take_changed()  # None: not known
        changed = None if told is None else told[0]
        backstop = self.poll_interval if told is None else max(self.rescan_seconds, self.poll_interval)
        full = now - self._last_sweep >= backstop
        if full or self._relist_due or (told is not None and told[1] & self._listed):
            self._relist(now)
        if full:
            self._last_sweep = now
            self._due.update(self._sources)
        elif changed:
            for folder in changed:
                self._due.update(self._by_dir.get(folder, ()))
        if self._read_due(out) or self._checkpoint_due:
            self._checkpoint_due = False
            parts = tuple((key, self._parts[key]) for key in self._keys)
            totals = self._totals
            self._checkpoint = Checkpoint(SourcesState(parts), totals["lines"], totals["bytes"])
        if self._watch_due:
            # A folder found now may have gained a file before it was watched: list once more
            # after watching it, so that file waits for no backstop.
            self._watch_due = False
            self._relist_due = True
            if self._waker is not None:
                self._waker.watch(sorted(self._listed))

    def _read_due(self, out: list[LineBlock]) -> bool:
        """Poll the sources due, in turn, within the budget; whether a source's position moved."""
        keys, budget, moved = sorted(self._due), self.poll_bytes, False
        if not keys:
            return False
        # Round-robin: on from the source after the last one polled (a poll visits at most
        # SOURCES_PER_POLL of them, and the byte budget may stop it sooner).
        start = 0 if self._last is None else bisect.bisect_right(keys, self._last) % len(keys)
        for key in (keys[start:] + keys[:start])[:SOURCES_PER_POLL]:
            if budget <= 0:
                break
            self._last = key
            source = self._sources.get(key)
            if source is None:
                self._due.discard(key)
                continue
            follower = source.follower
            follower.poll_bytes = budget
            before = follower.stats.bytes
            blocks = follower.poll_blocks()
            budget -= follower.stats.bytes - before
            out.extend(dataclasses.replace(block, key=key) for block in blocks)
            if not follower.more():
                self._due.discard(key)
            part = self._part(key, follower)
            if part != self._parts.get(key):
                self._parts[key] = part
                moved = True
            self._count(key, follower.stats)
            self._polled(key, follower)
        return moved

    def _polled(self, key: SourceKey, follower: Follower) -> None:
        """Past `open_files` files open, the source polled longest ago lets its file go (`Follower.park`)."""
        if not follower.is_open:
            self._open.pop(key, None)
            return
        self._open[key] = follower
        self._open.move_to_end(key)
        while len(self._open) > self._open_most:
            _, oldest = self._open.popitem(last=False)
            oldest.park()

    def _part(self, key: SourceKey, follower: Follower) -> Checkpoint:
        """A source's checkpoint; until it opens a file, the position the state file gave it (so a
        write made meanwhile keeps it, and a restart resumes there, not at the source's start)."""
        part = follower.checkpoint()
        saved = self._saved.get(key)
        if part.state is None and saved is not None:
            return Checkpoint(saved, part.lines, part.bytes)
        return part

    def _count(self, key: SourceKey, stats: FollowerStats) -> None:
        """Bring the totals up to date with what one source counted since its last poll."""
        now = tuple(getattr(stats, name) for name in _SUMMED)
        before = self._counted.get(key)
        if now != before:
            for name, new, old in zip(_SUMMED, now, before or [0] * len(now), strict=True):
                self._totals[name] += new - old
            self._counted[key] = now
        if stats.last_error:
            self._last_error = stats.last_error

    # -- the listing --------------------------------------------------------------------------------

    def _begin(self) -> None:
        self._begun = True
        if self._state is not None:
            saved = self._state.load(read_sources)
            self._resumed = saved is not None
            self._saved = saved or {}
        self._relist(self._clock(), first=True)

    def _relist(self, now: float, *, first: bool = False) -> None:
        """List the folder again: new sources get a follower, vanished ones start their grace."""
        self._relist_due = False
        if self.layout is None:
            self.layout = detect_layout(self.target)
            if self.layout is None:
                return
        listed: set[str] = set()
        found = discover(self.target, self.layout, self.pattern, self.select, self._error, self._names,
                         listed)
        listed.add(self.target)
        if listed != self._listed:
            self._watch_due = True
        self._found, self._listed = found, listed
        for key in sorted(found):
            source = self._sources.get(key)
            if source is None:
                self._add(key, found[key], first)
            elif source.found != found[key]:
                source.found = found[key]
                self._due.add(key)  # a file came or went: its follower looks at once
            self._gone.pop(key, None)
        for key in [k for k in self._sources if k not in found]:
            since = self._gone.setdefault(key, now)
            if now - since >= self.grace:
                self._drop(key)
        self._by_dir = {}
        for key, source in self._sources.items():
            for folder in source.found.dirs:
                self._by_dir.setdefault(folder, []).append(key)
        self._keys = sorted(self._sources)

    def _add(self, key: SourceKey, found: Found, first: bool) -> None:
        """A source seen at start begins where the state file says, else at its end (or its start with
        `from_start`); one that appears later is new: read from its start, and so is one seen at start
        that a state file read does not name (it appeared while the watch was down)."""
        unfolded = sum(1 for s in self._sources.values() if not s.folded)

        def lister() -> list[str]:
            current = self._found.get(key)
            return list(current.files) if current is not None else []

        follower = Follower(
            (key and "/".join(v for _, v in key)) or self.target, lister=lister, saved=self._saved.get(key),
            from_start=self.from_start or not first or (self._resumed and key not in self._saved),
            poll_interval=self.poll_interval,
        )
        self._sources[key] = _Source(follower, found, folded=unfolded >= self.max_sources)
        self._parts[key] = self._part(key, follower)
        self._checkpoint_due = True
        self._due.add(key)

    def _drop(self, key: SourceKey) -> None:
        source = self._sources.pop(key)
        source.follower.close()
        self._open.pop(key, None)
        self._parts.pop(key, None)
        self._counted.pop(key, None)
        self._checkpoint_due = True
        self._gone.pop(key, None)
        self._due.discard(key)
        self._dropped.append(key)

    # -- life cycle -------------------------------------------------------------------------------

    def more(self) -> bool:
        return bool(self._due) or self._relist_due

    def _waiter(self) -> Callable[[float], object]:
        wait = super()._waiter()
        with self._lock:
            self._watch_due = self._watch_due or self._owns_waker  # earlier polls (`step`) had no waker
        return wait

    def _release(self) -> None:
        for source in self._sources.values():
            source.follower.close()


def _brief(key: SourceKey, source: _Source) -> dict[str, Any]:
    """A source as the status shows it: labels, folded or not, the file read, where, and where it started."""
    status = source.follower.status()
    return {"labels": dict(key), "folded": source.folded, "path": status["path"], "offset": status["offset"],
            "start_offset": status["start_offset"]}


MAX_OPEN_FILES = 4096
MIN_OPEN_FILES = 16


def raise_open_files_limit() -> int:
    """Raise the soft RLIMIT_NOFILE to the hard limit (when it can be raised); the soft limit then."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != soft:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError):  # an infinite hard limit above the kernel's nr_open, a sandbox
            pass
    return soft


def open_files_budget(limit: int) -> int:
    """The log files a watch keeps open under a limit of `limit` descriptors: half of it, between
    `MIN_OPEN_FILES` and `MAX_OPEN_FILES`.

    >>> open_files_budget(1024), open_files_budget(1 << 20), open_files_budget(resource.RLIM_INFINITY)
    (512, 4096, 4096)
    """
    if limit == resource.RLIM_INFINITY or limit < 0:
        return MAX_OPEN_FILES
    return max(MIN_OPEN_FILES, min(MAX_OPEN_FILES, limit // 2))
