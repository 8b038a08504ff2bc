"""Pipeline: real files in tmp_path -> Follower -> parse -> metrics, read back from a fresh registry.

Most tests step the pipeline in the test's own thread with a ManualWaker (`pipeline.step()`), so they
need no sleep and no thread. The worker-thread tests wait for a value with a deadline.
"""

from __future__ import annotations

import errno
import itertools
import json
import logging
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry
from support import TESTS, ManualWaker

from vllm_logwatch.exporting.exporter import ExporterMetrics
from vllm_logwatch.following.follower import Follower
from vllm_logwatch.live import ingest
from vllm_logwatch.live.pipeline import Pipeline
from vllm_logwatch.parsing.events import Event
from vllm_logwatch.parsing.line import parse_line

pytestmark = pytest.mark.timeout(30)

REAL_LOG = TESTS / "data" / "real-vllm-cpu" / "serve_20261129T192328Z.log"
# Split on "\n" only, as the follower does (the log holds bare "\r" from progress bars).
REAL_LINES = [line + "\n" for line in REAL_LOG.read_bytes().decode("utf-8").split("\n")[:-1]]
STATS = [line for line in REAL_LINES if "Avg prompt throughput" in line]
# The first two stats lines of the real log, two seconds apart:
# 603.0 tok/s, 16 running, 8 waiting, 1.0% KV;  1727.3 tok/s, 2 running, 0 waiting, 0.4% KV.
E0 = {"engine": "0", "model_name": "unknown"}


def append(path: Path, *lines: str) -> None:
    with open(path, "a", encoding="utf-8") as f:
        f.write("".join(line if line.endswith("\n") else line + "\n" for line in lines))


class Rig:
    """A pipeline over `target`, its registry, and a shortcut to read a sample."""

    def __init__(self, target: Path, **follower: Any) -> None:
        follower.setdefault("waker", ManualWaker())
        self.follower = Follower(str(target), **follower)
        self.metrics = ExporterMetrics()
        self.registry = CollectorRegistry()
        self.pipeline = Pipeline(self.follower, self.metrics)
        self.pipeline.register(self.registry)

    def value(self, name: str, labels: dict[str, str] | None = None) -> float | None:
        return self.registry.get_sample_value("vllm_logwatch_" + name, labels or {})


@pytest.fixture
def rigs() -> Iterator[Callable[..., Rig]]:
    made: list[Rig] = []

    def make(target: Path, **kwargs: Any) -> Rig:
        rig = Rig(target, **kwargs)
        made.append(rig)
        return rig

    yield make
    for rig in made:
        rig.pipeline.stop()


def test_appended_lines_become_metric_values(tmp_path: Path, rigs: Callable[..., Rig]) -> None:
    log = tmp_path / "serve_20261129_192328.log"
    append(log, *REAL_LINES[:5])  # start-up lines already there: following starts at the end
    rig = rigs(log)
    assert rig.pipeline.step() == 0
    assert rig.value("generation_throughput_tokens_per_second", E0) is None

    append(log, STATS[0])
    assert rig.pipeline.step() == 1
    assert rig.value("generation_throughput_tokens_per_second", E0) == 603.0
    assert rig.value("requests_running", E0) == 16
    assert rig.value("requests_waiting", E0) == 8
    assert rig.value("kv_cache_usage_ratio", E0) == pytest.approx(0.010)
    assert rig.value("stats_lines_total", E0) == 1
    # The first line's window is unknown until the next line: its tokens are held, not guessed.
    assert rig.value("generation_tokens_total", E0) == 0

    append(log, 'INFO:     127.0.0.1:38934 - "POST /v1/completions HTTP/1.1" 200 OK', STATS[1])
    assert rig.pipeline.step() == 2
    assert rig.value("generation_throughput_tokens_per_second", E0) == 1727.3
    assert rig.value("requests_running", E0) == 2
    assert rig.value("generation_tokens_total", E0) == pytest.approx((603.0 + 1727.3) * 2)
    post = {"method": "POST", "path": "/v1/completions", "status": "200"}
    assert rig.value("http_requests_total", post) == 1
    assert rig.value("log_lines_total") == 3
    before = sum(len(line.encode()) for line in REAL_LINES[:5])
    assert rig.value("log_bytes_total") == log.stat().st_size - before
    assert rig.value("launches_total") == 1


