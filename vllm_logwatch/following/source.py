"""What the live pipeline needs of a source of lines: the `Follower` (files, folders, globs) and the
`StreamSource` (standard input, a named pipe) both are one, so `live/pipeline.py` has one path."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from .openfile import FollowerStats, LineBlock
from .statefile import Checkpoint, Position

__all__ = ["LineSource", "deliver"]


class LineSource(Protocol):
    """Blocks of complete lines, a position after them, counters and a status; never raises for I/O.

    `ended`: nothing more will ever come (a stream's writers are gone); a file never ends, it may grow.
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
