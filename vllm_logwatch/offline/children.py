"""The offline commands' helper processes (range workers, the drawing process) end with their parent.

A `kill -9` of `logwatch parse` (or an OOM kill) gives its forked helpers no word: they would wait on
their pipes forever, each holding its memory. Each watches its parent's pid instead and exits within
`EVERY` seconds of the parent's end.
"""

from __future__ import annotations

import os
import threading
import time

__all__ = ["EVERY", "exit_with_parent"]

EVERY = 0.5
"""Seconds between two looks at the parent."""


def exit_with_parent(parent: int) -> None:
    """In a forked helper: exit (`os._exit`, nothing flushed twice) once `parent` is no longer its parent."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(EVERY)
        os._exit(1)

    threading.Thread(target=watch, name="logwatch-parent-watch", daemon=True).start()
