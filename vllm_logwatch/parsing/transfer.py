"""`KV Transfer metrics: k=v, ...` and `EC Transfer metrics: ...` lines, read by key.

vLLM prints the connector's reduced stats for the interval as `key=value` pairs joined by `, ` (as the
connectors' own stats classes print them): NIXL and Mooncake use keys with spaces and parentheses
(`Avg xfer time (ms)=3.214`), NIXL 0.11.0 used `num_successful_transfers=N`, the offloading
connector prints metric-like keys, and a MultiConnector prints one Python dict per connector
(`NixlConnector={'Num successful transfers': 3, ...}`). Known keys get a field; the rest are kept in
`extra` by a bounded slug, never as text.
"""

from __future__ import annotations

import ast
import math
import re
from typing import Any, Literal

from .events import TransferStats, Unparsed

__all__ = ["TRANSFER_START", "parse_transfer"]

TRANSFER_START = re.compile(r"(?:Engine (\d{3,12}): )?(KV|EC) Transfer metrics: ")
_SLUG = re.compile(r"[^a-z0-9]+")
_MAX_EXTRA = 32
_MAX_DICT = 4096
"""A MultiConnector dict longer than this is not evaluated (a damaged line must stay cheap)."""

# Key (lower case, `_` read as a space) -> (field, type).
_FIELDS: dict[str, tuple[str, type]] = {
    "num successful transfers": ("successful_transfers", int),
    "num failed transfers": ("failed_transfers", int),
    "num failed recvs": ("failed_recvs", int),
    "num kv expired reqs": ("expired_requests", int),
    "num notifs after expiry": ("notifications_after_expiry", int),
    "avg xfer time (ms)": ("avg_transfer_ms", float),
    "p90 xfer time (ms)": ("p90_transfer_ms", float),
    "avg post time (ms)": ("avg_post_ms", float),
    "p90 post time (ms)": ("p90_post_ms", float),
    "avg mb per transfer": ("avg_mb_per_transfer", float),
    "throughput (mb/s)": ("throughput_mb_per_s", float),
    "avg number of descriptors": ("avg_descriptors", float),
}


class _Unreadable(ValueError):
    pass


def parse_transfer(msg: str, tm: re.Match[str], common: dict[str, Any]) -> TransferStats | Unparsed:
    """The event of a transfer line whose message `msg` matched `TRANSFER_START` as `tm`."""
    cache: Literal["kv", "ec"] = "kv" if tm.group(2) == "KV" else "ec"
    body = msg[tm.end():].strip().rstrip(".")
    values: dict[str, Any] = {}
    extra: dict[str, float] = {}
    try:
        for key, raw in _pairs(body):
            if raw.startswith("{"):
                _read_dict(_slug(key), raw, values, extra)
            else:
                _store(key, _number(raw), values, extra, "")
    except (_Unreadable, ValueError, SyntaxError, RecursionError, MemoryError, TypeError):
        return Unparsed(what="transfer", **common)
    if not values and not extra:
        return Unparsed(what="transfer", **common)
    engine = tm.group(1)
    return TransferStats(cache=cache, engine=int(engine) if engine else None, extra=extra, **values, **common)


def _pairs(body: str) -> list[tuple[str, str]]:
    """`a=1, b (ms)=2.5, C={'x': 1, 'y': 2}` -> [(a, 1), (b (ms), 2.5), (C, {'x': 1, 'y': 2})].

    Pieces are split at `, ` outside braces; a number's key is everything before its last `=` (an
    offloading connector's key may hold `label=value`), a dict's key everything before `={`.

    >>> _pairs("Num successful transfers=3, m:kind=x_count=5, C={'a': 1, 'b': 2}")
    [('Num successful transfers', '3'), ('m:kind=x_count', '5'), ('C', "{'a': 1, 'b': 2}")]
    """
    pieces: list[str] = []
    depth, start = 0, 0
    for i, ch in enumerate(body):
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        elif depth == 0 and ch == "," and body.startswith(", ", i):
            pieces.append(body[start:i])
            start = i + 2
    pieces.append(body[start:])
    pairs: list[tuple[str, str]] = []
    for piece in pieces:
        brace = piece.find("={")
        if brace > 0:
            key, value = piece[:brace], piece[brace + 1:]
        else:
            key, sep, value = piece.rpartition("=")
            if not sep:
                raise _Unreadable(piece[:40])
        if not key.strip():
            raise _Unreadable(piece[:40])
        pairs.append((key.strip(), value.strip()))
    return pairs


def _read_dict(connector: str, raw: str, values: dict[str, Any], extra: dict[str, float]) -> None:
    """One MultiConnector entry: its known keys fill the fields the line has not filled yet."""
    if len(raw) > _MAX_DICT:
        raise _Unreadable("dict too long")
    data = ast.literal_eval(raw)
    if not isinstance(data, dict):
        raise _Unreadable("not a dict")
    for key, value in data.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            continue  # nested structures carry no number we chart
        _store(str(key), float(value), values, extra, connector)


def _store(key: str, number: float, values: dict[str, Any], extra: dict[str, float], connector: str) -> None:
    typed = _FIELDS.get(key.replace("_", " ").strip().lower())
    if typed is not None:
        attribute, kind = typed
        if attribute not in values:
            values[attribute] = _as(kind, number)
        elif kind is int:
            values[attribute] += _as(kind, number)  # counts of several connectors add up
        return
    if len(extra) < _MAX_EXTRA:
        name = _slug(key)
        extra[f"{connector}__{name}" if connector else name] = number


def _number(raw: str) -> float:
    text = raw.strip()
    if not text or len(text) > 40:
        raise _Unreadable(text[:40])
    return float(text)


def _as(kind: type, value: float) -> float | int:
    if kind is int:
        if math.isnan(value) or math.isinf(value) or not value.is_integer():
            raise _Unreadable(str(value))
        return int(value)
    return value


def _slug(name: str) -> str:
    return _SLUG.sub("_", name.lower()).strip("_")[:64] or "field"
