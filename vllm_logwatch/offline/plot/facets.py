"""`logwatch plot`'s time panels side by side: one facet per run of launches close in time and of one
model, so files days apart (or of different models) are not slivers at the ends of one long axis;
and the one-line warning when the inputs look unrelated.

Pure: no matplotlib, no numpy.

>>> from datetime import datetime, timedelta
>>> from vllm_logwatch.offline.reading.launches import Launch
>>> t = datetime(2026, 11, 29, 10)
>>> a, b = Launch(0, "a.log", 1, model_name="m"), Launch(1, "b.log", 1, model_name="m")
>>> [f.launches for f in facets({0: (a, t), 1: (b, t + timedelta(days=3))},
...                             {0: t + timedelta(hours=1), 1: t + timedelta(days=3, hours=1)})]
[[0], [1]]
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from ...parsing.stamps import utc
from ..reading.launches import Launch

FACET_GAP = timedelta(hours=6)
"""A silence longer than this between launches starts a facet of its own."""
UNRELATED_GAP = timedelta(days=1)
"""A silence this long between launches (or two models) makes the inputs look unrelated: a warning."""
MAX_FACETS = 6
"""At most this many facets: past it, the closest neighbours share one."""


@dataclass
class Facet:
    launches: list[int]
    """Launch indexes, in time order."""
    start: datetime
    end: datetime
    model: str
    """The launches' model ("" unknown)."""


def facets(launches: dict[int, tuple[Launch, datetime]], ends: dict[int, datetime]) -> list[Facet]:
    """The facets of `launches` (index -> launch, first time drawn) whose last times are `ends`; their
    times in UTC."""
    launches, ends = _in_utc(launches, ends)
    out: list[Facet] = []
    for index, (launch, start) in sorted(launches.items(), key=lambda item: (item[1][1], item[0])):
        end = ends.get(index, start)
        model = launch.model_name or ""
        last = out[-1] if out else None
        if last is not None and start - last.end <= FACET_GAP and (model == last.model or not model
                                                                    or not last.model):
            last.launches.append(index)
            last.end = max(last.end, end)
            last.model = last.model or model
        else:
            out.append(Facet([index], start, end, model))
    while len(out) > MAX_FACETS:  # the two neighbours closest in time share one
        i = min(range(len(out) - 1), key=lambda k: out[k + 1].start - out[k].end)
        left, right = out[i], out.pop(i + 1)
        left.launches += right.launches
        left.end = max(left.end, right.end)
        left.model = left.model if left.model == right.model else ""
    return out


def unrelated(launches: dict[int, tuple[Launch, datetime]], ends: dict[int, datetime],
              drawn: list[Facet]) -> str | None:
    """One line saying why the inputs look unrelated (several models, or a day or more between
    launches), and how they are drawn; None when they look like one run."""
    launches, ends = _in_utc(launches, ends)
    models = sorted({la.model_name for la, _ in launches.values() if la.model_name})
    order = sorted(launches.items(), key=lambda item: (item[1][1], item[0]))
    widest = timedelta(0)
    last_end: datetime | None = None
    for index, (_, start) in order:
        if last_end is not None:
            widest = max(widest, start - last_end)
        end = ends.get(index, start)
        last_end = end if last_end is None else max(last_end, end)
    reasons = []
    if len(models) > 1:
        reasons.append(f"{len(models)} models ({', '.join(models)})")
    if widest >= UNRELATED_GAP:
        reasons.append(f"{widest / timedelta(days=1):.1f} days between launches")
    if not reasons:
        return None
    how = (f"drawn in {len(drawn)} facets side by side, one per run of launches" if len(drawn) > 1
           else "drawn on one time axis")
    return f"warning: these logs look unrelated: {', '.join(reasons)}; {how}"


def _in_utc(launches: dict[int, tuple[Launch, datetime]],
            ends: dict[int, datetime]) -> tuple[dict[int, tuple[Launch, datetime]], dict[int, datetime]]:
    """The times in UTC, to order and subtract: two times of one zone compare on their wall clocks,
    an hour off across a fall-back (`parsing/stamps.py`)."""
    return {i: (la, utc(t)) for i, (la, t) in launches.items()}, {i: utc(t) for i, t in ends.items()}
