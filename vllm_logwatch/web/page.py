"""The status page at `/`, rendered here alone (`static/page.js` swaps in its `data-live` parts and
draws the charts: docs/design.md), and its static files (`static_files`).

Every value is escaped; nothing but numbers, states, labels bounded by the metrics, start-up facts
(model, version) and the followed path reach the page: never log text.

>>> html = render({"engines": {}, "stats_missing": "stats_logging_disabled"})
>>> "--disable-log-stats" in html and "<table" in html
True
"""

from __future__ import annotations

import hashlib
import html
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources
from string import Template
from typing import Any

REFRESH_NO_SCRIPT_SECONDS = 10


@dataclass(frozen=True)
class Column:
    """A column of the engines table: `field` is a dotted path into one engine of the status."""

    field: str
    label: str
    unit: str
    digits: int = 1
    kind: str = "number"  # number | state | age; the Sources table's also text | quantity | problems


COLUMNS: tuple[Column, ...] = (
    Column("state", "State", "", kind="state"),
    Column("last.generation_throughput", "Generation", "tok/s"),
    Column("last.prompt_throughput", "Prompt", "tok/s"),
    Column("last.running", "Running", "reqs", 0),
    Column("last.waiting", "Waiting", "reqs", 0),
    Column("last.kv_cache_usage_pct", "KV cache usage", "%"),
    Column("last.prefix_cache_hit_rate_pct", "Prefix cache hit rate", "%"),
    Column("last.mm_cache_hit_rate_pct", "MM cache hit rate", "%"),
    Column("age_seconds", "Last stats line", "", 0, kind="age"),  # "ago" is in its cells
)

STATE_LABELS = {
    "ok": "active",
    "idle": "idle",
    "stalled": "stalled",
    "dead": "dead",
    "ended": "ended",
}
"""The engine states of `/api/v1/status` as the page names them."""

STATE_HELP = (
    "active: stats lines arrive; idle: nothing running (vLLM prints no stats line while idle, so "
    "silence is normal); stalled: requests were running and no stats line came for 3 intervals; "
    "dead: the engine failed (EngineDeadError) and serves no more; ended: the launch shut down."
)

STATS_MISSING = {
    "stats_logging_disabled": "No stats lines: vLLM runs with --disable-log-stats, so it prints none. "
                              "Only start-up facts and counters can be shown.",
    "requests_without_stats": "No stats lines: requests are served but no stats line came. vLLM prints "
                              "none when more than one API server runs (the data-parallel default, "
                              "--api-server-count above 1).",
    "unreadable_stats": "{n} lines look like stats lines but could not be read: vLLM's format may be one "
                        "this version of logwatch does not know (see the exporter's parse errors below).",
    "waiting": "Waiting for the first stats line (vLLM prints one every VLLM_LOG_STATS_INTERVAL "
               "seconds, 10 by default, while it serves requests).",
}
"""What the page says when no engine has a stats line yet, by `stats_missing` reason."""

def _asset(name: str) -> str:
    """A static URL that changes with the file, so a browser never mixes an old script with a new page."""
    return f"static/{name}?v={static_files()[name].etag.strip(chr(34))}"


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _cell(column: Column, engine: Mapping[str, Any]) -> str:
    value = _first(engine, column.field)
    attrs = f'data-field="{_e(column.field)}" data-kind="{column.kind}"'
    if column.kind == "state":
        state = value if value in STATE_LABELS else "ok"
        return (f'<td {attrs} data-value="{_e(state)}"><span class="badge state-{_e(state)}">'
                f"{_e(STATE_LABELS[state])}</span></td>")
    shown = format_age(value) if column.kind == "age" else format_number(value, column.digits)
    data_value = "" if not isinstance(value, (int, float)) or isinstance(value, bool) else repr(value)
    if column.kind == "age":
        interval = engine.get("interval_seconds")
        every = f"every {format_number(interval, 0)} s" if isinstance(interval, (int, float)) else ""
        return (f'<td {attrs} data-value="{_e(data_value)}"><span class="v">{_e(shown)}</span>'
                f' <span class="sub">{_e(every)}</span></td>')
    return f'<td {attrs} data-value="{_e(data_value)}">{_e(shown)}</td>'


