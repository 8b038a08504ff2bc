"""`logwatch summary`'s fast lane prints exactly what the general path prints, in every format."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import pytest
from support import TESTS

from vllm_logwatch.commands.summary import run_summary
from vllm_logwatch.errors import NoStatsError

DATA = TESTS / "data"
LOGS = (sorted(DATA.glob("*.log")) + sorted((DATA / "real-vllm-cpu").glob("*.log"))
        + sorted(DATA.glob("compare/*/*.log")))  # the last with MFU lines (--enable-mfu-metrics)
COMBOS = [(by, fmt) for by in ("launch", "engine", "none") for fmt in ("text", "markdown", "json")]

# A fresh interpreter (the workers fork), with sizes small enough that a test-sized file takes the
# multi-process route; every grouping and format, one after the other.
FAST = """
import sys
from vllm_logwatch.commands.summary import run_summary
from vllm_logwatch.errors import NoStatsError
from vllm_logwatch.offline.output.csv_rows import Tuning
tuning = Tuning(parallel_min_bytes=int(sys.argv[1]), range_bytes=int(sys.argv[2]), dense_probe=512)
for by in ("launch", "engine", "none"):
    for fmt in ("text", "markdown", "json"):
        try:
            run_summary(sys.argv[3:], by=by, fmt=fmt, tz="UTC", tuning=tuning)
        except NoStatsError:
            print("no stats")
        print("\\f")
"""


def slow_summaries(paths: list[str]) -> str:
    out = io.StringIO()
    for by, fmt in COMBOS:
        try:
            run_summary(paths, by=by, fmt=fmt, tz="UTC", out=out, tuning=None)  # the general path
        except NoStatsError:
            out.write("no stats\n")
        out.write("\f\n")
    return out.getvalue()


def fast_summaries(paths: list[str], parallel_min: int = 64 << 20, range_size: int = 8 << 20) -> str:
    proc = subprocess.run([sys.executable, "-c", FAST, str(parallel_min), str(range_size), *paths],
                          capture_output=True, text=True, timeout=60)
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc.stdout


@pytest.mark.parametrize("log", LOGS, ids=lambda p: p.name)
def test_fast_equals_general_path(log: Path) -> None:
    expected = slow_summaries([str(log)])
    assert fast_summaries([str(log)]) == expected
    assert fast_summaries([str(log)], 1, 4096) == expected


def test_ranges_restarts_and_several_files(tmp_path: Path) -> None:
    """Many small ranges over logs glued together (restarts inside one file: new launches), V0, spec
    and transfer lines across range edges, and several files in order."""
    parts = [(DATA / name).read_bytes() for name in ("004.log", "011.log", "012.log", "017.log", "019.log")]
    real = next((DATA / "real-vllm-cpu").glob("*.log")).read_bytes()
    mfu = next((DATA / "compare" / "mns16-prefix").glob("*.log")).read_bytes()  # MFU lines, then a restart
    big = tmp_path / "mixed_20261129_120000.log"
    big.write_bytes(b"".join(parts) * 20 + real * 2 + mfu * 2 + real)
    paths = [str(big), str(DATA / "021.log")]
    expected = slow_summaries(paths)
    for range_size in (4096, 65536):
        assert fast_summaries(paths, 1, range_size) == expected
