"""`scan_lines` (the block scanner behind `logwatch parse`) against a naive line-by-line filter: the same
(line number, text) pairs whatever the block size, at every block boundary, with CRLF, without a final
newline, and with over-long lines."""

from __future__ import annotations

import io

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import TESTS

from vllm_logwatch.offline.reading.stream import scan_lines, simd_count, simd_find
from vllm_logwatch.parsing.needles import FOLLOWER_NEEDLES, SPEC_NEEDLES, STATS_NEEDLES, VARIANT_NEEDLES

DATA = TESTS / "data"
MAX_LINE = 1 << 20

STATS = (b"(APIServer pid=1) INFO 11-02 12:00:10 [loggers.py:335] Engine 000: Avg prompt throughput: 1.0 "
         b"tokens/s, Avg generation throughput: 2.0 tokens/s, Running: 3 reqs, Waiting: 0 reqs, "
         b"GPU KV cache usage: 5.5%")
V0_STATS = (b"INFO 05-25 06:50:29 [metrics.py:486] Avg prompt throughput: 0.0 tokens/s, Avg generation "
            b"throughput: 15.5 tokens/s, Running: 1 reqs, Swapped: 0 reqs, Pending: 0 reqs, GPU KV cache "
            b"usage: 0.0%, CPU KV cache usage: 0.1%.")
V0_PREFIX = b"INFO 05-25 06:50:29 [metrics.py:502] Prefix cache hit rate: GPU: 0.00%, CPU: 90.00%"
SPEC = (b"(APIServer pid=1) INFO 11-02 12:00:10 [metrics.py:101] SpecDecoding metrics: Mean acceptance "
        b"length: 2.20, Accepted: 78 tokens, Drafted: 195 tokens")
ACCESS = b'INFO:     127.0.0.1:50000 - "POST /v1/chat/completions HTTP/1.1" 200 OK'
OTHER = b"(APIServer pid=1) INFO 11-02 12:00:10 [launcher.py:195] Route: /v1/models, Methods: GET"
STUB = b"INFO 01-27 12:00:05 loggers.py:34] Running: 3 reqs, Waiting: 0 reqs "
RUST = (b"(RustFrontend pid=4) INFO 11-02 12:00:10 [log_stats.rs:273] Avg prompt tput: 1.0 toks/s, "
        b"Reqs Running: 3")


def naive(
    data: bytes,
    needles: tuple[bytes, ...] = STATS_NEEDLES,
    followers: tuple[bytes, ...] = FOLLOWER_NEEDLES,
    block_size: int = 8 << 20,
) -> list[tuple[int, str]]:
    """What `scan_lines` promises, one line at a time: the (line number, text) pairs.

    A line is wanted when it holds a needle, or when it holds a follower and the line before it was
    wanted for a needle. Lines over 1 MiB are never wanted. The variant needles (0.7.0 stub, Rust
    frontend) are searched only by a reader of stats lines, and only when the first block holds one.
    """
    if STATS_NEEDLES[0] in needles:
        needles = needles + tuple(n for n in VARIANT_NEEDLES if n in data[:block_size] and n not in needles)
    lines = data.split(b"\n")
    if data.endswith(b"\n") or not data:
        lines.pop()
    out: list[tuple[int, str]] = []
    prev_hit = False
    for number, line in enumerate(lines, 1):
        hit = any(n in line for n in needles)
        if len(line) > MAX_LINE:
            prev_hit = False
            continue
        if hit or (prev_hit and any(f in line for f in followers)):
            out.append((number, line.decode("utf-8", "replace")))
        prev_hit = hit
    return out


def scan(data: bytes, block_size: int, needles: tuple[bytes, ...] = STATS_NEEDLES,
         followers: tuple[bytes, ...] = FOLLOWER_NEEDLES) -> list[tuple[int, str]]:
    return [(n, raw.decode("utf-8", "replace")) for n, raw in
            scan_lines(io.BytesIO(data), needles, followers=followers, block_size=block_size)]


