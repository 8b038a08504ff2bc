"""`summary --by lora`: a row per LoRA adapter from vLLM's request lines (`--enable-log-requests`,
`--enable-log-outputs`), read through `parse --kind requests`' rows (`offline/reading/details.py`).

An adapter is the one a request's `Received request` line names (`lora_request:
LoRARequest(lora_name='X', ...)`); a request without one is the base model's. A row counts the
requests received, those whose end was read, their finish reasons, and the end-to-end time p50 and p90
of those timed finer than a second (a container's stamps): vLLM's own stamps have whole seconds, so a
request read only by them is counted as untimed, not timed to the second.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...shown import shown_number as _f
from ..reading.details import REQUEST_COLUMNS, source_rows
from ..reading.inputs import resolve_inputs

BASE_MODEL = "(base model)"
"""The row of the requests that name no adapter."""
ADAPTER_COLUMNS = {
    "adapter": f"the LoRA adapter the request's `Received request` line names; {BASE_MODEL}: none",
    "requests": "requests received (or ended: a request whose Received line is not in the log)",
    "ended": "requests whose end was read (a whole response, a stream's last piece, an abort)",
    "finish reasons": "of the ended ones: vLLM's reason; abort for an `Aborted request` line; unknown: "
                      "a stream whose end vLLM logged without one",
    "e2e s p50, p90": "Received line to the end, of the requests timed finer than a second (container "
                      "stamps); '-': none",
    "untimed": "ended requests read by vLLM's whole-second stamps only: counted, not timed",
}
_COLUMNS = tuple(REQUEST_COLUMNS.index(c)
                 for c in ("lora", "end", "finish_reason", "e2e_s", "time_resolution_s"))


@dataclass
class AdapterRow:
    adapter: str
    requests: int = 0
    ended: int = 0
    reasons: Counter[str] = field(default_factory=Counter)
    e2e_s: list[float] = field(default_factory=list)
    untimed: int = 0

    def quantiles(self) -> tuple[float, float] | None:
        """The end-to-end p50 and p90 in seconds (3 decimals), None without timed requests."""
        if not self.e2e_s:
            return None
        p50, p90 = np.percentile(np.array(self.e2e_s), [50, 90])
        return round(float(p50), 3), round(float(p90), 3)


def collect_adapters(inputs: list[str], year: int | None = None, tz: str | None = None) -> list[AdapterRow]:
    """The rows of every adapter named in the inputs' request lines, the base model first, then by
    name; empty without request lines."""
    sources, zone = resolve_inputs(inputs, tz)
    rows: dict[str, AdapterRow] = {}
    for source in sources:
        for row in source_rows(source, "requests", zone, year):
            lora, end, reason, e2e, resolution = (row[i] for i in _COLUMNS)
            name = BASE_MODEL if lora is None else str(lora)
            acc = rows.setdefault(name, AdapterRow(name))
            acc.requests += 1
            if not end:
                continue
            acc.ended += 1
            acc.reasons[reason or "unknown"] += 1
            if e2e is not None and resolution is not None and resolution < 1:
                acc.e2e_s.append(float(e2e))
            else:
                acc.untimed += 1
    return sorted(rows.values(), key=lambda r: (r.adapter != BASE_MODEL, r.adapter))


def _reasons(row: AdapterRow) -> str:
    ordered = sorted(row.reasons.items(), key=lambda kv: (-kv[1], kv[0]))
    return ", ".join(f"{reason} {_f(n, 0)}" for reason, n in ordered)


def adapters_lines(rows: list[AdapterRow], table: Any, h: str) -> list[str]:
    """The rows as the summary's text or Markdown (`table`: its table writer; `h`: its heading mark)."""
    bullet = "- " if h else "  "
    cells = []
    for r in rows:
        q = r.quantiles()
        cells.append([r.adapter, _f(r.requests, 0), _f(r.ended, 0), _reasons(r) or "-",
                      "-" if q is None else f"{q[0]:g}", "-" if q is None else f"{q[1]:g}", _f(r.untimed, 0)])
    out = [f"{h}Requests by LoRA adapter", ""]
    head = ("adapter", "requests", "ended", "finish reasons", "e2e s p50", "e2e s p90", "untimed")
    out += table(head, cells)
    out += ["", *(f"{bullet}{name}: {text}" for name, text in ADAPTER_COLUMNS.items()), ""]
    return out


def adapters_json(rows: list[AdapterRow]) -> dict[str, Any]:
    """`summary --by lora --json`: the rows and what their columns mean."""
    out = []
    for r in rows:
        q = r.quantiles()
        out.append({"adapter": r.adapter, "requests": r.requests, "ended": r.ended,
                    "finish_reasons": dict(sorted(r.reasons.items())), "timed": len(r.e2e_s),
                    "e2e_s_p50": None if q is None else q[0], "e2e_s_p90": None if q is None else q[1],
                    "untimed": r.untimed})
    return {"adapters": out, "columns": ADAPTER_COLUMNS}
