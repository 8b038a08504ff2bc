"""Benchmark `logwatch parse --csv` against grep on the same files, in the same run.

Generates (with a seed) a realistic access-heavy log of 1 GB, a stats-only log of 200 MB and a
speculative-decoding + KV-transfer log of 100 MB (a spec line and a KV Transfer line after each stats
line, as a disaggregated-prefill server with spec decode prints) in a temp folder, or takes paths,
then times:
  - `logwatch parse --csv FILE > /dev/null`
  - `grep -c 'Avg prompt throughput' FILE`
  - `grep 'Avg prompt throughput' FILE | awk ...` writing a CSV of the same numbers
and prints wall times, MB/s, lines/s, ratios and peak RSS (of each command's own process tree).

    python bench/parse_bench.py                       # generate and measure
    python bench/parse_bench.py --access A.log --stats S.log --repeat 3
"""

from __future__ import annotations

import argparse
import compileall
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

# What an operator writes today: the same columns as `logwatch parse --csv`, picked by field name.
AWK_PROGRAM = r"""
{
  ts = ""; eng = ""; pt = ""; gt = ""; run = ""; wait = ""; kv = ""; pfx = ""; mm = ""
  if (match($0, /[0-9][0-9]-[0-9][0-9] [0-9][0-9]:[0-9][0-9]:[0-9][0-9]/))
    ts = "2026-" substr($0, RSTART, 5) "T" substr($0, RSTART + 6, 8)
  if (match($0, /Engine [0-9]+:/)) eng = substr($0, RSTART + 7, RLENGTH - 8) + 0
  n = split($0, f, ", ")
  for (i = 1; i <= n; i++) {
    if (f[i] ~ /Avg prompt throughput: /) { sub(/.*Avg prompt throughput: /, "", f[i]); pt = f[i] + 0 }
    else if (f[i] ~ /^Avg generation throughput: /) { sub(/^Avg generation throughput: /, "", f[i]); gt = f[i] + 0 }
    else if (f[i] ~ /^Running: /) { run = substr(f[i], 10) + 0 }
    else if (f[i] ~ /^Waiting: /) { wait = substr(f[i], 10) + 0 }
    else if (f[i] ~ /KV cache usage: /) { sub(/.*KV cache usage: /, "", f[i]); kv = f[i] + 0 }
    else if (f[i] ~ /^Prefix cache hit rate: /) { sub(/^Prefix cache hit rate: /, "", f[i]); pfx = f[i] + 0 }
    else if (f[i] ~ /^MM cache hit rate: /) { sub(/^MM cache hit rate: /, "", f[i]); mm = f[i] + 0 }
  }
  print ts "," FILENAME "," NR "," eng "," pt "," gt "," run "," wait "," kv "," pfx "," mm
}
"""


def stats_line(rng: random.Random, month: int, day: int, secs: int, pid: int) -> str:
    hh, mm, ss = secs // 3600 % 24, secs // 60 % 60, secs % 60
    running = rng.randint(0, 64)
    return (
        f"(APIServer pid={pid}) INFO {month:02d}-{day:02d} {hh:02d}:{mm:02d}:{ss:02d} [loggers.py:335] "
        f"Engine 000: Avg prompt throughput: {rng.uniform(0, 20000):.1f} tokens/s, "
        f"Avg generation throughput: {rng.uniform(0, 3000):.1f} tokens/s, Running: {running} reqs, "
        f"Waiting: {rng.randint(0, 40)} reqs, GPU KV cache usage: {rng.uniform(0, 100):.1f}%, "
        f"Prefix cache hit rate: {rng.uniform(0, 100):.1f}%\n"
    )


def access_line(rng: random.Random) -> str:
    path = rng.choice(["/v1/chat/completions"] * 8 + ["/v1/completions", "/health", "/metrics"])
    method = "GET" if path in ("/health", "/metrics") else "POST"
    client = f"10.0.{rng.randint(0, 255)}.{rng.randint(1, 254)}:{rng.randint(1024, 65535)}"
    return f'INFO:     {client} - "{method} {path} HTTP/1.1" 200 OK\n'


