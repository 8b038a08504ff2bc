"""Each benchmark run's window in the server's logs, what the server really ran in it, the verdicts, and
the audit as text, Markdown, JSON (`render_audit`) and a figure (`build_audit_figure`).

docs/audit.md says what a run's window is, what each column and verdict means (the thresholds are the
constants below), what `--observability` writes (`observability_partial`) and what the figure shows.

The logs are read once through the offline reader (`iter_summary_records`). The launch's iteration
lines in a window (`--enable-logging-iteration-details`) are kept with its stats lines, in the log's
order: `summary`'s time between tokens over the window reads their cadence (`offline/summary/tbt.py`).
The lines of one timestamp (one per engine of a data-parallel server) are one sample: Running, Waiting
and the generation throughput summed over engines, the KV cache usage their highest. Percentiles are
the nearest-rank ones of the samples (a median of 4 and 5 is 4.5). A run can get several verdicts;
`ok` only when it gets none.

The model names and file names in the tables are what result files and logs chose: text shows them
`printable` (no terminal escapes, one line), Markdown also with `&`, `<` and `>` as entities (text, not
HTML). matplotlib (the `plot` extra) is imported only for the figure, on the Agg canvas, without pyplot.
"""

from __future__ import annotations

import html
import json
import os
import statistics
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from ...errors import InputError
from ...parsing.events import EngineStats, IterationStats
from ...parsing.stamps import utc
from ...shown import json_safe, printable
from ...shown import shown_number as _f
from ..plot.collect import require_matplotlib
from ..reading.launches import Launch
from ..summary.build import quantile_sorted, summarize
from ..summary.tables import table_lines
from ..summary.tbt import TBT_HOW, TBT_SHORT, TbtFrom
from .results import Run

if TYPE_CHECKING:
    from matplotlib.figure import Figure

@dataclass
class Window:
    """One run and what its launch printed during it."""

    run: Run
    launch: Launch | None = None
    """The launch of the benchmark's model with the most lines in the window (None: none had any)."""
    records: list[EngineStats | IterationStats] = field(default_factory=list)
    """The launch's stats and iteration lines in the window, in the log's order."""
    other_models: dict[str, int] = field(default_factory=dict)
    """Served model name -> lines in the window, for launches serving another model."""

    @property
    def lines(self) -> list[EngineStats]:
        """The stats lines of `records`."""
        return [r for r in self.records if isinstance(r, EngineStats)]


@dataclass
class LogSpan:
    """The first and last stats line's time over all the logs, for the message when nothing matched."""

    first: datetime | None = None
    last: datetime | None = None

    def take(self, time: datetime) -> None:
        self.first = time if self.first is None or utc(time) < utc(self.first) else self.first
        self.last = time if self.last is None or utc(time) > utc(self.last) else self.last


def same_model(logged: str | None, asked: str | None) -> bool:
    """Is the logged (served) model name the benchmark's? Unknown on either side counts as the same; a
    hub name and its last part (`org/name` and `name`) match.

    >>> same_model("tiny-llama", "tiny-llama"), same_model("org/tiny-llama", "tiny-llama")
    (True, True)
    >>> same_model("small-llama", "tiny-llama"), same_model(None, "tiny-llama")
    (False, True)
    """
    if not logged or not asked:
        return True
    return logged == asked or os.path.basename(logged.rstrip("/")) == os.path.basename(asked.rstrip("/"))


def _moved(run: Run, offset: timedelta) -> tuple[datetime, datetime]:
    try:
        return utc(run.start) + offset, utc(run.end) + offset
    except OverflowError:
        raise InputError(f"{run.source}: its times moved by --clock-offset {offset.total_seconds():g} are "
                         "not dates") from None


