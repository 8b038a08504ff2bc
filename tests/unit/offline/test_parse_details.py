"""`logwatch parse --kind iterations` and `--kind requests`, CSV and JSON lines, on the real run of
tests/data/latency: a row per step, a row per request, the columns docs/offline.md names, no text."""

from __future__ import annotations

import csv
import gzip
import io
import json
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from vllm_logwatch.offline.reading import details
from vllm_logwatch.offline.reading.details import ITERATION_COLUMNS, REQUEST_COLUMNS, RequestRows
from vllm_logwatch.parsing.events import RequestLine
from vllm_logwatch.parsing.line import parse_line

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


def test_an_abort_line_ends_the_requests_read_or_one() -> None:
    """A client's request id with commas (vLLM joins an abort's ids with commas): one row, not 800; an
    abort of ids some of which were read ends those, once each."""
    rid = "chatcmpl-" + ",".join(f"x{i}" for i in range(800))
    rows = RequestRows()
    out: list[list[object]] = []
    for text in (f"Received request {rid}: params: SamplingParams(n=1), lora_request: None.",
                 f"Aborted request(s) {rid}-8bcc5583.",
                 "Received request a: params: SamplingParams(n=1), lora_request: None.",
                 "Received request b: params: SamplingParams(n=1), lora_request: None.",
                 "Aborted request(s) a-1a2b3c4d,b-1a2b3c4d,a-1a2b3c4d,never-seen."):
        event = parse_line("(APIServer pid=1) INFO 12-02 10:00:00 [x.py:1] " + text)
        if isinstance(event, RequestLine):
            out += rows.feed(event)
    out += rows.rest()
    assert len(out) == 3 and [r[0] for r in out[1:]] == ["a", "b"]


def test_the_columns_are_documented() -> None:
    text = DOCS.read_text()
    for column in (*ITERATION_COLUMNS, *REQUEST_COLUMNS):
        assert f"`{column}`" in text, column


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_the_range_workers_give_the_general_paths_step_rows(tmp_path: Path, fmt: str) -> None:
    """`parse --kind iterations` renders vLLM's common iteration line in the range workers (and in this
    process for a small file): the same rows as the general parser's, on the real log plus lines the
    pattern leaves to the parser (a compose prefix, an unreadable one) or reads in odd forms (the engine
    core's, a dummy step, encoder counts, a whole-number and an overlong elapsed time)."""
    import io

    from vllm_logwatch.commands.parse import run_parse
    from vllm_logwatch.offline.reading.ranges import Tuning

    real = gzip.decompress((DATA / "serve.log.gz").read_bytes()).decode()
    api = "(APIServer pid=1) INFO 12-02 02:10:2{} [loggers.py:199] Engine 00"
    extra = [
        "vllm-1  | " + api.format(0) + "0: Iteration(9): 0 context requests, 0 context tokens, 2 generation "
        "requests, 2 generation tokens, iteration elapsed time: 3.10 ms, CPU KV cache usage: 0.1%",
        "(EngineCore_DP0 pid=7) INFO 12-02 02:10:21 [core.py:335] Iteration(40): 0 context requests, "
        "0 context tokens, 8 generation requests, 8 generation tokens, iteration elapsed time: 9.87 ms",
        api.format(2) + "1: Iteration(3): 2 context requests, 900 context tokens, 5 generation requests, "
        "5 generation tokens, iteration elapsed time: 31.20 ms (dummy), GPU KV cache usage: 12.5%, "
        "encoder inputs: 2, encoder output embeddings: 1024",
        api.format(3) + "0: Iteration(4): many",
        api.format(4) + "0: Iteration(5): 1 context requests, 7 context tokens, 0 generation requests, "
        "0 generation tokens, iteration elapsed time: 5 ms, xpu KV cache usage: 0.05%",
        api.format(5) + "0: Iteration(6): 0 context requests, 0 context tokens, 0 generation requests, "
        "0 generation tokens, iteration elapsed time: " + "9" * 400 + ".5 ms",
        # a count past Python's 4,300-digit conversion limit: no vLLM count, left unread (no traceback)
        api.format(6) + "0: Iteration(7): 0 context requests, " + "9" * 5000 + " context tokens, "
        "1 generation requests, 1 generation tokens, iteration elapsed time: 3.00 ms",
        api.format(7) + "0: Iteration(0" + "9" * 5000 + "): 0 context requests, 0 context tokens, "
        "1 generation requests, 1 generation tokens, iteration elapsed time: 3.00 ms",
    ]
    log = tmp_path / "serve_20261202_020741.log"
    log.write_text(real + "\n".join(extra) + "\n")

    def parse(tuning: Tuning | None) -> list[str]:
        out = io.StringIO()
        result = run_parse([str(log)], fmt=fmt, kind="iterations", tz="UTC", out=out, tuning=tuning)  # type: ignore[arg-type]
        assert result.counts["iterations"] == 2827 + 5
        return out.getvalue().splitlines()

    general = parse(None)
    assert parse(Tuning()) == general  # one process (a small file)
    workers = Tuning(parallel_min_bytes=1, range_bytes=32 << 10, dense_probe=4 << 10)
    assert parse(workers) == general


