"""`logwatch watch` refuses at start what it could never follow or keep its place in: a state file that
is not a regular file (a device, a pipe, a link) or is too big to be one, and a target that is a loop of
symbolic links. Each case runs as a real subprocess, bounded in memory and time: before the fix, some
of them read without end or blocked for ever."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(60)


def _bounded() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))  # an unbounded read fails, not the machine


def watch(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOGWATCH_")}
    return subprocess.run([sys.executable, "-m", "vllm_logwatch", "watch", *args, "--port", "0",
                           "--listen", "127.0.0.1"], capture_output=True, text=True, timeout=20, env=env,
                          cwd=cwd, preexec_fn=_bounded)


@pytest.mark.parametrize("kind", ["/dev/full", "/dev/zero", "fifo", "big", "link-to-dev-null"])
def test_a_state_file_that_is_not_a_regular_file_or_too_big_is_a_usage_error(
    tmp_path: Path, kind: str
) -> None:
    log = tmp_path / "serve.log"
    log.write_text("")
    if kind.startswith("/dev/"):
        state, why = kind, "is not a regular file (a device, a pipe, a socket)"
    elif kind == "fifo":
        state, why = str(tmp_path / "state.json"), "is not a regular file (a device, a pipe, a socket)"
        os.mkfifo(state)
    elif kind == "big":
        state, why = str(tmp_path / "state.json"), "is 5000000 bytes: not a state file (at most 4 MiB)"
        Path(state).write_bytes(b" " * 5_000_000)
    else:
        state, why = str(tmp_path / "state.json"), ("is a symbolic link: give the path of the file itself "
                                                     "(it is replaced at each save)")
        os.symlink("/dev/null", state)
    done = watch(str(log), "--state-file", state, cwd=tmp_path)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == f"logwatch watch: --state-file {state}: {why}\n"
    if kind == "link-to-dev-null":
        assert os.path.islink(state), "left as it was"


def test_a_regular_state_file_is_accepted(tmp_path: Path) -> None:
    # The start-up check must not refuse the ordinary case: an existing state file (here a corrupt one,
    # which is counted and ignored) in a folder of its own. The port is taken, so it stops right after.
    import socket

    log, state = tmp_path / "serve.log", tmp_path / "state.json"
    log.write_text("")
    state.write_text("{}")
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        env = {k: v for k, v in os.environ.items() if not k.startswith("LOGWATCH_")}
        done = subprocess.run([sys.executable, "-m", "vllm_logwatch", "watch", str(log), "--state-file",
                               str(state), "--listen", "127.0.0.1", "--port", str(port)],
                              capture_output=True, text=True, timeout=20, env=env)
    assert done.returncode == 2
    assert "--state-file" not in done.stderr and "in use" in done.stderr, done.stderr


def test_a_symlink_loop_as_target_is_a_usage_error(tmp_path: Path) -> None:
    a, b = tmp_path / "a.log", tmp_path / "b.log"
    a.symlink_to(b)
    b.symlink_to(a)
    done = watch(str(a), cwd=tmp_path)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == f"logwatch watch: {a}: a loop of symbolic links: it can never be read\n"


def test_a_missing_state_folder_is_made_and_the_state_saved(tmp_path: Path) -> None:
    """A fresh host: `--state-file /var/lib/logwatch/state.json` with no such folder yet works as the
    docs show it, with no mkdir step: the folder is made (mode 0700) and the state written at stop."""
    from support import poll_until, run_watch

    log = tmp_path / "serve.log"
    log.write_text("INFO 11-29 19:26:05 [api_server.py:1] vLLM API server version 0.32.0\n")
    state = tmp_path / "fresh" / "logwatch" / "state.json"
    with run_watch(log, "--state-file", str(state), "--from-start", log_dir=tmp_path) as watch:
        poll_until(lambda: watch.status()["counters"]["log_lines"] >= 1, 10, "the line read")
        assert "made the state file's folder" in watch.stderr()
    assert state.is_file() and (state.parent.stat().st_mode & 0o777) == 0o700
