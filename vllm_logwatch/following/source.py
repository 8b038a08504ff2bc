"""What the live pipeline needs of a source of lines: the `Follower` (files, folders, globs), the
`StreamSource` (standard input, a named pipe) and the `ManyFollower` (a folder's many sources) all are
one, so `live/pipeline.py` has one path and calls each method directly."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from .layouts import SourceKey
from .openfile import FollowerStats, LineBlock
from .statefile import Checkpoint, Position

__all__ = ["SAVE_INTERVAL", "LineSource", "OneSource", "Start", "deliver"]

SAVE_INTERVAL = 0.1  # at most ten state writes a second; the file is never longer than this behind
Start = tuple[SourceKey, str, int]
"""A source's labels, the file it reads, and the offset reading began at in it."""


class LineSource(Protocol):
    """Blocks of complete lines, a position after them, counters and a status; never raises for I/O.

    `ended`: nothing more will ever come (a stream's writers are gone); a file never ends, it may grow.
    The last five methods tell a many-source follower's sources apart; a source of one has them from
    `OneSource`.
    """

    state_file: str | None
    poll_interval: float
    poll_bytes: int

    @property
    def stats(self) -> FollowerStats: ...

    @property
    def ended(self) -> bool: ...

    def poll_blocks(self) -> list[LineBlock]: ...

    def run_blocks(self, on_blocks: Callable[[list[LineBlock]], None], stop: threading.Event | None = None,
                   *, on_poll: Callable[[], None] | None = None) -> None: ...

    def checkpoint(self) -> Checkpoint: ...

    def write_checkpoint(self, state: Position, extra: Mapping[str, object] | None = None) -> bool: ...

    def status(self) -> dict[str, Any]: ...

    def stop(self) -> None: ...

    def close(self) -> None: ...

    def starts(self) -> list[Start] | None:
        """Where each source began reading its file, once known (None: not yet), for its launch's
        start-up facts from before that point (`live/startfacts.py`); [] when read from its start."""

    def labels_of(self, key: SourceKey) -> SourceKey:
        """The labels the series of source `key` get."""

    def source_counts(self) -> dict[str, int] | None:
        """The sources by state (followed, folded, gone); None for a source of one."""

    def source_stats(self) -> tuple[FollowerStats, dict[SourceKey, FollowerStats]] | None:
        """The watch's own counters (its listing and state file errors) and each source's; None for a
        source of one (its counters are `stats`)."""

    def take_dropped(self) -> list[SourceKey]:
        """The sources dropped since the last call (their series go)."""

    def save_interval(self) -> float:
        """Seconds the state file's writes are at least apart."""


class OneSource:
    """The part of `LineSource` that tells sources apart, for a source of one: key (), no counts."""

    def labels_of(self, key: SourceKey) -> SourceKey:
        return key

    def source_counts(self) -> dict[str, int] | None:
        return None

    def source_stats(self) -> tuple[FollowerStats, dict[SourceKey, FollowerStats]] | None:
        return None

    def take_dropped(self) -> list[SourceKey]:
        return []

    def save_interval(self) -> float:
        return SAVE_INTERVAL


def deliver(
    poll: Callable[[], list[LineBlock]], on_blocks: Callable[[list[LineBlock]], None],
    on_poll: Callable[[], None] | None, stopping: Callable[[], bool], more: Callable[[], bool],
    wait: Callable[[float], object], interval: float,
) -> None:
    """The run loop every source shares: poll, hand the blocks over, call `on_poll`, and wait (at most
    `interval`) only when a poll found nothing and nothing more is known to be there."""
    while not stopping():
        blocks = poll()
        if blocks:
            on_blocks(blocks)
        if on_poll is not None:
            on_poll()
        if stopping():
            break
        if not blocks and not more():
            wait(interval)
