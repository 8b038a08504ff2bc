"""The frame of `logwatch top` as Rich renderables (docs/top.md): `--once` prints them; the Textual
app (`app.py`) shows the same.

Every string a log, a server or a URL chose goes through `printable` and into `Text`, never into
markup.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from rich import box
from rich.cells import cell_len, set_cell_size
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Span, Text

from ..offline.summary.tables import TABLE_HEAD, concurrency_cells
from ..shown import printable, shown_number
from .view import STATES, EngineRow, ServerView, sparkline

SORTS: dict[str, Callable[[ServerView], float]] = {
    "name": lambda v: 0.0,
    "gen": lambda v: -(v.total("gen_tps") or 0.0),
    "waiting": lambda v: -(v.total("waiting") or 0.0),
    "kv": lambda v: -(v.worst("kv") or 0.0),
    "state": lambda v: float(STATES.index(v.state)) if v.state in STATES else 9.0,
}
"""The orders `s` steps through, each a server's key before its name."""
KEYS = (
    ("up/down, j/k", "select a row"),
    ("enter, d", "the detail pane of the selected server (again: close it)"),
    ("s", "sort: " + ", ".join(SORTS)),
    ("/", "filter rows by a word (server, model, state); enter applies, empty clears"),
    ("p, space", "pause (the screen stays; reading goes on)"),
    ("left, right", "log targets: back and forward in the file's history (--step)"),
    ("end", "log targets: back to now"),
    ("?", "this help (any key closes it)"),
    ("escape", "close the pane or the filter box"),
    ("q", "quit"),
)
_STATE_STYLE = {"serving": "green", "idle": "dim", "starting": "cyan", "stalled": "bold red",
                "down": "bold red reverse"}


@dataclass
class Row:
    """A line of the table: a server (with its one engine, or the totals of several) or an engine."""

    view: ServerView
    engine: EngineRow | None
    name: str
    values: EngineRow


@dataclass
class Shown:
    """What the screen shows now: sort, filter, selection, panes."""

    sort: str = "name"
    filter: str = ""
    selected: int = 0
    detail: bool = False
    help: bool = False
    paused: bool = False
    at_label: str = ""


def flat_rows(views: Sequence[ServerView], shown: Shown) -> list[Row]:
    """The table's rows in order: each server, then its engines when it has several."""
    word = shown.filter.lower()
    rows: list[Row] = []
    for v in sorted(views, key=lambda v: (SORTS[shown.sort](v), v.name)):
        haystack = " ".join([v.name, v.state, *(e.model for e in v.engines)]).lower()
        if word and word not in haystack:
            continue
        if len(v.engines) == 1:
            rows.append(Row(v, v.engines[0], printable(v.name), v.engines[0]))
            continue
        values = {what: v.total(what) for what in ("prompt_tps", "gen_tps", "running", "waiting")}
        ages = [a for e in v.engines if (a := e.get("age")) is not None]
        values.update(preemptions=v.total("preemptions"), kv=v.worst("kv"), age=min(ages, default=None))
        total = EngineRow(engine="", model=", ".join(sorted({e.model for e in v.engines if e.model})),
                          state=v.state, values=values, preempting=any(e.preempting for e in v.engines))
        rows.append(Row(v, None, printable(v.name), total))
        rows.extend(Row(v, e, f"  #{printable(e.engine)}", e) for e in v.engines)
    return rows


def tps(value: float | None) -> str:
    """Tokens a second: one decimal under 1,000, whole from there, thousands (k) from 100,000."""
    if value is None or not math.isfinite(value):
        return "-"
    if value >= 100_000:
        return f"{value / 1000:,.0f}k"
    return shown_number(value, 1 if value < 1000 else 0)


def pct(ratio: float | None) -> str:
    """A ratio as percent, one decimal (as the log prints it) below 100."""
    if ratio is None or not math.isfinite(ratio):
        return "-"
    value = ratio * 100
    return f"{value:.1f}" if value < 99.95 else f"{value:.0f}"


def count(value: float | None) -> str:
    return "-" if value is None or not math.isfinite(value) else f"{value:,.0f}"


def age(seconds: float | None) -> str:
    """`12s`, `5m`, `3h`, `2d`."""
    if seconds is None or not math.isfinite(seconds):
        return "-"
    for size, unit in ((86400, "d"), (3600, "h"), (60, "m")):
        if seconds >= size:
            return f"{seconds / size:.0f}{unit}"
    return f"{seconds:.0f}s"


def duration(seconds: float | None) -> str:
    """`850us`, `12.5ms`, `1.20s`."""
    if seconds is None or not math.isfinite(seconds):
        return "-"
    if seconds < 0.001:
        return f"{seconds * 1e6:.0f}us"
    if seconds < 1:
        return f"{seconds * 1000:.1f}ms"
    return f"{seconds:.2f}s"


