"""What the status says of a log that is not being written now (issue 25, points 2 and 3): `watch` started
at the end of a file shows its launch's start-up facts and says older lines were skipped; a backlog
replayed with --from-start is aged by its own stamps, and a launch that shut down or whose engine died
says so. Real files, a real Follower and Pipeline, stepped in this thread."""

from __future__ import annotations

import time
from datetime import datetime, timezone
from pathlib import Path

import pytest
from support import TESTS

from vllm_logwatch.exporting.exporter import ExporterMetrics
from vllm_logwatch.following.follower import Follower
from vllm_logwatch.following.wakers import ManualWaker
from vllm_logwatch.live.pipeline import Pipeline
from vllm_logwatch.web.page import render

pytestmark = pytest.mark.timeout(30)

REAL_LOG = TESTS / "data" / "real-vllm-cpu" / "serve_20261129T192328Z.log"
LINES = REAL_LOG.read_bytes().split(b"\n")[:-1]
SHUTDOWN = next(i for i, line in enumerate(LINES) if b"shutdown triggered" in line)
LAST_STATS = datetime(2026, 11, 29, 19, 26, 29, tzinfo=timezone.utc)  # the log's last stats line


def pipeline(target: Path, *, from_start: bool, state_file: str | None = None) -> Pipeline:
    follower = Follower(str(target), from_start=from_start, waker=ManualWaker(), state_file=state_file)
    return Pipeline(follower, ExporterMetrics(), zone=timezone.utc)


def read_all(pipe: Pipeline) -> None:
    while pipe.step():
        pass


def test_watch_at_the_end_shows_the_launchs_start_up_facts_and_says_what_it_skipped(tmp_path: Path) -> None:
    log = tmp_path / "serve.log"
    log.write_bytes(REAL_LOG.read_bytes())
    pipe = pipeline(log, from_start=False)
    read_all(pipe)
    status = pipe.status()
    assert status["server"]["vllm_version"] == "0.32.0"
    assert status["server"]["served_model_name"] == "tiny-llama"
    assert status["server"]["kv_cache_tokens"] == 524288
    assert status["skipped_bytes"] == log.stat().st_size
    # Nothing of the old lines is counted: no stats line, no message, no problem, no launch.
    assert status["engines"] == {} and status["launches"] == 0
    assert status["counters"]["log_lines"] == 0 and status["counters"]["log_messages"]["ERROR"] == 0
    assert not any(status["counters"]["problems"].values())
    html = render(status)
    assert "tiny-llama" in html and "0.32.0" in html
    assert "bytes of older lines were skipped" in html and "--from-start" in html


def test_start_up_facts_come_from_the_current_launch_only(tmp_path: Path) -> None:
    log = tmp_path / "serve.log"
    second = REAL_LOG.read_bytes().replace(b"0.32.0", b"0.33.1")
    log.write_bytes(REAL_LOG.read_bytes() + second.replace(b"tiny-llama", b"other-model"))
    read_all(pipe := pipeline(log, from_start=False))
    server = pipe.status()["server"]
    assert (server["vllm_version"], server["served_model_name"]) == ("0.33.1", "other-model")


def test_a_replayed_log_that_shut_down_reads_ended_aged_by_its_own_stamps(tmp_path: Path) -> None:
    log = tmp_path / "serve.log"
    log.write_bytes(REAL_LOG.read_bytes())
    pipe = pipeline(log, from_start=True)
    read_all(pipe)
    engine = pipe.status()["engines"]["0"]
    assert engine["state"] == "ended"
    assert engine["age_seconds"] == pytest.approx(time.time() - LAST_STATS.timestamp(), abs=5)
    assert "ended" in render(pipe.status())


def test_a_log_ending_in_engine_dead_reads_dead(tmp_path: Path) -> None:
    log = tmp_path / "serve.log"
    dead = (b"(APIServer pid=29214) ERROR 11-29 19:26:31 [async_llm.py:906] vllm.v1.engine.exceptions."
            b"EngineDeadError: EngineCore encountered an issue. See stack trace (above) for the root cause.")
    log.write_bytes(b"\n".join([*LINES[:SHUTDOWN], dead]) + b"\n")
    read_all(pipe := pipeline(log, from_start=True))
    assert pipe.status()["engines"]["0"]["state"] == "dead"


def test_lines_read_live_after_the_backlog_are_timed_by_the_clock(tmp_path: Path) -> None:
    """Once caught up, a line is aged from when it was read (a live line stamped in another zone must
    not look hours old)."""
    log = tmp_path / "serve.log"
    log.write_bytes(b"\n".join(LINES[:SHUTDOWN]) + b"\n")
    read_all(pipe := pipeline(log, from_start=True))
    assert pipe.status()["engines"]["0"]["age_seconds"] > 86400
    stats = next(line for line in reversed(LINES[:SHUTDOWN]) if b"Avg prompt throughput" in line)
    with open(log, "ab") as out:
        out.write(stats + b"\n")
    read_all(pipe)
    assert pipe.status()["engines"]["0"]["age_seconds"] < 60