def follower_lines(rng: random.Random, month: int, day: int, secs: int, pid: int) -> str:
    """The SpecDecoding and KV Transfer lines vLLM prints after an engine's stats line."""
    hh, mm, ss = secs // 3600 % 24, secs // 60 % 60, secs % 60
    head = f"(APIServer pid={pid}) INFO {month:02d}-{day:02d} {hh:02d}:{mm:02d}:{ss:02d} [exporting/exporter.py:"
    drafted = rng.randint(100, 400)
    accepted = rng.randint(0, drafted)
    return (
        f"{head}101] SpecDecoding metrics: Mean acceptance length: {1 + accepted / drafted * 3:.2f}, "
        f"Accepted throughput: {accepted / 10:.2f} tokens/s, Drafted throughput: {drafted / 10:.2f} tokens/s, "
        f"Accepted: {accepted} tokens, Drafted: {drafted} tokens, Per-position acceptance rate: "
        f"{rng.random():.3f}, {rng.random():.3f}, {rng.random():.3f}, Avg Draft acceptance rate: "
        f"{accepted / drafted * 100:.1f}%\n"
        f"{head}108] KV Transfer metrics: Num successful transfers={rng.randint(1, 90)}, Avg xfer time (ms)="
        f"{rng.uniform(1, 9):.3f}, P90 xfer time (ms)={rng.uniform(9, 20):.3f}, Avg post time (ms)="
        f"{rng.uniform(0, 1):.3f}, P90 post time (ms)={rng.uniform(1, 2):.3f}, Avg MB per transfer="
        f"{rng.uniform(1, 40):.3f}, Throughput (MB/s)={rng.uniform(1000, 9000):.3f}, Avg number of "
        f"descriptors={rng.uniform(100, 400):.1f}, Num failed transfers=0, Num KV expired reqs=0\n"
    )


