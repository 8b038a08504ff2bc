"""`logwatch run` and job control, helpers that leave vLLM's session, and a command that cannot
start: a real logwatch, real children, real signals. Waits poll with deadlines."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from test_run_cli import alive, logwatch_run, poll, samples

# vLLM's stand-in: numbered lines, one every 2 ms, forever; SIGTERM ends it with code 0.
COUNTER = (
    "import signal, sys, time\n"
    "signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))\n"
    "i = 0\n"
    "while True:\n"
    "    print(i, flush=True)\n"
    "    i += 1\n"
    "    time.sleep(0.002)\n"
)
# One that starts a helper in a session of its own, which keeps the output pipe, says its pid, and sleeps.
SETSID_HELPER = (
    "import os, signal, sys, time\n"
    "if os.fork() == 0:\n"
    "    os.setsid()\n"
    "    print('helper', os.getpid(), flush=True)\n"
    "    time.sleep(3600)\n"
    "    os._exit(0)\n"
    "signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))\n"
    "print('Starting vLLM server', flush=True)\n"
    "signal.pause()\n"
)


def state(pid: int) -> str:
    """The process's state letter (`T`: stopped), `-` if it is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return "-"


def launch_log(tmp_path: Path) -> Path:
    return next((tmp_path / "logs").glob("vllm_*.log"))


def log_bytes(tmp_path: Path) -> bytes:
    """The launch file so far (empty before it is made)."""
    found = list((tmp_path / "logs").glob("vllm_*.log"))
    return found[0].read_bytes() if found else b""


def numbers(tmp_path: Path) -> list[int]:
    return [int(x) for x in log_bytes(tmp_path).split()]


def test_ctrl_z_stops_vllm_with_logwatch_and_fg_resumes_both_losing_nothing(tmp_path: Path) -> None:
    # A job of its own in our session, as a shell makes it (a job in an orphaned group never stops).
    with logwatch_run(tmp_path, preexec=lambda: os.setpgid(0, 0), child=["-c", COUNTER]) as (proc, port):
        child = int(poll(lambda: samples(port).get("vllm_logwatch_child_pid"), what="child pid"))  # type: ignore[arg-type]
        poll(lambda: len(numbers(tmp_path)) > 50, what="the child's first lines")
        proc.send_signal(signal.SIGTSTP)  # Ctrl+Z
        poll(lambda: state(proc.pid) == "T" and state(child) == "T", deadline=5,
             what=f"both stopped (logwatch {state(proc.pid)}, vLLM {state(child)})")
        proc.send_signal(signal.SIGCONT)  # fg
        poll(lambda: state(proc.pid) != "T" and state(child) != "T", deadline=5, what="both running again")
        resumed = len(numbers(tmp_path))
        poll(lambda: len(numbers(tmp_path)) > resumed + 50, what="the child writing again")
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
        assert proc.returncode == 0, err
        got = numbers(tmp_path)
        assert got == list(range(len(got)))  # every line, in order: nothing lost across the stop
        assert out == launch_log(tmp_path).read_bytes()


def test_in_an_orphaned_group_sigtstp_stops_neither(tmp_path: Path) -> None:
    """The kernel discards a terminal stop signal there: vLLM, stopped first, is continued at once."""
    with logwatch_run(tmp_path, preexec=os.setsid, child=["-c", COUNTER]) as (proc, port):
        child = int(poll(lambda: samples(port).get("vllm_logwatch_child_pid"), what="child pid"))  # type: ignore[arg-type]
        poll(lambda: len(numbers(tmp_path)) > 50, what="the child's first lines")
        proc.send_signal(signal.SIGTSTP)
        sent = len(numbers(tmp_path))
        poll(lambda: len(numbers(tmp_path)) > sent + 200, deadline=5, what="the child writing on")
        assert state(proc.pid) != "T" and state(child) != "T"
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)
        got = numbers(tmp_path)
        assert got == list(range(len(got)))


def test_sigstop_stops_logwatch_alone_and_sigcont_loses_nothing(tmp_path: Path) -> None:
    """SIGSTOP cannot be caught (docs/run.md): vLLM runs on until the pipe is full, then waits."""
    with logwatch_run(tmp_path, child=["-c", COUNTER]) as (proc, port):
        child = int(poll(lambda: samples(port).get("vllm_logwatch_child_pid"), what="child pid"))  # type: ignore[arg-type]
        poll(lambda: len(numbers(tmp_path)) > 50, what="the child's first lines")
        proc.send_signal(signal.SIGSTOP)
        poll(lambda: state(proc.pid) == "T", deadline=5, what="logwatch stopped")
        assert state(child) != "T"
        proc.send_signal(signal.SIGCONT)
        poll(lambda: state(proc.pid) != "T", deadline=5, what="logwatch running again")
        resumed = len(numbers(tmp_path))
        poll(lambda: len(numbers(tmp_path)) > resumed + 50, what="the child writing again")
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)
        got = numbers(tmp_path)
        assert got == list(range(len(got)))


def test_a_helper_in_a_session_of_its_own_holding_the_pipe_is_stopped_too(tmp_path: Path) -> None:
    with logwatch_run(tmp_path, child=["-c", SETSID_HELPER]) as (proc, _):
        poll(lambda: b"helper" in log_bytes(tmp_path) and b"Starting" in log_bytes(tmp_path),
             what="the helper's pid")
        helper = int(log_bytes(tmp_path).split(b"helper ")[1].split()[0])
        assert os.getsid(helper) == helper  # out of vLLM's group and session: a group signal misses it
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
        assert proc.returncode == 0, err
        poll(lambda: not alive(helper), deadline=5, what="the helper to be gone")


def test_a_command_that_cannot_start_is_one_error_then_the_exit_line_no_launch_file(tmp_path: Path) -> None:
    p = subprocess.run(
        [sys.executable, "-m", "vllm_logwatch", "run", "--listen", "127.0.0.1", "--port", "0",
         "--log-dir", str(tmp_path), "--", "no-such-vllm-7f3a", "serve"],
        capture_output=True, text=True, timeout=30)
    assert p.returncode == 127
    said = [line.split(" logwatch ", 1)[1] for line in p.stderr.splitlines()]
    errors = [line for line in said if line.startswith("ERROR")]
    assert errors == ["ERROR cannot start no-such-vllm-7f3a: no such file or directory"], said
    assert not any("started vLLM" in line for line in said), said
    assert said[-1] == "INFO exiting with code 127", said
    assert list(tmp_path.iterdir()) == []  # no launch file: nothing ever ran


def test_the_last_line_is_the_exit_code(tmp_path: Path) -> None:
    with logwatch_run(tmp_path, "--lines", "3", "--exit", "3") as (proc, _):
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 3
    assert err.decode().splitlines()[-1].endswith("logwatch INFO exiting with code 3")
