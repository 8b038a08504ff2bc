"""Must show 2 of the latency issue: the string placed in every prompt and every request's stop list of
the real run of tests/data/latency (148 `Received request` lines hold it) appears in no output of
logwatch: /metrics (both formats), the status API, history and page, parse's CSV and JSON lines of every
kind, summary (--by lora too), compare and a plot's SVG text."""

from __future__ import annotations

import gzip
import subprocess
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parents[1] / "data" / "latency"
NEEDLE = "zqxj"  # of ZQXJ-SECRET-PROMPT: caught lower-cased, slugged or percent-encoded too


def _cli(*args: str, cwd: Path) -> str:
    done = subprocess.run([sys.executable, "-m", "vllm_logwatch", *args], capture_output=True, text=True,
                          check=False, timeout=120, cwd=cwd)
    assert done.returncode == 0, (args, done.stderr)
    return done.stdout + done.stderr


def test_the_planted_string_is_in_no_output(
    tmp_path: Path, logwatch_watch: Callable[..., Any], poll_until: Callable[..., Any]
) -> None:
    folder = tmp_path / "logs"
    folder.mkdir()
    log = folder / "serve_20261202_020741.log"
    log.write_bytes(gzip.decompress((DATA / "serve.log.gz").read_bytes()))
    assert log.read_text().count("ZQXJ-SECRET-PROMPT") >= 148  # it is there to be leaked
    bodies: dict[str, str] = {}
    with logwatch_watch(folder, "--from-start", "--tz", "UTC") as watch:
        poll_until(lambda: watch.sample("vllm_logwatch_requests_total",
                                        {"model_name": "tiny-llama", "finish_reason": "length", "lora": ""})
                   == 139, 30, "every request counted")
        for path in ("/metrics", "/api/v1/status", "/api/v1/history", "/"):
            bodies[path] = watch.get(path).text
        bodies["/metrics openmetrics"] = watch.get(
            "/metrics", headers={"Accept": "application/openmetrics-text; version=1.0.0"}).text
        bodies["stderr"] = watch.stderr()
    assert "vllm_logwatch_step_duration_seconds_bucket" in bodies["/metrics"]
    cri = str(DATA / "serve.cri.log.gz")
    runs = (["parse", str(log), "--csv"], ["parse", str(log), "--jsonl", "--kind", "all"],
                 ["parse", cri, "--jsonl", "--kind", "all"],
                 ["parse", cri, "--kind", "iterations", "--csv"], ["parse", cri, "--kind", "iterations"],
                 ["parse", cri, "--kind", "requests", "--csv"], ["parse", str(log), "--kind", "requests"],
                 ["parse", str(log), "--openmetrics"],
                 ["summary", str(log)], ["summary", cri, "--json"], ["summary", str(log), "--markdown"],
                 ["summary", cri, "--by", "lora"],
                 ["summary", str(DATA.parent / "lora" / "serve.cri.log"), "--by", "lora", "--json"],
                 ["compare", str(log), cri], ["compare", cri, "--json"],
                 ["plot", str(log), "-o", str(tmp_path / "run.svg")])
    with ThreadPoolExecutor(2) as pool:  # two at a time: each is a process of its own
        for args, body in zip(runs, pool.map(lambda args: _cli(*args, cwd=tmp_path), runs), strict=True):
            bodies[" ".join(args)] = body
    bodies["run.svg"] = (tmp_path / "run.svg").read_text()
    assert "<svg" in bodies["run.svg"]
    for where, body in bodies.items():
        assert body or where.startswith("plot "), where  # plot says nothing when it wrote its image
        assert NEEDLE not in body.lower(), f"the planted string in {where}"
