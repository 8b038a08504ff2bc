"""`logwatch parse --kind iterations` and `--kind requests`, CSV and JSON lines, on the real run of
tests/data/latency: a row per step, a row per request, the columns docs/offline.md names, no text."""

from __future__ import annotations

import csv
import gzip
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from vllm_logwatch.offline.details import ITERATION_COLUMNS, REQUEST_COLUMNS

DATA = Path(__file__).resolve().parents[2] / "data" / "latency"
DOCS = Path(__file__).resolve().parents[3] / "docs" / "offline.md"
SECRET = "ZQXJ-SECRET-PROMPT"
KEY = json.loads((DATA / "answer_key.json").read_text())


def _parse(*args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "vllm_logwatch", "parse", *args], capture_output=True,
                          text=True, check=False, timeout=60)
    assert done.returncode == 0, done.stderr
    assert SECRET not in done.stdout + done.stderr
    return done.stdout


def _lines(name: str, needle: str) -> int:
    with gzip.open(DATA / name, "rt") as fh:
        return sum(needle in line for line in fh)


@pytest.mark.parametrize("log", ["serve.log.gz", "serve.cri.log.gz"])
def test_iterations_a_row_per_step_in_csv_and_json_lines(log: str) -> None:
    rows = list(csv.DictReader(io.StringIO(_parse(str(DATA / log), "--kind", "iterations", "--csv"))))
    assert len(rows) == _lines(log, "] Engine 000: Iteration(") == 2827
    assert tuple(rows[0]) == ITERATION_COLUMNS
    assert (rows[1]["phase"], rows[1]["generation_requests"], rows[1]["device"]) == ("decode", "1", "CPU")
    records = [json.loads(line) for line in _parse(str(DATA / log), "--kind", "iterations").splitlines()]
    assert [r.pop("kind") for r in records] == ["iteration"] * len(rows)
    assert [str(r["elapsed_ms"]) for r in records] == [r["elapsed_ms"] for r in rows]


def test_requests_a_row_per_request_with_its_end_and_times() -> None:
    text = _parse(str(DATA / "serve.cri.log.gz"), "--kind", "requests", "--csv")
    rows = list(csv.DictReader(io.StringIO(text)))
    assert tuple(rows[0]) == REQUEST_COLUMNS
    assert len(rows) == _lines("serve.log.gz", "Received request ") == 148
    ends: dict[tuple[str, str], int] = {}
    for row in rows:
        ends[row["end"], row["finish_reason"]] = ends.get((row["end"], row["finish_reason"]), 0) + 1
    assert ends == {("complete", "length"): 139, ("complete", "stop"): 5, ("complete", ""): 1,
                    ("aborted", "abort"): 3}
    finished = [float(r["e2e_s"]) for r in rows if r["end"] == "complete"]
    vllm = sum(k["e2e_request_latency_mean_s"] * k["e2e_request_latency_count"] for k in KEY.values())
    assert abs(sum(finished) / vllm - 1) < 0.10  # container stamps: the same measure as the live exporter's
    assert {r["time_resolution_s"] for r in rows} == {"1e-06"}
    text = _parse(str(DATA / "serve.log.gz"), "--kind", "requests")
    plain = [json.loads(line) for line in text.splitlines()]
    assert len(plain) == 148 and {r["time_resolution_s"] for r in plain} == {1}


def test_the_columns_are_documented() -> None:
    text = DOCS.read_text()
    for column in (*ITERATION_COLUMNS, *REQUEST_COLUMNS):
        assert f"`{column}`" in text, column
