"""`logwatch watch -` as users run it: `docker logs -f vllm 2>&1 | logwatch watch -`. A real watch
subprocess reading a real pipe: lines on its stdin reach /metrics, the end of the pipe leaves it
serving (status says the source ended), signals stop it promptly while the pipe is still open, and a
named pipe given by its path is read the same way, and again for each next writer."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support import ROOT

from vllm_logwatch.cli import main

pytestmark = pytest.mark.timeout(60)

REAL_LOG = ROOT / "tests" / "data" / "real-vllm-cpu" / "serve_20261129T192328Z.log"
REAL_LINES = [line + "\n" for line in REAL_LOG.read_bytes().decode("utf-8").split("\n")[:-1]]
STATS = [line for line in REAL_LINES if "Avg prompt throughput" in line]
E0 = {"engine": "0", "model_name": "unknown"}


def stats_lines(watch: Any) -> float:
    """Stats lines counted, over every label set (start-up facts may name the model)."""
    return sum(v for (name, _), v in watch.samples().items() if name == "vllm_logwatch_stats_lines_total")


def test_lines_on_stdin_reach_metrics_and_the_end_of_the_pipe_leaves_it_serving(
    logwatch_watch: Callable[..., Any], poll_until: Callable[..., Any],
) -> None:
    with logwatch_watch("-", stdin=subprocess.PIPE) as watch:
        pipe = watch.proc.stdin
        status = watch.status()
        assert status["follower"]["target"] == "<stdin>" and status["follower"]["ended"] is False
        pipe.write("".join(STATS[:3]).encode())
        pipe.flush()
        watch.wait_sample("vllm_logwatch_stats_lines_total", E0, 3)
        assert watch.status()["pipeline"]["source"] == "<stdin>"
        # The last line without its newline: flushed at the end, as at the end of a file.
        busy = next(line for line in STATS if "Running: 0 reqs" not in line)
        pipe.write(busy.rstrip("\n").encode())
        pipe.close()
        poll_until(lambda: watch.status()["follower"]["ended"], 10, "the source to end")
        watch.wait_sample("vllm_logwatch_stats_lines_total", E0, 4)
        assert watch.get("/healthz").status_code == 200  # the exporter is healthy; its source ended
        assert watch.get("/metrics").status_code == 200
        assert watch.alive()
        status = watch.status()
        assert status["pipeline"]["healthy"] is True and status["pipeline"]["running"] is True
        assert watch.stop() == 0
    err = watch.stderr()
    assert err.count("<stdin> ended") == 1, err


def test_cat_log_into_watch_dash_serves_the_whole_log_after_cat_is_done(
    logwatch_watch: Callable[..., Any], poll_until: Callable[..., Any],
) -> None:
    cat = subprocess.Popen(["cat", str(REAL_LOG)], stdout=subprocess.PIPE)
    assert cat.stdout is not None
    try:
        with logwatch_watch("-", stdin=cat.stdout) as watch:
            cat.stdout.close()  # the child holds its own copy
            assert cat.wait(10) == 0
            poll_until(lambda: watch.status()["follower"]["ended"], 10, "the source to end")
            poll_until(lambda: stats_lines(watch) == len(STATS), 10, "every stats line counted")
            assert watch.sample("vllm_logwatch_launches_total") == 1
            assert watch.status()["follower"]["stats"]["lines"] == len(REAL_LINES)
            assert watch.get("/healthz").status_code == 200 and watch.alive()
    finally:
        if cat.poll() is None:
            cat.kill()
            cat.wait()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_a_signal_stops_it_promptly_while_stdin_stays_open(
    sig: signal.Signals, logwatch_watch: Callable[..., Any],
) -> None:
    with logwatch_watch("-", "--poll-interval", "30", stdin=subprocess.PIPE) as watch:
        watch.proc.stdin.write(STATS[0].encode())
        watch.proc.stdin.flush()
        watch.wait_sample("vllm_logwatch_stats_lines_total", E0, 1)
        started = time.monotonic()
        assert watch.stop(sig, timeout=5) == 0  # the pipe is still open: the reader must not hold it up
        assert time.monotonic() - started < 5
        watch.proc.stdin.close()
    assert f"stopped on {sig.name}" in watch.stderr()


def test_a_named_pipe_target_is_read_like_stdin_and_again_for_its_next_writer(
    tmp_path: Path, logwatch_watch: Callable[..., Any], poll_until: Callable[..., Any],
) -> None:
    fifo = tmp_path / "vllm.pipe"
    os.mkfifo(fifo)
    with logwatch_watch(fifo) as watch:  # serving before any writer opened the pipe
        assert watch.status()["follower"]["ended"] is False
        with open(fifo, "wb") as writer:  # vLLM: `vllm serve ... > vllm.pipe`
            writer.write("".join(STATS[:2]).encode())
        watch.wait_sample("vllm_logwatch_stats_lines_total", E0, 2)
        poll_until(lambda: watch.status()["follower"]["stats"]["files_opened"] == 1, 10,
                   "the pipe to be opened again after its writer's end")
        assert watch.status()["follower"]["ended"] is False
        assert watch.get("/healthz").status_code == 200
        with open(fifo, "wb") as writer:  # vLLM restarted into the same pipe: read on
            writer.write("".join(STATS[2:5]).encode())
        watch.wait_sample("vllm_logwatch_stats_lines_total", E0, 5)


def test_a_state_file_with_a_stream_is_a_usage_error(tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["watch", "-", "--port", "0", "--state-file", str(tmp_path / "state.json")]) == 2
    err = capsys.readouterr().err
    assert err == ("logwatch watch: --state-file: a stream (-, a pipe) has no position to resume at: "
                   "leave --state-file out, or follow the file the output is teed to\n")


def test_from_start_with_a_stream_is_said_to_mean_nothing(logwatch_watch: Callable[..., Any],
                                                         poll_until: Callable[..., Any]) -> None:
    with logwatch_watch("-", "--from-start") as watch:  # stdin is /dev/null: it ends at once
        poll_until(lambda: watch.status()["follower"]["ended"], 10, "the source to end")
    assert "--from-start means nothing for a stream: it is read from where it is now" in watch.stderr()


def test_watch_dash_with_standard_input_closed_is_a_usage_error() -> None:
    """`logwatch watch - <&-`: one line, exit 2 (the /dev/null the command line puts on a closed fd 0
    must not pass for an empty stream that ended at once)."""
    import sys

    code = ("import os, sys; os.close(0); from vllm_logwatch.cli import main; "
            "sys.exit(main(['watch', '-', '--port', '0']))")
    done = subprocess.run([sys.executable, "-c", code],
                          capture_output=True, text=True, timeout=30)
    assert done.returncode == 2, done.stderr
    assert done.stderr == ("logwatch watch: -: standard input is closed: pipe the log in "
                           "(docker logs -f vllm 2>&1 | logwatch watch -)\n")
