"""Offline inputs: files, globs, `-` for stdin, `.gz` read transparently; I/O errors as `InputError`."""

from __future__ import annotations

import errno
import glob
import gzip
import os
import sys
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import tzinfo
from typing import BinaryIO

from .errors import InputError
from .shown import shown_path
from .timeparse import resolve_zone

__all__ = ["Source", "expand_inputs", "open_source", "read_errors", "resolve_inputs"]

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


def expand_inputs(patterns: list[str]) -> list[Source]:
    """Expand globs (sorted, as a shell would); a pattern that matches nothing is an error.

    >>> expand_inputs(["-"])
    [Source(path='-')]
    """
    sources: list[Source] = []
    for pattern in patterns:
        if pattern == "-":
            sources.append(Source("-"))
            continue
        if glob.has_magic(pattern):
            matches = sorted(glob.glob(pattern))
            if not matches and os.path.lexists(pattern):
                matches = [pattern]  # a real name with glob characters: `serve[1].log`
            if not matches:
                raise InputError(f"no file matches {shown_path(pattern)}")
            sources.extend(Source(m) for m in matches)
        else:
            sources.append(Source(pattern))
    return sources


def _describe(exc: BaseException, name: str) -> str:
    if isinstance(exc, FileNotFoundError):
        return f"{name}: no such file"
    if isinstance(exc, IsADirectoryError) or (isinstance(exc, OSError) and exc.errno == errno.EISDIR):
        return f"{name}: is a directory (give the log files, e.g. {name.rstrip('/')}/*.log)"
    if isinstance(exc, PermissionError):
        return f"{name}: permission denied"
    if isinstance(exc, (EOFError, zlib.error, gzip.BadGzipFile)):
        return f"{name}: corrupt or truncated gzip data ({exc})"
    if isinstance(exc, OSError) and exc.strerror:
        return f"{name}: {exc.strerror.lower()}"
    return f"{name}: {exc}"


def input_error(exc: BaseException, source: Source) -> InputError:
    """The one-line `InputError` for an exception raised while opening or reading `source`."""
    return InputError(_describe(exc, source.name))


@contextmanager
def open_source(source: Source) -> Iterator[BinaryIO]:
    """A binary stream of the source's (decompressed) bytes. Raises `InputError`."""
    if source.is_stdin:
        if sys.stdin is None:  # started with standard input closed (<&-)
            raise InputError("-: standard input is closed")
        yield sys.stdin.buffer
        return
    try:
        if os.path.isdir(source.path):
            raise IsADirectoryError(errno.EISDIR, "is a directory", source.path)
        raw = open(source.path, "rb")  # noqa: SIM115 - closed below
    except OSError as exc:
        raise input_error(exc, source) from None
    try:
        head = raw.read(2)
        raw.seek(0)
        if head == _GZIP_MAGIC:
            with gzip.GzipFile(fileobj=raw) as gz:
                yield gz  # type: ignore[misc]
        else:
            yield raw
    finally:
        raw.close()


def resolve_inputs(inputs: list[str], tz: str | None) -> tuple[list[Source], tzinfo]:
    """The offline commands' common start: `--tz` checked, globs expanded. Raises `InputError`."""
    try:
        zone = resolve_zone(tz)
    except ValueError as exc:
        raise InputError(str(exc)) from None
    return expand_inputs(inputs), zone
