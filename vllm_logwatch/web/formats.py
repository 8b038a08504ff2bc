"""How the status page writes numbers, ages and engine names."""

from __future__ import annotations

import math
from typing import Any

__all__ = ["engine_name", "format_age", "format_number", "format_quantity"]


def format_number(value: Any, digits: int) -> str:
    """`1,727.3`; a dash for a value the line did not carry.

    >>> format_number(1727.3, 1), format_number(None, 1), format_number(3, 0)
    ('1,727.3', '—', '3')
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return "—"
    return f"{value:,.{digits}f}"


def format_quantity(value: Any, digits: int) -> str:
    """A count that may have a fraction: a whole value without decimals (`512`, not `512.0`), any
    other with `digits`.

    >>> format_quantity(512.0, 1), format_quantity(12.5, 1), format_quantity(None, 1)
    ('512', '12.5', '—')
    """
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) \
            and float(value).is_integer():
        digits = 0
    return format_number(value, digits)


def format_age(seconds: Any) -> str:
    """`4 s ago`, `2 min 5 s ago`, `1 h 3 min ago`.

    >>> format_age(4.6), format_age(125), format_age(3780)
    ('4 s ago', '2 min 5 s ago', '1 h 3 min ago')
    """
    if not isinstance(seconds, (int, float)) or not math.isfinite(seconds):
        return "—"
    whole = max(0, int(seconds))
    if whole < 60:
        return f"{whole} s ago"
    if whole < 3600:
        return f"{whole // 60} min {whole % 60} s ago"
    return f"{whole // 3600} h {whole % 3600 // 60} min ago"


def engine_name(label: str) -> str:
    """How an engine label reads on the page (`SOURCE #LABEL`: an engine of one source of many).

    >>> engine_name("0"), engine_name("vllm/vllm-0/vllm #0")
    ('Engine 0', 'vllm/vllm-0/vllm: engine 0')
    """
    source, mark, label = label.rpartition(" #")
    if mark:
        return f"{source}: {engine_name(label)[0].lower()}{engine_name(label)[1:]}"
    if label == "aggregated":
        return "All engines (aggregated)"
    if label == "other":
        return "Other engines (beyond the label limit)"
    return f"Engine {label}"
