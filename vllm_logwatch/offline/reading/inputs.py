"""Offline inputs: files, globs, `-` for stdin, `.gz` read transparently; I/O errors as `InputError`.

A regular file is opened and its first bytes looked at in place; anything else (standard input, a
pipe, a FIFO, `/dev/stdin`, a process substitution `<(...)`) is a stream, read once from its start:
its first bytes are read to look at them and then handed on with the rest (`_Replay`), gzip included.
"""

from __future__ import annotations

import glob
import gzip
import io
import os
import stat
import sys
import zlib
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import dataclass
from datetime import tzinfo
from typing import Any, BinaryIO, cast

from ...errors import InputError
from ...parsing.stamps import resolve_zone
from ...shown import shown_path

__all__ = ["PROGRESS_MIN_BYTES", "Source", "input_error", "open_source", "progress_bar", "read_errors",
           "resolve_inputs"]

_GZIP_MAGIC = b"\x1f\x8b"
read_errors: tuple[type[BaseException], ...] = (OSError, EOFError, zlib.error, gzip.BadGzipFile)
"""What a read of a (possibly compressed) source can raise."""


@dataclass(frozen=True)
class Source:
    """One input: a path, or `-` for standard input."""

    path: str

    @property
    def is_stdin(self) -> bool:
        return self.path == "-"

    @property
    def name(self) -> str:
        """The name shown and written into records: valid UTF-8 whatever bytes the file name has."""
        return "<stdin>" if self.is_stdin else shown_path(self.path)

    @property
    def is_stream(self) -> bool:
        """Standard input, or a path that is not a regular file (a pipe, a FIFO, a device): it can be
        read only once, from its start, and has no size."""
        if self.is_stdin:
            return True
        try:
            return not stat.S_ISREG(os.stat(self.path).st_mode)
        except (OSError, ValueError):
            return False  # opening it says why


def _unlistable(pattern: str) -> str | None:
    """Why a glob matched nothing when it is a folder it may not list (glob keeps quiet about it)."""
    parts = pattern.split(os.sep)
    folder = os.sep.join(parts[:next(i for i, part in enumerate(parts) if glob.has_magic(part))]) or "."
    try:
        os.scandir(folder).close()
    except PermissionError:
        return f"{shown_path(folder)}: permission denied (cannot list the folder for {shown_path(pattern)})"
    except OSError:
        pass
    return None


def input_error(exc: BaseException, source: Source) -> InputError:
    """The one-line `InputError` for an exception raised while opening or reading `source`."""
    name = source.name
    if isinstance(exc, FileNotFoundError):
        return InputError(f"{name}: no such file")
    if isinstance(exc, IsADirectoryError):
        return InputError(f"{name}: is a directory (give the log files, e.g. {name.rstrip('/')}/*.log)")
    if isinstance(exc, PermissionError):
        return InputError(f"{name}: permission denied")
    if isinstance(exc, (EOFError, zlib.error, gzip.BadGzipFile)):
        return InputError(f"{name}: corrupt or truncated gzip data ({exc})")
    if isinstance(exc, OSError) and exc.strerror:
        return InputError(f"{name}: {exc.strerror.lower()}")
    return InputError(f"{name}: {exc}")


class _Replay(io.RawIOBase):
    """A stream whose first bytes were read to look at them: those bytes, then the rest of it."""

    def __init__(self, head: bytes, rest: BinaryIO) -> None:
        super().__init__()
        self._head, self._rest = head, rest

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        if self._head:
            n = min(len(buffer), len(self._head))
            buffer[:n] = self._head[:n]
            self._head = self._head[n:]
            if n < len(buffer):  # the first read holds more than the head: a peek sees the first line
                n += self._rest.readinto(memoryview(buffer)[n:]) or 0  # type: ignore[attr-defined]
            return n
        return self._rest.readinto(buffer)  # type: ignore[attr-defined, no-any-return]


