"""Reading the `Name: value[unit], Name: value, ...` body of vLLM's periodic lines (stats, spec decode).

Fields are found by name, values are numbers with an optional unit; a list value (per-position rates)
stays with its field, and 0.7.1's comma-less join of two fields is split (`named_fields`, for `line.py`);
`parsing/transfer.py` (`key=value` pieces) shares the typing of values and the slugs.
The names vLLM prints for the fields of the three kinds of line, and the attribute each fills, are one
table here.
"""

from __future__ import annotations

import math
import re
from typing import get_args, get_type_hints

from .events import EngineStats, SpecDecodeStats, TransferStats

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


def named_fields(body: str) -> list[tuple[str, str]]:
    """`a: 1, b: 2, c: 3, 4.` -> [(`a`, `1`), (`b`, `2`), (`c`, `3, 4`)]: the (name, value) of each field
    of a message's body, its last period left out; also splits the 0.7.1 comma-less join. A field without
    `: ` is `Unreadable`. Linear in the length of the line (a long damaged line must not stall the reader).

    >>> named_fields("Running: 4 reqs, Waiting: 0 reqs GPU KV cache usage: 1.2%, Rates: 0.5, 0.25.")
    [('Running', '4 reqs'), ('Waiting', '0 reqs'), ('GPU KV cache usage', '1.2%'), ('Rates', '0.5, 0.25')]
    """
    fields: list[list[str]] = []
    for raw in body.rstrip().rstrip(".").rstrip().split(", "):
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
    pairs: list[tuple[str, str]] = []
    for parts in fields:
        name, sep, value = ", ".join(parts).partition(": ")
        if not sep:
            raise Unreadable(name)
        pairs.append((name.strip(), value))
    return pairs


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


def typed(record: type, names: dict[str, str]) -> dict[str, tuple[str, type]]:
    """`names` (a field's name on the line, lower case -> the record's attribute), each with the type the
    record declares for it: int (`as_kind` refuses a fraction) or float."""
    hints = get_type_hints(record)
    return {name: (attribute, int if int in get_args(hints[attribute]) else float)
            for name, attribute in names.items()}


def slug(name: str, unit: str | None, cut: int = 48) -> str:
    key = _SLUG.sub("_", name.lower()).strip("_")[:cut] or "field"
    return f"{key}_pct" if unit == "%" and not key.endswith("_pct") else key


# The names vLLM prints for the fields (lower case) -> the record's attribute, with the type it declares.
STATS_FIELDS = typed(EngineStats, {
    "avg prompt throughput": "prompt_throughput",
    "avg prompt tput": "prompt_throughput",
    "avg generation throughput": "generation_throughput",
    "avg generation tput": "generation_throughput",
    "running": "running",
    "reqs running": "running",
    "waiting": "waiting",
    "pending": "waiting",
    "swapped": "swapped",
    "prefix cache hit rate": "prefix_cache_hit_rate_pct",
    "mm cache hit rate": "mm_cache_hit_rate_pct",
})

SPEC_FIELDS = typed(SpecDecodeStats, {
    "mean acceptance length": "mean_acceptance_length",
    "accepted throughput": "accepted_throughput",
    "drafted throughput": "drafted_throughput",
    "accepted": "accepted_tokens",
    "drafted": "drafted_tokens",
    "draft acceptance rate": "draft_acceptance_rate_pct",
    "avg draft acceptance rate": "draft_acceptance_rate_pct",
    "system efficiency": "system_efficiency",
    "number of speculative tokens": "num_speculative_tokens",
    "number of accepted tokens": "accepted_tokens",
    "number of draft tokens": "drafted_tokens",
    "number of emitted tokens": "emitted_tokens",
})

# `key=value` keys (lower case, `_` read as a space); keys mapped to one int field add up.
TRANSFER_FIELDS = typed(TransferStats, {
    "num successful transfers": "successful_transfers",
    "num failed transfers": "failed_transfers",
    "num failed recvs": "failed_recvs",
    "num kv expired reqs": "expired_requests",
    "num notifs after expiry": "notifications_after_expiry",
    "avg xfer time (ms)": "avg_transfer_ms",
    "p90 xfer time (ms)": "p90_transfer_ms",
    "avg post time (ms)": "avg_post_ms",
    "p90 post time (ms)": "p90_post_ms",
    "avg mb per transfer": "avg_mb_per_transfer",
    "throughput (mb/s)": "throughput_mb_per_s",
    "avg number of descriptors": "avg_descriptors",
    # HF3FSKVConnector: failed saves and loads are failed transfers, done ones successful ones.
    "num save task failed": "failed_transfers",
    "num load task failed": "failed_transfers",
    "num save task success": "successful_transfers",
    "num load task success": "successful_transfers",
    # HiSparse (0.33)
    "hisparse hot-buffer hits": "hisparse_hits",
    "hisparse hot-buffer misses": "hisparse_misses",
    "hisparse host-to-device bytes": "hisparse_host_to_device_bytes",
    "hisparse host kv cache usage %": "hisparse_host_cache_usage_pct",
})