def check(data: bytes, block_size: int, needles: tuple[bytes, ...] = STATS_NEEDLES,
          followers: tuple[bytes, ...] = FOLLOWER_NEEDLES) -> list[tuple[int, str]]:
    pairs = scan(data, block_size, needles, followers)
    assert pairs == naive(data, needles, followers, block_size)
    return pairs


def join(*lines: bytes, eol: bytes = b"\n", final: bool = True) -> bytes:
    return eol.join(lines) + (eol if final else b"")


@pytest.mark.parametrize("block_size", [1, 7, 64, 4096, 8 << 20])
def test_real_logs(block_size: int) -> None:
    for path in sorted(DATA.glob("*.log")) + sorted((DATA / "real-vllm-cpu").glob("*.log")):
        data = path.read_bytes()
        for needles in (STATS_NEEDLES, STATS_NEEDLES + SPEC_NEEDLES):
            check(data, block_size, needles)


def test_real_v0_prefix_and_spec_followers() -> None:
    pairs = check((DATA / "012.log").read_bytes(), 64)
    assert [n for n, _ in pairs] == [1, 2, 3, 4, 5, 6]  # each stats line and its prefix-cache line
    pairs = check((DATA / "019.log").read_bytes(), 64)
    assert [n for n, _ in pairs] == [2, 3, 5, 6]  # stats lines and their SpecDecoding lines
    pairs = check((DATA / "017.log").read_bytes(), 7)
    assert [n for n, _ in pairs] == [2, 3]


@pytest.mark.parametrize("block_size", [7, 64, 4096])
@pytest.mark.parametrize("follower", [V0_PREFIX, SPEC])
@pytest.mark.parametrize("eol", [b"\n", b"\r\n"])
def test_follower_at_every_block_boundary(block_size: int, follower: bytes, eol: bytes) -> None:
    """Move the stats line and its follower across a block boundary one byte at a time."""
    span = len(V0_STATS) + len(follower) + 8
    for pad in range(0, min(block_size, 4096) + span, 1 if block_size < 4096 else 37):
        data = join(b"p" * pad, ACCESS, V0_STATS, follower, SPEC, OTHER, eol=eol)
        pairs = check(data, block_size)
        assert [n for n, _ in pairs] == [3, 4]
        assert pairs[0][1].endswith("." + eol[:-1].decode())  # CR kept: the parser strips it


@pytest.mark.parametrize("block_size", [7, 64, 4096, 8 << 20])
def test_no_newline_at_eof(block_size: int) -> None:
    assert [n for n, _ in check(join(OTHER, STATS, final=False), block_size)] == [2]
    assert [n for n, _ in check(join(OTHER, STATS, SPEC, final=False), block_size)] == [2, 3]
    assert check(join(OTHER, ACCESS, final=False), block_size) == []
    assert check(b"", block_size) == []
    assert check(STATS, block_size) == [(1, STATS.decode())]


@pytest.mark.parametrize("block_size", [4096, 65536, 8 << 20])
def test_over_long_lines_skipped(block_size: int) -> None:
    long_hit = b"x" * (MAX_LINE + 5000) + STATS  # a stats needle at the end of a 1 MiB line
    just_over = STATS + b"y" * (MAX_LINE - len(STATS) + 1)
    data = join(STATS, long_hit, SPEC, OTHER, just_over, V0_PREFIX, STATS, b"z" * (2 * MAX_LINE), STATS,
                final=False)
    pairs = scan(data, block_size)
    assert pairs == naive(data, block_size=block_size)
    assert [n for n, _ in pairs] == [1, 7, 9]  # neither long line nor the lines after them as followers


@pytest.mark.parametrize("block_size", [83, 4096])
def test_over_long_follower_candidate_ends_the_follow(block_size: int) -> None:
    """The line after a stats line is over-long: the line after *that* follows nothing."""
    hit = STATS[: block_size - 1] if block_size < len(STATS) else STATS
    data = join(hit.replace(b"Avg prompt throughput: ", b"") + b" Avg prompt throughput: 1",
                b"z" * (MAX_LINE + 100_000), SPEC, V0_PREFIX)
    assert [n for n, _ in scan(data, block_size)] == [1]


def test_over_long_last_line_without_newline_is_skipped() -> None:
    data = join(STATS, b"z" * (MAX_LINE + 50_000), final=False)
    assert [n for n, _ in scan(data, 4096)] == [1]


