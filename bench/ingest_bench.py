"""Live ingest: `logwatch watch --from-start` reading a big access-heavy log, against mtail, in one run.

Generates (with a seed) an access-heavy vLLM log from the real one in tests/data/real-vllm-cpu: its
start-up lines, then engine stats lines in the real format each followed by `--access-per-stats`
uvicorn access lines in the real format (`INFO:     127.0.0.1:PORT - "POST /v1/completions HTTP/1.1"
200 OK`, with the real share of /metrics and /health probes, a few 4xx, a few warnings). Then, in the
same run and alternating, times:
  - `grep -c 'HTTP/1.1' FILE` (a floor: one pass over the bytes, no work per line);
  - `mtail --one_shot --progs bench/vllm.mtail --logs FILE` (prints its metrics at the end; checked);
  - `logwatch watch FILE --from-start --port 0`, from the spawn until /api/v1/status says every byte
    and every line is applied (`pipeline.offset`, the position after the lines applied, is the file's
    size and `pipeline.lines_applied` its line count; polled every 0.1 s), then SIGTERM; its /metrics
    are checked first.
Wall time is the median of `--runs`; peak RSS (wait4) and CPU seconds (user + system, which counts
mtail's several threads) are those of the median run. Prints a Markdown table.

    python bench/ingest_bench.py                                 # 30 MB, 3 runs: a quick check
    python bench/ingest_bench.py --size-mb 300 --runs 3          # the RESULTS.md figure (~4 min)
    python bench/ingest_bench.py --size-mb 300 --workdir DIR     # keep the generated log in DIR, reuse it
    python bench/ingest_bench.py --shape details --size-mb 300   # request logging and iteration details on

`--shape details` generates the log of `bench/detail_shape.py` instead (iteration lines, request lines
with ~4 KB of prompt each, a few access and stats lines) and gives mtail `bench/vllm_details.mtail`
besides `bench/vllm.mtail` (step-time histogram, requests by finish reason); both sides' request counts
are checked.
"""

from __future__ import annotations

import argparse
import compileall
import os
import random
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import detail_shape  # noqa: E402  (the --shape details log)

ROOT = HERE.parent
REAL_LOG = ROOT / "tests" / "data" / "real-vllm-cpu" / "serve_20261129T192328Z.log"
MTAIL_PROGRAM = HERE / "vllm.mtail"
STATS = ("(APIServer pid=29214) INFO {stamp} [loggers.py:335] Engine 000: Avg prompt throughput: {p:.1f} "
         "tokens/s, Avg generation throughput: {g:.1f} tokens/s, Running: {r} reqs, Waiting: {w} reqs, "
         "CPU KV cache usage: {kv:.1f}%, Prefix cache hit rate: {pfx:.1f}%\n")
ACCESS = 'INFO:     127.0.0.1:{port} - "{method} {path} HTTP/1.1" {status}\n'
WARNING = ("(APIServer pid=29214) WARNING {stamp} [protocol.py:93] The following fields were present in "
           "the request but ignored: {{'ignore_eos'}}\n")
POLL_SECONDS = 0.1
GNU_TIME = "/usr/bin/time" if os.path.exists("/usr/bin/time") else None


def real_head() -> str:
    """The real log's lines before its first stats line: the launch and start-up facts."""
    head = []
    with open(REAL_LOG, encoding="utf-8") as fh:
        for line in fh:
            if "Avg prompt throughput" in line:
                break
            head.append(line)
    return "".join(head)


def generate(path: Path, size: int, access_per_stats: int, seed: int) -> None:
    """Write about `size` bytes: the real start-up lines, then a stats line every 10 s of log time
    with `access_per_stats` access lines after each (one /metrics scrape and one /health probe among
    them, as in the real log; 0.5% of requests 400 and 0.2% 429), and a warning now and then."""
    rng = random.Random(seed)
    written, secs = 0, 19 * 3600 + 24 * 60
    with open(path, "w", encoding="utf-8") as out:
        head = real_head()
        out.write(head)
        written += len(head)
        while written < size:
            day, hh, mm, ss = 29 + secs // 86400 % 2, secs // 3600 % 24, secs // 60 % 60, secs % 60
            stamp = f"11-{day:02d} {hh:02d}:{mm:02d}:{ss:02d}"
            chunk = [STATS.format(stamp=stamp, p=rng.uniform(0, 20000), g=rng.uniform(0, 3000),
                                  r=rng.randint(0, 64), w=rng.randint(0, 40), kv=rng.uniform(0, 100),
                                  pfx=rng.uniform(0, 100))]
            probes = {rng.randrange(access_per_stats): "/metrics", rng.randrange(access_per_stats): "/health"}
            for i in range(access_per_stats):
                probe = probes.get(i)
                roll = rng.random()
                status = ("200 OK" if probe or roll >= 0.007 else
                          "400 Bad Request" if roll < 0.005 else "429 Too Many Requests")
                chunk.append(ACCESS.format(port=rng.randint(32768, 60999), method="GET" if probe else "POST",
                                           path=probe or "/v1/completions", status=status))
            if rng.random() < 0.05:
                chunk.append(WARNING.format(stamp=stamp))
            text = "".join(chunk)
            out.write(text)
            written += len(text)
            secs += 10


