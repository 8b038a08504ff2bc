"""A hostile line (a dumped prompt: a long run of digits around a needle) never stalls vLLM under `run`
nor the exporter under `watch`: the patterns run in linear time (`tests/unit/parsing/test_linear_time.py`)
and `run`'s tee never waits for the parser."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from support import free_port, poll_until, run_watch

from vllm_logwatch.parsing.framing import MAX_LINE_BYTES

STATS = ("(APIServer pid=1) INFO 11-29 19:26:{s:02d} [loggers.py:335] Engine 000: Avg prompt throughput: "
         "1.0 tokens/s, Avg generation throughput: 2.0 tokens/s, Running: {n} reqs, Waiting: 0 reqs, "
         "GPU KV cache usage: 1.0%, Prefix cache hit rate: 0.0%\n")
HOSTILE = b"1" * (MAX_LINE_BYTES - 64) + b" WARNING Avg prompt t\n"  # under the cap: it is parsed
"""Before the linear patterns, this line took about half an hour of CPU to read, holding the interpreter."""
E0 = {"engine": "0", "model_name": "unknown"}
WRITES = 3000
LINE = b"INFO 11-29 19:26:06 [core.py:1] no needle here " + b"x" * 975 + b"\n"
"""After it, 3 MiB of these in 1 KiB writes over about two seconds: more than the child's 1 MiB pipe
holds, for longer than the parser takes to reach the hostile line."""

CHILD = f"""
import json, os, sys, time
os.write(1, {HOSTILE!r})
line = {LINE!r}
worst = 0.0
for _ in range({WRITES}):
    start = time.monotonic()
    os.write(1, line)
    worst = max(worst, time.monotonic() - start)
    time.sleep(0.0005)
with open(sys.argv[1], "w") as out:
    json.dump({{"worst": worst}}, out)
"""


def test_run_a_hostile_line_never_stalls_the_childs_writes(tmp_path: Path) -> None:
    child, report = tmp_path / "child.py", tmp_path / "report.json"
    child.write_text(CHILD)
    port = free_port()
    with open(tmp_path / "stdout", "wb") as out, open(tmp_path / "stderr", "wb") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "vllm_logwatch", "run", "--listen", "127.0.0.1", "--port", str(port),
             "--log-dir", str(tmp_path / "logs"), "--", sys.executable, str(child), str(report)],
            stdout=out, stderr=err,
        )
    try:
        poll_until(report.exists, 30, "the child's report (its writes blocked?)")
        worst = json.loads(report.read_text())["worst"]
        assert worst < 0.1, f"a write() of the child stalled {worst * 1000:.0f} ms"
        proc.wait(30)
        log = next((tmp_path / "logs").glob("vllm_*.log")).read_bytes()
        assert log.startswith(HOSTILE) and len(log) == len(HOSTILE) + WRITES * len(LINE)  # teed whole
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


def test_watch_reads_the_stats_line_after_a_hostile_line_within_a_poll(tmp_path: Path) -> None:
    poll = 1.0
    log = tmp_path / "serve.log"
    log.write_text("")
    with run_watch(log, "--poll-interval", str(poll), log_dir=tmp_path) as watch:
        with open(log, "a") as fh:
            fh.write(STATS.format(s=0, n=1))
        watch.wait_sample("vllm_logwatch_requests_running", E0, 1)
        with open(log, "ab") as fh:
            fh.write(HOSTILE)
            fh.write(STATS.format(s=5, n=7).encode())
        start = time.monotonic()
        assert watch.get("/healthz", timeout=poll).status_code == 200  # while the hostile line is read
        watch.wait_sample("vllm_logwatch_requests_running", E0, 7, 10)
        took = time.monotonic() - start
        assert took < poll, f"the stats line after the hostile one took {took:.2f} s to reach /metrics"
        assert watch.get("/healthz", timeout=poll).status_code == 200
