"""`logwatch run` under the faults an operator meets: the reader of its stdout going away, a closed
stdout, SIGHUP from a closing ssh session, a command that cannot start, a SIGTERM that is ignored,
a full log disk. Real logwatch processes, real children, real pipes."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path

from test_run_cli import FAKE, SHUTDOWN, alive, logwatch_run, poll, samples

from vllm_logwatch.exporting.exporter import ExporterMetrics
from vllm_logwatch.live.feed import LineFeeder
from vllm_logwatch.parsing.stamps import resolve_zone
from vllm_logwatch.supervising.supervisor import Supervisor
from vllm_logwatch.supervising.tee import FileSink

# A child that prints 100 numbered lines of 100 bytes over ~2 s, then exits 0 (vLLM's code: 0).
CHATTY = "import time\nfor i in range(100):\n    print('x' * 100, i, flush=True)\n    time.sleep(0.02)\n"


def _run_shell(tmp_path: Path, redirect: str) -> tuple[int, str, bytes]:
    """`logwatch run ... <redirect>` in bash; (logwatch's exit code, its stderr, the launch file)."""
    logs = tmp_path / "logs"
    script = (
        f'"$PY" -m vllm_logwatch run --port 0 --log-dir "$LOGS" -- "$PY" -c "$CHILD" 2>"$ERR" {redirect}; '
        'echo "${PIPESTATUS[0]}"'
    )
    env = {**os.environ, "PY": sys.executable, "LOGS": str(logs), "CHILD": CHATTY,
           "ERR": str(tmp_path / "err")}
    done = subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=env, timeout=60)
    code = int(done.stdout.strip().splitlines()[-1])
    log = next(logs.glob("vllm_*.log")).read_bytes()
    return code, (tmp_path / "err").read_text(), log


def _whole(log: bytes) -> bool:
    lines = log.decode().splitlines()
    return lines == [f"{'x' * 100} {i}" for i in range(100)]


def test_reader_of_stdout_going_away_stops_only_the_echo(tmp_path: Path) -> None:
    code, err, log = _run_shell(tmp_path, "| head -c 1000 >/dev/null")
    assert code == 0, err  # vLLM's own exit code; not 141 (SIGPIPE), and vLLM was not stopped
    assert _whole(log), f"the launch file lost lines: {len(log)} bytes"
    assert err.count("no more echo") == 1, err
    assert "Traceback" not in err


def test_closed_stdout_is_not_given_to_anything_else(tmp_path: Path) -> None:
    code, err, log = _run_shell(tmp_path, ">&-")
    assert code == 0, err
    assert _whole(log), f"the launch file lost lines: {len(log)} bytes"
    assert "standard output is closed" in err
    assert "Traceback" not in err


def _group_gone(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return True
    return False


def test_sighup_stops_vllm_gracefully_and_leaves_no_process(tmp_path: Path) -> None:
    with logwatch_run(tmp_path, "--stay", "--spawn-child") as (proc, port):
        child = int(poll(lambda: samples(port).get("vllm_logwatch_child_pid"), what="child pid"))  # type: ignore[arg-type]
        logs = tmp_path / "logs"
        # vLLM has its SIGTERM handler once it prints its first line (the fake, too)
        poll(lambda: any(b"Starting vLLM" in f.read_bytes() for f in logs.glob("vllm_*.log")),
             what="vLLM's first line")
        proc.send_signal(signal.SIGHUP)
        _, err = proc.communicate(timeout=30)
        assert proc.returncode == 143, err  # vLLM's code: it got SIGTERM and exited 128+15
        assert not alive(child)
        poll(lambda: _group_gone(child), deadline=10, what="vLLM's process group to be empty")
        log = next(logs.glob("vllm_*.log")).read_bytes()
        assert log.endswith(SHUTDOWN)  # its shutdown line reached the log
        assert b"exited with code 143 (ended by SIGTERM)" in err


def test_command_that_cannot_start_is_said_on_stderr_not_in_the_log(tmp_path: Path) -> None:
    p = subprocess.run(
        [sys.executable, "-m", "vllm_logwatch", "run", "--port", "0", "--log-dir", str(tmp_path), "--",
         "/nonexistent/vllm", "serve"], capture_output=True, text=True, timeout=30)
    assert p.returncode == 127
    assert p.stdout == ""
    assert "cannot start /nonexistent/vllm: no such file or directory" in p.stderr
    assert list(tmp_path.glob("vllm_*.log")) == []  # nothing ran: no launch file


def test_sigkill_fallback_is_said_once(tmp_path: Path, caplog: object) -> None:
    """A child that takes a while to die after SIGKILL (in the kernel, a driver call) is still one
    SIGKILL, said once: the kill reaches it 1.5 s late here, as to a process in uninterruptible sleep."""
    import logging
    import threading

    assert hasattr(caplog, "records")
    kills: list[int] = []

    def late(pgid: int, signum: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signum)

    def slow_kill(pgid: int, signum: int) -> None:
        if signum != signal.SIGKILL:
            os.killpg(pgid, signum)
            return
        kills.append(pgid)
        threading.Timer(1.5, late, (pgid, signum)).start()

    metrics = ExporterMetrics()
    sup = Supervisor([sys.executable, FAKE, "--stay", "--ignore-sigterm"], log_dir=str(tmp_path), name="x",
                     feeder=LineFeeder(metrics, resolve_zone("UTC")), echo_fd=None,
                     stop_timeout=0.3, killpg=slow_kill)
    with caplog.at_level(logging.INFO, logger="vllm_logwatch.run"):  # type: ignore[attr-defined]
        def stop_when_started() -> bool:
            logs = list(tmp_path.glob("x_*.log"))  # made by the tee, once it has started
            return sup.pid is not None and bool(logs) and b"Starting vLLM" in logs[0].read_bytes()
        def stopper() -> None:
            poll(stop_when_started, what="the child to start")
            sup.request_stop()

        t = threading.Thread(target=stopper, daemon=True)
        t.start()
        code = sup.run()
        t.join(10)
    assert code == 128 + signal.SIGKILL
    assert kills == [sup.pid]
    said = [r.getMessage() for r in caplog.records]  # type: ignore[attr-defined]
    assert sum("SIGKILL" in m and "still running" in m for m in said) == 1, said
    assert any("exited with code 137 (ended by SIGKILL)" in m for m in said), said


def test_full_log_disk_is_said_once_on_stderr(tmp_path: Path, caplog: object) -> None:
    import logging

    sink = FileSink("/dev/full")
    sink.start()
    with caplog.at_level(logging.INFO, logger="vllm_logwatch.run"):  # type: ignore[attr-defined]
        for _ in range(5):
            sink.put(b"a line of vLLM's output\n")
        sink.close()
    said = [r.getMessage() for r in caplog.records]  # type: ignore[attr-defined]
    assert sink.stats.bytes_dropped == 5 * 24
    assert sum("cannot write the log file" in m for m in said) == 1, said
    assert "no space left on device" in said[0]
