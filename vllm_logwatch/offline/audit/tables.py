"""The audit as text, Markdown or JSON: one row per run, then each run's verdicts with their numbers.

The model names and file names in it are what result files and logs chose: text shows them `printable`
(no terminal escapes, one line), Markdown also with `&`, `<` and `>` as entities (text, not HTML)."""

from __future__ import annotations

import html
import json
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from ...shown import json_safe, printable
from ...shown import shown_number as _f
from ..summary.tables import table_lines
from ..summary.tbt import TBT_SHORT
from .measures import Measures, Verdict, Window, client_tbt
from .results import Run

_HEAD = ("run", "asked", "model", "launch", "lines", "Running med", "p10", "p90", "waiting",
         "KV peak %", "preempt", "prefix hit %", "client tok/s", "server tok/s", "client TBT ms",
         "server TBT ms", "failed", "verdict")


@dataclass(frozen=True)
class Audited:
    """One run's audit."""

    window: Window
    measures: Measures
    verdicts: list[Verdict]
    joined: tuple[int, int] | None = None
    """(the run's requests whose X-Request-ID the log's request lines hold, its requests with one)."""


def _i(value: int | None) -> str:
    return "-" if value is None else str(value)


def _row(n: int, a: Audited) -> list[str]:
    run, m = a.window.run, a.measures
    launch = a.window.launch.label if a.window.launch else "-"
    return [str(n), run.label, run.model or "-", launch, str(m.lines), _f(m.running_median),
            _f(m.running_p10), _f(m.running_p90),
            "-" if m.waiting_share is None else f"{m.waiting_share:.0%}", _f(m.kv_peak_pct),
            _i(m.preemptions), _f(m.prefix_hit_pct), _f(run.output_tok_s), _f(m.server_gen_tok_s),
            _client_tbt(run), _server_tbt(m), _i(run.failed), ", ".join(v.kind for v in a.verdicts)]


def _client_tbt(run: Run) -> str:
    found = client_tbt(run)
    return "-" if found is None else f"{_f(found[1], 2)} {found[0]}"


def _server_tbt(m: Measures) -> str:
    """The log's time between tokens and what it rests on (`tbt.TBT_SHORT`: steps, Running)."""
    if m.server_tbt_ms is None:
        return "-"
    return _f(m.server_tbt_ms, 2) + (f" {TBT_SHORT[m.server_tbt_from]}" if m.server_tbt_from else "")


def _markdown_text(text: str) -> str:
    return html.escape(printable(text), quote=False)


def _text(audits: list[Audited], markdown: bool) -> str:
    shown: Callable[[str], str] = _markdown_text if markdown else printable
    rows = [[shown(cell) for cell in _row(n, a)] for n, a in enumerate(audits, 1)]
    out = table_lines(_HEAD, rows, markdown)
    out.append("")
    for n, a in enumerate(audits, 1):
        run = a.window.run
        where = f"run {n} ({run.client}, {run.source}, {run.start:%Y-%m-%d %H:%M:%S} to {run.end:%H:%M:%S})"
        out.append(f"- {shown(where)}" if markdown else shown(where))
        for v in a.verdicts:
            out.append(f"  - {v.kind}: {shown(v.why)}" if markdown else f"  {v.kind}: {shown(v.why)}")
        if a.joined is not None:
            joined, total = a.joined
            line = (f"requests joined to the log's Received request lines by X-Request-ID: {joined:,} of "
                    f"{total:,} ({joined / total:.0%})")
            out.append(f"  - {line}" if markdown else f"  {line}")
    return "\n".join(out) + "\n"


def _json(audits: list[Audited]) -> str:
    items: list[dict[str, Any]] = []
    for a in audits:
        run = a.window.run
        items.append({
            "source": run.source, "client": run.client, "model": run.model,
            "start": run.start.isoformat(), "end": run.end.isoformat(),
            "concurrency": run.concurrency, "rate": run.rate, "client_output_tok_s": run.output_tok_s,
            "completed": run.completed, "failed": run.failed,
            "client_itl_ms": run.itl_ms, "client_tpot_ms": run.tpot_ms,
            "launch": a.window.launch.label if a.window.launch else None,
            "other_models": a.window.other_models,
            "server": asdict(a.measures),
            "verdicts": [asdict(v) for v in a.verdicts],
            "requests_joined": None if a.joined is None else {"joined": a.joined[0], "requests": a.joined[1]},
        })
    return json.dumps(json_safe({"runs": items}), indent=1) + "\n"


def render_audit(audits: list[Audited], fmt: str) -> str:
    """`fmt`: text, markdown or json."""
    return _json(audits) if fmt == "json" else _text(audits, fmt == "markdown")
