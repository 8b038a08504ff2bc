"""`logwatch top` over 50 targets refreshed every second: its CPU share and peak memory.

    python bench/top_bench.py [--targets 50] [--seconds 60] [--kind url|log]

url: 50 HTTP servers (in this process, not measured) each serve a real exporter's /metrics (a `logwatch
watch --from-start` of the bundled real vLLM log, read once) whose own counters (lines, bytes read)
move every second and whose engine numbers move every 10 s, as a busy exporter's do.
log: 50 copies of the bundled log, each followed by top itself (a pipeline per target).
folder: the 50 copies in one folder, one target of 50 sources (one pipeline, as `watch` reads it).
top runs in a 160x48 tmux window (the real screen, Textual painting it) with --interval 1; after a
10 s warm-up its CPU time (utime + stime from /proc) is read over `--seconds`, and its peak RSS
(VmHWM). Needs tmux.
"""

from __future__ import annotations

import argparse
import http.server
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LOG = ROOT / "vllm_logwatch" / "data" / "serve_20261129T192328Z.log"


def exporter_text() -> str:
    """A real exporter's /metrics over the bundled log."""
    import httpx

    sys.path.insert(0, str(ROOT / "tests"))
    from support import run_watch

    folder = Path(tempfile.mkdtemp())
    shutil.copy(LOG, folder / LOG.name)
    with run_watch(folder, "--from-start") as watch:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            text = httpx.get(f"{watch.url}/metrics").text
            if "vllm_logwatch_stats_lines_total" in text:
                break
            time.sleep(0.2)
    shutil.rmtree(folder)
    return text


def serve(text: str, count: int) -> list[str]:
    """`count` servers of `text`, its log_lines_total moving every second."""
    lines = text.splitlines()

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as uvicorn (the exporter's and vLLM's server) does

        def do_GET(self) -> None:
            tick = int(time.time())
            body = "\n".join(_moved(line, tick) for line in lines).encode() + b"\n"
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    urls = []
    for _ in range(count):
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        urls.append(f"http://127.0.0.1:{server.server_address[1]}/metrics")
    return urls


def _moved(line: str, tick: int) -> str:
    """Every second the exporter's own counters move (a real one's move with each line read); every
    10 s, a stats interval, the engine's numbers too."""
    if line.startswith(("vllm_logwatch_log_lines_total ", "vllm_logwatch_log_bytes_total ")):
        return f"{line.split(' ')[0]} {tick}.0"
    if line.startswith(("vllm_logwatch_generation_throughput", "vllm_logwatch_requests_running",
                        "vllm_logwatch_last_stats_timestamp_seconds")):
        return f"{line.rsplit(' ', 1)[0]} {tick // 10 % 97}.0"
    return line


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--targets", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--kind", choices=("url", "log", "folder"), default="url")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="top-bench-"))
    if args.kind == "url":
        targets = serve(exporter_text(), args.targets)
    elif args.kind == "folder":
        for i in range(args.targets):
            shutil.copy(LOG, work / f"server{i:02d}.log")
        targets = [str(work)]
    else:
        targets = []
        for i in range(args.targets):
            folder = work / f"server{i:02d}"
            folder.mkdir()
            shutil.copy(LOG, folder / LOG.name)
            targets.append(str(folder))
    session = f"top-bench-{os.getpid()}"
    command = " ".join(["exec env -u COLUMNS -u LINES", f"PYTHONPATH={ROOT}", sys.executable, "-m",
                        "vllm_logwatch", "top", "--interval", "1", *targets])
    subprocess.run(["tmux", "new-session", "-d", "-s", session, "-x", "160", "-y", "48", command], check=True)
    subprocess.run(["tmux", "resize-window", "-t", session, "-x", "160", "-y", "48"], check=True)
    try:
        pid = int(subprocess.run(["tmux", "display", "-p", "-t", session, "#{pane_pid}"], check=True,
                                 capture_output=True, text=True).stdout)
        time.sleep(10)  # warm-up: imports, the first reads (logs: each read to its end)
        start_cpu, start = cpu_seconds(pid), time.monotonic()
        time.sleep(args.seconds)
        used, span = cpu_seconds(pid) - start_cpu, time.monotonic() - start
        screen = subprocess.run(["tmux", "capture-pane", "-p", "-t", session], check=True,
                                capture_output=True, text=True).stdout
        rows = sum(1 for line in screen.splitlines() if " idle " in line or " serving " in line)
        print(f"{args.kind}: {args.targets} targets, {span:.0f} s: CPU {used:.2f} s = "
              f"{100 * used / span:.2f}% of one core; peak RSS {peak_rss_mb(pid):.0f} MB; "
              f"{rows} rows on screen")
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], check=False)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
