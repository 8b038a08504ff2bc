"""`KV Transfer metrics: k=v, ...` and `EC Transfer metrics: ...` lines, read by key.

vLLM prints the connector's reduced stats for the interval as `key=value` pairs joined by `, ` (as the
connectors' own stats classes print them): NIXL and Mooncake use keys with spaces and parentheses
(`Avg xfer time (ms)=3.214`), NIXL 0.11.0 used `num_successful_transfers=N`, the offloading
connectors print metric-like keys with label tuples (`vllm:kv_offload_tiering_read_bytes:('1:fs',)=N`,
`vllm:kv_offload_tiering_promotion_latency_seconds:('1:fs', 'success')_count=3`, vLLM 0.33), and a
MultiConnector prints one Python dict per connector (`NixlConnector={'Num successful transfers': 3, ...}`).
Known keys get a field, `vllm:` keys an `OffloadSample` each (name, labels, `_count`/`_sum`); the rest
are kept in `extra` by a bounded slug, never as text. A piece that cannot be read is skipped and
counted (`unreadable_keys`): one odd key never costs the rest of the line.
"""

from __future__ import annotations

import ast
import re
from typing import Any, Literal

from .events import OffloadSample, TransferStats, Unparsed
from .fields import MAX_EXTRA, TRANSFER_FIELDS, Unreadable, as_kind, slug

TRANSFER_START = re.compile(r"(?:Engine (\d{3,12}): )?(KV|EC) Transfer metrics: ")
_MAX_DICT = 16384
"""A MultiConnector dict longer than this is not evaluated (a damaged line must stay cheap)."""
_MAX_OFFLOAD = 256
"""Offloading keys kept from one line (a tiered set-up prints a few dozen)."""
# `vllm:name`, an optional label tuple `:('a', 'b')`, an optional `_count` / `_sum`: every part bounded
# and the whole key matched (`fullmatch`), so it runs in linear time on any input.
_OFFLOAD_KEY = re.compile(
    r"vllm:([a-z][a-z0-9_]{0,127}?)(?::\(((?:'[^'()]{0,64}',? ?){1,8})\))?(_count|_sum)?"
)
_LABEL = re.compile(r"'([^'()]{0,64})'")
_MOONCAKE_ERRORS = re.compile(r"(?:load_get|save_exists|save_put)_error_count")
"""MooncakeStoreConnector's per-operation error counts (0.33): failed transfers."""

_SUMMED = frozenset({"num save task failed", "num load task failed", "num save task success",
                     "num load task success"})
"""Keys summed into a field that are also kept alone in `extra` (HF3FS's saves and loads)."""


def parse_transfer(msg: str, tm: re.Match[str], common: dict[str, Any]) -> TransferStats | Unparsed:
    """The event of a transfer line whose message `msg` matched `TRANSFER_START` as `tm`."""
    cache: Literal["kv", "ec"] = "kv" if tm.group(2) == "KV" else "ec"
    body = msg[tm.end():].strip().rstrip(".")
    values: dict[str, Any] = {}
    extra: dict[str, float] = {}
    offload: list[OffloadSample] = []
    unreadable = 0
    for piece in _pieces(body):
        try:
            key, raw = _pair(piece)
            if raw.startswith("{"):
                _read_dict(slug(key, None, cut=64), raw, values, extra, offload)
            else:
                _store(key, _number(raw), values, extra, "", offload)
        except (Unreadable, ValueError, SyntaxError, RecursionError, MemoryError, TypeError):
            unreadable += 1
    if not values and not extra and not offload:
        return Unparsed(what="transfer", **common)
    engine = tm.group(1)
    return TransferStats(cache=cache, engine=int(engine) if engine else None, extra=extra,
                         offload=tuple(offload), unreadable_keys=unreadable, **values, **common)