def find_windows(runs: list[Run], records: Iterable[tuple[Launch, EngineStats | IterationStats]],
                 offset: timedelta = timedelta(0)) -> tuple[list[Window], LogSpan]:
    """The window of each run among `records` (the logs' stats and iteration records with their
    launches, read once). `offset` is added to every run's times (the log's clock minus the client's);
    `InputError` when that takes one past the dates a clock can show. Times are compared in UTC: two of
    one zone compare on their wall clocks, wrong in a fall-back's repeated hour."""
    starts = [_moved(run, offset) for run in runs]
    per_run: list[dict[int, tuple[Launch, list[EngineStats | IterationStats]]]] = [{} for _ in runs]
    span = LogSpan()
    for launch, record in records:
        if record.time is None:
            continue
        if isinstance(record, EngineStats):
            span.take(record.time)
        time = utc(record.time)
        for n, (start, end) in enumerate(starts):
            if start <= time <= end:
                per_run[n].setdefault(launch.index, (launch, []))[1].append(record)
    windows = []
    for run, launches in zip(runs, per_run, strict=True):
        window = Window(run)
        most = 0
        for launch, found in launches.values():
            lines = sum(isinstance(r, EngineStats) for r in found)
            if not lines:
                continue  # iteration lines alone: no stats line of the launch in the window
            if same_model(launch.model_name, run.model):
                if lines > most:
                    window.launch, window.records, most = launch, found, lines
            else:
                name = launch.model_name or "?"
                window.other_models[name] = window.other_models.get(name, 0) + lines
        windows.append(window)
    return windows, span


@dataclass(frozen=True)
class Measures:
    """The server's side of one run (None: no line gave it)."""

    lines: int
    """Stats lines in the window (all engines)."""
    samples: int
    """Timestamps among them (an engine's line each)."""
    running_median: float | None
    running_p10: float | None
    running_p90: float | None
    running_max: int | None
    waiting_share: float | None
    """Share of the samples with a request waiting (0..1)."""
    waiting_max: int | None
    waiting_below_cap: float | None
    """Share of the samples with a request waiting while fewer than max-num-seqs ran (0..1): the
    scheduler held requests back for another reason than the sequence cap (KV cache blocks, mostly)."""
    preemptions: int | None
    """Sum of the lines' `Preemptions:` fields (None: no line has one; vLLM 0.32 prints none)."""
    kv_peak_pct: float | None
    prefix_hit_pct: float | None
    """The last line's prefix cache hit rate in the window (vLLM's own is over its recent requests)."""
    mm_hit_pct: float | None
    server_gen_tok_s: float | None
    """Mean over the samples of the summed `Avg generation throughput`."""
    max_num_seqs: int | None
    """The launch's `--max-num-seqs` (its arguments, else the engine's config line)."""
    server_tbt_ms: float | None = None
    """The time between a stream's tokens, from the log: `summary`'s over the window (None: no figure)."""
    server_tbt_from: TbtFrom | None = None
    """What `server_tbt_ms` rests on: the iteration lines' cadence or the stats lines' Running."""


@dataclass(frozen=True)
class Sample:
    """One timestamp's stats lines (an engine's each) added up (None: no line gave it)."""

    time: datetime
    """The first line's, in its zone."""
    engines: int
    running: float | None
    waiting: int | None
    generation: float | None
    kv_pct: float | None
    """The highest of the engines'."""


def _total(values: list[Any]) -> Any:
    found = [v for v in values if v is not None]
    return sum(found) if found else None


def samples(lines: list[EngineStats]) -> list[Sample]:
    """`lines` by timestamp, in the order of their first line (a line without a time is no sample)."""
    by_time: dict[datetime, tuple[datetime, list[EngineStats]]] = {}
    for line in lines:  # by UTC time: in a fall-back's repeated hour, lines an hour apart are equal
        if line.time is not None:
            by_time.setdefault(utc(line.time), (line.time, []))[1].append(line)
    found = []
    for time, group in by_time.values():
        running = _total([e.running for e in group])
        kv = [e.kv_cache_usage_pct for e in group if e.kv_cache_usage_pct is not None]
        found.append(Sample(time, len(group), None if running is None else float(running),
                            _total([e.waiting for e in group]),
                            _total([e.generation_throughput for e in group]), max(kv) if kv else None))
    return found


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def max_num_seqs(launch: Launch | None) -> int | None:
    """The launch's max-num-seqs: from its `non-default args:` line, else the start-up facts."""
    if launch is None:
        return None
    for value in ((launch.args or {}).get("max_num_seqs"), launch.facts.get("max_num_seqs")):
        if isinstance(value, int) and not isinstance(value, bool):  # a damaged line's 'lots' is no cap
            return value
    return None


