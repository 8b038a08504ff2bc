"""The token rule (`exporting/tokens.py`), through the exporter's per-engine state."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import pytest

from vllm_logwatch.exporting.engine_state import EngineState
from vllm_logwatch.parsing.events import EngineStats

T0 = datetime(2026, 11, 1, tzinfo=UTC)


def _lines(spec: list[tuple[int | None, float, float]]) -> list[EngineStats]:
    out, t = [], T0
    for step, prompt, generation in spec:
        if step is not None:
            t += timedelta(seconds=step)
        out.append(EngineStats(time=None if step is None else t, prompt_throughput=prompt,
                               generation_throughput=generation, running=1, waiting=0))
    return out


@pytest.mark.parametrize("huge", [9.99e306, 2e9, math.inf])
def test_a_throughput_past_any_engines_counts_no_token(huge: float) -> None:
    """9.99e306 tokens/s made the total inf, then NaN; no engine computes 1e9 tokens a second, so such a
    line is unreadable and counts nothing."""
    lines = _lines([(10, huge, huge)] * 3 + [(10, 3.0, 3.0)] * 3)
    one = EngineState()
    read = [one.apply_stats(e, 0.0) for e in lines]
    assert one.tokens.generation_tokens.value == 90.0  # the good lines, 10 s each
    assert read == [False] * 3 + [True] * 3


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
    assert state.tokens.generation_tokens.value == 20 * 2 * 100 * 10