def _row(label: str, engine: Mapping[str, Any]) -> str:
    state = engine.get("state") if engine.get("state") in STATE_LABELS else "ok"
    cells = "".join(_cell(column, engine) for column in COLUMNS)
    return (f'<tr data-engine="{_e(label)}" class="row-{_e(state)}"><th scope="row">{_e(engine_name(label))}'
            f"</th>{cells}</tr>")


def _header_cells(first: str, columns: tuple[Column, ...]) -> str:
    """`first`, then each column's label and unit."""
    out = [f'<th scope="col">{first}</th>']
    for column in columns:
        unit = f' <span class="unit">({_e(column.unit)})</span>' if column.unit else ""
        out.append(f'<th scope="col">{_e(column.label)}{unit}</th>')
    return "".join(out)


def _notice(status: Mapping[str, Any]) -> tuple[str, str]:
    """The notice text and its reason key ("" when every engine has lines)."""
    if status.get("engines"):
        return "", ""
    unreadable = _first(status, "counters.parse_errors.stats")
    if isinstance(unreadable, int) and unreadable > 0:
        return STATS_MISSING["unreadable_stats"].replace("{n}", f"{unreadable:,}"), "unreadable_stats"
    reason = status.get("stats_missing")
    key = reason if reason in STATS_MISSING else "waiting"
    return STATS_MISSING[key], key


def skipped_text(skipped: Any) -> str:
    """What the page says when `watch` started at the end of a file.

    >>> skipped_text(2048)[:58]
    'Started at the end of the log: 2,048 bytes of older lines '
    """
    if isinstance(skipped, bool) or not isinstance(skipped, int) or skipped <= 0:
        return ""
    return (f"Started at the end of the log: {skipped:,} bytes of older lines were skipped (only the "
            "launch's start-up facts were read from them); the numbers count lines from then on. To "
            "read the older lines, start watch with --from-start.")


_FACT_COLUMNS = (
    Column("server.served_model_name|server.model|model_name", "Model", "", kind="text"),
    Column("server.vllm_version", "vLLM", "", kind="text"),
    Column("server.kv_cache_tokens", "KV cache", "tokens", 0),
    Column("server.max_concurrency", "Max concurrency", "requests of max length", 1, kind="quantity"),
    Column("server.max_model_len", "Max model length", "tokens", 0),
)
# 0.34 sizes the KV cache after warm-up (`Extended KV cache to N blocks (X GiB)`); before, the estimate
_MEMORY = Column("server.kv_cache_extended_gib|server.available_kv_cache_gib", "KV cache memory",
                 "GiB per worker", 2)
_FACTS = (*_FACT_COLUMNS[:3], _MEMORY, *_FACT_COLUMNS[3:])
_MANY_FACTS = (  # a watch of many sources: each one's facts are in the Sources table
    Column("follower.sources", "Sources", "", 0),
    Column("across_sources.models", "Models", "", kind="list"),
    Column("across_sources.vllm_versions", "vLLM", "", kind="list"),
)
SOURCE_COLUMNS: tuple[Column, ...] = (
    *_FACT_COLUMNS,
    Column("counters.log_lines", "Lines read", "", 0),
    Column("launches", "Launches", "", 0),
    Column("counters.log_messages.WARNING", "Warnings", "", 0),
    Column("counters.log_messages.ERROR", "Errors", "", 0),
    Column("counters.problems", "Problems seen", "", kind="problems"),
)
"""The columns of the Sources table of a many-source watch: each source's start-up facts and counters."""


