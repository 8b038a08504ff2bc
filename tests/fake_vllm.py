"""A stand-in for `vllm serve` in run-mode tests: prints real-format lines from tests/data.

    python tests/fake_vllm.py [--log FILE] [--rate LINES_PER_S] [--lines N] [--exit CODE]
                              [--ignore-sigterm] [--no-start] [--stay] [--stderr-every K] [--spawn-child]

Lines come from a real vLLM log (default: the vLLM 0.32 CPU log in tests/data), replayed in order
and looped, written to stdout (every K-th to stderr, to check the merge). It prints
"Starting vLLM server on ..." first unless --no-start (a start-up failure). --stay keeps running
after the lines until a signal; --ignore-sigterm makes it ignore SIGTERM (to test the SIGKILL
fallback); --spawn-child starts a grandchild that sleeps (to test the process-group stop).
On SIGTERM (when obeyed) it prints a shutdown line and exits 143.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

DEFAULT_LOG = next((Path(__file__).parent / "data" / "real-vllm-cpu").glob("serve_*.log"))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--log", type=Path, default=DEFAULT_LOG)
    ap.add_argument("--rate", type=float, default=0.0, help="lines per second (0: as fast as possible)")
    ap.add_argument("--lines", type=int, default=-1, help="lines to print (-1: the whole log once)")
    ap.add_argument("--exit", type=int, default=0)
    ap.add_argument("--ignore-sigterm", action="store_true")
    ap.add_argument("--no-start", action="store_true")
    ap.add_argument("--stay", action="store_true")
    ap.add_argument("--stderr-every", type=int, default=0)
    ap.add_argument("--spawn-child", action="store_true")
    args = ap.parse_args()

    def on_term(signum: int, frame: object) -> None:
        sys.stdout.buffer.write(b"INFO:     Shutting down\n")
        sys.stdout.buffer.flush()
        os._exit(128 + signum)

    signal.signal(signal.SIGTERM, signal.SIG_IGN if args.ignore_sigterm else on_term)
    if args.spawn_child:
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])
    out, err = sys.stdout.buffer, sys.stderr.buffer
    if not args.no_start:
        out.write(b"(APIServer pid=1) INFO 11-29 19:23:52 [entry.py:140] Starting vLLM server on http://127.0.0.1:18000\n")
        out.flush()
    lines = args.log.read_bytes().splitlines(keepends=True)
    total = len(lines) if args.lines < 0 else args.lines
    delay = 1.0 / args.rate if args.rate > 0 else 0.0
    next_at = time.monotonic()
    for i in range(total):
        line = lines[i % len(lines)]
        stream = err if args.stderr_every and i % args.stderr_every == 0 else out
        stream.write(line)
        if delay:
            stream.flush()
            next_at += delay
            pause = next_at - time.monotonic()
            if pause > 0:
                time.sleep(pause)
    out.flush()
    err.flush()
    while args.stay:
        signal.pause()
    return args.exit


if __name__ == "__main__":
    sys.exit(main())
