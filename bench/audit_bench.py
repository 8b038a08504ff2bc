"""`logwatch audit` on a large detailed result: time and peak memory.

Writes a result in the shape of `vllm bench serve --save-result --save-detailed` (one JSON object on one
line, per request its latency, TTFT, lengths, generated text and `itls`: `--itls` floats each), made from
tests/data/audit/roomy/vllm-bench-c2.json so that its window is in that folder's log, then runs

    /usr/bin/time -v python -m vllm_logwatch audit BIG.json --log tests/data/audit/roomy/serve_*.log

and prints its wall time and peak RSS (best of `--repeat`).

    python bench/audit_bench.py --workdir /tmp/lwaudit              # 100,000 requests, ~120 MB
    python bench/audit_bench.py --workdir /tmp/lwaudit --requests 1000 --repeat 1
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data" / "audit" / "roomy"


def write_result(path: Path, requests: int, itls: int) -> None:
    """A detailed result of `requests` requests with `itls` inter-token latencies each."""
    rng = random.Random(7)
    base = json.loads((DATA / "vllm-bench-c2.json").read_text())
    base.update(num_prompts=requests, completed=requests)
    head = json.dumps(base)[:-1]
    with path.open("w") as out:
        out.write(head)
        for key, make in (("input_lens", lambda: rng.randrange(100, 1000)),
                          ("output_lens", lambda: rng.randrange(10, 200)),
                          ("ttfts", rng.random), ("latencies", rng.random),
                          ("generated_texts", lambda: "word " * 8), ("errors", lambda: "")):
            out.write(f', "{key}": ')
            out.write(json.dumps([make() for _ in range(requests)]))
        out.write(', "itls": [')
        for n in range(requests):
            out.write(("," if n else "") + json.dumps([round(rng.random() / 50, 6) for _ in range(itls)]))
        out.write("]}\n")


def measure(result: Path) -> tuple[float, int]:
    """Wall seconds and peak RSS (KiB) of one audit of `result`."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    logs = [str(p) for p in sorted(DATA.glob("serve_*.log"))]
    proc = subprocess.run(["/usr/bin/time", "-v", sys.executable, "-m", "vllm_logwatch", "audit", str(result),
                           "--tz", "UTC", *(a for log in logs for a in ("--log", log))],
                          capture_output=True, text=True, env=env, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"audit failed ({proc.returncode}): {proc.stderr[-2000:]}")
    wall = re.search(r"Elapsed \(wall clock\) time.*: (?:(\d+):)?(\d+):([\d.]+)", proc.stderr)
    rss = re.search(r"Maximum resident set size \(kbytes\): (\d+)", proc.stderr)
    assert wall and rss, proc.stderr
    seconds = int(wall[1] or 0) * 3600 + int(wall[2]) * 60 + float(wall[3])
    return seconds, int(rss[1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workdir", type=Path, required=True)
    ap.add_argument("--requests", type=int, default=100_000)
    ap.add_argument("--itls", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    result = args.workdir / f"detailed-{args.requests}x{args.itls}.json"
    if not result.exists():
        write_result(result, args.requests, args.itls)
    runs = [measure(result) for _ in range(args.repeat)]
    wall = min(w for w, _ in runs)
    rss = min(r for _, r in runs)
    print(f"{result.name}: {result.stat().st_size / 1e6:.0f} MB; audit wall {wall:.2f} s, "
          f"peak RSS {rss / 1024:.0f} MB (best of {args.repeat})")


if __name__ == "__main__":
    main()
