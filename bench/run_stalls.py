"""Does `logwatch run` ever stall vLLM's writes on a busy host? Against the launch script's `tee`,
in the same run, under CPU hogs on every core.

A child writes a request-heavy vLLM log (Received with a prompt, Added, two streamed deltas, a
complete line, an access line per request, a stats line every 500 requests: about 1.1 KB a request)
as fast as its reader takes it, in 64 KiB writes, and times each write. It runs, alternately, under

    logwatch run --listen 127.0.0.1 --port <free> --log-dir <tmp> -- python run_stalls.py child MB
    bash -c 'python run_stalls.py child MB | tee -a <tmp>/tee.log >/dev/null'

while `--hogs` processes spin (default: two per core). Printed per run: the child's largest write
and how many took over 100 ms; per mode the worst of the runs.

    python bench/run_stalls.py                              # 10 runs of each, 400 MB, 4 hogs
    python bench/run_stalls.py --repeat 10 --mb 400 --results bench/RESULTS.md

With --results the numbers and the command are appended to that file under "## run: stalls".
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HOG = "while True: pass"


def _log_bytes(requests: int) -> bytes:
    out, secs = [], 0
    prompt = "lorem ipsum dolor sit amet " * 12
    for n in range(requests):
        h = f"(APIServer pid=26467) INFO 12-02 {secs // 3600 % 24:02d}:{secs // 60 % 60:02d}:{secs % 60:02d} "
        rid = f"chatcmpl-{n:012x}"
        out += [h + f"[logger.py:39] Received request {rid}: prompt: '{prompt}', params: SamplingParams(n=1, "
                "stop=['END']), lora_request: None.\n",
                h + f"[async_llm.py:578] Added request {rid}-8bcc5583.\n",
                h + f"[logger.py:80] Generated response {rid} (streaming delta): output: 'a', "
                "finish_reason: None\n",
                h + f"[logger.py:80] Generated response {rid} (streaming delta): output: 'b', "
                "finish_reason: length\n",
                h + f"[logger.py:80] Generated response {rid} (streaming complete): output: 'ab', "
                "finish_reason: streaming_complete\n",
                f'INFO:     127.0.0.1:{40000 + n % 20000} - "POST /v1/chat/completions HTTP/1.1" 200 OK\n']
        if n % 500 == 0:
            out.append(h + "[loggers.py:335] Engine 000: Avg prompt throughput: 100.0 tokens/s, Avg "
                       "generation throughput: 200.0 tokens/s, Running: 3 reqs, Waiting: 0 reqs, GPU KV "
                       "cache usage: 4.0%, Prefix cache hit rate: 0.0%\n")
        secs += n % 100 == 0
    return "".join(out).encode()


def child(mb: int, report: str) -> int:
    block = _log_bytes(20_000)  # ~24 MB, written again and again
    out = sys.stdout.buffer
    out.write(b"INFO 12-02 10:00:00 [api_server.py:1] Starting vLLM API server\n")
    out.flush()
    lat, total, at, start = [], 0, 0, time.monotonic()
    while total < mb << 20:
        chunk = block[at:at + 65536]
        at = at + 65536 if at + 65536 < len(block) else 0
        t = time.monotonic()
        out.write(chunk)
        out.flush()
        lat.append(time.monotonic() - t)
        total += len(chunk)
    took = time.monotonic() - start
    Path(report).write_text(json.dumps({"max": max(lat), "over_100ms": sum(x > 0.1 for x in lat),
                                        "mb_s": total / took / 1e6, "seconds": took}))
    return 0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def one(mode: str, mb: int, tmp: Path, n: int) -> dict[str, float]:
    report = tmp / f"{mode}-{n}.json"
    me = [sys.executable, os.path.abspath(__file__), "child", str(mb), str(report)]
    if mode == "tee":
        cmd = ["bash", "-c", f"{shlex.join(me)} | tee -a {shlex.quote(str(tmp / 'tee.log'))} >/dev/null"]
    else:
        cmd = ["logwatch", "run", "--listen", "127.0.0.1", "--port", str(_free_port()), "--log-dir",
               str(tmp / f"logs-{n}"), "--", *me]
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True, timeout=900)
    for old in (tmp / "tee.log", *tmp.glob(f"logs-{n}/*.log")):
        old.unlink(missing_ok=True)
    return json.loads(report.read_text())  # type: ignore[no-any-return]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--mb", type=int, default=400)
    ap.add_argument("--hogs", type=int, default=2 * (os.cpu_count() or 1))
    ap.add_argument("--results", help="append the figures to this markdown file")
    args = ap.parse_args()
    hogs = [subprocess.Popen([sys.executable, "-c", HOG]) for _ in range(args.hogs)]
    runs: dict[str, list[dict[str, float]]] = {"logwatch run": [], "tee": []}
    try:
        with tempfile.TemporaryDirectory() as d:
            for n in range(args.repeat):
                for mode in runs:
                    got = one("tee" if mode == "tee" else "run", args.mb, Path(d), n)
                    runs[mode].append(got)
                    print(f"{mode:12s} run {n + 1}: largest write {got['max'] * 1000:.0f} ms, "
                          f"{got['over_100ms']:.0f} over 100 ms, {got['mb_s']:.0f} MB/s", flush=True)
    finally:
        for hog in hogs:
            hog.kill()
    lines = [f"- {mode}: largest write per run (ms) "
             + ", ".join(f"{r['max'] * 1000:.0f}" for r in rs)
             + f"; worst {max(r['max'] for r in rs) * 1000:.0f} ms; writes over 100 ms in all: "
             + f"{sum(r['over_100ms'] for r in rs):.0f}; MB/s median "
             + f"{sorted(r['mb_s'] for r in rs)[len(rs) // 2]:.0f}"
             for mode, rs in runs.items()]
    print("\n".join(lines))
    if args.results:
        with open(args.results, "a") as out:
            out.write(f"\n### {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} ({os.cpu_count()} cores, "
                      f"{args.hogs} CPU hogs, {args.mb} MB a run)\n\n    python bench/run_stalls.py "
                      + " ".join(shlex.quote(a) for a in sys.argv[1:]) + "\n\n" + "\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "child":
        sys.exit(child(int(sys.argv[2]), sys.argv[3]))
    sys.exit(main())
