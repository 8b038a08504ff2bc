"""File names as shown to people and written into data: valid UTF-8, whatever bytes the name has.

A name that is not valid UTF-8 (`serve_\\xff.log`) reaches Python as a str with surrogate escapes
(`serve_\\udcff.log`), which no UTF-8 output can hold: a JSON response, a CSV cell, a plot title or a
terminal line would fail on it. Opening and statting use the real name; everything that shows one
goes through `shown_path`, which replaces the undecodable bytes with U+FFFD and escapes control
characters (a newline or a terminal escape in a name must not start a line or drive the terminal).
`printable` does the latter for any text shown (arguments, error messages, every line logged). Imports
nothing of the package: the offline commands and the live exporter both use it.
"""

from __future__ import annotations

import logging
import math
import os
import re
from collections.abc import Callable, Mapping
from typing import Any

_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(m: re.Match[str]) -> str:
    c = m.group()
    return _NAMED.get(c) or (f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}")


def printable(text: str) -> str:
    """`text` with every control character (C0, DEL, C1, the Unicode line and paragraph separators)
    escaped as Python writes it, so that it stays one line and cannot drive a terminal.

    >>> printable("serve\\n\\x1b[31m.log"), printable("plain")
    ('serve\\\\n\\\\x1b[31m.log', 'plain')
    """
    return _CONTROL.sub(_escape, text) if _CONTROL.search(text) else text


def shown_path(path: str | bytes | os.PathLike[str] | os.PathLike[bytes]) -> str:
    """The name with every byte that is not UTF-8 replaced by U+FFFD and control characters escaped
    (`printable`); any other text unchanged.

    >>> shown_path(os.fsdecode(b"logs/serve_\\xff.log"))
    'logs/serve_\\ufffd.log'
    >>> shown_path("logs/serve.log")
    'logs/serve.log'
    """
    raw = os.fspath(path)
    return printable(raw.decode("utf-8", "replace") if isinstance(raw, bytes) else _utf8(raw))


def _utf8(raw: str) -> str:
    """`raw` with its surrogate escapes (undecodable bytes of a name) replaced by U+FFFD."""
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
    surrogate escape as the text `\\udcff`; a UTF-8 log collector could refuse the line; a newline in a
    name would forge a line). A traceback after the message keeps its lines."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        return shown_path(super().formatMessage(record))

    def format(self, record: logging.LogRecord) -> str:
        return _utf8(super().format(record))


def finite(value: float | None) -> float | None:
    """`value`, or None for a missing, NaN or infinite one (vLLM prints `nan%`): the one rule for
    numbers that JSON, CSV cells, the status page and the token counters cannot hold.

    >>> finite(1.5), finite(float("nan")), finite(float("inf")), finite(None)
    (1.5, None, None, None)
    """
    return value if value is not None and math.isfinite(value) else None


def shown_number(value: float | None, digits: int = 1) -> str:
    """A number in a table: `digits` decimals with thousands separators; "-" for none or NaN; from a
    quadrillion on (a price of 1e308) in scientific notation, not hundreds of digits.

    >>> shown_number(1234.5678, 2), shown_number(None), shown_number(float("nan")), shown_number(5.5e305, 4)
    ('1,234.57', '-', '-', '5.500e+305')
    """
    if value is None or math.isnan(value):
        return "-"
    return f"{value:.3e}" if abs(value) >= 1e15 else f"{value:,.{digits}f}"


def json_safe(value: Any, text: Callable[[str], str] | None = None) -> Any:
    """A copy of `value` fit for strict JSON, at any depth: NaN and infinities null (`finite`), tuples
    lists, keys strings; with `text`, every string (keys too) passed through it (`shown_path`).

    >>> json_safe({"a": float("nan"), "b": (1, {"c": float("-inf")})})
    {'a': None, 'b': [1, {'c': None}]}
    """
    if isinstance(value, float):
        return finite(value)
    if isinstance(value, str):
        return value if text is None else text(value)
    if isinstance(value, Mapping):
        return {(str(k) if text is None else text(str(k))): json_safe(v, text) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v, text) for v in value]
    return value
