"""`summary`'s engine-step tables (`offline/summary/steps.py`) on the real run of tests/data/latency: the
decode steps' time by running streams, p50 and p90, and the prefill time per 1000 prompt tokens, the
same numbers `parse --kind iterations` gives; none for a log without iteration lines."""

from __future__ import annotations

import gzip
import io
import json
import re
from pathlib import Path

import numpy as np
import pytest

from vllm_logwatch.commands.summary import run_summary

DATA = Path(__file__).resolve().parents[2] / "data"
LOG = str(DATA / "latency" / "serve.log.gz")
_STEP = re.compile(r"Iteration\(\d+\): (\d+) context requests, (\d+) context tokens, "
                   r"(\d+) generation requests, \d+ generation tokens, iteration elapsed time: ([\d.]+) ms")


def _steps() -> list[tuple[int, int, int, float]]:
    with gzip.open(LOG, "rt") as fh:
        return [(int(m[1]), int(m[2]), int(m[3]), float(m[4])) for line in fh if (m := _STEP.search(line))]


def test_summary_json_has_the_steps_by_running_streams_and_the_prefill_rate() -> None:
    out = io.StringIO()
    run_summary([LOG], fmt="json", out=out)
    (table,) = json.loads(out.getvalue())["steps"]
    steps = _steps()
    by_running: dict[int, list[float]] = {}
    for ctx, _, gen, ms in steps:
        if ctx == 0 and gen:
            by_running.setdefault(gen, []).append(ms)
    assert [row["running"] for row in table["decode"]] == sorted(by_running)
    for row in table["decode"]:
        times = by_running[row["running"]]
        assert row["steps"] == len(times)
        expected = tuple(round(float(x), 2) for x in np.percentile(times, [50, 90]))
        assert (row["p50_ms"], row["p90_ms"]) == expected
    prefill = [(tokens, ms) for ctx, tokens, gen, ms in steps if ctx and not gen]
    assert table["prefill_steps"] == len(prefill)
    rate = 1000 * sum(m for _, m in prefill) / sum(t for t, _ in prefill)
    assert table["prefill_ms_per_1k_tokens"] == round(rate, 2)


def test_summary_text_shows_the_table_only_where_iteration_lines_exist() -> None:
    out = io.StringIO()
    run_summary([LOG], out=out)
    assert "Engine step time by running streams" in out.getvalue()
    assert "Time between tokens by running streams" not in out.getvalue()  # a step's time is not that
    assert "prefill ms / 1k tokens: 73.1 (36 steps)" in out.getvalue()
    plain = io.StringIO()
    run_summary([str(next((DATA / "real-vllm-cpu").glob("serve_*.log")))], out=plain)
    assert "Engine step time" not in plain.getvalue()


def test_the_step_tables_are_the_same_on_every_route(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The steps come in the summary's own pass: the range workers (the common line read in this
    process by their pattern), the stream route, standard input and the general parser give the same
    tables; a file is opened once for them (it was read a second time)."""
    from vllm_logwatch.offline.reading import inputs
    from vllm_logwatch.offline.reading.ranges import Tuning

    log = tmp_path / "serve_20261202_020741.log"
    hostile = ("(APIServer pid=1) INFO 12-02 02:30:00 [loggers.py:199] Engine 000: Iteration(7): 0 context "
               "requests, 0 context tokens, " + "9" * 5000 + " generation requests, 1 generation tokens, "
               "iteration elapsed time: 3.00 ms\n")  # a count past int()'s limit: left unread, no traceback
    log.write_bytes(gzip.decompress(Path(LOG).read_bytes()) + hostile.encode())

    def tables(source: str, tuning: Tuning | None) -> object:
        out = io.StringIO()
        run_summary([source], fmt="json", out=out, tuning=tuning)
        return json.loads(out.getvalue())["steps"]

    general = tables(str(log), None)
    assert general and general[0]["decode"]
    opened = []
    real_open = inputs.open_source

    def counting(source, **kw):  # type: ignore[no-untyped-def]
        opened.append(source.name)
        return real_open(source, **kw)

    monkeypatch.setattr(inputs, "open_source", counting)
    for module in ("route", "events"):
        monkeypatch.setattr(f"vllm_logwatch.offline.reading.{module}.open_source", counting)
    assert tables(str(log), Tuning()) == general
    assert opened.count(str(log)) == 2  # the format's sniff, and the one pass
    workers = Tuning(parallel_min_bytes=1, range_bytes=64 << 10, dense_probe=4 << 10)
    assert tables(str(log), workers) == general
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(log.read_bytes())))
    stdin = tables("-", Tuning())
    assert [{k: v for k, v in t.items() if k != "file"} for t in stdin] == [
        {k: v for k, v in t.items() if k != "file"} for t in general]


def test_the_matrix_cells_get_the_time_of_their_decode_steps() -> None:
    """Each decode-only step's own estimate (its KV usage x the KV cache size / its generation requests,
    the matrix's rule) and its running count place it in a cell; a cell shows its steps' count and
    median elapsed ms, computed here from the lines alone."""
    import math
    import statistics

    from vllm_logwatch.offline.summary.build import bucket_of

    out = io.StringIO()
    run_summary([LOG], fmt="json", out=out)
    matrix = json.loads(out.getvalue())["groups"][0]["matrix"]
    tokens = matrix["kv_cache_tokens"]
    kv_step = re.compile(_STEP.pattern + r"(?: \(dummy\))?, \w+ KV cache usage: ([\d.]+)%")
    with gzip.open(LOG, "rt") as fh:
        decode = [(int(m[3]), float(m[5]), float(m[4])) for line in fh
                  if (m := kv_step.search(line)) and m[1] == "0" and int(m[3]) > 0 and "(dummy)" not in line]
    assert len(decode) > 2000
    by_cell: dict[tuple[int, int], list[float]] = {}
    for running, kv, ms in decode:
        estimate = kv / 100.0 * tokens / running
        power = max(7, round(math.log2(estimate))) if estimate > 0 else 7
        by_cell.setdefault((power, bucket_of(running)[0]), []).append(ms)
    placed = 0
    for cell in matrix["cells"]:
        times = by_cell.get((cell["context_tokens"].bit_length() - 1, cell["running_lo"]), [])
        assert cell["decode_steps"] == len(times)
        assert cell["step_ms_median"] == (round(statistics.median(times), 2) if times else None)
        placed += len(times)
    assert placed > 0 and matrix["steps_elsewhere"] == len(decode) - placed
