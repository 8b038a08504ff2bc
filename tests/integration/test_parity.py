"""Watch and run read a line the same way: the same real vLLM log (the CPU build's, with a GPU
build's start-up lines in it) followed from a file by `logwatch watch` and printed by a child under
`logwatch run` gives the same metrics and the same start-up facts in /api/v1/status."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from support import TESTS, free_port, poll_until, run_watch

DATA = TESTS / "data"
CPU_LOG = DATA / "real-vllm-cpu" / "serve_20261129T192328Z.log"
GPU_START = DATA / "049.log"  # torch.compile, KV cache memory and size, concurrency, graph capture
FAKE = str(TESTS / "fake_vllm.py")

# Series that differ between the modes by design, not by reading: the token and busy-seconds
# counters and sample times come from when a line was read (a file read at once vs. a child's
# output as it arrives), the follower's and the child's own counters exist in one mode only.
_MODE_OWN = re.compile(
    r"^(process_|python_|vllm_logwatch_(child_|log_file_|parse_bytes_dropped|stdout_bytes_dropped|"
    r"state_errors|prompt_tokens_total|generation_tokens_total|busy_seconds_total|"
    r"last_stats_timestamp_seconds|stats_interval_seconds|engine_stalled))"
)


def composite_log() -> bytes:
    """The CPU log, with the GPU log's start-up lines (stamps moved into the launch) after its own."""
    cpu = CPU_LOG.read_bytes().split(b"\n")
    gpu = re.sub(rb"06-22 02:5\d:\d\d", b"11-29 19:23:36", GPU_START.read_bytes()).rstrip(b"\n").split(b"\n")
    cut = next(i for i, line in enumerate(cpu) if b"Using max model len" in line) + 1
    return b"\n".join(cpu[:cut] + gpu + cpu[cut:])


def metrics_of(text: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if _MODE_OWN.match(s.name):
                continue
            labels = ",".join(f"{k}={v}" for k, v in sorted(s.labels.items()))
            out[f"{s.name}{{{labels}}}"] = s.value
    return out


def test_watch_and_run_read_the_same_log_the_same_way(tmp_path: Path) -> None:
    data = composite_log()
    lines = data.count(b"\n") + (not data.endswith(b"\n"))
    source = tmp_path / "composite.log"
    source.write_bytes(data)
    followed = tmp_path / "watched" / "serve_20261129_192328.log"
    followed.parent.mkdir()
    followed.write_bytes(data)

    with run_watch(followed, "--from-start") as watch:
        poll_until(lambda: watch.sample("vllm_logwatch_log_lines_total") == lines, 30, "watch to read it all")
        watch_metrics = metrics_of(watch.get("/metrics").text)
        watch_status = watch.status()

    port = free_port()
    run = subprocess.Popen(
        [sys.executable, "-m", "vllm_logwatch", "run", "--listen", "127.0.0.1", "--port", str(port),
         "--log-dir", str(tmp_path / "run"), "--name", "serve", "--", sys.executable, FAKE, "--log",
         str(source), "--no-start", "--stay"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        base = f"http://127.0.0.1:{port}"

        def all_read() -> str | None:
            try:
                text = httpx.get(f"{base}/metrics", timeout=5).text
            except httpx.TransportError:
                return None
            done = f"vllm_logwatch_log_lines_total {float(lines)}" in text
            return text if done else None

        run_text = poll_until(all_read, 30, "run to read it all")
        run_status = httpx.get(f"{base}/api/v1/status", timeout=5).json()
    finally:
        run.send_signal(signal.SIGTERM)
        _, err = run.communicate(timeout=30)
    assert b"Traceback" not in err

    assert run_status["server"] == watch_status["server"]
    assert run_status["server"]["available_kv_cache_gib"] == pytest.approx(26.91)
    run_metrics = metrics_of(run_text)
    assert sorted(run_metrics) == sorted(watch_metrics)
    assert run_metrics == watch_metrics
