"""Speculative-decoding lines: V0 `Speculative metrics:`, V1 `SpecDecoding metrics:` (all variants) and
`DiffusionDecoding metrics:`, read by field name."""

from __future__ import annotations

import re
from typing import Any, Literal

from .events import Event, SpecDecodeStats, Unparsed
from .fields import MAX_EXTRA, SPEC_FIELDS, Unreadable, as_kind, read_number, slug, split_fields

SPEC_START = re.compile(r"(?:Engine (\d{3,12}): )?(SpecDecoding|Speculative|DiffusionDecoding) metrics: ")

def parse_spec(msg: str, spm: re.Match[str], common: dict[str, Any]) -> Event:
    kind = spm.group(2)
    fmt: Literal["v0", "v1", "diffusion"] = (
        "v1" if kind == "SpecDecoding" else "v0" if kind == "Speculative" else "diffusion"
    )
    body = msg[spm.end():].rstrip().rstrip(".").rstrip()
    values: dict[str, Any] = {}
    extra: dict[str, float] = {}
    try:
        for field in split_fields(body):
            name, sep, value = field.partition(": ")
            if not sep:
                raise Unreadable(field)
            lname = name.strip().lower().replace("tokens tokens", "tokens")
            if lname == "per-position acceptance rate":
                rates = tuple(read_number(v)[0] for v in value.split(", ") if v.strip())
                values["per_position_acceptance_rate"] = rates
                continue
            typed = SPEC_FIELDS.get(lname) if fmt != "diffusion" else None
            if typed is None:
                if len(extra) < MAX_EXTRA:
                    number, unit = read_number(value)
                    extra[slug(lname, unit)] = number
                continue
            number = read_number(value)[0]
            if fmt == "v0" and typed[0] == "draft_acceptance_rate_pct":
                number = round(number * 100.0, 9)  # V0 prints a fraction (3 decimals); the field is percent
            values[typed[0]] = as_kind(typed[1], number)
    except Unreadable:
        return Unparsed(what="spec", **common)
    if not values and not extra:
        return Unparsed(what="spec", **common)
    engine = spm.group(1)
    return SpecDecodeStats(
        format=fmt,
        cumulative=fmt == "v0",
        engine=int(engine) if engine else None,
        extra=extra,
        **values,
        **common,
    )