@dataclass
class Run:
    wall: float
    rss_kib: int
    cpu: float


def timed(argv: list[str], out: Path) -> Run:
    """Wall seconds, peak RSS and CPU of a command writing to a real file (grep -c stops early on
    /dev/null). The peak RSS comes from GNU time: a child forked from this process starts with our
    memory counted in its ru_maxrss, one forked from `time` does not."""
    rss_file = out.with_suffix(".rss")
    wrapper = [GNU_TIME, "-f", "%M", "-o", str(rss_file)] if GNU_TIME else []
    with open(out, "wb") as fh:
        start = time.perf_counter()
        proc = subprocess.Popen([*wrapper, *argv], stdout=fh, stderr=subprocess.DEVNULL,
                                stdin=subprocess.DEVNULL)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) not in (0, 1):
        raise SystemExit(f"failed ({status}): {' '.join(argv)}")
    rss = int(rss_file.read_text().split()[-1]) if GNU_TIME else usage.ru_maxrss
    return Run(wall, rss, usage.ru_utime + usage.ru_stime)


def peak_rss_kib(pid: int) -> int:
    """VmHWM of a running process: its own peak, since exec."""
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0


def http_total(prom_text: str, name: str) -> float:
    """The sum of every sample of `name` in a Prometheus text page."""
    pattern = re.compile(rf"^{name}(?:\{{[^}}]*\}})? (\S+)$", re.MULTILINE)
    return sum(float(v) for v in pattern.findall(prom_text))


def run_mtail(log: Path, work: Path, access_lines: int, requests: int | None = None) -> Run:
    out = work / "mtail.out"
    progs: Path = MTAIL_PROGRAM
    if requests is not None:  # the detail shape: both programs, from a folder of their own
        progs = work / "progs"
        progs.mkdir(exist_ok=True)
        for prog in (MTAIL_PROGRAM, HERE / "vllm_details.mtail"):
            shutil.copy(prog, progs / prog.name)
    run = timed(["mtail", "--one_shot", "--one_shot_format", "prometheus", "--logtostderr",
                 "--address", "127.0.0.1", "--port", "0", "--progs", str(progs),
                 "--logs", str(log)], out)
    counted = http_total(out.read_text(), "vllm_http_requests_total")
    if counted != access_lines:
        raise SystemExit(f"mtail counted {counted:.0f} access lines, the file has {access_lines}")
    if requests is not None and http_total(out.read_text(), "vllm_requests_total") != requests:
        raise SystemExit(f"mtail counted other than the {requests} requests of the file")
    return run


def run_logwatch(log: Path, work: Path, lines: int, access_lines: int,
                 requests: int | None = None) -> tuple[Run, float]:
    """(the run until every line is applied, the seconds SIGTERM took to stop it)."""
    size = log.stat().st_size
    err_path = work / "watch.stderr"
    err = open(err_path, "wb")  # noqa: SIM115 - open for the child's whole life
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    start = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "vllm_logwatch", "watch", str(log), "--from-start", "--listen", "127.0.0.1",
         "--port", "0"], stdout=err, stderr=err, stdin=subprocess.DEVNULL, env=env, cwd=str(work))
    try:
        port = None
        while port is None:
            if proc.poll() is not None:
                tail = err_path.read_text(errors="replace")[-2000:]
                raise SystemExit(f"logwatch watch exited with {proc.returncode}: {tail}")
            m = re.search(r"listening on 127\.0\.0\.1:(\d+)", err_path.read_text(errors="replace"))
            port = int(m.group(1)) if m else None
            if port is None:
                time.sleep(0.02)
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30.0) as client:
            while True:
                if proc.poll() is not None:
                    raise SystemExit(f"logwatch watch exited with {proc.returncode}")
                try:
                    status = client.get("/api/v1/status").json()
                except httpx.TransportError:
                    status = None
                if (status is not None and status["pipeline"]["offset"] == size
                        and status["pipeline"]["lines_applied"] == lines):
                    wall = time.perf_counter() - start
                    break
                time.sleep(POLL_SECONDS)
            metrics = client.get("/metrics").text
        counted = http_total(metrics, "vllm_logwatch_http_requests_total")
        if counted != access_lines:
            raise SystemExit(f"logwatch counted {counted:.0f} access lines, the file has {access_lines}")
        if requests is not None and http_total(metrics, "vllm_logwatch_requests_total") != requests:
            raise SystemExit(f"logwatch counted other than the {requests} requests of the file")
        rss = peak_rss_kib(proc.pid)
        stopping = time.perf_counter()
        proc.send_signal(signal.SIGTERM)
        _, code, usage = os.wait4(proc.pid, 0)
        stop = time.perf_counter() - stopping
        proc.returncode = os.waitstatus_to_exitcode(code)
    finally:
        if proc.returncode is None:
            proc.kill()
            proc.wait()
        err.close()
    return Run(wall, rss, usage.ru_utime + usage.ru_stime), stop


