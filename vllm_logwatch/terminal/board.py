"""Every target of `logwatch top` in one place: each refresh reads the log targets in this process
(one thread polls the live ones: `start`) and takes the URL targets' readings that came in
(`fetch.Fetcher`), and turns them into views (`view.Tracker`), in the order the targets were given;
`step` remakes the log targets as they were at another time (`commands/top.py`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Protocol

from .fetch import Fetcher, Reading
from .view import ServerKey, ServerSnap, ServerView, StatsBook, Tracker


class LogSource(Protocol):
    """A log target read in this process (made by `commands/top.py` through `watch.follow`)."""

    name: str
    book: StatsBook
    at: float | None
    """None: followed live; else the time it is shown at."""

    def snaps(self) -> dict[ServerKey, ServerSnap]:
        """Its servers as its `/metrics` would show them now."""

    def poll(self) -> None:
        """Read what was written since the last poll (in the board's reading thread)."""

    def close(self) -> None: ...


Remake = Callable[[float | None], list[LogSource]]
"""The log targets again, as of a time (None: live, followed)."""


class Board:
    def __init__(self, logs: list[LogSource], fetcher: Fetcher, order: list[str], *,
                 remake: Remake | None = None) -> None:
        """`order`: every target's name as given (log targets' and URLs'), the order of the rows."""
        self.logs = logs
        self.fetcher = fetcher
        self.order = order
        self.tracker = Tracker()
        self.remake = remake
        self.views: dict[str, list[ServerView]] = {}
        self._lock = threading.Lock()
        self._polling = threading.Lock()  # held while the logs are polled: `step` closes none under way
        self._stop = threading.Event()
        self._reader: threading.Thread | None = None
        self.at: float | None = logs[0].at if logs else None

    def start(self, interval: float) -> None:
        """Poll the live log targets every `interval` seconds, in one thread, until `close`."""
        if self.logs:
            self._reader = threading.Thread(target=self._read_loop, args=(interval,),
                                            name="logwatch-top-logs", daemon=True)
            self._reader.start()

    def _read_loop(self, interval: float) -> None:
        while not self._stop.wait(interval):
            with self._polling:
                for source in list(self.logs):
                    if source.at is None and not self._stop.is_set():
                        source.poll()

    def refresh(self, timeout: float | None = None) -> list[ServerView]:
        """Read what is new, without waiting on a URL target (with `timeout`: up to that many seconds
        for each URL to answer once, `--once`); every view in target order."""
        self._take(self.fetcher.poll() if timeout is None else self.fetcher.wait(time.monotonic() + timeout))
        self._read_logs()
        return self.all()

    def all(self) -> list[ServerView]:
        with self._lock:
            return [v for name in self.order for v in self.views.get(name, ())]

    def _take(self, readings: dict[str, Reading]) -> None:
        names = {t.url: t.name for t in self.fetcher.targets}
        for url, reading in readings.items():
            name = names[url]
            with self._lock:
                before = self.views.get(name, [])
            if not reading.snaps:  # None: no answer; empty: an answer without our series
                views = self.tracker.down(name, reading.error or "no vLLM or logwatch series in its answer",
                                          before)
            else:
                views = self.tracker.update(name, reading.snaps, reading.at)
            with self._lock:
                self.views[name] = views

    def _read_logs(self) -> None:
        with self._lock:
            logs = list(self.logs)
        for source in logs:
            now = source.at if source.at is not None else time.time()
            views = self.tracker.update(source.name, source.snaps(), now, book=source.book)
            with self._lock:
                self.views[source.name] = views

    def step(self, seconds: float) -> None:
        """Move the log targets `seconds` back (negative) or forward in their history, reading them
        again up to that time; past the newest line, back to following them live. Blocking: the app
        runs it in a worker thread."""
        times = [t for source in self.logs if (t := source.book.latest()) is not None]
        newest = max(times, default=None)
        start = self.at if self.at is not None else newest
        if self.remake is None or start is None:
            return
        at: float | None = start + seconds
        if newest is not None and start + seconds >= newest and seconds > 0:
            at = None
        fresh = self.remake(at)
        with self._polling:
            with self._lock:
                old, self.logs, self.at = self.logs, fresh, at
                self.tracker = Tracker()  # the sparklines and windows of another time are not these
                self.views = {k: v for k, v in self.views.items() if k not in {s.name for s in old}}
            for source in old:
                source.close()
        self._read_logs()

    def close(self) -> None:
        self._stop.set()
        if self._reader is not None:
            self._reader.join()
        self.fetcher.close()
        for source in self.logs:
            source.close()
