"""Latency of `logwatch watch`: a stats line written to the followed file -> its value on /metrics.

Runs `logwatch watch` as a subprocess with the poll backstop at 2 s (so only the file-notification
path can be fast), appends stats lines one at a time, each with a new generation throughput, and
for each polls /metrics (or, with --via status, the status endpoint's line counter) until the new
value is there. Prints p50 / p90 / p99 / max; exits 1 if p99 is over the budget (100 ms).

    python bench/latency.py                  # 250 lines, measured on /metrics
    python bench/latency.py --via status     # the same, reading /api/v1/status's lines_applied
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta
from pathlib import Path

import httpx

LINE = ("(APIServer pid=29214) INFO {stamp} [loggers.py:335] Engine 000: Avg prompt throughput: 1330.2 "
        "tokens/s, Avg generation throughput: {gen:.1f} tokens/s, Running: 16 reqs, Waiting: 8 reqs, "
        "CPU KV cache usage: 1.0%, Prefix cache hit rate: 61.3%\n")
SERIES = 'vllm_logwatch_generation_throughput_tokens_per_second{engine="0",model_name="unknown"} '
BUDGET_P99_MS = 100.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def wait_ready(client: httpx.Client, proc: subprocess.Popen[bytes], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"logwatch watch exited with {proc.returncode}")
        try:
            if client.get("/healthz").status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.05)
    raise SystemExit("logwatch watch did not start")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lines", type=int, default=250, help="stats lines to append (default 250)")
    parser.add_argument("--poll-interval", type=float, default=2.0, help="the watch's --poll-interval")
    parser.add_argument("--via", choices=("metrics", "status"), default="metrics")
    parser.add_argument("--gap", type=float, default=0.01,
                        help="seconds between a seen value and the next line")
    args = parser.parse_args()

    folder = Path(tempfile.mkdtemp(prefix="logwatch-bench-"))
    log = folder / f"serve_{datetime.now():%Y%m%d_%H%M%S}.log"
    log.touch()
    port = free_port()
    err = open(folder / "watch.stderr", "wb")  # noqa: SIM115 - open for the child's whole life
    proc = subprocess.Popen(
        [sys.executable, "-m", "vllm_logwatch", "watch", str(folder), "--listen", "127.0.0.1", "--port",
         str(port), "--poll-interval", str(args.poll_interval), "--from-start"],
        stdout=err, stderr=err, stdin=subprocess.DEVNULL,
    )
    client = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=5.0)
    latencies_ms: list[float] = []
    polls = 0
    try:
        wait_ready(client, proc)
        fd = os.open(log, os.O_WRONLY | os.O_APPEND)
        start = datetime.now().replace(microsecond=0)
        for i in range(args.lines):
            gen = 1000.0 + i
            line = LINE.format(stamp=(start + timedelta(seconds=2 * i)).strftime("%m-%d %H:%M:%S"), gen=gen)
            wanted = f"{SERIES}{gen:.1f}"
            began = time.perf_counter()
            os.write(fd, line.encode())
            while True:
                polls += 1
                if args.via == "metrics":
                    if wanted in client.get("/metrics").text:
                        break
                elif client.get("/api/v1/status").json()["pipeline"]["lines_applied"] > i:
                    break
                if time.perf_counter() - began > 10:
                    raise SystemExit(f"line {i} not visible after 10 s")
            latencies_ms.append((time.perf_counter() - began) * 1000)
            time.sleep(args.gap)  # pacing between lines, so each write is its own event
        os.close(fd)
    finally:
        client.close()
        proc.send_signal(signal.SIGTERM)
        proc.wait(15)
        err.close()
    p50, p90, p99 = (percentile(latencies_ms, q) for q in (50, 90, 99))
    where = "/metrics" if args.via == "metrics" else "/api/v1/status"
    print(f"logwatch watch latency, line written -> value on {where} ({args.lines} lines, "
          f"--poll-interval {args.poll_interval:g}):")
    print(f"  p50 {p50:.1f} ms   p90 {p90:.1f} ms   p99 {p99:.1f} ms   max {max(latencies_ms):.1f} ms   "
          f"mean {statistics.fmean(latencies_ms):.1f} ms   "
          f"({polls / len(latencies_ms):.1f} HTTP polls per line)")
    ok = p99 <= BUDGET_P99_MS
    print(f"  budget p99 <= {BUDGET_P99_MS:.0f} ms: {'ok' if ok else 'OVER'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
