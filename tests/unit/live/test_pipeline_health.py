"""`/healthz` follows the follower's progress (`Pipeline.healthy`): a worker stuck in one poll (a hung
file system, a bug) turns it unhealthy after `stall_after` seconds, and healthy again once it polls."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from support import poll_until

from vllm_logwatch.exporting.exporter import ExporterMetrics
from vllm_logwatch.following.follower import Follower
from vllm_logwatch.following.openfile import LineBlock
from vllm_logwatch.following.wakers import WatchdogWaker
from vllm_logwatch.live.pipeline import STALL_FLOOR, STALL_POLLS, Pipeline


@pytest.mark.integration  # over 0.2 s (a process, or a day of lines): make test, not smoke
def test_a_poll_that_does_not_end_makes_the_pipeline_unhealthy_until_it_ends(tmp_path: Path) -> None:
    log = tmp_path / "serve.log"
    log.write_text("")
    follower = Follower(str(log), poll_interval=0.05, waker=WatchdogWaker(0.05))
    polls, stuck, release = [0], threading.Event(), threading.Event()
    real_poll = follower.poll_blocks

    def poll() -> list[LineBlock]:
        polls[0] += 1
        if polls[0] == 5:
            stuck.set()
            release.wait(10.0)  # as open() on a named pipe would
        return real_poll()

    follower.poll_blocks = poll  # type: ignore[method-assign]
    pipeline = Pipeline(follower, ExporterMetrics())
    pipeline.stall_after = 0.3
    assert pipeline.healthy()
    pipeline.start()
    try:
        assert stuck.wait(5.0)
        assert pipeline.healthy()  # not stuck long enough yet
        poll_until(lambda: not pipeline.healthy(), 5.0, "unhealthy while the poll does not end")
        assert pipeline.status()["pipeline"]["last_poll_age_seconds"] >= 0.3
        release.set()
        poll_until(pipeline.healthy, 5.0, "healthy again once polls complete")
    finally:
        release.set()
        pipeline.stop()
    assert pipeline.healthy()  # stopped: not stuck


def test_the_default_stall_is_ten_poll_intervals_and_at_least_five_seconds(tmp_path: Path) -> None:
    assert (STALL_POLLS, STALL_FLOOR) == (10, 5.0)
    for interval, stall in ((0.1, 5.0), (2.0, 20.0)):
        follower = Follower(str(tmp_path / "a.log"), poll_interval=interval)
        assert Pipeline(follower, ExporterMetrics()).stall_after == stall
