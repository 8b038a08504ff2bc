"""Supervisor in-process: a real child (tests/fake_vllm.py), real files, real pipes."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry
from support import TESTS

from vllm_logwatch.commands.run import child_reporter
from vllm_logwatch.exporting.exporter import ExporterMetrics
from vllm_logwatch.live.feed import LineFeeder
from vllm_logwatch.parsing.stamps import resolve_zone
from vllm_logwatch.supervising.supervisor import Supervisor, command_facts, launch_name

FAKE = str(TESTS / "fake_vllm.py")
REAL_LOG = next((TESTS / "data" / "real-vllm-cpu").glob("serve_*.log"))


class Echo:
    """Our stdout in the tests: a pipe read by a thread, like a terminal or journald would."""

    def __init__(self) -> None:
        self.r, self.w = os.pipe()
        self.data: list[bytes] = []
        self.thread = threading.Thread(target=lambda: self.data.append(_read_all(self.r)), daemon=True)
        self.thread.start()

    def output(self) -> bytes:
        os.close(self.w)
        self.thread.join(10)
        os.close(self.r)
        return self.data[0]


Made = tuple[Supervisor, ExporterMetrics, CollectorRegistry, Echo]


def make(tmp_path: Path, *args: str, **kw: object) -> Made:
    metrics = ExporterMetrics()
    registry = CollectorRegistry()
    metrics.register(registry)
    echo = Echo()
    feeder = LineFeeder(metrics, resolve_zone("UTC"))
    sup = Supervisor(
        [sys.executable, FAKE, *args], log_dir=str(tmp_path / "logs"), name="fake",
        on_state=child_reporter(metrics), feeder=feeder, echo_fd=echo.w, **kw,  # type: ignore[arg-type]
    )
    return sup, metrics, registry, echo


def drain(echo: Echo) -> bytes:
    return echo.output()


def when(condition: Callable[[], bool], action: Callable[[], None], deadline: float = 20.0) -> object:
    """Run `action` from a thread as soon as `condition` holds (polled, with a deadline)."""

    def loop() -> None:
        end = time.monotonic() + deadline
        while time.monotonic() < end:
            if condition():
                action()
                return
            time.sleep(0.02)

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    return thread


def started(sup: Supervisor) -> Callable[[], bool]:
    def check() -> bool:
        path = sup.log_path
        return path is not None and os.path.exists(path) and b"Starting vLLM" in Path(path).read_bytes()

    return check


def test_log_file_bytes_equal_child_output(tmp_path: Path) -> None:
    sup, _, registry, echo = make(tmp_path, "--exit", "3")
    code = sup.run()
    echoed = echo.output()
    assert code == 3
    expected = (
        b"(APIServer pid=1) INFO 11-29 19:23:52 [entry.py:140] Starting vLLM server on http://127.0.0.1:18000\n"
        + REAL_LOG.read_bytes()
    )
    logs = list((tmp_path / "logs").glob("fake_*.log"))
    assert len(logs) == 1
    assert logs[0].read_bytes() == expected
    assert echoed == expected  # echoed to our stdout too, unchanged
    assert registry.get_sample_value("vllm_logwatch_child_last_exit_code") == 3
    assert registry.get_sample_value("vllm_logwatch_child_up") == 0
    assert registry.get_sample_value("vllm_logwatch_log_file_bytes_written_total") == len(expected)
    # parsed in process: the 78 stats lines of the real log
    assert registry.get_sample_value(
        "vllm_logwatch_stats_lines_total", {"engine": "0", "model_name": "tiny-llama"}
    ) == 78


def test_a_parser_behind_loses_chunks_from_parsing_only_and_counts_them(tmp_path: Path) -> None:
    metrics = ExporterMetrics()
    registry = CollectorRegistry()
    metrics.register(registry)
    echo = Echo()
    feeder = LineFeeder(metrics, resolve_zone("UTC"), max_bytes=0)  # every chunk finds the hand-off full
    sup = Supervisor([sys.executable, FAKE], log_dir=str(tmp_path / "logs"), name="fake",
                     on_state=child_reporter(metrics), feeder=feeder, echo_fd=echo.w)
    assert sup.run() == 0
    echoed = echo.output()
    log = next((tmp_path / "logs").glob("fake_*.log")).read_bytes()
    assert log == echoed and log.endswith(REAL_LOG.read_bytes())  # the tee lost nothing
    assert registry.get_sample_value("vllm_logwatch_parse_bytes_dropped_total") == len(log)
    assert registry.get_sample_value(
        "vllm_logwatch_stats_lines_total", {"engine": "0", "model_name": "tiny-llama"}) is None


def _read_all(fd: int) -> bytes:
    chunks = []
    while True:
        data = os.read(fd, 1 << 20)
        if not data:
            return b"".join(chunks)
        chunks.append(data)


def test_stdout_and_stderr_merged(tmp_path: Path) -> None:
    sup, _, _, echo = make(tmp_path, "--stderr-every", "3")
    assert sup.run() == 0
    drain(echo)
    log = next((tmp_path / "logs").glob("fake_*.log")).read_bytes()
    expected = REAL_LOG.read_bytes().splitlines(keepends=True)
    got = log.splitlines(keepends=True)[1:]
    assert Counter(got) == Counter(expected)  # every line, from both streams


def test_sigterm_forwarded_then_exit_code(tmp_path: Path) -> None:
    sup, _, _, echo = make(tmp_path, "--stay")
    when(started(sup), lambda: os.kill(os.getpid(), signal.SIGTERM))
    code = sup.run()
    drain(echo)
    assert code == 143
    assert b"Shutting down" in next((tmp_path / "logs").glob("fake_*.log")).read_bytes()


def test_sigkill_after_stop_timeout(tmp_path: Path) -> None:
    sup, _, _, echo = make(tmp_path, "--stay", "--ignore-sigterm", stop_timeout=1.0)
    when(started(sup), sup.request_stop)
    code = sup.run()
    drain(echo)
    assert code == 128 + signal.SIGKILL


def test_restart_on_failure_with_backoff(tmp_path: Path) -> None:
    # exits 1 after start-up; grace 0 so it counts as a crash after start-up, not a start-up failure
    sup, _, registry, echo = make(
        tmp_path, "--lines", "5", "--exit", "1", restart="on-failure", startup_grace=0.0, backoff_max=0.2
    )
    when(lambda: sup.restarts >= 2, sup.request_stop)
    code = sup.run()
    drain(echo)
    assert code in (1, 143)  # the stop may find the third launch running (SIGTERM) or gone
    assert sup.restarts >= 2
    assert registry.get_sample_value("vllm_logwatch_child_restarts_total") == sup.restarts
    assert len(list((tmp_path / "logs").glob("fake_*.log"))) == sup.restarts + 1  # a file per launch


def test_no_restart_loop_on_startup_failure(tmp_path: Path) -> None:
    sup, _, _, echo = make(tmp_path, "--no-start", "--lines", "3", "--exit", "1", restart="always")
    assert sup.run() == 1
    drain(echo)
    assert sup.restarts == 0


def test_command_facts_and_name() -> None:
    cmd = ["vllm", "serve", "nvidia/Qwen3", "--served-model-name=qwen", "--port", "8001"]
    assert command_facts(cmd) == {"served_model_name": "qwen", "port": 8001}
    assert launch_name(None, cmd) == "qwen"
    assert launch_name(None, ["vllm", "serve", "org/model"]) == "vllm"
    assert launch_name("my/run", cmd) == "my_run"


@pytest.mark.parametrize("missing", ["definitely-not-a-command-7f3a"])
def test_missing_command_exit_127(tmp_path: Path, missing: str) -> None:
    metrics = ExporterMetrics()
    sup = Supervisor([missing], log_dir=str(tmp_path), name="x",
                     feeder=LineFeeder(metrics, resolve_zone("UTC")), echo_fd=None)
    assert sup.run() == 127
    assert list(tmp_path.glob("x_*.log")) == []  # the reason goes to stderr; never run: no launch file
