"""Idle cost of `logwatch watch`: CPU share of one core and resident memory while nothing is logged.

Starts `logwatch watch` on a folder holding the real vLLM log (read from its start, so the exporter
holds real state), waits until it is read, then measures utime + stime from /proc/PID/stat over the
window (default 60 s) while Prometheus-like scrapes hit /metrics every --scrape-every seconds (0: no
scrapes). Budgets: CPU <= 1% of a core, RSS <= 80 MB; exits 1 if over.

    python bench/idle_cpu.py                         # 60 s, a scrape every 15 s
    python bench/idle_cpu.py --scrape-every 0        # 60 s, no scrapes at all
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]
REAL_LOG = REPO / "vllm_logwatch" / "data" / "serve_20261129T192328Z.log"
BUDGET_CPU_PCT = 1.0
BUDGET_RSS_MB = 80.0


def cpu_seconds(pid: int) -> float:
    """utime + stime of the process, in seconds (fields 14 and 15 of /proc/PID/stat)."""
    text = Path(f"/proc/{pid}/stat").read_text()
    fields = text[text.rindex(")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def memory_mb(pid: int) -> tuple[float, float]:
    """(VmRSS, VmHWM) in MB: resident now, and the peak."""
    values = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, rest = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            values[key] = int(rest.split()[0]) / 1024
    return values["VmRSS"], values["VmHWM"]


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--scrape-every", type=float, default=15.0, help="seconds between scrapes (0: none)")
    parser.add_argument("--poll-interval", type=float, default=1.0, help="the watch's --poll-interval")
    args = parser.parse_args()

    folder = Path(tempfile.mkdtemp(prefix="logwatch-idle-"))
    shutil.copy(REAL_LOG, folder / REAL_LOG.name)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    err = open(folder / "watch.stderr", "wb")  # noqa: SIM115 - open for the child's whole life
    proc = subprocess.Popen(
        [sys.executable, "-m", "vllm_logwatch", "watch", str(folder), "--listen", "127.0.0.1", "--port",
         str(port), "--from-start", "--poll-interval", str(args.poll_interval)],
        stdout=err, stderr=err, stdin=subprocess.DEVNULL,
    )
    client = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=5.0)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if client.get("/api/v1/status").json()["follower"]["offset"] == REAL_LOG.stat().st_size:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline or proc.poll() is not None:
                raise SystemExit("logwatch watch did not read the log")
            time.sleep(0.1)
        time.sleep(2.0)  # let start-up work (imports, first scrape) settle before measuring
        cpu_before, wall_before = cpu_seconds(proc.pid), time.monotonic()
        scrapes = 0
        end = wall_before + args.seconds
        while (now := time.monotonic()) < end:
            if args.scrape_every > 0:
                client.get("/metrics").raise_for_status()
                scrapes += 1
                time.sleep(min(args.scrape_every, end - now))
            else:
                time.sleep(end - now)
        cpu = cpu_seconds(proc.pid) - cpu_before
        wall = time.monotonic() - wall_before
        rss, peak = memory_mb(proc.pid)
    finally:
        client.close()
        proc.send_signal(signal.SIGTERM)
        proc.wait(15)
        err.close()
        shutil.rmtree(folder, ignore_errors=True)
    share = 100 * cpu / wall
    print(f"logwatch watch idle over {wall:.0f} s ({scrapes} scrapes of /metrics, --poll-interval "
          f"{args.poll_interval:g}): CPU {cpu:.2f} s = {share:.2f}% of one core; "
          f"RSS {rss:.1f} MB (peak {peak:.1f} MB)")
    ok = share <= BUDGET_CPU_PCT and rss <= BUDGET_RSS_MB
    print(f"  budget CPU <= {BUDGET_CPU_PCT:g}%, RSS <= {BUDGET_RSS_MB:g} MB: {'ok' if ok else 'OVER'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
