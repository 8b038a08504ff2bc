"""Time `logwatch parse --csv` of two source trees (the code before and after a change) on the same
files, interleaved round by round (a change of load hits both alike), with `grep -c` as the floor.

Each file is read twice: by path (a big file: the range workers) and from standard input (the stream
route). Prints the medians and the after/before ratio.

    python bench/trees_bench.py --before OLD_TREE --after NEW_TREE --rounds 4 ACCESS.log STATS.log
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time


def timed(args: list[str], stdin_path: str | None = None, env: dict[str, str] | None = None) -> float:
    with open(stdin_path or os.devnull, "rb") as fh:
        start = time.perf_counter()
        # grep stops at its first match when its output is /dev/null: a pipe it is
        subprocess.run(args, stdin=fh, stdout=subprocess.PIPE, env=env, check=True)
        return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--before", required=True, help="a source tree (its folder holds vllm_logwatch/)")
    parser.add_argument("--after", required=True)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("files", nargs="+")
    args = parser.parse_args()
    trees = {"before": args.before, "after": args.after}
    times: dict[tuple[str, str], list[float]] = {}
    cases = [(f"{os.path.basename(f)}{' (stdin)' if stdin else ''}", f, stdin)
             for f in args.files for stdin in (False, True)]
    for _ in range(args.rounds):
        for name, path, stdin in cases:
            grep = ["grep", "-c", "Avg prompt throughput", path]
            times.setdefault((name, "grep -c"), []).append(timed(grep))
            for tree, folder in trees.items():
                env = dict(os.environ, PYTHONPATH=folder)
                command = [sys.executable, "-m", "vllm_logwatch", "parse", "--csv", "--tz", "UTC",
                           "-" if stdin else path]
                times.setdefault((name, tree), []).append(timed(command, path if stdin else None, env))
    print("| file | grep -c | before | after | after / before |\n| --- | ---: | ---: | ---: | ---: |")
    for name, _, _ in cases:
        grep, before, after = (statistics.median(times[name, k]) for k in ("grep -c", "before", "after"))
        print(f"| {name} | {grep:.2f} | {before:.2f} | {after:.2f} | {after / before:.2f} |")


if __name__ == "__main__":
    main()