def measure(window: Window) -> Measures:
    """The numbers of `window`."""
    lines = window.lines
    found = samples(lines)
    cap = max_num_seqs(window.launch)
    running = [s.running for s in found if s.running is not None]
    waiting = [s.waiting for s in found if s.waiting is not None]
    held = sum(1 for s in found if s.waiting and (cap is None or (s.running or 0) < cap * s.engines))
    gen = [s.generation for s in found if s.generation is not None]
    kv = [s.kv_pct for s in found if s.kv_pct is not None]
    tbt = _tbt(window)
    pre = [e.extra["preemptions"] for e in lines if "preemptions" in e.extra]
    prefix = [e.prefix_cache_hit_rate_pct for e in lines if e.prefix_cache_hit_rate_pct is not None]
    mm = [e.mm_cache_hit_rate_pct for e in lines if e.mm_cache_hit_rate_pct is not None]
    return Measures(
        lines=len(lines),
        samples=len(found),
        running_median=statistics.median(running) if running else None,
        running_p10=_pct(running, 0.1) if running else None,
        running_p90=_pct(running, 0.9) if running else None,
        running_max=int(max(running)) if running else None,
        waiting_share=sum(1 for w in waiting if w > 0) / len(waiting) if waiting else None,
        waiting_max=max(waiting) if waiting else None,
        waiting_below_cap=held / len(waiting) if waiting else None,
        preemptions=int(sum(pre)) if pre else None,
        kv_peak_pct=max(kv) if kv else None,
        prefix_hit_pct=prefix[-1] if prefix else None,
        mm_hit_pct=mm[-1] if mm else None,
        server_gen_tok_s=statistics.fmean(gen) if gen else None,
        max_num_seqs=cap,
        server_tbt_ms=tbt[0],
        server_tbt_from=tbt[1],
    )


def _tbt(window: Window) -> tuple[float | None, TbtFrom | None]:
    """`summary`'s time between tokens over the window's lines and where it came from."""
    launch = window.launch
    if launch is None or not window.records:
        return None, None
    groups = summarize((launch, e) for e in window.records).groups
    return (groups[0].tbt_ms, groups[0].tbt_from) if groups else (None, None)


COMPONENT = "vllm"
"""The component's label (a report's `scenario.stack[].metadata.label` names it where it has one)."""


def _statistics(values: list[float], units: str) -> dict[str, Any]:
    ordered = sorted(values)
    out: dict[str, Any] = {"units": units, "mean": statistics.fmean(ordered), "min": ordered[0]}
    for name, q in (("p10", 0.1), ("p50", 0.5), ("p90", 0.9), ("p99", 0.99)):
        out[name] = quantile_sorted(ordered, q)
    out["max"] = ordered[-1]
    if len(ordered) > 1:
        out["stddev"] = statistics.stdev(ordered)
    return out


def observability_partial(window: Window) -> dict[str, Any]:
    """The `results.observability` partial of `window`'s run (no component without a stats line)."""
    found = sorted(samples(window.lines), key=lambda s: utc(s.time))
    running = [(s.time, s.running) for s in found if s.running is not None]
    waiting = [(s.time, float(s.waiting)) for s in found if s.waiting is not None]
    kv = [(s.time, s.kv_pct) for s in found if s.kv_pct is not None]
    aggregate: dict[str, Any] = {}
    series: dict[str, Any] = {}
    for name, series_name, units, points in (("running_requests", "num_requests_running", "count", running),
                                             ("waiting_requests", "num_requests_waiting", "count", waiting),
                                             ("kv_cache_usage", "kv_cache_usage", "percent", kv)):
        if points:
            aggregate[name] = _statistics([v for _, v in points], units)
            series[series_name] = {"units": units, "series": [{"ts": t.isoformat(), "value": v}
                                                              for t, v in points]}
    components = [{"component_label": COMPONENT, "aggregate": aggregate, "time_series": series}] if series \
        else []
    return {"results": {"observability": {"components": components}}}


