"""File names as shown to people and written into data: valid UTF-8, whatever bytes the name has.

A name that is not valid UTF-8 (`serve_\\xff.log`) reaches Python as a str with surrogate escapes
(`serve_\\udcff.log`), which no UTF-8 output can hold: a JSON response, a CSV cell, a plot title or a
terminal line would fail on it. Opening and statting use the real name; everything that shows one
goes through `shown_path`, which replaces the undecodable bytes with U+FFFD. Imports nothing of the
package: the offline commands and the live exporter both use it.
"""

from __future__ import annotations

import logging
import os

__all__ = ["ShownFormatter", "shown_path"]


def shown_path(path: str | bytes | os.PathLike[str] | os.PathLike[bytes]) -> str:
    """The name with every byte that is not UTF-8 replaced by U+FFFD; any other text unchanged.

    >>> shown_path(os.fsdecode(b"logs/serve_\\xff.log"))
    'logs/serve_\\ufffd.log'
    >>> shown_path("logs/serve.log")
    'logs/serve.log'
    """
    raw = os.fspath(path)
    if isinstance(raw, bytes):
        return raw.decode("utf-8", "replace")
    try:
        raw.encode("utf-8")
        return raw  # the common case: nothing to replace, no copy
    except UnicodeEncodeError:
        pass
    try:
        return os.fsencode(raw).decode("utf-8", "replace")
    except UnicodeEncodeError:  # a surrogate no file name decodes to: replace its code units
        return raw.encode("utf-8", "surrogatepass").decode("utf-8", "replace")


class ShownFormatter(logging.Formatter):
    """Log lines with the file names in them shown as `shown_path` shows them (stderr would print a
    surrogate escape as the text `\\udcff`; a UTF-8 log collector could refuse the line)."""

    def format(self, record: logging.LogRecord) -> str:
        return shown_path(super().format(record))
