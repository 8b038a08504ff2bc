"""The block path reads a log as `parse_line` on every line does: the access lines counted by one
pattern (`line.ACCESS_LINE`), the other lines found by their needles, give the same metrics as a
parse of every line, on every log in tests/data and on generated ones, whatever the block boundaries."""

from __future__ import annotations

import json
import math
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry
from support import TESTS, ManualWaker, poll
from test_parse_line import ALL_CASES

from vllm_logwatch.exporting.exporter import ExporterMetrics
from vllm_logwatch.following.follower import Follower
from vllm_logwatch.live.feed import LineFeeder
from vllm_logwatch.live.pipeline import Pipeline
from vllm_logwatch.parsing.assemble import Assembler
from vllm_logwatch.parsing.envelope import detect
from vllm_logwatch.parsing.events import HttpAccess
from vllm_logwatch.parsing.framing import long_lines
from vllm_logwatch.parsing.line import ACCESS_LINE, parse_line, scan_block, shutdown_at
from vllm_logwatch.parsing.stamps import YearClock, resolve_zone

DATA = TESTS / "data"
LOGS = sorted(DATA.glob("*.log")) + sorted((DATA / "real-vllm-cpu").glob("*.log"))
SAMPLES = [c.values[0] for c in ALL_CASES if isinstance(c.values[0], str) and "\n" not in c.values[0]]
UTC = resolve_zone("UTC")
# The follower's own counters: the same follower feeds both paths.
_FOLLOWER_OWN = ("log_lines", "log_bytes", "log_rotations", "log_truncations", "read_errors", "lines_cut",
                 "state_errors")


def samples_of(metrics: ExporterMetrics) -> dict[str, float | str]:
    """Every sample but the follower's own; NaN as a string, so that it equals itself."""
    registry = CollectorRegistry()
    metrics.register(registry)
    return {f"{s.name}{sorted(s.labels.items())}": "nan" if math.isnan(s.value) else s.value
            for family in registry.collect()
            for s in family.samples
            if not any(s.name.startswith(f"vllm_logwatch_{own}") for own in _FOLLOWER_OWN)}


def line_by_line(path: Path) -> tuple[dict[str, float | str], dict[str, object]]:
    """The reference: every line the follower hands out through `parse_line`, as watch read before."""
    follower = Follower(str(path), from_start=True, waker=ManualWaker())
    metrics = ExporterMetrics(clock=lambda: 1000.0)
    assembler, source = None, None
    while lines := poll(follower):
        for line in lines:
            if line.source != source:
                source = line.source
                assembler = Assembler(source, lambda stamp, s=source: YearClock.for_source(
                    s, UTC, first_stamp=stamp), hold=False, repeats=True)
                metrics.new_launch(source)
            assert assembler is not None
            event = parse_line(line.text)
            if event is not None:
                for done in assembler.feed(event, line.number):
                    metrics.apply(done)
            if shutdown_at(line.text.encode() + b"\n") is not None:
                metrics.mark_shutdown()  # the launch ends at its shutdown line
    follower.close()
    return samples_of(metrics), metrics.status()["server"]


def by_blocks(path: Path, poll_bytes: int) -> tuple[dict[str, float | str], dict[str, object]]:
    """Watch's pipeline as it runs, its polls `poll_bytes` long."""
    follower = Follower(str(path), from_start=True, waker=ManualWaker())
    follower.poll_bytes = poll_bytes
    metrics = ExporterMetrics(clock=lambda: 1000.0)
    pipeline = Pipeline(follower, metrics, zone=UTC)
    size = path.stat().st_size
    while pipeline.step() or follower.status()["read_offset"] < size:
        pass
    pipeline.stop()
    return samples_of(metrics), metrics.status()["server"]


@pytest.mark.parametrize("log", LOGS, ids=lambda p: p.name)
@pytest.mark.parametrize("poll_bytes", [1 << 20, 4096, 97])
def test_every_log_reads_the_same_by_blocks_as_line_by_line(log: Path, poll_bytes: int) -> None:
    want = line_by_line(log)
    assert want[0], "the reference reads something"
    assert by_blocks(log, poll_bytes) == want


# Lines that are close to the access pattern's edges, and to the other kinds'.
ODD = [
    'INFO:     127.0.0.1:1 - "GET /v1/models HTTP/1.1" 200 OK',
    'ERROR:    127.0.0.1:1 - "POST /v1/completions HTTP/1.0" 500 Internal Server Error',
    'WARNING:  [::1]:2 - "GET /health?x=[1m HTTP/1.1" 404 Not Found',
    'INFO:     1.2.3.4:5 - "GET /a\x1b[0mb HTTP/1.1" 200 OK',
    'INFO:     1.2.3.4:5 - "GET /caf\u00e9 HTTP/1.1" 200 OK',
    'INFO:     1.2.3.4:5 - "GET /x\u00a0y HTTP/1.1" 200 OK',
    'INFO:     1.2.3.4:5 - "GET /}{" HTTP/1.1" 200 OK}',
    'INFO:     1.2.3.4:5 - "GET /WARNING/Running: HTTP/1.1" 200 OK',
    'INFO:     1.2.3.4:5 - "GET / HTTP/1.1" 200 OK INFO 11-29 19:26:05 [x.py:1] version 0.1',
    'INFO:     1.2.3.4:5 - "GET /HTTP/1.1 HTTP/1.1" 200 I\'m a teapot',
    '2026-11-29T19:26:05.123Z INFO:     1.2.3.4:5 - "GET /metrics HTTP/1.1" 200 OK',
    'vllm-1  | INFO:     1.2.3.4:5 - "GET /metrics HTTP/1.1" 200 OK',
    json.dumps({"levelname": "WARNING", "message": '1.2.3.4:5 - "GET /health HTTP/1.1" 503'}),
    json.dumps({"level": "error", "message": "Engine core proc died"}),  # structlog's lower case
    "(APIServer pid=1) WARNING 11-29 19:26:05 [api.py:1] slow",
    "",
    "\r",
]
_PREFIXES = ["", "2026-11-29T19:26:05.123456789Z ", "vllm-1  | ", "\x1b[32m", "[1;36m"]
_SUFFIXES = ["", "\r", "  ", "\x00", " \ufffd"]


