"""Benchmark every offline command against `parse --csv` and `grep -c`, on the same logs, in one run.

On the bench logs of `parse_bench.py` (a 200 MB stats-only log and a 1 GB access-heavy one, generated
with its seed, or reused from `--workdir`), times, interleaved round by round (so a change of load hits
every command alike), medians of `--repeat` runs:

    grep -c 'Avg prompt throughput' FILE          the floor: reading the file
    logwatch parse --csv FILE                     the reference of the budgets
    logwatch parse --jsonl FILE
    logwatch summary FILE
    logwatch plot FILE -o OUT.png
    python -c 'import matplotlib.figure ...'     (plot's budget: 3x csv plus this)
    logwatch parse --openmetrics FILE > OUT.om
    promtool tsdb create-blocks-from openmetrics OUT.om DIR     (ingesting what the line above wrote)

and the peak memory of each: the largest process's RSS (Linux's wait4 figure) and the whole process
tree's PSS, summed (sampled every 20 ms from /proc: the range workers count too, a page they share
with the parent once). Prints a Markdown table.

    python bench/offline_bench.py --workdir /tmp/lwbench            # generate once, reuse after
    python bench/offline_bench.py --workdir /tmp/lwbench --logs access --skip promtool
    python bench/offline_bench.py --workdir /tmp/lwbench --logs details --skip promtool,plot

The `details` log (200 MB of `bench/detail_shape.py`: request logging and iteration details on) adds
`parse --kind iterations` and `parse --kind requests` to the commands (budget: iterations <= 2x
`parse --csv` on the same file).
"""

from __future__ import annotations

import argparse
import compileall
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import detail_shape  # the `details` log
from parse_bench import generate  # the same generator and seed as the parse bench

PAGE = os.sysconf("SC_PAGE_SIZE")
LOGS = {  # name: (file name, size, access lines per stats line, seed offset)
    "stats": ("stats_20261101_000000.log", 200 * 10**6, 0, 1),
    "access": ("serve_20261101_000000.log", 1 << 30, 3000, 0),
    "details": ("details_20261202_000000.log", 200 * 10**6, -1, 2),
}
TITLES = {"stats": "stats-only, 200 MB", "access": "access-heavy, 1 GB",
          "details": "request logging and iteration details, 200 MB"}


def _tree_pss(root: int) -> int:
    """Bytes of memory `root` and its descendants hold now, each shared page split among its users
    (the kernel's PSS: forked workers share the parent's pages, and a sum of RSS counts them twice)."""
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        try:
            with open(f"/proc/{pid}/smaps_rollup") as fh:
                for row in fh:
                    if row.startswith("Pss:"):
                        total += int(row.split()[1]) * 1024
                        break
            for task in os.listdir(f"/proc/{pid}/task"):
                with open(f"/proc/{pid}/task/{task}/children") as fh:
                    todo.extend(int(child) for child in fh.read().split())
        except (OSError, ValueError):
            continue
    return total


def run(argv: list[str], stdout: Path | None) -> tuple[float, int, int]:
    """Wall seconds, the largest process's peak RSS and the tree's peak PSS, summed (bytes)."""
    out = open(stdout, "wb") if stdout is not None else subprocess.DEVNULL  # noqa: SIM115
    peak = [0]
    done = threading.Event()
    try:
        start = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=out)

        def sample() -> None:
            while not done.wait(0.02):
                peak[0] = max(peak[0], _tree_pss(proc.pid))

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        done.set()
        sampler.join()
    finally:
        if stdout is not None:
            out.close()  # type: ignore[union-attr]
    code = os.waitstatus_to_exitcode(status)
    if code not in (0, 1):
        raise SystemExit(f"exit {code}: {' '.join(argv)}")
    return wall, usage.ru_maxrss * 1024, peak[0]


