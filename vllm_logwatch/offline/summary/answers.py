"""The summary's answers to operators' questions, from its groups and launches: capacity at a target
speed per stream (`matrix.py`), cost and idle time at a price per GPU-hour, and the Pareto view
(per-stream tok/s against total tok/s per GPU). `summary` and `compare` print them (`answer_lines`)
and put them in their JSON (`answers_json`). Pure. docs/offline.md ("Answers") says how each is
reckoned; `ANSWER_NOTES` says it in the output.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from ...parsing.launchargs import gpu_count
from ...parsing.stamps import seconds_between
from ...shown import shown_number as _f
from ..reading.launches import Launch
from .build import GroupSummary, Summary
from .matrix import KV_FULL_PCT, CapacityAnswer, answer

ANSWER_NOTES: dict[str, str] = {
    "capacity": "the largest running count whose median stream (generation tok/s / running, over the "
    "intervals with nothing waiting) gets the target; limit: speed (a higher count was seen with "
    "nothing waiting and is slower), max-num-seqs (the answer is --max-num-seqs), KV cache (above it "
    f"requests waited with the KV cache at least {KV_FULL_PCT:.0f}% full), load (nothing higher was "
    "asked); context rows: the matrix's estimate of tokens held per request",
    "cost": "GPUs x wall time (first stats window to last stats line: start-up and trailing silence "
    "are not in the log's stats) x the price; busy: windows in which tokens were computed; $/1M: the "
    "whole cost (idle included) per million tokens; per day: a launch counts whole in the UTC day it "
    "started",
}


@dataclass
class Asked:
    """What the command line asked for: `--target-tps`, `--gpu-hour-cost`, `--gpus`."""

    target_tps: float | None = None
    gpu_hour_cost: float | None = None
    gpus: int | None = None


@dataclass
class CostRow:
    label: str
    """The launch's label, or a day (YYYY-MM-DD)."""
    gpus: int | None
    """GPUs (None: a day of launches with different counts)."""
    gpu_hour_cost: float
    wall_hours: float
    busy_hours: float
    prompt_tokens: float
    generation_tokens: float
    cost: float
    """GPU-hours x price, in the price's currency."""

    @property
    def busy_share(self) -> float | None:
        return self.busy_hours / self.wall_hours if self.wall_hours > 0 else None

    @property
    def idle_hours(self) -> float:
        return max(0.0, self.wall_hours - self.busy_hours)

    @property
    def idle_cost(self) -> float:
        share = self.busy_share
        return 0.0 if share is None else self.cost * (1.0 - min(1.0, share))

    @property
    def per_million_generated(self) -> float | None:
        return self.cost / self.generation_tokens * 1e6 if self.generation_tokens > 0 else None

    @property
    def per_million_prompt(self) -> float | None:
        return self.cost / self.prompt_tokens * 1e6 if self.prompt_tokens > 0 else None

    def as_json(self) -> dict[str, Any]:
        return {"label": self.label, "gpus": self.gpus, "gpu_hour_cost": self.gpu_hour_cost,
                "wall_hours": self.wall_hours, "busy_hours": self.busy_hours, "busy_share": self.busy_share,
                "idle_hours": self.idle_hours, "idle_cost": self.idle_cost, "cost": self.cost,
                "prompt_tokens": self.prompt_tokens, "generation_tokens": self.generation_tokens,
                "usd_per_million_generated": self.per_million_generated,
                "usd_per_million_prompt": self.per_million_prompt}


def cost_row(label: str, start: datetime | None, end: datetime | None, interval: float | None,
             busy_windows: int, prompt_tokens: float, generation_tokens: float, gpus: int,
             gpu_hour_cost: float) -> CostRow | None:
    """A launch's row; None without stamps or an interval (no wall time to price).

    >>> from datetime import datetime
    >>> r = cost_row("x", datetime(2026, 1, 1, 0, 0, 2), datetime(2026, 1, 1, 1, 0, 0), 2.0, 900,
    ...              1e6, 4e6, 2, 3.0)
    >>> r.wall_hours, r.busy_hours, r.cost, r.per_million_generated, r.idle_cost
    (1.0, 0.5, 6.0, 1.5, 3.0)
    """
    if start is None or end is None or interval is None:
        return None
    wall = seconds_between(start, end) + interval
    return CostRow(label=label, gpus=gpus, gpu_hour_cost=gpu_hour_cost, wall_hours=wall / 3600.0,
                   busy_hours=busy_windows * interval / 3600.0, prompt_tokens=prompt_tokens,
                   generation_tokens=generation_tokens, cost=gpus * wall / 3600.0 * gpu_hour_cost)


