"""`logwatch run` as a user runs it: a real logwatch process, a fake vLLM child, real HTTP."""

from __future__ import annotations

import os
import resource
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families
from support import TESTS

FAKE = str(TESTS / "fake_vllm.py")
REAL_LOG = next((TESTS / "data" / "real-vllm-cpu").glob("serve_*.log"))
START = b"(APIServer pid=1) INFO 11-29 19:23:52 [entry.py:140] Starting vLLM server on http://127.0.0.1:18000\n"
SHUTDOWN = b"INFO:     Shutting down\n"
STATS_LINES = "vllm_logwatch_stats_lines_total{engine=0,model_name=tiny-llama}"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def poll(check: Callable[[], object], deadline: float = 30.0, what: str = "condition") -> object:
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        value = check()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def samples(port: int) -> dict[str, float]:
    """name{labels} -> value of every sample on /metrics (empty dict if not up yet)."""
    try:
        text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=2).text
    except httpx.HTTPError:
        return {}
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            labels = ",".join(f"{k}={v}" for k, v in sorted(s.labels.items()))
            out[s.name + ("{" + labels + "}" if labels else "")] = s.value
    return out


@contextmanager
def logwatch_run(
    tmp_path: Path, *child_args: str, extra: tuple[str, ...] = (), preexec: Callable[[], None] | None = None,
    child: list[str] | None = None,
) -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    """`logwatch run` of tests/fake_vllm.py with `child_args`, or of `python *child`."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "vllm_logwatch", "run", "--listen", "127.0.0.1", "--port", str(port),
         "--log-dir", str(tmp_path / "logs"), *extra, "--", sys.executable,
         *(child if child is not None else [FAKE, *child_args])],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=preexec,
    )
    try:
        yield proc, port
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=30)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie (exited, not yet reaped by its new parent) counts as gone
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def test_metrics_live_then_sigterm_passes_exit_code(tmp_path: Path) -> None:
    with logwatch_run(tmp_path, "--rate", "2000", "--stay") as (proc, port):
        got = poll(lambda: samples(port).get(STATS_LINES), what="stats lines while the child runs")
        assert got
        live = samples(port)
        assert live["vllm_logwatch_child_up"] == 1
        child = int(live["vllm_logwatch_child_pid"])
        poll(lambda: samples(port).get(STATS_LINES) == 78, what="all 78 stats lines")
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
        assert proc.returncode == 143, err
        assert not alive(child)
        assert b"Traceback" not in err
        log = next((tmp_path / "logs").glob("vllm_*.log")).read_bytes()
        assert out == log  # echoed and written: the same bytes
        assert log.startswith(START) and log.endswith(SHUTDOWN)
        assert REAL_LOG.read_bytes().startswith(log[len(START):-len(SHUTDOWN)])  # unchanged, in order


def test_no_orphan_when_logwatch_is_sigkilled(tmp_path: Path) -> None:
    with logwatch_run(tmp_path, "--stay") as (proc, port):
        child = int(poll(lambda: samples(port).get("vllm_logwatch_child_pid"), what="child pid"))  # type: ignore[arg-type]
        # the child printing: killed while it starts, it has no signal handler yet to print its last lines
        poll(lambda: samples(port).get(STATS_LINES), what="the child's lines read")
        assert alive(child)
        proc.kill()
        out, _ = proc.communicate(timeout=30)  # its stdout ends when the tee, which echoes to it, is gone
        poll(lambda: not alive(child), deadline=15, what="the child to get its death signal")
        log = next((tmp_path / "logs").glob("vllm_*.log")).read_bytes()
        assert log.endswith(SHUTDOWN) and out == log  # vLLM's last lines, written by the tee after the kill


def test_full_disk_child_keeps_running_and_drops_are_counted(tmp_path: Path) -> None:
    limit = 20_000  # bytes: the "disk" fills after ~20 kB of a 400 kB log

    def small_disk() -> None:  # in the logwatch process only: RLIMIT_FSIZE makes its writes fail (EFBIG)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    with logwatch_run(tmp_path, "--stay", preexec=small_disk) as (proc, port):
        def done() -> dict[str, float] | None:
            s = samples(port)
            full = s.get(STATS_LINES) == 78
            return s if full and s.get("vllm_logwatch_log_file_bytes_dropped_total", 0) > 0 else None

        s = poll(done, what="all stats parsed and drops counted")
        assert isinstance(s, dict)
        assert s["vllm_logwatch_child_up"] == 1  # vLLM was never blocked
        assert s["vllm_logwatch_log_file_write_errors_total"] >= 1
        written = s["vllm_logwatch_log_file_bytes_written_total"]
        dropped = s["vllm_logwatch_log_file_bytes_dropped_total"]
        total = len(REAL_LOG.read_bytes()) + len(START)
        assert written <= limit and written + dropped == total
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=30)
        assert REAL_LOG.read_bytes() in out  # stdout kept flowing, whole
        assert proc.returncode == 143


def test_command_missing_and_usage_errors(tmp_path: Path) -> None:
    run = [sys.executable, "-m", "vllm_logwatch", "run", "--listen", "127.0.0.1", "--port", str(free_port()),
           "--log-dir", str(tmp_path)]
    p = subprocess.run([*run, "--", "no-such-command-7f3a"], capture_output=True, timeout=30)
    assert p.returncode == 127 and b"Traceback" not in p.stderr
    p = subprocess.run(run, capture_output=True, timeout=30)
    assert p.returncode == 2 and len(p.stderr.decode().strip().splitlines()) == 1
    p = subprocess.run([*run, "--restart", "sometimes", "--", "true"], capture_output=True, timeout=30)
    assert p.returncode == 2
    blocked = tmp_path / "a-file"
    blocked.write_text("not a folder\n")
    bad_dir = [*run[:-1], str(blocked / "logs"), "--", "true"]
    p = subprocess.run(bad_dir, capture_output=True, text=True, timeout=30)
    assert p.returncode == 2, p.stderr
    assert p.stderr == f"logwatch run: --log-dir {blocked / 'logs'}: cannot create it (Not a directory)\n"
