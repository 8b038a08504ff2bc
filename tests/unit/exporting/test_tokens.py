"""The token rule (`exporting/tokens.py`): a run of backlog lines given as columns in one call
(`EngineState.apply_stats_run`, the summary's fast lane) counts what the lines one at a time count."""

from __future__ import annotations

import math
from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vllm_logwatch.exporting.engine_state import EngineState
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
    return (a.prompt_tokens.value, a.generation_tokens.value, a.busy_seconds.value, a.stats_lines,
            a.typical_interval(), a.last)


@pytest.mark.integration  # over 0.2 s: make test, not smoke
@settings(max_examples=150, deadline=None)
@given(st.lists(st.lists(LINE, min_size=1, max_size=30), min_size=1, max_size=4), STATES)
def test_rows_give_the_records_numbers(runs: list[list[tuple[int | None, float, float]]],
                                       kwargs: dict[str, object]) -> None:
    """Runs of lines, each run in one call, equal the lines one at a time: counters to the bit, the
    typical interval; then a launch ends (`reset`) and a held first line is credited alike."""
    one, rows = EngineState(**kwargs), EngineState(**kwargs)  # type: ignore[arg-type]
    every = _lines([line for run in runs for line in run])
    for run in runs:
        lines, every = every[:len(run)], every[len(run):]
        for e in lines:
            one.apply_stats(e, 0.0)
        rows.apply_stats_run([e.time for e in lines], [e.prompt_throughput for e in lines],  # type: ignore[misc]
                             [e.generation_throughput for e in lines], lines[-1], 0.0)  # type: ignore[misc]
        assert repr(_state(rows)) == repr(_state(one))
    one.reset()
    rows.reset()
    assert repr(_state(rows)) == repr(_state(one))


@pytest.mark.parametrize("huge", [9.99e306, 2e9, math.inf])
def test_a_throughput_past_any_engines_counts_no_token(huge: float) -> None:
    """The summary's runs of lines (and the lines one at a time): 9.99e306 tokens/s made the total inf,
    then NaN; no engine computes 1e9 tokens a second, so such a line is unreadable and counts nothing."""
    lines = _lines([(10, huge, huge)] * 3 + [(10, 3.0, 3.0)] * 3)
    one, rows = EngineState(), EngineState()
    read = [one.apply_stats(e, 0.0) for e in lines]
    unread = rows.apply_stats_run([e.time for e in lines], [e.prompt_throughput for e in lines],  # type: ignore[misc]
                                  [e.generation_throughput for e in lines], lines[-1], 0.0)  # type: ignore[misc]
    assert one.generation_tokens.value == rows.generation_tokens.value == 90.0  # the good lines, 10 s each
    assert repr(_state(rows)) == repr(_state(one))
    assert read == [False] * 3 + [True] * 3 and unread == 3


def test_restarts_without_a_banner_keep_the_writers_bounded() -> None:
    """Each restart's pid gets windows of its own (`Writers`), at most `MAX_WRITERS` of them: the one
    silent longest is forgotten, its held line credited; one writer at a time is no second server."""
    from vllm_logwatch.exporting.engine_state import MAX_WRITERS
    state = EngineState()
    for pid in range(20):
        for step in range(2):
            time = T0 + timedelta(seconds=100 * pid + 10 * step)
            state.apply_stats(EngineStats(time=time, pid=pid, generation_throughput=100.0, running=1), 0.0)
    assert len(state.writers.windows) == MAX_WRITERS and state.processes() == 1
    assert state.generation_tokens.value == 20 * 2 * 100 * 10
