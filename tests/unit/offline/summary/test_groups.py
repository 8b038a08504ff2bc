"""The summary's block path (`offline/summary/groups.py`) against the record-at-a-time path it replaces."""

from __future__ import annotations

import math
from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vllm_logwatch.exporting.engine_state import EngineState
from vllm_logwatch.offline.summary.groups import apply_stats_rows
from vllm_logwatch.parsing.events import EngineStats

T0 = datetime(2026, 11, 1, tzinfo=timezone.utc)
THROUGHPUT = st.one_of(st.just(0.0), st.just(math.nan), st.just(math.inf), st.just(-0.0),
                       st.floats(0, 5000, allow_nan=False))
LINE = st.tuples(st.one_of(st.none(), st.sampled_from([0, 1, 5, 9, 10, 11, 14, 15, 16, 20, 30, 61, 200])),
                 THROUGHPUT, THROUGHPUT)
STATES = st.sampled_from([{}, {"exact_times": True}, {"prior": 5.0}, {"stats_interval": 10.0}])


def _lines(spec: list[tuple[int | None, float, float]]) -> list[EngineStats]:
    out, t = [], T0
    for step, prompt, generation in spec:
        if step is not None:
            t += timedelta(seconds=step)
        out.append(EngineStats(time=None if step is None else t, prompt_throughput=prompt,
                               generation_throughput=generation, running=1, waiting=0))
    return out


def _state(a: EngineState) -> tuple[object, ...]:
    return (a.prompt_tokens.value, a.generation_tokens.value, a.stats_lines, list(a._gaps), a._held,
            a._last_time, a.last)


@pytest.mark.integration  # over 0.2 s (a process, or a day of lines): make test, not smoke
@settings(max_examples=150, deadline=None)
@given(st.lists(st.lists(LINE, min_size=1, max_size=30), min_size=1, max_size=4), STATES)
def test_rows_give_the_records_numbers(runs: list[list[tuple[int | None, float, float]]],
                                       kwargs: dict[str, object]) -> None:
    """Runs of lines, each run in one call, equal the lines one at a time: counters to the bit, the
    held first line, the gaps; then a launch ends (`reset`) and the held line is credited alike."""
    one, rows = EngineState(**kwargs), EngineState(**kwargs)  # type: ignore[arg-type]
    every = _lines([line for run in runs for line in run])
    for run in runs:
        lines, every = every[:len(run)], every[len(run):]
        for e in lines:
            one.apply_stats(e, 0.0)
        apply_stats_rows(rows, [e.time for e in lines], [e.prompt_throughput for e in lines],  # type: ignore[misc]
                         [e.generation_throughput for e in lines], lines[-1], 0.0)  # type: ignore[misc]
        assert repr(_state(rows)) == repr(_state(one))
    one.reset()
    rows.reset()
    assert repr(_state(rows)) == repr(_state(one))


def test_block_times_are_the_stamps_datetimes() -> None:
    """`_Times.many` (an hour's later stamps from its datetime) gives what a call per stamp gives, on
    the daylight-saving days of two zones and in UTC: values, offsets and folds."""
    from zoneinfo import ZoneInfo

    from vllm_logwatch.offline.reading.records import _Times
    from vllm_logwatch.parsing.stamps import YearClock

    days = ("10-25", "11-01", "03-08", "03-29")
    stamps = b"".join(f"{day} {h:02d}:{m:02d}:{s:02d}".encode()
                      for day in days for h in range(24) for m in range(0, 60, 7) for s in range(0, 60, 13))
    stamps += b"11-01 01:61:00" + b"11-01 01:05:00"  # a stamp no datetime has, then its hour again
    n = len(stamps) // 14
    for zone in (timezone.utc, ZoneInfo("America/New_York"), ZoneInfo("Europe/Berlin")):
        clocks = [YearClock.for_source(None, zone, 2026, first_stamp="10-25 00:00:00") for _ in range(2)]
        many = _Times(lambda _s, c=clocks[0]: c).many(stamps, 0, n)  # type: ignore[misc]
        one = _Times(lambda _s, c=clocks[1]: c)  # type: ignore[misc]
        expected = [one(stamps[i * 14:(i + 1) * 14]) for i in range(n)]
        assert [(t, t and t.isoformat(), t and t.fold) for t in many] == \
            [(t, t and t.isoformat(), t and t.fold) for t in expected]