def daily_rows(rows: list[tuple[datetime, CostRow]]) -> list[CostRow]:
    """The launches' rows summed per UTC day of their start (naive stamps: taken as UTC)."""
    days: dict[str, list[CostRow]] = {}
    for start, row in rows:
        day = (start if start.tzinfo is None else start.astimezone(UTC)).strftime("%Y-%m-%d")
        days.setdefault(day, []).append(row)
    out = []
    for day, members in sorted(days.items()):
        counts = {r.gpus for r in members}
        out.append(CostRow(
            label=day, gpus=counts.pop() if len(counts) == 1 else None,
            gpu_hour_cost=members[0].gpu_hour_cost,
            wall_hours=sum(r.wall_hours for r in members), busy_hours=sum(r.busy_hours for r in members),
            prompt_tokens=sum(r.prompt_tokens for r in members),
            generation_tokens=sum(r.generation_tokens for r in members), cost=sum(r.cost for r in members)))
    return out


def launch_gpus(launch: Launch | None, override: int | None) -> int:
    """`--gpus`, else the launch's TP x PP x DP, else 1."""
    if override is not None:
        return override
    counted = gpu_count(launch.facts) if launch is not None else None
    return counted or 1


def _pairs(summary: Summary) -> list[tuple[Launch | None, GroupSummary]]:
    by_index = {la.index: la for la in summary.launches}
    return [(by_index.get(g.launch_index) if g.launch_index is not None else None, g) for g in summary.groups]


def _max_num_seqs(launch: Launch | None) -> int | None:
    value = launch.facts.get("max_num_seqs") if launch is not None else None
    return value if isinstance(value, int) else None


def capacity_answers(summary: Summary, target: float) -> list[tuple[GroupSummary, CapacityAnswer]]:
    """Each group's answer, then its context rows' (groups of one launch only)."""
    out = []
    for launch, g in _pairs(summary):
        for curve in g.capacity:
            out.append((g, answer(curve, target, _max_num_seqs(launch))))
    return out


def cost_rows(summary: Summary, price: float, gpus: int | None) -> tuple[list[CostRow], list[CostRow]]:
    """Per launch (groups of one launch; by launch only), and per day."""
    rows: list[tuple[datetime, CostRow]] = []
    if summary.by != "launch":
        return [], []
    for launch, g in _pairs(summary):
        if launch is None or g.start is None:
            continue
        row = cost_row(g.launch, g.start, g.end, g.interval_seconds, g.busy_windows, g.prompt_tokens,
                       g.generation_tokens, launch_gpus(launch, gpus), price)
        if row is not None:
            rows.append((g.start, row))
    return [r for _, r in rows], daily_rows(rows)


def pareto(summary: Summary, gpus: int | None) -> list[dict[str, Any]]:
    """Per group of one launch: its points (running, per-stream tok/s, total tok/s per GPU), nothing
    waiting."""
    out = []
    for launch, g in _pairs(summary):
        if launch is None or not g.capacity:
            continue
        n = launch_gpus(launch, gpus)
        points = [{"running": p.running, "intervals": p.intervals, "per_stream_tps": p.per_stream_median,
                   "total_tps_per_gpu": p.total_median / n}
                  for p in g.capacity[0].points
                  if p.per_stream_median is not None and p.total_median is not None]
        out.append({"launch": g.launch, "engine": g.engine, "gpus": n, "points": points})
    return out


def _n(intervals: int) -> str:
    return f"{intervals} interval{'' if intervals == 1 else 's'}"