def test_no_rows_says_whether_lines_of_the_kind_were_there_but_unread(tmp_path: Path) -> None:
    """Exit 1 with one line: step lines that could not be read are counted and the first named (not
    "vLLM runs without --enable-logging-iteration-details"); a log without any keeps that hint."""
    api = "(APIServer pid=1) INFO 12-02 02:10:2{} [loggers.py:199] Engine 000: Iteration(1): "
    step = "0 context requests, " + "9" * 5000 + " context tokens, 1 generation requests, 1 generation " \
           "tokens, iteration elapsed time: 3.00 ms\n"
    damaged = tmp_path / "damaged.log"
    damaged.write_text("".join(api.format(i) + step for i in range(2)))
    plain = next((DATA.parent / "real-vllm-cpu").glob("serve_*.log"))
    unread = f"2 lines look like iteration lines but could not be read (first: {damaged}, line 1)"
    without = "no iteration lines: vLLM runs without --enable-logging-iteration-details"
    for fmt in ("--csv", "--jsonl"):
        for log, want in ((damaged, unread), (plain, without)):
            done = subprocess.run([sys.executable, "-m", "vllm_logwatch", "parse", str(log), "--kind",
                                   "iterations", fmt], capture_output=True, text=True, check=False,
                                  timeout=60)
            assert done.returncode == 1 and not done.stdout, done.stderr
            assert want in done.stderr and "Traceback" not in done.stderr, done.stderr
            assert done.stderr.count("\n") == 1, done.stderr


def test_requests_past_the_cap_cost_the_same_whatever_the_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    """A log whose requests never end (`--enable-log-requests` without `--enable-log-outputs`) keeps
    every request open: past the cap each new one writes the oldest. That costs the same with a cap of
    1,000 or 50,000 (the oldest was found by walking a dict's deleted front slots: quadratic)."""

    lines = [RequestLine(event="received", request_id=f"r{i}") for i in range(80_000)]

    def per_eviction(cap: int) -> float:
        monkeypatch.setattr(details, "_OPEN_CAP", cap)
        rows = RequestRows()
        for e in lines[:cap]:
            assert rows.feed(e) == []
        start = time.thread_time()  # this thread's CPU time: other processes' load does not count
        written = [row for e in lines[cap:cap + 30_000] for row in rows.feed(e)]
        took = time.thread_time() - start
        assert [row[0] for row in written] == [f"r{i}" for i in range(30_000)]  # the oldest first
        return took

    small = min(per_eviction(1_000) for _ in range(3))
    large = min(per_eviction(50_000) for _ in range(3))
    # Quadratic made it ~50x; a loaded host's cache misses on the larger table measured 3.5x once.
    assert large < 10 * small, (small, large)


def test_a_request_across_a_fall_back_takes_its_seconds_in_utc() -> None:
    """Received at 02:59:55 CEST, ended at 02:00:05 CET (Berlin's clocks went back in between): 10 s,
    not the -3,590 s between the wall clocks."""
    berlin = ZoneInfo("Europe/Berlin")
    rows = RequestRows()
    received = datetime(2026, 10, 25, 2, 59, 55, 1, tzinfo=berlin)
    ended = datetime(2026, 10, 25, 2, 0, 5, 1, fold=1, tzinfo=berlin)
    assert rows.feed(RequestLine(event="received", request_id="r", time=received)) == []
    [row] = rows.feed(RequestLine(event="response", request_id="r", time=ended, finish_reason="stop"))
    assert row[REQUEST_COLUMNS.index("e2e_s")] == 10


def test_one_unreadable_line_is_said_in_the_singular(tmp_path: Path) -> None:
    from vllm_logwatch.offline.reading.events import no_rows_hint, no_stats_hint
    from vllm_logwatch.offline.reading.inputs import resolve_inputs

    damaged = tmp_path / "damaged.log"
    damaged.write_text("(APIServer pid=1) INFO 12-02 02:10:20 [loggers.py:199] Engine 000: Iteration(1): 0 "
                       "context requests, " + "9" * 5000 + " context tokens, 1 generation requests, 1 "
                       "generation tokens, iteration elapsed time: 3.00 ms\n"
                       "(APIServer pid=1) INFO 12-02 02:10:25 [loggers.py:259] Engine 000: Avg prompt "
                       "throughput: banana\n")
    sources, _ = resolve_inputs([str(damaged)], "UTC")
    hint = no_rows_hint(sources, "iterations", "")
    assert "1 line looks like iteration lines but could not be read" in hint
    assert "1 line looks like stats lines but could not be read" in no_stats_hint(sources)
