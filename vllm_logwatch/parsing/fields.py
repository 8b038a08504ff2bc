"""Reading the `Name: value[unit], Name: value, ...` body of vLLM's periodic lines (stats, spec decode).

Fields are found by name, values are numbers with an optional unit; a list value (per-position rates)
stays with its field, and 0.7.1's comma-less join of two fields is split. Shared by `parsing/line.py` and
`parsing/spec.py`.
"""

from __future__ import annotations

import math
import re

__all__ = ["MAX_EXTRA", "Unreadable", "as_kind", "read_number", "slug", "split_fields"]

# One field glued to the next without a comma (0.7.1: `Waiting: 0 reqs GPU KV cache usage: 1.2%`).
_GLUED = re.compile(r"[^:]+: \S+(?: reqs| tokens/s| toks/s| tokens)? (?=[A-Z][^:]*: )")
_VALUE = re.compile(
    r"^\s*(-?(?:\d[\d,]*(?:\.\d*)?|\.\d+)|[-+]?nan|[-+]?inf)\s*(%|[A-Za-z/]+(?: [A-Za-z/]+)*)?\s*$",
    re.IGNORECASE,
)
_SLUG = re.compile(r"[^a-z0-9]+")
MAX_EXTRA = 32
"""Unknown fields kept per line; a longer tail is counted but dropped (label-like data stays bounded)."""


class Unreadable(ValueError):
    """A known field whose value is not a number."""


def split_fields(body: str) -> list[str]:
    """`a: 1, b: 2, c: 3, 4` -> [`a: 1`, `b: 2`, `c: 3, 4`]; also splits the 0.7.1 comma-less join.

    Linear in the length of the line (a long damaged line must not stall the reader).

    >>> split_fields("Running: 4 reqs, Waiting: 0 reqs GPU KV cache usage: 1.2%, Rates: 0.5, 0.25")
    ['Running: 4 reqs', 'Waiting: 0 reqs', 'GPU KV cache usage: 1.2%', 'Rates: 0.5, 0.25']
    """
    fields: list[list[str]] = []
    for raw in body.split(", "):
        piece = raw.strip()
        if not piece:
            continue
        if ": " not in piece and fields:
            fields[-1].append(piece)  # a list value: per-position rates, KV fetch
            continue
        pos = 0
        glued = _GLUED.match(piece)
        while glued is not None:
            fields.append([piece[pos:glued.end() - 1]])
            pos = glued.end()
            glued = _GLUED.match(piece, pos)
        fields.append([piece[pos:]])
    return [", ".join(parts) for parts in fields]


def read_number(value: str) -> tuple[float, str | None]:
    m = _VALUE.match(value)
    if m is None:
        raise Unreadable(value)
    return float(m.group(1).replace(",", "")), m.group(2)


def as_kind(kind: type, value: float) -> float | int:
    if kind is int:
        if math.isnan(value) or math.isinf(value) or not value.is_integer():
            raise Unreadable(str(value))  # a count is never `nan` or `1.5`
        return int(value)
    return value


def slug(name: str, unit: str | None) -> str:
    key = _SLUG.sub("_", name.lower()).strip("_")[:48] or "field"
    return f"{key}_pct" if unit == "%" and not key.endswith("_pct") else key
