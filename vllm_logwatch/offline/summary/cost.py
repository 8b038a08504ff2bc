"""Cost and idle time of launches at a price per GPU-hour (`--gpu-hour-cost`).

A launch's GPU time is its GPU count (tensor x pipeline x data parallel size from its arguments,
`parsing/launchargs.gpu_count`; `--gpus` overrides) x its wall time: from the start of its first stats
window (its first line less one interval) to its last stats line. Start-up before the first stats line
and silence after the last are not in it: vLLM prints nothing while idle, so the log cannot tell
them from a stopped server. Busy: the windows in which tokens were computed (prompt or generation
throughput above 0), one interval each (the live `busy_seconds` counter's rule); idle: the rest.
$/1M tokens: the whole GPU time's cost (idle included: it is paid) per million tokens of the
summary's estimates. Per day: the launches by the UTC day of their first stats line (a launch is
counted whole in the day it started). Pure: a `GroupSummary`'s numbers in.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from ...parsing.stamps import seconds_between


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
        day = (start if start.tzinfo is None else start.astimezone(timezone.utc)).strftime("%Y-%m-%d")
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
