"""`logwatch parse` writes no NaN or infinity: JSON has neither, so each is `null` in JSON lines (at any
depth: `extra`, per-position rates) and an empty cell in CSV, on the fast lane and the general path."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from vllm_logwatch.cli import main

HDR = "(APIServer pid=1) INFO 11-29 19:26:05 [loggers.py:335] "
HUGE = "9" * 400 + ".0"  # read as a float: infinity
LINES = [
    # the common stats line (the fast lane renders it) with numbers too large for a float
    f"Engine 000: Avg prompt throughput: {HUGE} tokens/s, Avg generation throughput: 1.0 tokens/s, "
    f"Running: 1 reqs, Waiting: 0 reqs, GPU KV cache usage: {HUGE}%, Prefix cache hit rate: {HUGE}%",
    # the general path: an infinity and a NaN spelled out, in fields and in `extra`
    "Engine 000: Avg prompt throughput: inf tokens/s, Avg generation throughput: nan tokens/s, "
    "Running: 1 reqs, Waiting: 0 reqs, GPU KV cache usage: 1.0%, Foo: inf, Bar: -inf",
    "Engine 000: SpecDecoding metrics: Mean acceptance length: inf, Accepted: 1 tokens, Drafted: 2 tokens, "
    "Per-position acceptance rate: inf, nan, Foo: -inf",
    "Engine 000: MFU: inf TF/s/device nan GB/s/device",
    "KV Transfer metrics: Avg xfer time (ms)=inf, foo=nan, C={'x': 1e999}",
]


def _strict(line: str) -> object:
    def refuse(constant: str) -> object:
        raise AssertionError(f"{constant} in {line[:120]}")
    return json.loads(line, parse_constant=refuse)


@pytest.mark.parametrize("kind", ["stats", "all"])
def test_json_lines_hold_null_for_each_nan_and_infinity(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                        kind: str) -> None:
    log = tmp_path / "serve.log"
    log.write_text("".join(HDR + line + "\n" for line in LINES))
    assert main(["parse", "--jsonl", "--kind", kind, "--year", "2026", "--tz", "UTC", str(log)]) == 0
    records = [_strict(line) for line in capsys.readouterr().out.splitlines()]
    assert len(records) == (2 if kind == "stats" else 5)
    first = records[0]
    assert isinstance(first, dict)
    fields = ("prompt_throughput", "gpu_kv_cache_usage_pct", "prefix_cache_hit_rate_pct")
    assert [first[name] for name in fields] == [None, None, None]


def test_csv_cells_of_an_infinity_are_empty(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "serve.log"
    log.write_text("".join(HDR + line + "\n" for line in LINES))
    assert main(["parse", "--csv", "--year", "2026", "--tz", "UTC", str(log)]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert [row["prompt_throughput"] for row in rows] == ["", ""]
    assert rows[0]["gpu_kv_cache_usage_pct"] == "" and rows[0]["prefix_cache_hit_rate_pct"] == ""
    assert all("inf" not in v.lower() for k, v in rows[0].items() if k != "file")
    assert "nan" not in rows[1]["extra"].lower()