def test_variant_needles_only_when_the_first_block_has_one() -> None:
    data = join(OTHER, STUB, RUST, STATS)
    assert [n for n, _ in check(data, 8 << 20)] == [2, 3, 4]
    assert [n for n, _ in check(data, 64)] == [4]  # the first 64 bytes hold neither variant


def test_custom_needles_without_followers() -> None:
    data = join(STATS, SPEC, ACCESS, V0_PREFIX)
    pairs = check(data, 7, needles=(b'HTTP/1.1" ',), followers=())
    assert [n for n, _ in pairs] == [3]


def test_invalid_utf8_replaced() -> None:
    data = join(b"\xff" + STATS + b"\xc3", b"\x80\x80")
    assert check(data, 7)[0][1].startswith("\ufffd(APIServer")


_LINES = [
    STATS, V0_STATS, V0_PREFIX, SPEC, ACCESS, OTHER, STUB, RUST, b"", b"\r", b"Avg prompt", b"metrics: ",
    b" metrics: x", b"Prefix cache hit rate: GPU", b"\xff\xfe", b"Avg prompt throughput: \r", b"] Running: 1",
    b"Avg prompt tput: 5",
]
_NO_NEWLINE = st.binary(max_size=40).map(lambda b: b.replace(b"\n", b""))


@st.composite
def streams(draw: st.DrawFn) -> tuple[bytes, int]:
    lines = draw(st.lists(st.one_of(st.sampled_from(_LINES), _NO_NEWLINE), max_size=40))
    eol = draw(st.sampled_from([b"\n", b"\r\n"]))
    final = draw(st.booleans())
    data = eol.join(lines)
    if lines and final:
        data += eol
    block_size = draw(st.one_of(st.integers(1, 300), st.sampled_from([4096, 8 << 20])))
    return data, block_size


@pytest.mark.integration  # over 0.2 s (a process, or a day of lines): make test, not smoke
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(streams(), st.sampled_from([STATS_NEEDLES, STATS_NEEDLES + SPEC_NEEDLES, (b"HTTP/1.1",)]))
def test_scan_stream_matches_naive_filter(stream: tuple[bytes, int], needles: tuple[bytes, ...]) -> None:
    data, block_size = stream
    check(data, block_size, needles)


@settings(max_examples=1000, deadline=None)
@given(st.binary(max_size=300).map(lambda b: b.replace(b"\x00", b"\n")),
       st.sampled_from([b"\n", b"A", b"Avg prompt throughput: ", b" metrics: ", b"\n\n", b"\xff"]),
       st.integers(0, 320), st.integers(0, 320), st.booleans())
@pytest.mark.integration  # over 0.2 s (a process, or a day of lines): make test, not smoke
def test_simd_find_and_count_answer_as_bytes_methods(
    text: bytes, needle: bytes, start: int, end: int, mutable: bool
) -> None:
    """The scanners rely on StringZilla giving `bytes.find` / `bytes.count`'s exact answers, for
    `bytes` and the workers' reused `bytearray`, with any start and end (past the end, or crossed)."""
    subject = bytearray(text) if mutable else text
    assert simd_find(subject, needle, start, end) == text.find(needle, start, end)
    assert simd_count(subject, needle, start, end) == text.count(needle, start, end)


# --- every line, numbered (no needles) ------------------------------------------------------------------


def test_every_line_numbers_crlf_and_last_line() -> None:
    data = join(STATS, b"", ACCESS, eol=b"\r\n") + b"tail"
    got = list(scan_lines(io.BytesIO(data), None))
    assert [n for n, _ in got] == [1, 2, 3, 4]
    assert got[0][1].endswith(b"\r") and got[3][1] == b"tail"


def test_every_line_cuts_over_long_lines() -> None:
    data = join(STATS, b"q" * (3 * MAX_LINE), ACCESS)
    got = list(scan_lines(io.BytesIO(data), None))
    assert [n for n, _ in got] == [1, 2, 3]
    assert len(got[1][1]) == MAX_LINE and got[2][1].startswith(b"INFO:")