def _pieces(body: str) -> list[str]:
    """The `key=value` pieces of a line: split at `, ` outside braces and parentheses (a label tuple
    `('1:fs', 'success')` holds `, `, so does a MultiConnector dict). A bracket left open (a damaged
    piece) does not swallow the line: the pieces after it are split as if it were closed.

    >>> _pieces("a=1, m:('x', 'y')_count=5, C={'a': 1, 'b': 2}, d (ms)=2")
    ['a=1', "m:('x', 'y')_count=5", "C={'a': 1, 'b': 2}", 'd (ms)=2']
    >>> _pieces("a=1, b:('x=2, c=3")
    ['a=1', "b:('x=2", 'c=3']
    """
    raw = body.split(", ")
    depths = [_depth(part) for part in raw]
    pieces: list[str] = []
    i = 0
    while i < len(raw):
        depth, j = depths[i], i + 1
        while depth > 0 and j < len(raw):  # join until the brackets close
            depth += depths[j]
            j += 1
        if depth == 0:
            pieces.append(", ".join(raw[i:j]))
            i = j
        else:  # never closed (or closed too often): the piece alone
            pieces.append(raw[i])
            i += 1
            if depths[i - 1] > 0:  # the rest is split alone too: one damaged bracket stays linear
                pieces.extend(raw[i:])
                break
    return pieces


def _depth(text: str) -> int:
    return text.count("{") + text.count("(") - text.count("}") - text.count(")")


def _pair(piece: str) -> tuple[str, str]:
    """`key=value`: a number's key is everything before its last `=` (an old offloading key held
    `label=value`), a dict's key everything before `={`.

    >>> _pair("m:kind=x_count=5"), _pair("C={'a': 1}")
    (('m:kind=x_count', '5'), ('C', "{'a': 1}"))
    """
    brace = piece.find("={")
    if brace > 0:
        key, value = piece[:brace], piece[brace + 1:]
    else:
        key, sep, value = piece.rpartition("=")
        if not sep:
            raise Unreadable(piece[:40])
    if not key.strip():
        raise Unreadable(piece[:40])
    return key.strip(), value.strip()


def _read_dict(
    connector: str, raw: str, values: dict[str, Any], extra: dict[str, float], offload: list[OffloadSample]
) -> None:
    """One MultiConnector entry: its known keys fill the fields the line has not filled yet."""
    if len(raw) > _MAX_DICT:
        raise Unreadable("dict too long")
    data = ast.literal_eval(raw)
    if not isinstance(data, dict):
        raise Unreadable("not a dict")
    for key, value in data.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            continue  # nested structures carry no number we chart
        _store(str(key), float(value), values, extra, connector, offload)


def _store(
    key: str, number: float, values: dict[str, Any], extra: dict[str, float], connector: str,
    offload: list[OffloadSample],
) -> None:
    om = _OFFLOAD_KEY.fullmatch(key) if key.startswith("vllm:") else None
    if om is not None:  # another shape of `vllm:` key (`name:label=value_sum`) goes to `extra`
        if len(offload) < _MAX_OFFLOAD:
            suffix = om.group(3)
            offload.append(OffloadSample(
                name=om.group(1), labels=tuple(_LABEL.findall(om.group(2) or "")), value=number,
                suffix="count" if suffix == "_count" else "sum" if suffix else ""))
        return
    if _MOONCAKE_ERRORS.fullmatch(key):
        key = "num failed transfers"
    lower = key.replace("_", " ").strip().lower()
    typed = TRANSFER_FIELDS.get(lower)
    if typed is not None:
        attribute, kind = typed
        if attribute not in values:
            values[attribute] = as_kind(kind, number)
        elif kind is int:
            values[attribute] += as_kind(kind, number)  # counts of several connectors add up
        if lower not in _SUMMED:
            return
    if len(extra) < MAX_EXTRA:
        name = slug(key, None, cut=64)
        extra[f"{connector}__{name}" if connector else name] = number


def _number(raw: str) -> float:
    text = raw.strip()
    if not text or len(text) > 40:
        raise Unreadable(text[:40])
    return float(text)