Cell = str | tuple[str, str]
"""A cell's text, or its text and style."""


@dataclass(frozen=True)
class _Column:
    head: str
    width: int
    cell: Callable[[Row], Cell]
    min_screen: int = 0
    """Shown from this terminal width on."""
    right: bool = True


def _state(row: Row) -> Cell:
    state = row.values.state
    return state, _STATE_STYLE.get(state, "")


def _preempt(row: Row) -> Cell:
    return count(row.values.get("preemptions")), "bold yellow reverse" if row.values.preempting else ""


def _problems(row: Row) -> Cell:
    if row.engine is not None and len(row.view.engines) > 1:
        return ""
    names = ", ".join(f"{printable(k)} {v:,.0f}" for k, v in sorted(row.view.problems.items()))
    if row.view.reason:
        names = printable(row.view.reason) + (f"; {names}" if names else "")
    return names, "red" if names else ""


_COLUMNS = (
    _Column("state", 8, _state, right=False),
    _Column("age", 4, lambda r: age(r.values.get("age"))),
    _Column("gen/s", 7, lambda r: tps(r.values.get("gen_tps"))),
    _Column("gen last 5m", 12, lambda r: (sparkline(r.values.spark, 12), "cyan"), 100, False),
    _Column("prompt/s", 8, lambda r: tps(r.values.get("prompt_tps"))),
    _Column("run", 4, lambda r: count(r.values.get("running"))),
    _Column("wait", 4, lambda r: count(r.values.get("waiting"))),
    _Column("KV%", 4, lambda r: pct(r.values.get("kv"))),
    _Column("hit%", 4, lambda r: pct(r.values.get("prefix"))),
    _Column("TBT", 6, lambda r: duration(r.values.get("tbt"))),
    _Column("preempt", 7, _preempt),
    _Column("model", 16, lambda r: printable(r.values.model), 130, False),
    _Column("problems", 20, _problems, 130, False),
)


def rows_table(rows: Sequence[Row], width: int, *, selected: int | None = None, first: int = 0,
               limit: int | None = None) -> Text:
    """The rows `first` .. `first + limit` under a header, at a terminal `width` (columns that do not
    fit are left out; the server column takes what is left), as one `Text` and its styles' spans:
    a `Text` a cell cost more than the rest of a refresh."""
    columns = [c for c in _COLUMNS if width >= c.min_screen]
    name_width = max(10, width - sum(c.width + 1 for c in columns) - 1)
    plain: list[str] = []
    spans: list[Span] = []
    at = 0
    widths = [name_width, *(c.width for c in columns)]
    rights = [False, *(c.right for c in columns)]

    def line(cells: list[Cell], style: str) -> None:
        """A line of `cells`; the first's style is the whole line's, under the cells' own."""
        nonlocal at
        start, under = at, len(spans)
        for index, (cell, cell_width, right) in enumerate(zip(cells, widths, rights, strict=True)):
            text, cell_style = (cell, "") if isinstance(cell, str) else cell
            text = (" " if index else "") + _fit(text, cell_width, right)
            if cell_style and index:
                spans.append(Span(at + 1, at + len(text), cell_style))
            plain.append(text)
            at += len(text)
        if not isinstance(cells[0], str) and cells[0][1]:
            spans.insert(under, Span(start, at, cells[0][1]))
        if style:
            spans.append(Span(start, at, style))
        plain.append("\n")
        at += 1

    line(["server", *(c.head for c in columns)], "bold")
    chosen = rows[first:first + limit if limit is not None else None]
    for index, row in enumerate(chosen, start=first):
        server_row = row.engine is None or len(row.view.engines) == 1
        line([(_short(row.name, name_width), "bold" if server_row else ""), *(c.cell(row) for c in columns)],
             "reverse" if index == selected else "")
    text = "".join(plain).rstrip()
    return Text(text, no_wrap=True, overflow="ellipsis",
                spans=[span.right_crop(len(text)) for span in spans if span.start < len(text)])


def _fit(text: str, width: int, right: bool) -> str:
    """`text` in `width` cells: cut with an ellipsis, then padded (Rich's `Text.truncate` and `align`)."""
    length = cell_len(text)
    if length > width:
        text = set_cell_size(text, width - 1) + "…"
        length = cell_len(text)
    return " " * (width - length) + text if right else text + " " * (width - length)