@st.composite
def logs(draw: st.DrawFn) -> bytes:
    pool = st.sampled_from(SAMPLES + ODD)
    lines = draw(st.lists(st.tuples(st.sampled_from(_PREFIXES), pool, st.sampled_from(_SUFFIXES)),
                          min_size=1, max_size=60))
    data = "\n".join(pre + line + suf for pre, line, suf in lines).encode()
    # a log that starts like a container log is one (parsing/envelope.py): its stamps time its records
    assume(detect(data[:512]) in (None, "plain"))
    if draw(st.booleans()):
        data += b"\n"
    if draw(st.booleans()):  # bad UTF-8 somewhere
        at = draw(st.integers(0, len(data)))
        data = data[:at] + draw(st.sampled_from([b"\xff", b"\xc3", b"\xe2\x82"])) + data[at:]
    return data


@pytest.mark.integration  # over 0.2 s (a process, or a day of lines): make test, not smoke
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=logs(), poll_bytes=st.integers(16, 4096))
def test_generated_logs_read_the_same_by_blocks_as_line_by_line(data: bytes, poll_bytes: int) -> None:
    with tempfile.TemporaryDirectory() as folder:
        log = Path(folder) / "serve_20261129_192328.log"
        log.write_bytes(data)
        assert by_blocks(log, poll_bytes) == line_by_line(log)


@pytest.mark.parametrize("line", SAMPLES + ODD)
def test_a_line_the_access_pattern_counts_is_an_access_line_to_parse_line(line: str) -> None:
    raw = line.encode()
    m = ACCESS_LINE.match(raw)
    event = parse_line(line)
    if m is not None:
        method, path, _, status = m.group(1).decode().split(" ")
        assert isinstance(event, HttpAccess)
        assert (event.method, event.path, event.status) == (method, path.split("?")[0], int(status))
    access, hits = scan_block(raw + b"\n", 7)
    if m is not None:
        assert (sum(access.values()), hits) == (1, [])
    else:
        assert access == {}
        if event is not None:  # handed over for a parse (a line without an event may be too)
            assert hits == [(7, line.removesuffix("\r"))]


def test_real_access_lines_are_counted_without_a_parse() -> None:
    data = (DATA / "real-vllm-cpu" / "serve_20261129T192328Z.log").read_bytes()
    access, hits = scan_block(data, 1)
    texts = [t.removesuffix("\r") for t in data.decode("utf-8", "replace").split("\n")]
    assert sum(access.values()) == sum(isinstance(parse_line(t), HttpAccess) for t in texts)
    assert not any(isinstance(parse_line(text), HttpAccess) for _, text in hits)
    assert len(hits) < data.count(b"\n") // 10


@given(st.lists(st.integers(0, 40), max_size=30), st.integers(1, 20))
def test_long_lines_are_those_over_the_cap(lengths: list[int], cap: int) -> None:
    data = b"".join(b"x" * n + b"\n" for n in lengths)
    starts, at = [], 0
    for n in lengths:
        if n > cap:
            starts.append(at)
        at += n + 1
    assert list(long_lines(data, 0, len(data), cap)) == starts


def test_run_mode_reads_the_same_as_watch_mode() -> None:
    """The feeder reads through the same core: the same counters for the same bytes."""
    log = DATA / "real-vllm-cpu" / "serve_20261129T192328Z.log"
    metrics = ExporterMetrics(clock=lambda: 1000.0)
    feeder = LineFeeder(metrics, UTC)
    feeder.start()
    feeder.relaunch(str(log))
    data = log.read_bytes()
    for at in range(0, len(data), 5000):
        feeder.put(data[at:at + 5000])
    feeder.close(timeout=30)
    run = samples_of(metrics)
    watch = line_by_line(log)[0]
    counters = [k for k in watch if k.startswith(("vllm_logwatch_http", "vllm_logwatch_log_messages",
                                                  "vllm_logwatch_problems", "vllm_logwatch_parse_errors"))]
    assert counters and {k: run[k] for k in counters} == {k: watch[k] for k in counters}


def test_status_shows_the_offset_after_the_lines_applied(tmp_path: Path) -> None:
    log = tmp_path / "serve_20261129_192328.log"
    data = (DATA / "real-vllm-cpu" / "serve_20261129T192328Z.log").read_bytes()
    log.write_bytes(data + b"a partial last line")
    follower = Follower(str(log), from_start=True, waker=ManualWaker())
    follower.poll_bytes = 50_000
    pipeline = Pipeline(follower, ExporterMetrics(), zone=UTC)
    seen = []
    while pipeline.step():
        status = pipeline.status()["pipeline"]
        seen.append((status["offset"], status["lines_applied"]))
    pipeline.stop()
    assert len(seen) > 2
    for offset, applied in seen:  # the offset is just after the last line applied, never ahead of it
        assert offset == len(b"".join(line + b"\n" for line in data.split(b"\n")[:applied]))
    assert seen[-1] == (len(data), data.count(b"\n"))
