"""`logwatch summary`'s launch facts, MFU columns and context x concurrency matrix, checked against
numbers the test reads from the log lines itself."""

from __future__ import annotations

import json
import math
import re
import statistics
from pathlib import Path

import pytest
from support import TESTS

from vllm_logwatch.cli import main
from vllm_logwatch.offline.summary.build import bucket_of
from vllm_logwatch.offline.summary.matrix import build_matrix

REAL = TESTS / "data" / "real-vllm-cpu" / "serve_20261129T192328Z.log"
STATS = re.compile(r"Avg generation throughput: ([\d.]+) tokens/s, Running: (\d+) reqs, Waiting: \d+ reqs, "
                   r"CPU KV cache usage: ([\d.]+)%")


def summary_json(capsys: pytest.CaptureFixture[str], *files: Path) -> dict:  # type: ignore[type-arg]
    assert main(["summary", *map(str, files), "--json", "--tz", "UTC"]) == 0
    return json.loads(capsys.readouterr().out)  # type: ignore[no-any-return]


def test_facts_in_json(capsys: pytest.CaptureFixture[str]) -> None:
    doc = summary_json(capsys, REAL)
    (launch,) = doc["launches"]
    facts = launch["facts"]
    assert facts["vllm_version"] == "0.32.0" and facts["served_model_name"] == "tiny-llama"
    assert (facts["max_num_seqs"], facts["kv_cache_tokens"], facts["max_concurrency"]) == (16, 524288, 512.0)
    assert (facts["dtype"], facts["enable_prefix_caching"], facts["tensor_parallel_size"]) == (
        "bfloat16", True, 1)
    assert launch["args"]["max_num_seqs"] == 16 and launch["args"]["enable_prefix_caching"] is True
    assert "estimate" in doc["matrix_caveat"]


def test_matrix_equals_one_computed_from_the_lines(capsys: pytest.CaptureFixture[str]) -> None:
    doc = summary_json(capsys, REAL)
    cells = {(c["context"], c["running"]): c for c in doc["groups"][0]["matrix"]["cells"]}
    by_cell: dict[tuple[str, str], list[float]] = {}
    streams: dict[tuple[str, str], list[int]] = {}
    before = 0
    for m in STATS.finditer(REAL.read_text()):
        gen, running, kv = float(m.group(1)), int(m.group(2)), float(m.group(3))
        held = running > 0 and before > 0 and bucket_of(before) == bucket_of(running)
        before = running
        if not held:  # the count (its bucket) did not hold the whole interval: in no cell
            continue
        tokens = kv / 100 * 524288 / running
        power = max(7, round(math.log2(tokens))) if tokens > 0 else 7
        row = f"{(1 << power) // 1024}K" if power >= 10 else str(1 << power)
        lo, hi = bucket_of(running)
        by_cell.setdefault((row, str(lo) if lo == hi else f"{lo}-{hi}"), []).append(gen)
        streams.setdefault((row, str(lo) if lo == hi else f"{lo}-{hi}"), []).append(running)
    assert by_cell.keys() == cells.keys()
    for key, gens in by_cell.items():
        assert cells[key]["intervals"] == len(gens)
        assert cells[key]["gen_tps_median"] == statistics.median(gens), key
        assert cells[key]["tbt_ms"] == pytest.approx(1000 * sum(streams[key]) / sum(gens), abs=0.01), key


def test_no_matrix_without_kv_size(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    log = tmp_path / "serve.log"
    log.write_text("".join(line for line in REAL.read_text().splitlines(keepends=True)
                           if "KV cache size" not in line))
    doc = summary_json(capsys, log)
    assert doc["groups"][0]["matrix"] is None
    assert main(["summary", str(log), "--tz", "UTC"]) == 0
    text = capsys.readouterr().out
    assert "Context x concurrency" not in text and "Launch facts" in text


def test_mfu_columns(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    log = tmp_path / "serve.log"
    lines = []
    for i, (tf, gb) in enumerate([(1.5, 100.0), (2.5, 300.0), (3.5, 200.0)]):
        stamp = f"12-01 10:00:{10 * i:02d}"
        lines.append(f"(APIServer pid=1) INFO {stamp} [loggers.py:335] Engine 000: Avg prompt throughput: "
                     "1.0 tokens/s, Avg generation throughput: 10.0 tokens/s, Running: 1 reqs, "
                     "Waiting: 0 reqs, GPU KV cache usage: 1.0%\n")
        lines.append(f"(APIServer pid=1) INFO {stamp} [perf.py:1725] Engine 000: MFU: {tf} TF/s/device "
                     f"{gb} GB/s/device\n")
    log.write_text("".join(lines))
    mfu = summary_json(capsys, log)["groups"][0]["mfu"]
    assert (mfu["lines"], mfu["tflops_median"], mfu["gbps_median"]) == (3, 2.5, 200.0)
    assert main(["summary", str(log), "--tz", "UTC"]) == 0
    assert "MFU (--enable-mfu-metrics)" in capsys.readouterr().out


def test_build_matrix_rows_and_columns() -> None:
    m = build_matrix([1, 2, 16, 0], [0.4, 3.2, 100.0, 5.0], [10.0, 20.0, 30.0, 40.0], 4096, 1)
    assert m is not None
    assert [(c.context, c.running, c.tokens_per_request_median) for c in m.cells] == [
        ("128", "1", 16.4), ("128", "2", 65.5), ("256", "9-16", 256.0)]
    assert build_matrix([0], [1.0], [1.0], 4096, 1) is None