def commands(log: Path, work: Path, skip: set[str]) -> list[tuple[str, list[str], Path | None]]:
    lw = [sys.executable, "-m", "vllm_logwatch"]
    om = work / f"{log.stem}.om"
    out = [
        ("grep -c", ["grep", "-c", "Avg prompt throughput", str(log)], work / "grep.out"),
        ("parse --csv", [*lw, "parse", "--csv", str(log)], work / "out.csv"),
        ("parse --jsonl", [*lw, "parse", "--jsonl", str(log)], work / "out.jsonl"),
        *((f"parse --kind {kind}", [*lw, "parse", "--kind", kind, "--csv", str(log)], work / f"{kind}.csv")
          for kind in (("iterations", "requests") if log.name.startswith("details_") else ())),
        ("summary", [*lw, "summary", str(log)], work / "summary.txt"),
        ("plot", [*lw, "plot", str(log), "-o", str(work / "out.png")], None),
        # plot's budget is 3x parse --csv plus matplotlib's own import, measured here in the same run
        ("import matplotlib",
         [sys.executable, "-c", "import matplotlib.figure, matplotlib.backends.backend_agg"], None),
        ("parse --openmetrics", [*lw, "parse", "--openmetrics", str(log)], om),
        ("promtool", ["promtool", "tsdb", "create-blocks-from", "openmetrics", str(om), str(work / "tsdb")],
         None),
    ]
    return [c for c in out if c[0] == "parse --csv" or not skip & {c[0], c[0].split()[-1]}]


def bench(log: Path, work: Path, repeat: int, skip: set[str]) -> dict[str, list[tuple[float, int, int]]]:
    results: dict[str, list[tuple[float, int, int]]] = {}
    for round_ in range(repeat):
        for label, argv, stdout in commands(log, work, skip):
            if label == "promtool":
                shutil.rmtree(work / "tsdb", ignore_errors=True)
            got = run(argv, stdout)
            results.setdefault(label, []).append(got)
            print(f"  round {round_ + 1} {label}: {got[0]:.2f} s", file=sys.stderr, flush=True)
    shutil.rmtree(work / "tsdb", ignore_errors=True)
    return results


def table(title: str, results: dict[str, list[tuple[float, int, int]]]) -> str:
    csv = statistics.median(r[0] for r in results["parse --csv"])
    rows = [f"| {title} | command | wall s | median | x csv | peak MB: RSS of a process / PSS of the tree |",
            "| --- | --- | --- | ---: | ---: | ---: |"]
    for label, runs in results.items():
        walls = [r[0] for r in runs]
        med = statistics.median(walls)
        rss = max(r[1] for r in runs) / 1e6
        tree = max(r[2] for r in runs) / 1e6
        shown = ", ".join(f"{w:.2f}" for w in walls)
        rows.append(f"| | `{label}` | {shown} | {med:.2f} | {med / csv:.2f} | {rss:.0f} / {tree:.0f} |")
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workdir", type=Path, help="keep the generated logs here and reuse them")
    parser.add_argument("--logs", default="stats,access",
                        help="which logs: stats, access, details (default stats,access)")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each command, the median shown")
    parser.add_argument("--skip", default="", help="commands to leave out (parse --csv always runs), "
                        "e.g. promtool,plot,--jsonl")
    parser.add_argument("--seed", type=int, default=20261129, help="parse_bench's seed")
    args = parser.parse_args()
    tmp = args.workdir or Path(tempfile.mkdtemp(prefix="logwatch-bench-"))
    tmp.mkdir(parents=True, exist_ok=True)
    skip = {s for s in args.skip.split(",") if s}
    if shutil.which("promtool") is None:
        print("promtool not found (Debian package prometheus): its ingest is left out", file=sys.stderr)
        skip.add("promtool")
    import vllm_logwatch

    compileall.compile_dir(os.path.dirname(vllm_logwatch.__file__), quiet=1)  # as `pip install` leaves it
    work = Path(tempfile.mkdtemp(prefix="logwatch-bench-out-"))
    try:
        load = os.getloadavg()
        print(f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} at the start; "
              f"{os.cpu_count()} CPUs; Python {sys.version.split()[0]}")
        for name in args.logs.split(","):
            file_name, size, access, seed = LOGS[name]
            log = tmp / file_name
            if not log.exists():
                print(f"generating {log} ...", file=sys.stderr)
                if access < 0:
                    detail_shape.generate(log, size, seed=args.seed + seed)
                else:
                    generate(log, size, access_per_stats=access, seed=args.seed + seed)
            print(f"\n{table(TITLES[name], bench(log, work, args.repeat, skip))}")
        load = os.getloadavg()
        print(f"\nload average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} at the end")
    finally:
        shutil.rmtree(work, ignore_errors=True)
        if args.workdir is None:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
