"""Many sources: `logwatch watch --layout pods` over a kubelet tree of idle container logs and 2 busy ones.

Two runs in one script, the same window, the same 2 busy sources (each a vLLM writing a stats line a
second and --access-per-second uvicorn access lines, as containerd writes them, P/F parts included):
first the 2 busy ones alone (the baseline), then with --idle idle ones next to them (each holds the
bundled real vLLM log, read from its start, so every source has real state: engines, start-up facts).
CPU (utime + stime from /proc) and RSS of the watch process over --seconds, scraped every 15 s.
Budget: besides the scrapes themselves (their size grows with the series served, ~140 a source), the
idle sources add at most 1% of a core, and 100 MB; exits 1 if over.

    python bench/sources_idle.py                        # 200 idle + 2 busy, 60 s a run
    python bench/sources_idle.py --idle 500 --seconds 30
"""

from __future__ import annotations

import argparse
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
from idle_cpu import REAL_LOG, cpu_seconds, memory_mb

BUDGET_CPU_PCT = 1.0
BUDGET_RSS_MB = 100.0
STATS = ("(APIServer pid=1) INFO 07-05 11:29:{s:02d} [loggers.py:259] Engine 000: Avg prompt throughput: "
         "1301.0 tokens/s, Avg generation throughput: 1924.0 tokens/s, Running: 30 reqs, Waiting: 0 reqs, "
         "GPU KV cache usage: 4.8%, Prefix cache hit rate: 0.0%")
ACCESS = 'INFO:     127.0.0.1:{port} - "POST /v1/chat/completions HTTP/1.1" 200 OK'


def cri(text: str, part: str = "F") -> str:
    return f"2025-07-05T11:29:01.123456789Z stdout {part} {text}\n"


def make_tree(root: Path, idle: int) -> list[Path]:
    """The kubelet tree: `idle` pods holding the real log, and 2 busy pods' files (returned)."""
    real = "".join(cri(line) for line in REAL_LOG.read_text().splitlines())
    for i in range(idle):
        folder = root / f"vllm_idle-{i}_uid-{i:08d}" / "vllm"
        folder.mkdir(parents=True)
        (folder / "0.log").write_text(real)
    busy = []
    for i in range(2):
        folder = root / f"vllm_busy-{i}_uid-b{i:07d}" / "vllm"
        folder.mkdir(parents=True)
        (folder / "0.log").write_text(real)
        busy.append(folder / "0.log")
    return busy


def write_busy(paths: list[Path], per_second: int, stop: threading.Event) -> None:
    """Each second, to each busy file: `per_second` access lines spread over it, one stats line (cut in
    two parts, as a runtime cuts a line flushed in two writes)."""
    files = [p.open("a", buffering=1) for p in paths]
    second = 0
    try:
        while not stop.is_set():
            for tick in range(10):
                for f in files:
                    for n in range(per_second // 10):
                        f.write(cri(ACCESS.format(port=40000 + tick * 100 + n)))
                    if tick == 0:
                        line = STATS.format(s=second % 60)
                        f.write(cri(line[:50], "P") + cri(line[50:]))
                if stop.wait(0.1):
                    break
            second += 1
    finally:
        for f in files:
            f.close()


def measure(idle: int, seconds: float, per_second: int) -> tuple[float, float, int, float, int]:
    """(CPU % of a core, RSS MB, sources, seconds of one scrape, its bytes) of a watch over `idle` idle
    and 2 busy sources."""
    root = Path(tempfile.mkdtemp(prefix="logwatch-sources-"))
    busy = make_tree(root / "pods", idle)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    err = open(root / "watch.stderr", "wb")  # noqa: SIM115 - open for the child's whole life
    proc = subprocess.Popen(
        [sys.executable, "-m", "vllm_logwatch", "watch", str(root / "pods"), "--layout", "pods",
         "--from-start", "--listen", "127.0.0.1", "--port", str(port), "--max-sources", "1000"],
        stdout=err, stderr=err, stdin=subprocess.DEVNULL)
    client = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10.0)
    stop = threading.Event()
    writer = threading.Thread(target=write_busy, args=(busy, per_second, stop), daemon=True)
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                status = client.get("/api/v1/status").json()
                if status["follower"]["sources"] == idle + 2:
                    lines = client.get("/metrics").text.count("vllm_logwatch_log_lines_total{")
                    if lines >= idle + 2:
                        break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline or proc.poll() is not None:
                stderr = (root / "watch.stderr").read_text()
                raise SystemExit(f"logwatch watch did not read the tree:\n{stderr}")
            time.sleep(0.2)
        writer.start()
        time.sleep(3.0)  # the start-up backlog read, the writers running: measure from here
        cpu_before, wall_before = cpu_seconds(proc.pid), time.monotonic()
        end = wall_before + seconds
        scrapes: list[float] = []
        while (now := time.monotonic()) < end:
            started = time.monotonic()
            answer = client.get("/metrics")
            answer.raise_for_status()
            scrapes.append(time.monotonic() - started)
            time.sleep(min(15.0, end - now))
        cpu = cpu_seconds(proc.pid) - cpu_before
        wall = time.monotonic() - wall_before
        rss, _peak = memory_mb(proc.pid)
        sources = int(client.get("/api/v1/status").json()["follower"]["sources"])
    finally:
        stop.set()
        client.close()
        proc.send_signal(signal.SIGTERM)
        proc.wait(15)
        err.close()
        shutil.rmtree(root, ignore_errors=True)
    return 100 * cpu / wall, rss, sources, sorted(scrapes)[len(scrapes) // 2], len(answer.content)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--idle", type=int, default=200, help="idle container logs next to the 2 busy ones")
    parser.add_argument("--seconds", type=float, default=60.0, help="measuring window of each run")
    parser.add_argument("--access-per-second", type=int, default=50, help="access lines a busy source writes")
    args = parser.parse_args()
    base_cpu, base_rss, base_n, base_scrape, base_size = measure(0, args.seconds, args.access_per_second)
    cpu, rss, n, scrape, size = measure(args.idle, args.seconds, args.access_per_second)
    print(f"{base_n} busy sources alone:        CPU {base_cpu:.2f}% of one core, RSS {base_rss:.1f} MB; "
          f"a scrape {1000 * base_scrape:.0f} ms, {base_size >> 10} KiB")
    print(f"{n - 2} idle + 2 busy sources:  CPU {cpu:.2f}% of one core, RSS {rss:.1f} MB; "
          f"a scrape {1000 * scrape:.0f} ms, {size >> 10} KiB")
    extra_cpu, extra_rss = cpu - base_cpu, rss - base_rss
    scraping = 100 * (scrape - base_scrape) / 15.0  # one scrape every 15 s, its time on one core
    print(f"the idle sources add {extra_cpu:.2f}% of a core ({scraping:.2f}% of it their bigger scrapes, "
          f"{extra_cpu - scraping:.2f}% the rest) and {extra_rss:.1f} MB "
          f"({1024 * extra_rss / max(1, n - 2):.0f} KB a source)")
    ok = extra_cpu - scraping <= BUDGET_CPU_PCT and extra_rss <= BUDGET_RSS_MB
    print(f"  budget: +{BUDGET_CPU_PCT:g}% CPU besides the scrapes, +{BUDGET_RSS_MB:g} MB: "
          f"{'ok' if ok else 'OVER'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
