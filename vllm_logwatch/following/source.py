"""What the live pipeline needs of a source of lines: the `Follower`, the `StreamSource` and the
`ManyFollower` are each a `LineSource` (docs/design.md, "Following files")."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any

from ..parsing.framing import MAX_LINE_BYTES
from .layouts import SourceKey
from .openfile import FollowerStats, LineBlock
from .statefile import Checkpoint, Position, describe
from .wakers import Waker, own_waker

READ_CHUNK_BYTES = 1 << 20  # one read() call
MAX_POLL_BYTES = 16 << 20  # per poll: a huge backlog must not starve the caller
SAVE_INTERVAL = 0.1  # at most ten state writes a second; the file is never longer than this behind
Start = tuple[SourceKey, str, int]
"""A source's labels, the file it reads, and the offset reading began at in it."""


class LineSource:
    """Blocks of complete lines, a position after them, counters and a status; never raises for I/O.

    `ended`: nothing more will ever come (a stream's writers are gone); a file never ends, it may grow.
    Errors are counted in `stats` (`last_error` says the last), never raised.
    """

    state_file: str | None = None

    def __init__(self, poll_interval: float, poll_bytes: int, waker: Waker | None,
                 max_line_bytes: int = MAX_LINE_BYTES, read_bytes: int = READ_CHUNK_BYTES) -> None:
        """`poll_bytes`: what one poll reads at most; `read_bytes`: one `read()` call; `max_line_bytes`:
        the line cap (a longer line is cut and counted)."""
        self.poll_interval, self.poll_bytes = poll_interval, poll_bytes
        self.max_line_bytes, self.read_bytes = max_line_bytes, read_bytes
        self._more = False  # the last poll stopped at its budget
        self._stats = FollowerStats()
        self._waker, self._owns_waker = waker, False
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._closed = False
        self._checkpoint = Checkpoint(None, 0, 0)

    @property
    def stats(self) -> FollowerStats:
        return self._stats

    @property
    def ended(self) -> bool:
        return False

    def poll_blocks(self) -> list[LineBlock]:
        """One non-blocking step: what is new (at most `poll_bytes`), in blocks of complete lines, in
        order. Never blocks on a writer, never raises for I/O (errors are counted)."""
        out: list[LineBlock] = []
        with self._lock:
            if not self._closed and not self.ended:
                self._more = False
                self._poll(out)
        return out

    def _poll(self, out: list[LineBlock]) -> None:
        """Read into `out` (the lock is held)."""
        raise NotImplementedError

    def status(self) -> dict[str, Any]:
        """A snapshot for the status endpoint: what is followed, where, the counters."""
        raise NotImplementedError

    def checkpoint(self) -> Checkpoint:
        """The position just after the lines the last poll returned (and the totals then): take it
        once those lines are handled, before polling again, and writing it records exactly them."""
        return self._checkpoint

    def write_checkpoint(self, state: Position, extra: Mapping[str, object] | None = None) -> bool:
        """Write `state` (from `checkpoint()`) to the state file, with `extra`'s keys, atomically, from
        any thread; True if written. Errors are counted in `stats.state_errors`, never raised."""
        return False

    def run_blocks(
        self, on_blocks: Callable[[list[LineBlock]], None], stop: threading.Event | None = None, *,
        on_poll: Callable[[], None] | None = None,
    ) -> None:
        """Poll and hand the blocks over until `stop()` or `stop` is set. `on_poll()` follows every poll
        (after `on_blocks`): the moment to take `checkpoint()`. A wait (at most the poll interval) only
        when a poll found nothing and nothing more is known to be there. Without an injected waker, a
        `WatchdogWaker(poll_interval)` is made here (and closed by `close()`). Exceptions from
        `on_blocks` and `on_poll` propagate."""
        wait = self._waiter()

        def stopping() -> bool:
            return self._stop.is_set() or (stop is not None and stop.is_set())

        while not stopping():
            blocks = self.poll_blocks()
            if blocks:
                on_blocks(blocks)
            if on_poll is not None:
                on_poll()
            if stopping():
                break
            if not blocks and not self.more():
                wait(self.poll_interval)

    def _waiter(self) -> Callable[[float], object]:
        waker, owned = own_waker(self._waker, self.poll_interval)
        self._waker, self._owns_waker = waker, self._owns_waker or owned
        return waker.wait

    def more(self) -> bool:
        """The last poll stopped at its budget (or a storm of file changes): more is there at once."""
        return self._more

    def _error(self, exc: OSError, path: str) -> None:
        """A read or listing error: counted, the last one said in the status."""
        self._stats.read_errors += 1
        self._stats.last_error = describe(exc, path)

    def stop(self) -> None:
        """Make `run_blocks()` return soon; safe to call from any thread, and after `close()`."""
        self._stop.set()
        self._wake()

    def _wake(self) -> None:
        if self._waker is not None:
            self._waker.wake()

    def close(self) -> None:
        """Stop `run_blocks()`, close what is open and the waker made here. Idempotent."""
        self.stop()
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._release()
        if self._owns_waker and self._waker is not None:
            self._waker.close()

    def _release(self) -> None:
        """Close what is open (the lock is held)."""

    def starts(self) -> list[Start] | None:
        """Where each source began reading its file, once known (None: not yet), for its launch's
        start-up facts from before that point (`live/pipeline.py`); [] when read from its start."""
        return []

    def labels_of(self, key: SourceKey) -> SourceKey:
        """The labels the series of source `key` get."""
        return key

    def source_counts(self) -> dict[str, int] | None:
        """The sources by state (followed, folded, gone); None for a source of one."""
        return None

    def source_stats(self) -> tuple[FollowerStats, dict[SourceKey, FollowerStats]] | None:
        """The watch's own counters (its listing and state file errors) and each source's; None for a
        source of one (its counters are `stats`)."""
        return None

    def take_dropped(self) -> list[SourceKey]:
        """The sources dropped since the last call (their series go)."""
        return []

    def save_interval(self) -> float:
        """Seconds the state file's writes are at least apart."""
        return SAVE_INTERVAL