def fleet_text(views: Sequence[ServerView], shown: Shown, width: int, *, status: bool = True) -> Text:
    """The line on top: servers and how many are down, the fleet's totals, the engines with the most
    waiting and the highest KV usage; and with `status` what the view shows (the app shows that on its
    bottom line)."""
    rows = [(f"{v.name} #{e.engine}" if len(v.engines) > 1 else v.name, e) for v in views for e in v.engines]

    def total(what: str) -> float:
        return math.fsum(e.get(what) or 0.0 for _, e in rows)

    def worst(what: str) -> tuple[str, float] | None:
        found = [(name, value) for name, e in rows if (value := e.get(what)) is not None]
        return max(found, key=lambda pair: pair[1], default=None)

    down = sum(v.state == "down" for v in views)
    text = Text(no_wrap=True, overflow="ellipsis")
    text.append("fleet ", style="bold")
    text.append(f"{len(views)} server{'s' if len(views) != 1 else ''}")
    if down:
        text.append(f" ({down} down)", style="bold red")
    text.append(f"  gen {tps(total('gen_tps'))}/s  prompt {tps(total('prompt_tps'))}/s"
                f"  run {count(total('running'))}  wait {count(total('waiting'))}")
    waiting, kv = worst("waiting"), worst("kv")
    if waiting is not None and waiting[1] > 0:
        text.append(f"  most waiting: {_short(waiting[0])} ({count(waiting[1])})", style="yellow")
    if kv is not None:
        text.append(f"  top KV: {_short(kv[0])} ({pct(kv[1])}%)")
    if status:
        text.append("  " + status_text(shown), style="dim")
    text.truncate(width, overflow="ellipsis")
    return text


def status_text(shown: Shown) -> str:
    """`[at ..., paused, sort gen, filter word]`: what the view shows now."""
    said = [*([shown.at_label] if shown.at_label else []), *(["paused"] if shown.paused else []),
            f"sort {shown.sort}", *([f"filter {printable(shown.filter)}"] if shown.filter else [])]
    return "[" + ", ".join(said) + "]"


def _short(name: str, most: int = 20) -> str:
    """`name`, or its end after an ellipsis (a port, a file's stamp tell servers apart)."""
    shown = printable(name)
    return shown if len(shown) <= most else "…" + shown[-(most - 1):]


def detail(view: ServerView) -> RenderableType:
    """The detail pane of a server: start-up facts, latency percentiles, the throughput-by-concurrency
    table so far (the summary's columns), spec decoding, connector transfers, problems."""
    parts: list[RenderableType] = []
    head = Text()
    head.append(printable(view.name), style="bold")
    head.append(f"  {view.kind}  {view.state}")
    if view.reason:
        head.append(f" ({printable(view.reason)})", style="red")
    if view.target != view.name:
        head.append(f"  target {printable(view.target)}", style="dim")
    parts.append(head)
    if view.facts:
        parts.append(Text("  ".join(f"{printable(k)}: {printable(v)}" for k, v in view.facts.items()),
                          overflow="fold"))
    if view.latency:
        lat = Table(box=box.SIMPLE_HEAD, padding=(0, 1), pad_edge=False, show_edge=False)
        for head_cell in ("latency", "window", "p50", "p95", "p99", "count"):
            lat.add_column(head_cell, justify="left" if head_cell in ("latency", "window") else "right")
        names = {"tbt": "time between tokens", "ttft": "time to first token", "e2e": "request"}
        for row in view.latency:
            lat.add_row(names.get(row.name, row.name), row.window, duration(row.p50), duration(row.p95),
                        duration(row.p99), count(row.count))
        parts.append(lat)
    rows = view.stats() if view.stats is not None else []
    if rows:
        # two spaces between columns (the rule's and a pad), not three: 80 columns hold every number whole
        table = Table(title="throughput by concurrency (so far)", title_justify="left", box=box.SIMPLE_HEAD,
                      padding=(0, 1, 0, 0), pad_edge=False, show_edge=False)
        for head_cell in TABLE_HEAD:
            table.add_column(head_cell, justify="left" if head_cell == "running" else "right")
        for r in rows:
            table.add_row(*concurrency_cells(r))
        parts.append(table)
    if view.spec is not None:
        drafted, accepted = view.spec
        rate = f"{accepted / drafted:.1%}" if drafted else "-"
        parts.append(Text(f"spec decoding: drafted {count(drafted)}, accepted {count(accepted)}, "
                          f"acceptance {rate}"))
    if view.connector:
        parts.append(Text("connector: " + ", ".join(
            f"{printable(k)} {shown_number(v, 0)}" for k, v in sorted(view.connector.items()))))
    if view.problems:
        parts.append(Text("problems: " + ", ".join(
            f"{printable(k)} {v:,.0f}" for k, v in sorted(view.problems.items())), style="red"))
    return Group(*parts)


def help_table() -> Table:
    table = Table(title="logwatch top: keys", box=box.SIMPLE_HEAD, show_edge=False)
    table.add_column("key", style="bold")
    table.add_column("does")
    for key, does in KEYS:
        table.add_row(key, does)
    return table
