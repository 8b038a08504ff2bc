"""Container envelopes: the format told from the first line, the vLLM lines given back exactly (parts
joined per stream, in any block cut), each with its container stamp; long, dangling and bad lines."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from envelopes import FORMATS, NOISE_STDERR, wrap
from support import TESTS

from vllm_logwatch.parsing.envelope import Unwrapped, Unwrapper, container_time, detect

DATA = TESTS / "data"
LOGS = sorted(DATA.glob("*.log")) + sorted((DATA / "real-vllm-cpu").glob("*.log"))
DETECTED = {"docker-json": "docker-json", "containerd": "cri", "cri-o": "cri"}


def lines_of(path: Path) -> list[bytes]:
    """Split on newlines only, as the follower does (the logs hold bare carriage returns)."""
    data = path.read_bytes()
    lines = [line + b"\n" for line in data.split(b"\n")]
    lines[-1] = lines[-1][:-1]
    return lines if lines[-1] else lines[:-1]


def unwrap_all(unwrapper: Unwrapper, data: bytes, rng: random.Random) -> Unwrapped:
    """`data` cut into blocks of complete lines at random, each unwrapped, then the flush."""
    whole = Unwrapped()
    lines = data.split(b"\n")
    lines = [line + b"\n" for line in lines[:-1]] + ([lines[-1]] if lines[-1] else [])
    chunks: list[bytes] = []
    i, number = 0, 1
    while i <= len(lines):
        n = rng.randrange(1, 40)
        block = b"".join(lines[i : i + n])
        got = unwrapper.unwrap(block, number) if block else unwrapper.flush()
        chunks.append(got.data)
        whole.numbers += got.numbers
        whole.stamps += got.stamps
        whole.malformed += got.malformed
        whole.cut += got.cut
        i, number = i + n, number + n
    chunks.append(unwrapper.flush().data)
    whole.data = b"".join(chunks)
    return whole


def test_detect() -> None:
    assert detect(b'{"log":"INFO 07-05 11:29:01 x\\n","stream":"stdout","time":"2025-07-05T11:29:01Z"}\n') \
        == "docker-json"
    assert detect(b"2025-07-05T11:29:01.5+02:00 stderr F INFO x\n") == "cri"
    assert detect(b"2025-07-05T11:29:01.123456789-04:00 stdout P INFO x") == "cri"
    assert detect(b"2025-07-05T11:29:01.123456789Z INFO 07-05 11:29:01 [loggers.py:1] x\n") \
        == "docker-timestamps"
    assert detect(b"INFO 07-05 11:29:01 [loggers.py:1] Engine 000: ...\n") == "plain"
    assert detect(b"\n\n(APIServer pid=1) INFO 07-05 11:29:01 x\n") == "plain"
    assert detect(b"") is None and detect(b"\n") is None and detect(b"2025-07") is None
    assert detect(b"07-05 11:29:01 a line that is long enough to be nothing else than plain text") == "plain"


def test_container_time() -> None:
    assert container_time(b"2025-07-05T11:29:01.123456789Z") == datetime(
        2025, 7, 5, 11, 29, 1, 123456, tzinfo=UTC)
    assert container_time(b"2025-07-05T13:29:01.1+02:00") == datetime(
        2025, 7, 5, 11, 29, 1, 100000, tzinfo=UTC)
    assert container_time(b"2025-07-05T11:29:01Z") == datetime(2025, 7, 5, 11, 29, 1, tzinfo=UTC)
    assert container_time(b"2025-07-05T11:29:01") is None  # no zone: not a container stamp
    assert container_time(b"garbage") is None


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("path", LOGS, ids=lambda p: p.name)
def test_real_logs_come_back_exactly(fmt: str, path: Path) -> None:
    rng = random.Random(f"{fmt}:{path}")
    lines = lines_of(path)
    data, times = wrap(lines, fmt, rng)
    assert detect(data[:256]) == DETECTED[fmt]
    got = unwrap_all(Unwrapper(DETECTED[fmt]), data, rng)  # type: ignore[arg-type]
    assert got.malformed == [] and got.cut == 0
    produced = [line + b"\n" for line in got.data.split(b"\n")[:-1]]
    assert len(produced) == len(got.numbers) == len(got.stamps)
    kept = [(line, container_time(stamp)) for line, stamp in zip(produced, got.stamps, strict=True)
            if line != NOISE_STDERR and not line.startswith(b"xxxxxxxx")]
    want = [line if line.endswith(b"\n") else line + b"\n" for line in lines]
    assert [line for line, _ in kept] == want
    assert [when for _, when in kept] == times
    assert got.numbers == sorted(got.numbers)  # a joined line is numbered by the record that ends it


def test_parts_join_per_stream() -> None:
    unwrapper = Unwrapper("cri")
    got = unwrapper.unwrap(
        b"2025-07-05T11:29:01Z stdout P Engine 000: Avg prompt\n"
        b"2025-07-05T11:29:02Z stderr P warn\n"
        b"2025-07-05T11:29:03Z stderr F ing\n"
        b"2025-07-05T11:29:04Z stdout F  throughput: 1.0 tokens/s\n"
        b"2025-07-05T11:29:05Z stdout F\n", 10)
    assert got.data == b"warning\nEngine 000: Avg prompt throughput: 1.0 tokens/s\n\n"
    assert got.numbers == [12, 13, 14]
    assert got.stamps == [b"2025-07-05T11:29:02Z", b"2025-07-05T11:29:01Z", b"2025-07-05T11:29:05Z"]


def test_docker_parts_and_dangling_line() -> None:
    unwrapper = Unwrapper("docker-json")
    got = unwrapper.unwrap(
        b'{"log":"a \\u003cb\\u003e","stream":"stdout","time":"2025-07-05T11:29:01.5Z"}\n'
        b'{"log":"stderr line\\n","stream":"stderr","time":"2025-07-05T11:29:02Z"}\n'
        b'{"log":" c\\n","stream":"stdout","attrs":{"tag":"x"},"time":"2025-07-05T11:29:01.5Z"}\n'
        b'{"log":"no newline yet","stream":"stdout","time":"2025-07-05T11:29:03Z"}\n')
    assert got.data == b"stderr line\na <b> c\n"
    end = unwrapper.flush()
    assert (end.data, end.numbers, end.stamps) == (b"no newline yet\n", [4], [b"2025-07-05T11:29:03Z"])
    assert unwrapper.flush().data == b""  # nothing held after it


def test_joined_line_past_the_cap_is_cut_once() -> None:
    unwrapper = Unwrapper("cri", cap=10)
    got = unwrapper.unwrap(
        b"2025-07-05T11:29:01Z stdout P 0123456\n"
        b"2025-07-05T11:29:01Z stdout P 789abc\n"
        b"2025-07-05T11:29:01Z stdout P def\n"
        b"2025-07-05T11:29:01Z stdout F ghi\n"
        b"2025-07-05T11:29:02Z stdout F next\n")
    assert got.data == b"0123456789\nnext\n"
    assert got.cut == 1 and got.numbers == [2, 5]
    assert Unwrapper("cri", cap=4).unwrap(b"2025-07-05T11:29:01Z stdout F \xc3\xa9\xc3\xa9\xc3\xa9\n").data \
        == b"\xc3\xa9\xc3\xa9\n"  # a whole line over the cap, cut on a character boundary


def test_malformed_lines_are_skipped_and_named() -> None:
    got = Unwrapper("docker-json").unwrap(
        b'{"log":"ok\\n","stream":"stdout","time":"2025-07-05T11:29:01Z"}\n'
        b'{"log":"cut in the mid\n'
        b"[1, 2]\n"
        b'{"log":5,"stream":"stdout","time":"2025-07-05T11:29:01Z"}\n'
        b"\n"
        b'{"log":"ok too\\n","stream":"stdout","time":"2025-07-05T11:29:01Z"}\n')
    assert (got.data, got.malformed) == (b"ok\nok too\n", [2, 3, 4])
    cri = Unwrapper("cri").unwrap(
        b"INFO plain line\n2025-07-05T11:29:01Z stdin F x\n2025-07-05T11:29:01Z stdout\n")
    assert (cri.data, cri.malformed) == (b"", [1, 2, 3])
    ts = Unwrapper("docker-timestamps").unwrap(b"2025-07-05T11:29:01.000000001Z INFO a\nplain\n")
    assert (ts.data, ts.malformed) == (b"INFO a\nplain\n", [])
    assert ts.stamps == [b"2025-07-05T11:29:01.000000001Z", b""]
    assert container_time(ts.stamps[1]) is None  # read as it is, timed by vLLM's own stamp


def test_plain_needs_no_unwrapper() -> None:
    with pytest.raises(ValueError):
        Unwrapper("plain")


def test_instants_are_kept_in_their_own_zone() -> None:
    when = container_time(b"2025-12-31T23:59:59.999999999-05:00")
    assert when is not None and when.utcoffset() == timedelta(hours=-5)
    assert when.astimezone(UTC) == datetime(2026, 1, 1, 4, 59, 59, 999999, tzinfo=UTC)