def generate(path: Path, size: int, access_per_stats: int, seed: int, followers: bool = False) -> None:
    """Write about `size` bytes: `access_per_stats` access lines (+ a few others) per stats line, and
    with `followers` a spec and a KV Transfer line after each stats line."""
    rng = random.Random(seed)
    written, secs, pid = 0, 0, 4242
    with open(path, "w", encoding="utf-8") as out:
        while written < size:
            chunk = [stats_line(rng, 11, 1 + secs // 86400 % 28, secs, pid)]
            if followers:
                chunk.append(follower_lines(rng, 11, 1 + secs // 86400 % 28, secs, pid))
            for _ in range(access_per_stats):
                chunk.append(access_line(rng))
            if access_per_stats and rng.random() < 0.05:
                chunk.append(f"(APIServer pid={pid}) WARNING 11-01 00:00:00 [serving.py:120] disconnected\n")
            text = "".join(chunk)
            out.write(text)
            written += len(text)
            secs += 10


def run(cmd: str) -> tuple[float, int]:
    """Wall seconds and peak RSS (KiB): Linux's wait4 reports the largest of the process and its
    waited-for descendants, so a pipeline's figure is that of its biggest stage."""
    start = time.perf_counter()
    proc = subprocess.Popen(["bash", "-c", cmd])
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) not in (0, 1):
        raise SystemExit(f"failed ({status}): {cmd}")
    return wall, usage.ru_maxrss


def measure(commands: dict[str, str], repeat: int) -> dict[str, tuple[float, int]]:
    """The median wall time and the largest peak RSS of each command over `repeat` rounds, every round
    running each command once in turn (a load that comes and goes falls on all of them)."""
    walls: dict[str, list[float]] = {label: [] for label in commands}
    peaks = dict.fromkeys(commands, 0)
    for _ in range(repeat):
        for label, cmd in commands.items():
            wall, peak = run(f"exec {cmd}" if "|" not in cmd else cmd)
            walls[label].append(wall)
            peaks[label] = max(peaks[label], peak)
    return {label: (statistics.median(walls[label]), peaks[label]) for label in commands}


def bench_file(path: Path, repeat: int, logwatch: Sequence[str]) -> dict[str, tuple[float, int]]:
    """Median-of-`repeat` wall time and peak RSS of each command; every output goes to a real file
    (GNU grep stops at the first match when its output is /dev/null)."""
    f = str(path)
    out = str(path.with_suffix(".out"))
    awk = path.with_suffix(".awk")
    awk.write_text(AWK_PROGRAM)
    lw = " ".join(logwatch)
    return measure({
        "grep -c": f"grep -c 'Avg prompt throughput' {f} > {out}",
        "grep | awk (CSV)": f"grep 'Avg prompt throughput' {f} | awk -f {awk} > {out}",
        "logwatch parse --csv": f"{lw} parse --csv {f} > {out}",
    }, repeat)


def report(name: str, path: Path, results: dict[str, tuple[float, int]]) -> None:
    size = path.stat().st_size
    with open(path, "rb") as fh:
        lines = sum(chunk.count(b"\n") for chunk in iter(lambda: fh.read(1 << 24), b""))
    print(f"\n## {name}: {path.name}, {size / 1e6:.0f} MB, {lines:,} lines")
    print("| command | wall s | MB/s | lines/s | peak RSS MB |")
    print("|---|---:|---:|---:|---:|")
    for label, (wall, rss) in results.items():
        rss_text = f"{rss / 1024:.0f}" if rss else "-"
        print(f"| {label} | {wall:.2f} | {size / 1e6 / wall:.0f} | {lines / wall:,.0f} | {rss_text} |")
    lw = results["logwatch parse --csv"][0]
    print(f"\nratio logwatch / grep -c: {lw / results['grep -c'][0]:.2f}x; "
          f"logwatch / grep|awk: {lw / results['grep | awk (CSV)'][0]:.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--access", type=Path, help="an access-heavy log (default: generate 1 GB)")
    parser.add_argument("--stats", type=Path, help="a stats-only log (default: generate 200 MB)")
    parser.add_argument("--spec-kv", type=Path, help="a stats + spec + KV Transfer log (default: generate 100 MB)")
    parser.add_argument("--access-size", type=int, default=1 << 30)
    parser.add_argument("--stats-size", type=int, default=200 * 10**6)
    parser.add_argument("--spec-kv-size", type=int, default=100 * 10**6)
    parser.add_argument("--repeat", type=int, default=3, help="the median of N runs (default 3)")
    parser.add_argument("--seed", type=int, default=20261129)
    parser.add_argument("--workdir", type=Path, help="keep generated logs here and reuse them")
    args = parser.parse_args()
    tmp = args.workdir or Path(tempfile.mkdtemp(prefix="logwatch-bench-"))
    tmp.mkdir(parents=True, exist_ok=True)
    try:
        access = args.access or tmp / "serve_20261101_000000.log"
        stats = args.stats or tmp / "stats_20261101_000000.log"
        if args.access is None and not access.exists():
            print(f"generating {args.access_size / 1e6:.0f} MB access-heavy log...", file=sys.stderr)
            generate(access, args.access_size, access_per_stats=3000, seed=args.seed)
        if args.stats is None and not stats.exists():
            print(f"generating {args.stats_size / 1e6:.0f} MB stats-only log...", file=sys.stderr)
            generate(stats, args.stats_size, access_per_stats=0, seed=args.seed + 1)
        spec_kv = args.spec_kv or tmp / "speckv_20261101_000000.log"
        if args.spec_kv is None and not spec_kv.exists():
            print(f"generating {args.spec_kv_size / 1e6:.0f} MB stats + spec + KV log...", file=sys.stderr)
            generate(spec_kv, args.spec_kv_size, access_per_stats=0, seed=args.seed + 2, followers=True)
        # As `pip install` leaves it: the package byte-compiled, so no run pays for compiling our modules
        # (some environments set PYTHONDONTWRITEBYTECODE, and an editable install compiles nothing).
        import vllm_logwatch

        compileall.compile_dir(os.path.dirname(vllm_logwatch.__file__), quiet=1)
        logwatch = [sys.executable, "-m", "vllm_logwatch"]
        for name, path in (("access-heavy", access), ("stats-only", stats), ("stats + spec + KV", spec_kv)):
            report(name, path, bench_file(path, args.repeat, logwatch))
    finally:
        if args.workdir is None:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