# The verdicts' thresholds (`judge`; docs/audit.md's table says them in words).
KV_FULL_PCT = 80.0
SATURATED_SHARE = 0.5
CLIENT_BOUND_RATIO = 0.75
CLIENT_BOUND_WAITING = 0.1
TBT_DIFF_SHARE = 0.15


@dataclass(frozen=True)
class Verdict:
    kind: str
    """`ok`, `another model`, `absent`, `idle`, `capped by max-num-seqs`, `KV-throttled`, `queueing`,
    `time between tokens differs`, `client-bound`."""
    why: str
    """The numbers behind it, one line."""


def _num(value: float | None) -> str:
    return "?" if value is None else f"{value:g}"


def client_tbt(run: Run) -> tuple[str, float] | None:
    """The client's time between tokens: its mean ITL, else its mean TPOT (name, ms)."""
    if run.itl_ms is not None:
        return "ITL", run.itl_ms
    if run.tpot_ms is not None:
        return "TPOT", run.tpot_ms
    return None


def judge(window: Window, m: Measures) -> list[Verdict]:
    """The verdicts on `window`'s run, from its measures `m`."""
    run = window.run
    if not window.lines:
        if window.other_models:
            names = ", ".join(f"{name} ({n} lines)" for name, n in sorted(window.other_models.items()))
            return [Verdict("another model", f"the benchmark's model is {run.model}; the log's in the "
                                             f"window: {names}")]
        return [Verdict("absent", "no stats line of the server in the window "
                                  f"({run.start:%m-%d %H:%M:%S} to {run.end:%H:%M:%S})")]
    if not m.running_max and not m.server_gen_tok_s:
        return [Verdict("idle", f"{m.lines} stats lines in the window, Running 0 and no tokens generated")]
    out: list[Verdict] = []
    asked = run.concurrency
    shown = (f"Running median {_num(m.running_median)} (p10 {_num(m.running_p10)}, p90 "
             f"{_num(m.running_p90)})")
    if asked is not None and m.max_num_seqs is not None and asked > m.max_num_seqs:
        out.append(Verdict("capped by max-num-seqs", f"asked {asked} concurrent, --max-num-seqs "
                                                     f"{m.max_num_seqs}; {shown}"))
    waiting = m.waiting_share or 0.0
    held = m.waiting_below_cap or 0.0
    if (m.kv_peak_pct is not None and m.kv_peak_pct >= KV_FULL_PCT and held > 0) or m.preemptions:
        pre = f", {m.preemptions} preemptions" if m.preemptions else ""
        cap = f"--max-num-seqs {m.max_num_seqs}" if m.max_num_seqs is not None else "the cap"
        out.append(Verdict("KV-throttled", f"KV cache peak {_num(m.kv_peak_pct)}%, requests waiting with "
                                           f"fewer running than {cap} in {held:.0%} of the samples{pre}; "
                                           f"{shown}"))
    if waiting >= SATURATED_SHARE:
        out.append(Verdict("queueing", f"requests waiting in {waiting:.0%} of the samples (up to "
                                       f"{_num(m.waiting_max)}); the run measured a saturated server"))
    client = client_tbt(run)
    if client is not None and client[1] > 0 and m.server_tbt_ms is not None \
            and abs(m.server_tbt_ms - client[1]) > TBT_DIFF_SHARE * client[1]:
        how = TBT_HOW[m.server_tbt_from or "stats lines"]
        out.append(Verdict("time between tokens differs",
                           f"the log's {m.server_tbt_ms:.2f} ms ({how}) against the client's mean "
                           f"{client[0]} {client[1]:.2f} ms ({m.server_tbt_ms / client[1] - 1:+.0%})"))
    can = asked if asked is None or m.max_num_seqs is None else min(asked, m.max_num_seqs)
    if can is not None and m.running_median is not None and m.running_median < CLIENT_BOUND_RATIO * can \
            and waiting < CLIENT_BOUND_WAITING:
        out.append(Verdict("client-bound", f"{shown} where {can} could run, requests waiting in "
                                           f"{waiting:.0%} of the samples"))
    return out or [Verdict("ok", f"{shown}" + (f" for {asked} asked" if asked is not None else ""))]


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


