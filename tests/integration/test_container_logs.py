"""Container logs through real processes, the machine's zone set to one other than UTC: every real log
of tests/data wrapped as Docker json-file, containerd and CRI-O files (lines cut at random and at the
runtime's limit, stderr lines between the parts of stdout lines) gives exactly its answer key's stats
records from `logwatch parse --jsonl`, each at its container stamp's instant; `logwatch watch` reads
the bundled real log, wrapped, to its last record, whose instant /metrics shows."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import pytest
from envelopes import FORMATS, wrap
from support import TESTS, run_watch

from vllm_logwatch.offline.reading.events import iter_source_events
from vllm_logwatch.offline.reading.inputs import Source
from vllm_logwatch.parsing.events import EngineStats
from vllm_logwatch.parsing.stamps import resolve_zone

pytestmark = pytest.mark.timeout(120)

DATA = TESTS / "data"
LOGS = [n for n in sorted(p.name.split(".")[0] for p in DATA.glob("*.expected.jsonl"))
        if (DATA / f"{n}.expected.jsonl").stat().st_size]
REAL_LOG = DATA / "real-vllm-cpu" / "serve_20261129T192328Z.log"
KEYS = (
    "engine", "prompt_throughput", "generation_throughput", "running", "waiting", "swapped",
    "gpu_kv_cache_usage_pct", "cpu_kv_cache_usage_pct", "prefix_cache_hit_rate_pct",
    "prefix_cache_hit_rate_cpu_pct", "mm_cache_hit_rate_pct",
)
UTC = resolve_zone("UTC")
ZONE = {"TZ": "America/New_York"}


def lines_of(path: Path) -> list[bytes]:
    lines = [line + b"\n" for line in path.read_bytes().split(b"\n")]
    lines[-1] = lines[-1][:-1]
    return lines if lines[-1] else lines[:-1]


def instants(plain: Path, times: list[datetime]) -> list[datetime]:
    """The container instant of each stats record's line (numbered by the offline reader)."""
    events = iter_source_events(Source(str(plain)), "stats", UTC, None)
    return [times[e.line - 1] for e in events if isinstance(e, EngineStats) and e.line is not None]


@pytest.mark.parametrize("fmt", FORMATS)
def test_parse_jsonl_gives_the_answer_keys_at_container_instants(tmp_path: Path, fmt: str) -> None:
    files, want = [], {}
    for name in LOGS:
        path = tmp_path / f"{name}-{fmt}.log"
        data, times = wrap(lines_of(DATA / f"{name}.log"), fmt, random.Random(f"cli/{name}/{fmt}"))
        path.write_bytes(data)
        files.append(str(path))
        key = [json.loads(line) for line in (DATA / f"{name}.expected.jsonl").read_text().splitlines()]
        want[str(path)] = (key, instants(DATA / f"{name}.log", times))
    proc = subprocess.run([sys.executable, "-m", "vllm_logwatch", "parse", "--jsonl", *files],
                          capture_output=True, text=True, timeout=100, env={**os.environ, **ZONE})
    assert proc.returncode == 0, proc.stderr
    records = [json.loads(line) for line in proc.stdout.splitlines()]
    for path, (key, at) in want.items():
        got = [r for r in records if r["file"] == path]
        assert [{k: r[k] for k in KEYS} for r in got] == [{k: e.get(k) for k in KEYS} for e in key], path
        assert [datetime.fromisoformat(r["time"]) for r in got] == at, path


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("command", [["parse", "--jsonl"], ["parse", "--csv"],
                                     ["parse", "--jsonl", "--kind", "all"]])
def test_a_container_log_on_a_pipe(tmp_path: Path, fmt: str, command: list[str]) -> None:
    data, times = wrap(lines_of(REAL_LOG), fmt, random.Random(f"pipe/{fmt}"))
    proc = subprocess.run([sys.executable, "-m", "vllm_logwatch", *command, "-"], input=data,
                          capture_output=True, timeout=100, env={**os.environ, **ZONE})
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout.decode().splitlines()
    if "--csv" in command:
        stamps = [line.split(",", 1)[0] for line in out[1:]]
    else:
        stamps = [r["time"] for r in map(json.loads, out) if r["kind"] == "stats"]
    assert [datetime.fromisoformat(t) for t in stamps] == instants(REAL_LOG, times)


@pytest.mark.parametrize("fmt", FORMATS)
def test_watch_reads_a_container_log_at_its_stamps(tmp_path: Path, fmt: str) -> None:
    data, times = wrap(lines_of(REAL_LOG), fmt, random.Random(f"watch/{fmt}"))
    path = tmp_path / "container.log"
    path.write_bytes(data)
    at = instants(REAL_LOG, times)
    engine = {"engine": "0", "model_name": "tiny-llama"}  # served model name from its start-up lines
    with run_watch(path, "--from-start", env=ZONE, log_dir=tmp_path) as watch:
        watch.wait_sample("vllm_logwatch_stats_lines_total", engine, len(at), timeout=30)
        last = watch.sample("vllm_logwatch_last_stats_timestamp_seconds", engine)
        assert last == pytest.approx(at[-1].timestamp())
        assert watch.sample("vllm_logwatch_parse_errors_total", {"what": "envelope"}) in (None, 0.0)
        assert watch.stop() == 0
