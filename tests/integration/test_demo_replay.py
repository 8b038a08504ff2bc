"""`logwatch demo` reads as a replay: the page and the status say so (which pass, why each pass ends
with a failure), the engines table never falls back to "No stats line yet" between passes, and the
history has a gap (a row of nulls) where one pass ends and the next begins, so the charts break the
line there instead of drawing a diagonal."""

from __future__ import annotations

from typing import Any

import httpx
from support import poll_until

from vllm_logwatch.commands.demo import REPLAYED_FAILURE


def status(base: str) -> dict[str, Any]:
    body: dict[str, Any] = httpx.get(f"{base}/api/v1/status", timeout=5).json()
    return body


def test_passes_are_seamless_marked_as_a_replay_and_gaps_are_gaps(demo: str) -> None:
    poll_until(lambda: bool(status(demo)["engines"]), 20, "the first stats line")
    empty: list[int] = []

    def third_pass() -> bool:
        now = status(demo)
        if not now["engines"]:
            empty.append(now["replay"]["pass"])
        return bool(now["replay"]["pass"] >= 3)

    poll_until(third_pass, 30, "the third pass", interval=0.02)
    assert empty == [], f"'No stats line yet' shown between passes (during passes {sorted(set(empty))})"
    replay = status(demo)["replay"]
    assert replay["log"] == "serve_20261129T192328Z.log" and replay["speed"] == 100
    assert replay["failure"] == REPLAYED_FAILURE

    page = httpx.get(demo, timeout=5).text
    assert '<span id="replay-badge" class="badge replay"' in page
    assert "EngineDeadError" in page and "pass <span data-key=\"replay.pass\"" in page

    history = httpx.get(f"{demo}/api/v1/history", timeout=5).json()
    engine = history["engines"]["0"]
    assert engine["gaps"], "no gap between passes"
    for at in engine["gaps"]:
        i = engine["time"].index(at)
        assert engine["generation_throughput"][i] is None and engine["running"][i] is None
        assert engine["generation_throughput"][i - 1] is not None  # a real point before the gap
        assert engine["time"][i + 1] - engine["time"][i - 1] > 10  # a silence of passes, not an interval