def _facts(status: Mapping[str, Any]) -> str:
    """Start-up facts (of many sources: how many, their models and versions)."""
    items = _MANY_FACTS if isinstance(status.get("sources"), list) else _FACTS
    out = []
    for c in items:
        shown = _shown(_first(status, c.field), c.kind, c.digits)
        unit_html = f' <span class="unit">{_e(c.unit)}</span>' if c.unit else ""
        out.append(f'<div><dt>{_e(c.label)}</dt><dd><span data-key="{_e(c.field)}">{_e(shown)}</span>'
                   f"{unit_html}</dd></div>")
    return "".join(out)


def _shown(value: Any, kind: str, digits: int) -> str:
    if kind == "list":
        return ", ".join(str(v) for v in value) if isinstance(value, list) and value else "—"
    if kind == "problems":
        seen = [f"{tag} ×{count}" for tag, count in value.items()
                if isinstance(count, int) and count > 0] if isinstance(value, Mapping) else []
        return ", ".join(seen) or "none"
    if kind in ("number", "quantity"):  # a quantity: a whole value without decimals (`512`, not `512.0`)
        whole = kind == "quantity" and isinstance(value, (int, float)) and float(value).is_integer()
        return format_number(value, 0 if whole else digits)
    return "—" if value is None or value == "" else str(value)


def _items(status: Mapping[str, Any], rows: tuple[tuple[str, str, str, int], ...]) -> list[str]:
    """A `<dt>` and `<dd>` a row: its label, and the first value of its keys shown as `kind`, `digits`."""
    return [f'<div><dt>{_e(label)}</dt><dd data-key="{_e(key)}">'
            f"{_e(_shown(_first(status, key), kind, digits))}</dd></div>"
            for label, key, kind, digits in rows]


def _first(source: Mapping[str, Any], keys: str) -> Any:
    """The first of the `|`-separated dotted paths into `source` that holds a value."""
    for key in keys.split("|"):
        value: Any = source
        for part in key.split("."):
            value = value.get(part) if isinstance(value, Mapping) else None
        if value not in (None, "", "unknown"):
            return value
    return None


def child_state(child: Mapping[str, Any]) -> str:
    """Run mode: what the supervised vLLM process is doing, in words.

    >>> child_state({"child_up": 1.0, "pid": 41}), child_state({"child_up": 0.0, "last_exit_code": 1})
    ('running (pid 41)', 'not running (last exit code 1)')
    """
    up = child.get("child_up")
    pid = child.get("pid", child.get("child_pid"))
    code = child.get("last_exit_code", child.get("child_last_exit_code"))
    if up == 1:
        return f"running (pid {pid})" if pid is not None else "running"
    if up is None and code is None:
        return "starting"
    return "not running" + (f" (last exit code {code})" if code is not None else "")


def _child(status: Mapping[str, Any]) -> str:
    if status.get("mode") != "run":
        return ""
    child = status.get("child")
    state = _e(child_state(child if isinstance(child, Mapping) else {}))
    items = [f'<div><dt>Process</dt><dd data-key="child">{state}</dd></div>', *_items(status, (
        ("Restarts", "child.restarts|child.child_restarts", "number", 0),
        ("Log file", "child.log_file", "text", 0),
        ("Log write errors", "child.log_write_errors|child.log_file_write_errors", "number", 0),
        ("Log bytes dropped", "child.log_bytes_dropped|child.log_file_bytes_dropped", "number", 0),
    ))]
    return ('<section id="child" data-live aria-labelledby="child-h">'
            '<h2 id="child-h">vLLM process (run mode)</h2>'
            f'<dl class="facts">{"".join(items)}</dl></section>')


