"""`logwatch plot`'s drawing process: matplotlib is imported there while the log is read here.

Importing matplotlib takes as long as reading a large log (bench/RESULTS.md), and the drawing
cannot start before the log is read; so a process forked at the start (before any thread or
range worker exists) imports it meanwhile, then waits for `collect`'s data (a few thousand points,
whatever the log's size), draws it (`plot.draw`) and sends the image back as bytes. The caller writes
the bytes (so a full disk is its error, as before). Nothing of the log but those points is sent.

If the caller stops first (an error while reading, Ctrl-C), it closes the pipe and the drawing process
exits; killed (-9), the drawing process sees it by its parent's pid (`offline/children.py`). It
ignores Ctrl-C itself: the caller's interrupt ends both.
"""

from __future__ import annotations

import contextlib
import io
import os
import pickle
import signal
import sys
import traceback
from multiprocessing import get_context
from multiprocessing.connection import Connection
from types import TracebackType
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo

from ...errors import OutputError, UsageError
from ..children import exit_with_parent

if TYPE_CHECKING:
    from .decimate import PlotData

_JOIN_SECONDS = 5.0


class _Pickler(pickle.Pickler):
    """Time zones go by name: a zone read from a file (this machine's, /etc/localtime) cannot be
    pickled, and the drawing process reads the same file."""

    def persistent_id(self, obj: Any) -> Any:
        return ("zone", obj.key) if isinstance(obj, ZoneInfo) else None


class _Unpickler(pickle.Unpickler):
    def persistent_load(self, pid: Any) -> Any:
        _, key = pid
        if key.startswith("/"):
            with open(key, "rb") as fh:
                return ZoneInfo.from_file(fh, key=key)
        return ZoneInfo(key)


def _dumps(obj: object) -> bytes:
    out = io.BytesIO()
    _Pickler(out, pickle.HIGHEST_PROTOCOL).dump(obj)
    return out.getvalue()


def _serve(conn: Connection, parent_end: Connection, parent: int) -> None:
    """The drawing process: import, wait for the data, draw, answer; every outcome is one message."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})  # blocked across the fork (Drawer)
    parent_end.close()  # the pipe closes when the caller closes its end (the range workers hold a copy
    exit_with_parent(parent)  # of it, so a caller killed with -9 is seen by its pid)
    from .collect import draw

    with contextlib.suppress(ImportError):  # `draw` says so, as a UsageError
        import matplotlib.figure  # noqa: F401 - the import this process is for
    try:
        data, kind, options = _Unpickler(io.BytesIO(conn.recv_bytes())).load()
    except (EOFError, OSError):
        return  # the caller stopped before its data: nothing to draw
    try:
        image = io.BytesIO()
        draw(data).savefig(image, format=kind, **options)
        answer: tuple[str, Any] = ("image", image.getvalue())
    except UsageError as exc:
        answer = ("usage", str(exc))
    except ValueError as exc:  # an unknown image format
        answer = ("format", str(exc))
    except Exception as exc:  # a defect: its traceback here, its name there
        traceback.print_exc()
        answer = ("error", f"{type(exc).__name__}: {exc}")
    with contextlib.suppress(OSError):  # the caller is gone
        conn.send(answer)


class Drawer:
    """`with Drawer() as drawer: ... drawer.image(data, "png", dpi=100)`: the drawing process."""

    def __init__(self) -> None:
        for stream in (sys.stdout, sys.stderr):  # nothing buffered that the fork could write twice
            if stream is not None:
                with contextlib.suppress(OSError, ValueError):
                    stream.flush()
        ctx = get_context("fork")
        self._conn, child_end = ctx.Pipe()
        self._process = ctx.Process(target=_serve, args=(child_end, self._conn, os.getpid()),
                                    name="logwatch-plot-draw", daemon=True)
        # A Ctrl-C between the fork and the drawing process's own SIG_IGN would kill it with a
        # KeyboardInterrupt: SIGINT is blocked across the fork (here it is delivered just after).
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        try:
            self._process.start()
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
        child_end.close()

    @property
    def pid(self) -> int:
        """The drawing process's pid."""
        pid = self._process.pid
        assert pid is not None
        return pid

    def image(self, data: PlotData, kind: str | None, **options: Any) -> bytes:
        """The image of `data` in format `kind` (None: PNG); ValueError for an unknown format, UsageError
        without matplotlib, OutputError if the drawing process died (its exit code said)."""
        try:
            self._conn.send_bytes(_dumps((data, kind, options)))
            what, value = self._conn.recv()
        except (EOFError, OSError):
            self._process.join(_JOIN_SECONDS)
            raise OutputError(f"the drawing process ended without an image (exit code "
                              f"{self._process.exitcode})") from None
        if what == "image":
            return bytes(value)
        if what == "usage":
            raise UsageError(str(value))
        if what == "format":
            raise ValueError(str(value))
        raise RuntimeError(f"the drawing failed: {value}")

    def close(self) -> None:
        self._conn.close()  # a drawing process still waiting for data exits
        self._process.join(_JOIN_SECONDS)
        if self._process.is_alive():
            self._process.kill()
            self._process.join()

    def __enter__(self) -> Drawer:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
