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
# multi-process route; every grouping and format, one after the other. Each group of inputs
# (separated by `--`) is summarised on its own; each group's output is ended by a record separator.
FAST = """
import sys
from vllm_logwatch.commands.summary import run_summary
from vllm_logwatch.errors import NoStatsError
from vllm_logwatch.offline.output.csv_rows import Tuning
tuning = Tuning(parallel_min_bytes=int(sys.argv[1]), range_bytes=int(sys.argv[2]), dense_probe=512)
for group in " ".join(sys.argv[3:]).split(" -- "):
    for by in ("launch", "engine", "none"):
        for fmt in ("text", "markdown", "json"):
            try:
                run_summary(group.split(" "), by=by, fmt=fmt, tz="UTC", tuning=tuning)
            except NoStatsError:
                print("no stats")
            print("\\f")
    print("\\x1e", end="", flush=True)
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


def fast_summaries(groups: list[list[str]], parallel_min: int = 64 << 20,
                   range_size: int = 8 << 20) -> list[str]:
    """The fast lane's summaries of each group of inputs, one interpreter for all of them."""
    args = [arg for group in groups for arg in ([*group, "--"])][:-1]
    proc = subprocess.run([sys.executable, "-c", FAST, str(parallel_min), str(range_size), *args],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    outputs = proc.stdout.split("\x1e")
    assert outputs.pop() == "" and len(outputs) == len(groups)
    return outputs


@pytest.fixture(scope="module")
def fast_outputs() -> dict[tuple[str, int, int], str]:
    """Every log's fast-lane summaries, in one process (streamed) and through the range workers: one
    interpreter for each, not two per log."""
    out = {}
    for parallel_min, range_size in ((64 << 20, 8 << 20), (1, 4096)):
        for log, text in zip(LOGS, fast_summaries([[str(log)] for log in LOGS], parallel_min, range_size),
                             strict=True):
            out[(str(log), parallel_min, range_size)] = text
    return out


@pytest.mark.parametrize("log", LOGS, ids=lambda p: p.name)
def test_fast_equals_general_path(log: Path, fast_outputs: dict[tuple[str, int, int], str]) -> None:
    expected = slow_summaries([str(log)])
    assert fast_outputs[(str(log), 64 << 20, 8 << 20)] == expected
    assert fast_outputs[(str(log), 1, 4096)] == expected


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
        assert fast_summaries([paths], 1, range_size) == [expected]