def test_new_launch_file_in_a_folder_resets_engine_state(tmp_path: Path, rigs: Callable[..., Rig]) -> None:
    old = tmp_path / "serve_20261129_192328.log"
    append(old, *STATS[:2])
    os.utime(old, (1_700_000_000, 1_700_000_000))
    rig = rigs(tmp_path, from_start=True)
    rig.pipeline.step()
    assert rig.value("requests_running", E0) == 2
    assert rig.value("launches_total") == 1

    new = tmp_path / "serve_20261129_200000.log"
    engine1 = STATS[2].replace("Engine 000:", "Engine 001:")
    append(new, engine1)
    rig.pipeline.step()
    # Engine 0's gauges belong to the old launch: gone. Its counters keep counting (never go down).
    assert rig.value("requests_running", E0) is None
    assert rig.value("kv_cache_usage_ratio", E0) is None
    assert rig.value("stats_lines_total", E0) == 2
    assert rig.value("requests_running", {"engine": "1", "model_name": "unknown"}) == 13
    assert rig.value("launches_total") == 2
    status = rig.pipeline.status()
    assert status["pipeline"]["source"] == str(new)
    assert status["launch_source"] == str(new)
    assert set(status["engines"]) == {"1"}


def test_a_bad_line_does_not_stop_the_worker_thread(
    tmp_path: Path, rigs: Callable[..., Rig], caplog: pytest.LogCaptureFixture,
    poll_until: Callable[..., Any], monkeypatch: pytest.MonkeyPatch,
) -> None:
    def faulty(text: str) -> Event | None:
        if "BOOM" in text:
            raise RuntimeError(f"cannot handle {text}")  # a bug whose message holds the line
        return parse_line(text)

    monkeypatch.setattr(ingest, "parse_line", faulty)
    log = tmp_path / "serve_20261129_192328.log"
    log.touch()
    rig = rigs(log, waker=None, poll_interval=0.05, from_start=True)
    caplog.set_level(logging.INFO, logger="vllm_logwatch")
    rig.pipeline.start()
    boom = STATS[0].rstrip("\n")  # a stats line: the block scan hands it to the parser
    append(log, boom + " BOOM SECRET-PROMPT-7f3a9", boom + " BOOM again", STATS[0])
    poll_until(lambda: rig.value("requests_running", E0) == 16, 10, "the stats line after two bad lines")
    append(log, STATS[1])
    poll_until(lambda: rig.value("requests_running", E0) == 2, 10, "the next stats line")
    assert rig.value("parse_errors_total", {"what": "stats"}) == 2
    status = rig.pipeline.status()
    assert status["pipeline"]["running"] and status["pipeline"]["healthy"]
    assert status["pipeline"]["internal_errors"] == 2
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1, "logged once, then only counted"
    assert "RuntimeError" in errors[0].getMessage()
    assert "7f3a9" not in caplog.text, "an exception message may hold log text: never logged"


def test_status_is_json_with_positions_and_no_line_text(tmp_path: Path, rigs: Callable[..., Rig]) -> None:
    log = tmp_path / "serve_20261129_192328.log"
    append(log, STATS[0].rstrip("\n") + ", SECRET-PROMPT-7f3a9 rate: 5.0%, Preemptions: 3")
    rig = rigs(log, from_start=True)
    rig.pipeline.step()
    status = rig.pipeline.status()
    text = json.dumps(status, allow_nan=False)
    assert "7f3a9" not in text.lower()
    assert status["follower"]["path"] == str(log)
    assert status["follower"]["offset"] == log.stat().st_size
    assert status["pipeline"]["lines_applied"] == 1
    engine = status["engines"]["0"]
    assert engine["last"]["generation_throughput"] == 603.0
    assert engine["last"]["extra"] == {"preemptions": 3.0}, "unknown field names come from the log: not shown"
    assert status["counters"]["unknown_fields"] == 1


def test_stop_writes_the_state_file_and_a_new_pipeline_resumes(
    tmp_path: Path, rigs: Callable[..., Rig]
) -> None:
    log = tmp_path / "serve_20261129_192328.log"
    state = tmp_path / "state.json"
    append(log, *STATS[:3])
    first = Rig(log, from_start=True, state_file=str(state))
    assert first.pipeline.step() == 3
    first.pipeline.stop()
    assert json.loads(state.read_text())["offset"] == log.stat().st_size

    append(log, STATS[3])
    second = rigs(log, from_start=True, state_file=str(state))
    assert second.pipeline.step() == 1
    assert second.value("stats_lines_total", E0) == 1, "the first three lines are not counted again"
    assert second.value("requests_running", E0) == 16