def _replay(status: Mapping[str, Any]) -> tuple[str, str, str]:
    """The badge and the paragraph of a replay (`logwatch demo`): which log, which pass, and why each
    pass ends with a failure; and what its chart axis is (the replayed stamps, which run ahead of the
    wall clock). ("", "", "") for a live log."""
    replay = status.get("replay")
    if not isinstance(replay, Mapping):
        return "", "", ""
    log, speed = _e(replay.get("log")), _e(_shown(replay.get("speed"), "number", 0))
    number = _e(_shown(replay.get("pass"), "number", 0))
    badge = ' <span id="replay-badge" class="badge replay" title="logwatch demo">Replay</span>'
    text = (f'<p id="replay" class="notice replay" data-live>Replay of a real vLLM log ({log}) at {speed}x, '
            f'pass <span data-key="replay.pass">{number}</span>, written again each pass as a new launch. '
            f'{_e(replay.get("failure") or "")}</p>')
    return badge, text, f" (replay time: the log stamps at {speed}x, ahead of this clock)"


def _sources(status: Mapping[str, Any]) -> str:
    """The Sources section of a many-source watch ("" with one source): a row a source."""
    sources = status.get("sources")
    if not isinstance(sources, list):
        return ""
    rows = []
    for source in sources:
        if not isinstance(source, Mapping):
            continue
        cells = "".join(f'<td data-kind="{c.kind}">{_e(_shown(_first(source, c.field), c.kind, c.digits))}'
                        "</td>" for c in SOURCE_COLUMNS)
        name = _e(source.get("name"))
        rows.append(f'<tr data-source="{name}"><th scope="row">{name}</th>{cells}</tr>')
    return ('<section id="sources-section" data-live aria-labelledby="sources-h">'
            '<h2 id="sources-h">Sources</h2><div class="table-wrap"><table id="sources">'
            f'<thead><tr>{_header_cells("Source", SOURCE_COLUMNS)}</tr></thead>'
            f'<tbody>{"".join(rows)}</tbody></table></div>'
            '<p class="help">Each source of the folder: its launch\'s start-up facts and what was read of '
            "it. The Exporter block below adds them up.</p></section>")


def _exporter(status: Mapping[str, Any]) -> str:
    return "".join(_items(status, (
        ("Following", "follower.path|child.log_file|follower.target", "text", 0),
        ("Lines read", "counters.log_lines", "number", 0),
        ("Stats lines parse errors", "counters.parse_errors.stats", "number", 0),
        ("Warnings", "counters.log_messages.WARNING", "number", 0),
        ("Errors", "counters.log_messages.ERROR", "number", 0),
        ("HTTP requests", "counters.http_requests", "number", 0),
        ("Launches", "launches", "number", 0),
        ("Problems seen", "counters.problems", "problems", 0),
    )))


_PAGE = Template("""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>vLLM logwatch — status</title>
<link rel="icon" href="data:,">
<noscript><meta http-equiv="refresh" content="$refresh"></noscript>
<link rel="stylesheet" href="$uplot_css">
<link rel="stylesheet" href="$page_css">
<script defer src="$uplot_js"></script>
<script defer src="$page_js"></script>
</head>
<body>
<header class="top">
  <div class="title">
    <h1>vLLM logwatch$replay_badge</h1>
    <p id="connection" class="connection" role="status" aria-live="polite">\
<span class="dot" aria-hidden="true"></span> <span class="text">\
Snapshot at <time datetime="$rendered_iso">$rendered_clock</time>; \
<noscript>JavaScript is off: this page reloads every $refresh s.</noscript></span></p>
  </div>
  <dl class="facts" id="server" data-live>$facts</dl>
</header>
<main>
$replay
<p id="skipped" class="help" data-live$skipped_hidden>$skipped</p>
<p id="notice" class="notice" data-live data-reason="$notice_reason"$notice_hidden>$notice</p>
$child
<section aria-labelledby="engines-h">
  <h2 id="engines-h">Engines now</h2>
  <div class="table-wrap">
  <table id="engines" aria-describedby="engines-about">
    <thead><tr>$header</tr></thead>
    <tbody id="engine-rows" data-live data-stats-lines="$stats_lines">$rows</tbody>
  </table>
  </div>
  <p id="engines-about" class="help">Values of each engine's last stats line. Throughputs are averages \
over vLLM's stats interval; running, waiting and KV cache usage are instant values; hit rates cover recent \
requests.</p>
  <p class="help">$state_help</p>
</section>
$sources
<section id="charts" aria-labelledby="charts-h">
  <h2 id="charts-h">Last hour$charts_time</h2>
  <noscript><p class="help">The charts need JavaScript; the table above is the same data, now.</p></noscript>
  <div id="chart-list" data-empty="No points yet: the charts fill as stats lines arrive."></div>
</section>
<section aria-labelledby="exporter-h">
  <h2 id="exporter-h">Exporter</h2>
  <dl class="facts" id="exporter" data-live>$exporter</dl>
  <p class="help">Raw data: <a href="metrics">/metrics</a> (Prometheus), <a href="api/v1/status">\
/api/v1/status</a>, <a href="api/v1/history">/api/v1/history</a> (JSON).</p>
</section>
</main>
</body>
</html>
""")


