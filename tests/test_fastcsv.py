"""The fast CSV path writes exactly what the general parser writes, row for row."""

from __future__ import annotations

import contextlib
import gzip
import io
import subprocess
import sys
from pathlib import Path

import pytest

from vllm_logwatch.errors import NoStatsError
from vllm_logwatch.report import run_parse

DATA = Path(__file__).parent / "data"
LOGS = sorted(DATA.glob("*.log")) + sorted((DATA / "real-vllm-cpu").glob("*.log"))

# Run the fast path in a fresh interpreter, with its thresholds made small enough that a test-sized
# file takes the multi-process route (8 KiB ranges, parallel from 1 byte on).
FAST = """
import sys
import vllm_logwatch.fastcsv as f
f.PARALLEL_MIN_BYTES = int(sys.argv[1])
f._RANGE = int(sys.argv[2])
f._DENSE_PROBE = int(sys.argv[3])
from vllm_logwatch.errors import NoStatsError
try:
    f.run_csv(sys.argv[4:], tz="UTC")
except NoStatsError:
    sys.exit(1)
"""


def slow_csv(paths: list[str]) -> str:
    out = io.StringIO()
    with contextlib.suppress(NoStatsError):  # files without stats: compared as empty output
        run_parse(paths, tz="UTC", out=out)  # a StringIO has no .buffer: the general path
    return out.getvalue()


def fast_csv(
    paths: list[str], parallel_min: int = 64 << 20, range_size: int = 8 << 20, probe: int = 1 << 16
) -> str:
    proc = subprocess.run(
        [sys.executable, "-c", FAST, str(parallel_min), str(range_size), str(probe), *paths],
        capture_output=True, text=True, timeout=60,
    )
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc.stdout


@pytest.mark.parametrize("log", LOGS, ids=lambda p: p.name)
def test_fast_equals_general_path(log: Path) -> None:
    assert fast_csv([str(log)]) == slow_csv([str(log)])


def test_parallel_ranges_equal_general_path(tmp_path: Path) -> None:
    """Many small ranges, dense and sparse, V0 prefix lines and spec lines across range edges."""
    parts = [(DATA / name).read_bytes() for name in ("004.log", "012.log", "017.log", "019.log", "021.log")]
    real = next((DATA / "real-vllm-cpu").glob("*.log")).read_bytes()
    big = tmp_path / "mixed_20261129_120000.log"
    big.write_bytes(b"".join(parts) * 40 + real * 3)
    for range_size, probe in ((8192, 65536), (4096, 512), (1 << 20, 65536)):
        fast = fast_csv([str(big)], parallel_min=1, range_size=range_size, probe=probe)
        assert fast == slow_csv([str(big)])


def test_gzip_and_several_files_in_order(tmp_path: Path) -> None:
    real = next((DATA / "real-vllm-cpu").glob("*.log"))
    gz = tmp_path / "serve_20261129T192328Z.log.gz"
    gz.write_bytes(gzip.compress(real.read_bytes()))
    paths = [str(DATA / "002.log"), str(gz), str(DATA / "012.log")]
    assert fast_csv(paths) == slow_csv(paths)