LABELLED_RUNS = 16
"""Runs drawn each with its labels and verdicts; past them the figure keeps its width."""
_RUN_IN = 1.6
"""Inches per labelled run; 2.5 more for the axis and the legend."""
MAX_WIDTH_IN = _RUN_IN * LABELLED_RUNS + 2.5

_COLORS = {"ok": "C2", "client-bound": "C0", "idle": "0.5", "absent": "0.5", "another model": "0.5"}
"""A run's bar colour by its first verdict; every other verdict (a server limit) is red."""
_LEGEND = {"C2": "ok", "C0": "client-bound", "0.5": "idle, absent or another model", "C3": "a server limit"}


def build_audit_figure(audits: list[Audited]) -> Figure:
    """The figure of the audit (nothing is written)."""
    require_matplotlib()
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch
    from matplotlib.ticker import MaxNLocator

    labelled = len(audits) <= LABELLED_RUNS
    width = min(MAX_WIDTH_IN, max(6.0, _RUN_IN * len(audits) + 2.5))
    fig = Figure(figsize=(width, 5.5), layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    runs = [a.window.run for a in audits]
    measures = [a.measures for a in audits]
    colors = [_COLORS.get(a.verdicts[0].kind, "C3") for a in audits]
    xs = range(1, len(audits) + 1)

    asked = [(x, r.concurrency) for x, r in zip(xs, runs, strict=True) if r.concurrency is not None]
    ax.bar([x - 0.2 for x, _ in asked], [c for _, c in asked], width=0.38, fill=False, edgecolor="black",
           linewidth=1.2 if labelled else 0.5, label="asked")
    ran = [(x, m, c) for x, m, c in zip(xs, measures, colors, strict=True) if m.running_median is not None]
    medians = [m.running_median or 0.0 for _, m, _ in ran]
    ax.bar([x + 0.2 for x, _, _ in ran], medians, width=0.38, color=[c for _, _, c in ran],
           yerr=[[med - (m.running_p10 or 0.0) for med, (_, m, _) in zip(medians, ran, strict=True)],
                 [(m.running_p90 or 0.0) - med for med, (_, m, _) in zip(medians, ran, strict=True)]],
           capsize=4 if labelled else 0, error_kw={"elinewidth": 1.5 if labelled else 0.5})
    capped = [(x, m.max_num_seqs) for x, m in zip(xs, measures, strict=True) if m.max_num_seqs is not None]
    ax.hlines([n for _, n in capped], [x - 0.45 for x, _ in capped], [x + 0.45 for x, _ in capped],
              colors="C1", linestyles="dashed", label="max-num-seqs")
    top = max([1.0, *(c for _, c in asked), *(m.running_p90 or 0.0 for _, m, _ in ran),
               *(float(n) for _, n in capped)])
    ax.set_ylim(0, top * 1.5)
    title = "Asked concurrency and what the server ran\n(Running in the run's window"
    if labelled:
        for x, a, color in zip(xs, audits, colors, strict=True):
            ax.text(x, 0.97, "\n".join(v.kind for v in a.verdicts), transform=ax.get_xaxis_transform(),
                    ha="center", va="top", fontsize=8, color=color, fontweight="bold")
        ax.set_xticks(list(xs))
        ax.set_xticklabels([f"{x}: {r.label}\n{r.client}" for x, r in zip(xs, runs, strict=True)], fontsize=8)
        title += ")"
    else:
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlim(0.5, len(audits) + 0.5)
        ax.set_xlabel("run (as numbered in the table)")
        title += f"; {len(audits)} runs: too many to label, the colour is each run's first verdict)"
    ax.set_ylabel("concurrent requests")
    ax.set_title(title, loc="left", fontsize=11, fontweight="bold")
    ax.grid(True, axis="y", alpha=0.3)
    handles, _labels = ax.get_legend_handles_labels()
    handles += [Patch(color=c, label=f"running (median, p10-p90): {_LEGEND[c]}")
                for c in _LEGEND if c in colors]
    ax.legend(handles=handles, loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize="small")
    return fig