def _open_stream(source: Source, stack: ExitStack) -> tuple[BinaryIO, bytes]:
    """Standard input or a non-regular path (a path closed by `stack`) and its first two bytes (fewer
    at its end)."""
    if source.is_stdin:
        if sys.stdin is None:  # started with standard input closed (<&-)
            raise InputError("-: standard input is closed")
        raw = sys.stdin.buffer
    else:
        raw = stack.enter_context(open(source.path, "rb", buffering=0))  # noqa: SIM115 - the stack closes it
    head = b""
    while len(head) < len(_GZIP_MAGIC):  # a pipe may deliver them one at a time
        more = raw.read(len(_GZIP_MAGIC) - len(head))
        if not more:
            break
        head += more
    return io.BufferedReader(_Replay(head, raw), 1 << 20), head


def _open_file(source: Source, stack: ExitStack) -> tuple[BinaryIO, bytes]:
    """A regular file (closed by `stack`) and its first two bytes, looked at in place."""
    raw = stack.enter_context(open(source.path, "rb"))  # noqa: SIM115 - the stack closes it
    head = raw.read(len(_GZIP_MAGIC))
    raw.seek(0)
    return raw, head


PROGRESS_MIN_BYTES = 64 << 20
"""A file from this size on shows a progress bar while it is read, when stderr is a terminal."""


@contextmanager
def progress_bar(source: Source) -> Iterator[Callable[[int], object] | None]:
    """The `update` of a tqdm bar on stderr for a regular file from `PROGRESS_MIN_BYTES` on, when stderr
    is a terminal, closed on leaving; else None (and tqdm is not imported)."""
    size = 0
    if not source.is_stream and sys.stderr is not None and sys.stderr.isatty():
        with suppress(OSError):
            size = os.path.getsize(source.path)
    if size < PROGRESS_MIN_BYTES:
        yield None
        return
    from tqdm import tqdm

    with tqdm(total=size, desc=shown_path(os.path.basename(source.path)), unit="B", unit_scale=True,
              leave=False, file=sys.stderr) as bar:
        yield bar.update


@contextmanager
def open_source(source: Source, *, progress: bool = False) -> Iterator[BinaryIO]:
    """A binary stream of the source's (decompressed) bytes. Raises `InputError`. With `progress`, a
    big file's reads move a progress bar (`progress_bar`), by the bytes read from the disk.

    Errors of the body of the `with` pass through untouched: only opening and looking at the first
    bytes are reported here (reading goes on in the caller, which reports its own errors)."""
    with ExitStack() as stack:  # closed in reverse: the gzip reader, the bar, the file
        try:
            raw, head = _open_stream(source, stack) if source.is_stream else _open_file(source, stack)
        except read_errors as exc:
            raise input_error(exc, source) from None
        update = stack.enter_context(progress_bar(source)) if progress else None
        if update is not None:
            from tqdm.utils import CallbackIOWrapper

            raw = cast(BinaryIO, CallbackIOWrapper(update, raw))
        if head == _GZIP_MAGIC:
            raw = cast(BinaryIO, stack.enter_context(gzip.GzipFile(fileobj=raw)))
        yield raw


def resolve_inputs(inputs: list[str], tz: str | None) -> tuple[list[Source], tzinfo]:
    """The offline commands' common start: `--tz` checked, globs expanded (sorted, as a shell would; a
    pattern that matches nothing is an error). Raises `InputError`."""
    try:
        zone = resolve_zone(tz)
    except ValueError as exc:
        raise InputError(str(exc)) from None
    sources: list[Source] = []
    for pattern in inputs:
        if not glob.has_magic(pattern):  # `-` too
            sources.append(Source(pattern))
            continue
        matches = sorted(glob.glob(pattern))
        if not matches and os.path.lexists(pattern):
            matches = [pattern]  # a real name with glob characters: `serve[1].log`
        if not matches:
            raise InputError(_unlistable(pattern) or f"no file matches {shown_path(pattern)}")
        sources.extend(Source(m) for m in matches)
    return sources, zone