def render(status: Mapping[str, Any]) -> str:
    """The whole page for `status` (a `/api/v1/status` snapshot), ready to serve."""
    engines = status.get("engines") if isinstance(status.get("engines"), Mapping) else {}
    assert isinstance(engines, Mapping)
    rows = "".join(_row(str(label), engine) for label, engine in engines.items()
                   if isinstance(engine, Mapping))
    if not rows:
        rows = f'<tr class="empty"><td colspan="{len(COLUMNS) + 1}">No stats line yet</td></tr>'
    notice, reason = _notice(status)
    local = time.localtime()
    replay_badge, replay, charts_time = _replay(status)
    skipped = skipped_text(status.get("skipped_bytes"))
    return _PAGE.substitute(
        replay_badge=replay_badge, replay=replay,
        refresh=REFRESH_NO_SCRIPT_SECONDS,
        uplot_css=_asset("uPlot.min.css"), page_css=_asset("page.css"),
        uplot_js=_asset("uPlot.iife.min.js"), page_js=_asset("page.js"),
        rendered_iso=_e(time.strftime("%Y-%m-%dT%H:%M:%S%z", local)),
        rendered_clock=_e(time.strftime("%H:%M:%S", local)),
        facts=_facts(status),
        notice=_e(notice), notice_reason=_e(reason),
        notice_hidden="" if notice else " hidden",
        skipped=_e(skipped), skipped_hidden="" if skipped else " hidden",
        child=_child(status),
        sources=_sources(status),
        charts_time=charts_time,
        header=_header_cells("Engine", COLUMNS),
        rows=rows,
        stats_lines=sum(e["stats_lines"] for e in engines.values()
                        if isinstance(e, Mapping) and isinstance(e.get("stats_lines"), int)),
        state_help=_e(STATE_HELP),
        exporter=_exporter(status),
    )


_STATIC_TYPES = {
    "page.css": "text/css; charset=utf-8",
    "page.js": "text/javascript; charset=utf-8",
    "uPlot.iife.min.js": "text/javascript; charset=utf-8",
    "uPlot.min.css": "text/css; charset=utf-8",
    "uPlot.LICENSE": "text/plain; charset=utf-8",
}


@dataclass(frozen=True)
class StaticFile:
    """One file of `vllm_logwatch/web/static/`, read once."""

    body: bytes
    media_type: str
    etag: str


@cache
def static_files() -> dict[str, StaticFile]:
    """The page's static files by name (a fixed list: nothing else under `/static/` is served)."""
    folder = resources.files("vllm_logwatch.web").joinpath("static")
    out = {}
    for name, media_type in _STATIC_TYPES.items():
        body = folder.joinpath(name).read_bytes()
        out[name] = StaticFile(body, media_type, '"' + hashlib.sha256(body).hexdigest()[:16] + '"')
    return out


def format_number(value: Any, digits: int) -> str:
    """`1,727.3`; a dash for a value the line did not carry.

    >>> format_number(1727.3, 1), format_number(None, 1), format_number(3, 0)
    ('1,727.3', '—', '3')
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return "—"
    return f"{value:,.{digits}f}"


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
