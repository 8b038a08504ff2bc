"""Wakers: how a follower waits between two polls.

The follower trusts ``stat``, never notifications (docs/design.md, "Following files"): a notification only
ends the wait early, and the poll interval is always on as a backstop. Waiting is injected, as in
google/mtail's ``internal/waker``, so that:

* production wakes within milliseconds of a write (``WatchdogWaker``, inotify on Linux) yet still polls
  when notifications are lost (network file systems, inotify limits, renamed directories);
* tests step the follower exactly (a waker whose ``wait`` returns at once) and never sleep to synchronise;
* watchdog, with its OS limits and threads, is imported in this module and nowhere else.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterable
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from watchdog.events import (
    EVENT_TYPE_MODIFIED,
    DirCreatedEvent,
    DirDeletedEvent,
    DirModifiedEvent,
    DirMovedEvent,
    FileCreatedEvent,
    FileDeletedEvent,
    FileModifiedEvent,
    FileMovedEvent,
    FileSystemEvent,
    FileSystemEventHandler,
)
from watchdog.observers import Observer

if TYPE_CHECKING:
    from watchdog.observers.api import BaseObserver, ObservedWatch


# Only changes to content or names matter (watchdog hands over no other event). Opens, closes and reads
# are left out on purpose: the follower's own reads would otherwise wake it again and again.
_EVENT_FILTER: list[type[FileSystemEvent]] = [
    FileCreatedEvent,
    DirCreatedEvent,
    FileModifiedEvent,
    DirModifiedEvent,
    FileMovedEvent,
    DirMovedEvent,
    FileDeletedEvent,
    DirDeletedEvent,
]


@runtime_checkable
class Waker(Protocol):
    """What a follower needs from whatever tells it to look again: `WatchdogWaker`'s methods, whose
    ``wait`` returns True when woken (a file event or ``wake()``), False when the timeout passed."""

    degraded_reason: str | None

    def take_changed(self) -> tuple[set[str], set[str]] | None: ...

    def wait(self, timeout: float | None) -> bool: ...

    def watch(self, paths: Iterable[str]) -> None: ...

    def wake(self) -> None: ...

    def close(self) -> None: ...


class _WakeOnChange(FileSystemEventHandler):
    """Turns a relevant watchdog event into a set ``threading.Event``; nothing else runs on that thread."""

    def __init__(self, event: threading.Event) -> None:
        super().__init__()
        self._event = event
        self._lock = threading.Lock()
        self.changed: set[str] = set()  # the folders events were about since `take`
        self.entries: set[str] = set()  # the folders that gained, lost or renamed an entry

    def on_any_event(self, event: FileSystemEvent) -> None:
        paths = [os.fsdecode(event.src_path), os.fsdecode(getattr(event, "dest_path", "") or "")]
        written = event.event_type == EVENT_TYPE_MODIFIED
        with self._lock:
            for path in filter(None, paths):
                if written and event.is_directory:
                    self.changed.add(path)  # a folder's own event (after any write in it, too)
                else:
                    self.changed.add(os.path.dirname(path))  # an entry's event names its folder
                    if not written:
                        self.entries.add(os.path.dirname(path))  # created, deleted, renamed
        self._event.set()

    def take(self) -> tuple[set[str], set[str]]:
        with self._lock:
            changed, self.changed = self.changed, set()
            entries, self.entries = self.entries, set()
        return changed, entries


class WatchdogWaker:
    """Wakes early on file-system events in the watched directories; polls every ``interval`` anyway.

    A directory is watched by itself (a followed file's parent, or the followed folder), or through a
    recursive watch of the folder above it (a many-source tree: one watch). If
    watchdog cannot start or cannot watch a directory (inotify instance or watch limits, a file system
    without notifications), the waker keeps polling and says why in ``degraded_reason``, so a status
    page can show it; it is never an error. The observer thread starts in ``start()``, never in
    ``__init__``: until then it only polls. ``wait(None)`` and ``wait(t)`` both return after at most
    ``interval`` seconds; after ``close()``, ``wait`` returns True at once so no thread stays stuck.
    """

    def __init__(self, interval: float = 1.0) -> None:
        self.interval = interval
        self._event = threading.Event()
        self._closed = False
        self.degraded_reason: str | None = None
        self._lock = threading.Lock()
        self._handler = _WakeOnChange(self._event)
        self._watches: dict[tuple[str, bool], ObservedWatch] = {}  # by (folder, recursive)
        self._plan: dict[tuple[str, bool], None] = {}
        self._wanted: frozenset[str] = frozenset()
        self._observer: BaseObserver | None = None
        self._started = False

    def wait(self, timeout: float | None) -> bool:
        """Block until woken or until ``min(timeout, interval)`` seconds passed."""
        if self._closed:
            return True
        limit = self.interval if timeout is None else min(max(timeout, 0.0), self.interval)
        woke = self._event.wait(limit)
        if not self._closed:
            # Clearing after the wait may swallow an event that came in just now; harmless, because
            # the caller polls right after returning and sees whatever that event was about.
            self._event.clear()
        return woke

    def wake(self) -> None:
        """End a ``wait`` early, from any thread."""
        self._event.set()

    def start(self) -> None:
        """Start watchdog's observer thread (once); if it cannot start, say why and go on polling."""
        with self._lock:
            if self._started:
                return
            self._started = True
        try:
            observer = Observer()
            observer.daemon = True
            observer.start()
        except (OSError, RuntimeError) as exc:
            self.degraded_reason = f"file notifications unavailable, polling only: {_one_line(exc)}"
        else:
            with self._lock:
                self._observer = observer

    def watch(self, paths: Iterable[str]) -> None:
        """Watch these directories (missing ones are retried on the next call), with as few watches as
        cover them: a folder with others of the set below it is watched recursively, once, and those
        below it through it (watchdog runs threads per watch, not per folder: a tree of a thousand pods
        costs one watch); a folder alone is watched by itself. A watch that cannot be made (the inotify
        limits, no thread left to start) leaves the waker polling, said in `degraded_reason`."""
        wanted = frozenset(os.path.abspath(p) for p in paths)
        with self._lock:
            observer = self._observer
            if observer is None or self._closed:
                return
            if wanted == self._wanted and set(self._plan).issubset(self._watches):
                return
            self._wanted = wanted
            self._plan = plan = _cover(wanted)
            for key in [k for k in self._watches if k not in plan]:
                watch = self._watches.pop(key)
                with contextlib.suppress(KeyError, OSError):  # its emitter may have died with the folder
                    observer.unschedule(watch)
            for key in sorted(plan.keys() - self._watches.keys()):
                path, recursive = key
                if not os.path.isdir(path):
                    continue  # not there yet: the poll backstop covers it until it appears
                try:
                    self._watches[key] = observer.schedule(
                        self._handler, path, recursive=recursive, event_filter=_EVENT_FILTER
                    )
                except (OSError, RuntimeError) as exc:
                    # ENOSPC: the inotify watch limit; EMFILE: its instances; RuntimeError: no thread
                    # could start (a pid limit). Keep polling; say so.
                    self.degraded_reason = f"cannot watch {path}, polling it: {_one_line(exc)}"

    def take_changed(self) -> tuple[set[str], set[str]] | None:
        """The folders that had events since the last call, and of those the ones that gained, lost or
        renamed an entry (a file written to is not one); None when that is not known (no observer, or a
        folder that could not be watched): then every folder may have changed."""
        changed = self._handler.take()
        with self._lock:
            known = self._observer is not None and self.degraded_reason is None
        return changed if known else None

    def close(self) -> None:
        """Stop the observer thread and release any waiter for good."""
        self._closed = True
        self._event.set()
        with self._lock:
            observer, self._observer = self._observer, None
            self._watches.clear()
        if observer is not None:
            observer.stop()
            observer.join(timeout=5.0)


def _cover(folders: frozenset[str]) -> dict[tuple[str, bool], None]:
    """The watches that cover `folders`: each folder with no other of them above it, recursive when
    some are below it.

    >>> sorted(_cover(frozenset({"/p", "/p/a", "/p/a/c", "/p-x", "/q"})))
    [('/p', True), ('/p-x', False), ('/q', False)]
    """
    tops = sorted(folders, key=lambda p: p.split(os.sep))  # a folder's own below it come right after it
    plan: dict[tuple[str, bool], None] = {}
    i = 0
    while i < len(tops):
        top, prefix = tops[i], tops[i].rstrip(os.sep) + os.sep
        j = i + 1
        while j < len(tops) and tops[j].startswith(prefix):
            j += 1
        plan[(top, j > i + 1)] = None
        i = j
    return plan


def own_waker(waker: Waker | None, interval: float) -> tuple[Waker, bool]:
    """`waker`, or else a started `WatchdogWaker(interval)`, and whether it is the caller's to close."""
    if waker is not None:
        return waker, False
    made = WatchdogWaker(interval)
    made.start()
    return made, True


def _one_line(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return " ".join(text.split())