def median_run(runs: list[Run]) -> Run:
    return sorted(runs, key=lambda r: r.wall)[len(runs) // 2]


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size-mb", type=float, default=30, help="size of the generated log (default 30)")
    parser.add_argument("--runs", type=int, default=3, help="median of N runs of each command (default 3)")
    parser.add_argument("--access-per-stats", type=int, default=3000,
                        help="access lines per stats line (default 3000: 300 requests/s at vLLM's "
                        "10 s interval)")
    parser.add_argument("--log", type=Path, help="measure this log instead of generating one")
    parser.add_argument("--seed", type=int, default=20261201)
    parser.add_argument("--workdir", type=Path, help="keep the generated log here and reuse it")
    parser.add_argument("--shape", choices=("access", "details"), default="access",
                        help="access: stats and access lines (default); details: request logging and "
                        "iteration details on (bench/detail_shape.py)")
    args = parser.parse_args()
    if shutil.which("mtail") is None:
        raise SystemExit("mtail not found: apt-get install -y mtail")
    work = args.workdir or Path(tempfile.mkdtemp(prefix="logwatch-ingest-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        folder = f"{args.size_mb:g}mb" + ("" if args.shape == "access" else "-details")
        log = args.log or work / folder / "serve_20261129T192328Z.log"
        if args.log is None and not log.exists():
            log.parent.mkdir(exist_ok=True)
            print(f"generating {args.size_mb:g} MB {args.shape} log...", file=sys.stderr)
            if args.shape == "access":
                generate(log, int(args.size_mb * 1e6), args.access_per_stats, args.seed)
            else:
                detail_shape.generate(log, int(args.size_mb * 1e6), args.seed)
        data = log.read_bytes()
        requests = detail_shape.expected(data)["requests"] if args.shape == "details" else None
        size, lines = len(data), data.count(b"\n")
        access = re.compile(rb'^INFO: +\S+ - "[A-Z]+ \S+ HTTP/1\.1" \d{3}', re.MULTILINE)
        access_lines = sum(1 for _ in access.finditer(data))
        stats_lines = data.count(b"Avg prompt throughput")
        del data
        # As `pip install` leaves it: byte-compiled, so no run pays for compiling our modules.
        compileall.compile_dir(str(ROOT / "vllm_logwatch"), quiet=1)
        load_before = os.getloadavg()
        labels = ("grep -c", "mtail --one_shot", "logwatch watch --from-start")
        results: dict[str, list[Run]] = {label: [] for label in labels}
        stops: list[float] = []
        for i in range(args.runs):
            order = list(results) if i % 2 == 0 else list(reversed(results))
            for label in order:
                if label == "grep -c":
                    run = timed(["grep", "-c", "HTTP/1.1", str(log)], work / "grep.out")
                elif label.startswith("mtail"):
                    run = run_mtail(log, work, access_lines, requests)
                else:
                    run, stop = run_logwatch(log, work, lines, access_lines, requests)
                    stops.append(stop)
                results[label].append(run)
                print(f"  run {i + 1}: {label}: {run.wall:.2f} s", file=sys.stderr)
        load_after = os.getloadavg()
    finally:
        if args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)
    print(f"\n{log.name}: {size / 1e6:.0f} MB, {lines:,} lines ({access_lines:,} access, "
          f"{stats_lines:,} stats); median of {args.runs}; load average {load_before[0]:.2f} before, "
          f"{load_after[0]:.2f} after\n")
    print("| command | wall s (runs) | lines/s | MB/s | CPU s | peak RSS MB |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for label, runs in results.items():
        med = statistics.median(r.wall for r in runs)
        rep = median_run(runs)
        walls = ", ".join(f"{r.wall:.2f}" for r in runs)
        print(f"| `{label}` | {med:.2f} ({walls}) | {lines / med:,.0f} | {size / 1e6 / med:.0f} | "
              f"{rep.cpu:.2f} | {rep.rss_kib / 1024:.0f} |")
    lw = statistics.median(r.wall for r in results["logwatch watch --from-start"])
    mt = statistics.median(r.wall for r in results["mtail --one_shot"])
    verdict = "met" if lw <= mt else "NOT met"
    print(f"\nlogwatch / mtail (wall, medians): {lw / mt:.2f}x (target <= 1.00x: {verdict}); "
          f"{lw / lines * 1e6:.1f} us a line; SIGTERM to exit: {statistics.median(stops):.2f} s "
          "(not in the wall time)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