def test_a_read_error_shows_at_scrape_time_without_any_line(
    tmp_path: Path, rigs: Callable[..., Rig], monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    log = tmp_path / "serve_20261129_192328.log"
    append(log, STATS[0])
    rig = rigs(log, from_start=True)
    real_read = os.read

    def failing_read(fd: int, size: int) -> bytes:
        if os.readlink(f"/proc/self/fd/{fd}") == str(log):
            raise OSError(errno.EIO, "Input/output error")
        return real_read(fd, size)

    monkeypatch.setattr(os, "read", failing_read)
    caplog.set_level(logging.INFO, logger="vllm_logwatch")
    assert rig.pipeline.step() == 0
    assert rig.pipeline.step() == 0
    assert rig.value("read_errors_total") == 2
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == [f"input/output error: {log} (retrying; counted in vllm_logwatch_read_errors_total)"]
    assert rig.pipeline.status()["follower"]["stats"]["last_error"] == f"input/output error: {log}"

    monkeypatch.setattr(os, "read", real_read)
    assert rig.pipeline.step() == 1
    assert rig.value("requests_running", E0) == 16


# -- the state file: a line a scrape shows is on disk --------------------------------------------


def saved_offset(state: Path) -> int | None:
    try:
        offset: int = json.loads(state.read_text())["offset"]
    except FileNotFoundError:
        return None
    return offset


def test_a_scrape_never_shows_a_line_whose_position_is_not_on_disk(
    tmp_path: Path, rigs: Callable[..., Rig], monkeypatch: pytest.MonkeyPatch
) -> None:
    log, state = tmp_path / "serve_20261129_192328.log", tmp_path / "state.json"
    append(log, *STATS[:3])
    rig = rigs(log, from_start=True, state_file=str(state))
    seen: list[tuple[float, int | None]] = []  # (stats lines in the scrape, offset on disk meanwhile)
    collect = rig.metrics.collect

    def collect_and_look() -> Any:
        families = list(collect())
        lines = next(s.value for f in families for s in f.samples if s.name.endswith("stats_lines_total"))
        seen.append((lines, saved_offset(state)))
        return families

    monkeypatch.setattr(rig.metrics, "collect", collect_and_look)
    assert rig.pipeline.step() == 3
    assert rig.value("stats_lines_total", E0) == 3
    assert seen[-1] == (3, log.stat().st_size), "3 lines in the scrape, and their end on disk"
    writes = len(seen)
    assert rig.value("stats_lines_total", E0) == 3
    assert saved_offset(state) == log.stat().st_size and len(seen) == writes + 1
    assert rig.pipeline.step() == 0


@pytest.mark.integration  # over 0.2 s (a process, or a day of lines): make test, not smoke
def test_the_state_follows_the_applied_lines_within_a_tenth_of_a_second(
    tmp_path: Path, rigs: Callable[..., Rig], monkeypatch: pytest.MonkeyPatch, poll_until: Callable[..., Any]
) -> None:
    """Lines keep coming (each waited for through status(), which may write too): the writes are at
    least 0.1 s apart, and the last one, made without any scrape, ends at the last line."""
    from vllm_logwatch.following import statefile

    log, state = tmp_path / "serve_20261129_192328.log", tmp_path / "state.json"
    log.touch()
    written: list[float] = []
    write_state = statefile.write_state

    def timed_write(path: str, saved: Any, extra: Any = None) -> None:
        written.append(time.monotonic())  # when it starts: writes take a few ms, and that varies
        write_state(path, saved, extra)

    monkeypatch.setattr(statefile, "write_state", timed_write)
    rig = rigs(log, from_start=True, state_file=str(state), waker=None, poll_interval=30.0)
    rig.pipeline.start()
    poll_until(lambda: saved_offset(state) == 0, 5, "the first save (the open file, nothing read)")
    if rig.follower.status()["waker_degraded_reason"]:
        pytest.skip("no file notifications here: the 30 s poll would be the only wake")
    deadline = time.monotonic() + 0.6
    n = 0
    while time.monotonic() < deadline:
        append(log, STATS[n % len(STATS)])
        n += 1
        poll_until(lambda n=n: rig.pipeline.status()["pipeline"]["lines_applied"] == n, 5, f"line {n}")
    poll_until(lambda: saved_offset(state) == log.stat().st_size, 2, "the state at the end of the last line")
    gaps = [b - a for a, b in itertools.pairwise(written)]
    assert len(written) >= 3 and min(gaps) >= 0.099, gaps


def test_a_state_save_that_fails_is_counted_in_state_errors_and_says_so(
    tmp_path: Path, rigs: Callable[..., Rig], caplog: pytest.LogCaptureFixture
) -> None:
    log, state = tmp_path / "serve_20261129_192328.log", tmp_path / "state.json"
    append(log, STATS[0])
    rig = rigs(log, from_start=True, state_file=str(state))
    caplog.set_level(logging.INFO, logger="vllm_logwatch")
    assert rig.pipeline.step() == 1
    assert rig.value("state_errors_total") == 0
    state.unlink()
    state.mkdir()  # the state path replaced by a folder after start
    append(log, STATS[1])
    assert rig.pipeline.step() == 1
    assert rig.value("requests_running", E0) == 2, "a scrape is answered even when the state cannot be saved"
    assert rig.value("state_errors_total") == 1
    assert rig.value("read_errors_total") == 0
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == [f"cannot save state: a folder, not a file: {state} "
                        "(retrying; counted in vllm_logwatch_state_errors_total)"]
    assert rig.pipeline.status()["follower"]["stats"]["last_state_error"] == (
        f"cannot save state: a folder, not a file: {state}")


def test_the_start_up_line_names_the_offset_reading_starts_at(
    tmp_path: Path, rigs: Callable[..., Rig], caplog: pytest.LogCaptureFixture
) -> None:
    log = tmp_path / "serve_20261129_192328.log"
    append(log, *STATS[:3])
    caplog.set_level(logging.INFO, logger="vllm_logwatch")
    rig = rigs(log, from_start=True)
    assert rig.pipeline.step() == 3
    infos = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    assert infos == [f"reading {log} from offset 0"]


def test_a_backlog_is_applied_a_megabyte_at_a_time(tmp_path: Path, rigs: Callable[..., Rig]) -> None:
    """A poll's lines are applied holding the gate scrapes wait for: a 4 MB backlog must not make a
    scrape wait for all of it (about 0.3 s of parsing), only for one megabyte's lines."""
    log = tmp_path / "serve_20261129_192328.log"
    append(log, *(STATS[0] for _ in range((4 << 20) // len(STATS[0]))))
    rig = rigs(log, from_start=True)
    per_poll = (1 << 20) // len(STATS[0].encode())
    assert per_poll <= rig.pipeline.step() <= per_poll + 1


def test_a_stream_read_to_its_end_says_it_ended_and_never_that_it_follows_new_lines(
        caplog: pytest.LogCaptureFixture) -> None:
    """`cat serve.log | logwatch watch -` said '<stdin> ended: nothing more to read', then 'caught up:
    ... following new lines'."""
    from vllm_logwatch.following.stream import StreamSource

    r, w = os.pipe()
    os.write(w, "".join(REAL_LINES[:50]).encode())
    os.close(w)
    pipeline = Pipeline(StreamSource(r, poll_interval=0.01), ExporterMetrics())
    caplog.set_level(logging.INFO, logger="vllm_logwatch.live.pipeline")
    deadline = time.monotonic() + 5
    while not pipeline.follower.ended and time.monotonic() < deadline:
        pipeline.step()
    for _ in range(3):
        pipeline.step()
    said = [record.getMessage() for record in caplog.records]
    assert any("ended: nothing more to read" in line and "50 lines read" in line for line in said), said
    assert not any("following new lines" in line for line in said), said
    pipeline.stop()


def test_a_stats_line_written_twice_counts_once(tmp_path: Path, rigs: Callable[..., Rig]) -> None:
    """Two logging handlers print every line twice: watch leaves the copy out and counts it."""
    log = tmp_path / "serve_20261129_192328.log"
    append(log, *REAL_LINES[:5])
    rig = rigs(log)
    rig.pipeline.step()
    append(log, STATS[0], STATS[0], STATS[1], STATS[1])
    rig.pipeline.step()
    assert rig.value("stats_lines_total", E0) == 2
    assert rig.value("generation_tokens_total", E0) == pytest.approx((603.0 + 1727.3) * 2)
    assert rig.value("parse_errors_total", {"what": "duplicate"}) == 2
