"""An offline command killed with -9 (or by the OOM killer) leaves no range worker behind: each watches
its parent (`offline/children.py`) and exits, where it would wait on its pipe for ever."""

from __future__ import annotations

import subprocess
import sys

from support import TESTS, poll_until

REAL_CPU_LOG = next((TESTS / "data" / "real-vllm-cpu").glob("serve_*.log"))

DRIVER = """
import multiprocessing, sys, time
from vllm_logwatch.offline.reading.ranges import Tuning, scan_file_chunks
from vllm_logwatch.parsing.needles import STATS_NEEDLES
tuning = Tuning(parallel_min_bytes=1, range_bytes=4096, dense_probe=512)
chunks = scan_file_chunks(sys.argv[1], STATS_NEEDLES, workers=2, tuning=tuning)
next(chunks)  # the workers are up, ranges in flight
print(" ".join(str(p.pid) for p in multiprocessing.active_children()), flush=True)
time.sleep(60)
"""


def gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] == "Z"  # ended, not yet reaped by init
    except FileNotFoundError:
        return True


def test_range_workers_end_with_their_killed_parent() -> None:
    with subprocess.Popen([sys.executable, "-c", DRIVER, str(REAL_CPU_LOG)], stdout=subprocess.PIPE,
                          text=True) as proc:
        assert proc.stdout is not None
        workers = [int(pid) for pid in proc.stdout.readline().split()]
        assert len(workers) == 2 and all(not gone(pid) for pid in workers)
        proc.kill()
        proc.wait(10)
    poll_until(lambda: all(gone(pid) for pid in workers), timeout=10,
               what=f"range workers {workers} to end after their parent's kill -9")