def _evidence(a: CapacityAnswer, launch_max: int | None) -> str:
    if a.limit == "max-num-seqs":
        return f"--max-num-seqs {launch_max}"
    if a.above is None:
        top = a.point.running if a.point is not None else 0
        return f"nothing above {top} running was seen"
    if a.limit == "speed":
        return (f"at {a.above.running}: {_f(a.above.per_stream_median)} tok/s per stream "
                f"({_n(a.above.intervals)})")
    return (f"at {a.above.running}: {_n(a.above.waiting_intervals)} waiting, "
            f"KV {_f(a.above.waiting_kv_median_pct)}%")


CAPACITY_HEAD = ("launch", "context", "concurrency", "intervals", "per-stream tok/s", "total tok/s",
                 "limit", "evidence")
COST_HEAD = ("launch", "GPUs", "wall h", "busy %", "idle h", "idle cost", "cost", "per 1M gen",
             "per 1M prompt")


def capacity_table(summary: Summary, target: float) -> list[list[str]]:
    maxima = {g.launch: _max_num_seqs(la) for la, g in _pairs(summary)}
    rows = []
    for g, a in capacity_answers(summary, target):
        p = a.point
        name = g.launch if summary.by != "engine" else f"{g.launch} {g.engine}"
        rows.append([name,
                     a.context or "all", "-" if a.concurrency is None else str(a.concurrency),
                     "-" if p is None else str(p.intervals), _f(p.per_stream_median if p else None),
                     _f(p.total_median if p else None), a.limit, _evidence(a, maxima.get(g.launch))])
    return rows


def cost_cells(r: CostRow) -> list[str]:
    share = r.busy_share
    return [r.label, "-" if r.gpus is None else str(r.gpus), _f(r.wall_hours, 3),
            "-" if share is None else f"{share * 100:.0f}", _f(r.idle_hours, 3), _f(r.idle_cost, 4),
            _f(r.cost, 4), _f(r.per_million_generated, 4), _f(r.per_million_prompt, 4)]


def answer_lines(summary: Summary, asked: Asked, table: Any, h: str) -> list[str]:
    """The capacity and cost sections (`table(head, rows)` draws a table, `h` heads a title)."""
    out: list[str] = []
    if asked.target_tps is not None:
        title = f"Capacity at {asked.target_tps:g} tok/s per stream (median stream, nothing waiting)"
        out += ["", f"{h}{title}", ""]
        rows = capacity_table(summary, asked.target_tps)
        out += table(CAPACITY_HEAD, rows) if rows else ["(nothing ran)"]
    if asked.gpu_hour_cost is not None:
        launches, days = cost_rows(summary, asked.gpu_hour_cost, asked.gpus)
        out += ["", f"{h}Cost at {asked.gpu_hour_cost:g} per GPU-hour", ""]
        if summary.by != "launch":
            out.append(f"(launches are priced with --by launch only, not --by {summary.by})")
        elif not launches:
            out.append("(no launch with stamped stats lines: no wall time to price)")
        else:
            out += table(COST_HEAD, [cost_cells(r) for r in launches])
            out += ["", f"{h}Cost per day (UTC)", ""]
            out += table(("day", *COST_HEAD[1:]), [cost_cells(r) for r in days])
    return out


def answer_notes(asked: Asked, bullet: str) -> list[str]:
    asked_for = (("capacity", asked.target_tps is not None), ("cost", asked.gpu_hour_cost is not None))
    keys = [k for k, on in asked_for if on]
    return [f"{bullet}{k}: {ANSWER_NOTES[k]}" for k in keys]


def answers_json(summary: Summary, asked: Asked) -> dict[str, Any]:
    """The answers as JSON-able data: the Pareto points always, capacity and cost when asked."""
    doc: dict[str, Any] = {"pareto": pareto(summary, asked.gpus)}
    if asked.target_tps is not None:
        doc["capacity"] = [
            {"launch": g.launch, "engine": g.engine, "context": a.context, "target_tps": a.target_tps,
             "concurrency": a.concurrency, "limit": a.limit,
             "point": None if a.point is None else vars(a.point),
             "above": None if a.above is None else vars(a.above)}
            for g, a in capacity_answers(summary, asked.target_tps)]
    if asked.gpu_hour_cost is not None:
        launches, days = cost_rows(summary, asked.gpu_hour_cost, asked.gpus)
        doc["cost"] = {"launches": [r.as_json() for r in launches], "days": [r.as_json() for r in days]}
    doc["notes"] = ANSWER_NOTES
    return doc
