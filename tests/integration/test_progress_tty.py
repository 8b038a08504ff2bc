"""Long work says how far it got on a terminal, and nothing on a pipe: every offline command that reads
a log over `PROGRESS_MIN_BYTES` shows a progress bar on a real pseudo-terminal (each route: the range
workers, the stream, the general parser, a gzip'd file), exits 0 with its output whole; and `watch`
says once when it has caught up with a backlog."""

from __future__ import annotations

import fcntl
import gzip
import os
import pty
import select
import shutil
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest
from support import TESTS, poll_until, run_watch

from vllm_logwatch.offline.reading.inputs import PROGRESS_MIN_BYTES

REAL = TESTS / "data" / "real-vllm-cpu" / "serve_20261129T192328Z.log"
PAD = b"x" * ((1 << 20) + 1) + b"\n"  # a line over the cap: skipped by every reader, cheap to write


@pytest.fixture(scope="module")
def big_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The real log, then padding to just over the size where progress starts, then the log again."""
    path = tmp_path_factory.mktemp("progress") / "serve_20261129T192328Z.log"
    real = REAL.read_bytes()
    with open(path, "wb") as out:
        out.write(real)
        for _ in range(PROGRESS_MIN_BYTES // len(PAD) + 1):
            out.write(PAD)
        out.write(real)
    assert path.stat().st_size > PROGRESS_MIN_BYTES
    return path


def run_in_terminal(args: list[str], cwd: Path) -> tuple[int, str, bytes]:
    """`logwatch ARGS` with stderr on a real pseudo-terminal: (exit code, what it showed, stdout)."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 120, 0, 0))  # a terminal has a size
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOGWATCH_")}
    with open(cwd / "stdout", "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "vllm_logwatch", *args], stdout=out, stderr=slave,
                                stdin=subprocess.DEVNULL, cwd=cwd, env=env)
    os.close(slave)
    shown = bytearray()
    deadline = time.monotonic() + 120
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.5)
            if ready:
                try:
                    data = os.read(master, 65536)
                except OSError:  # the terminal's other end closed: the child is done with it
                    break
                if not data:
                    break
                shown += data
            elif proc.poll() is not None:
                break
        code = proc.wait(timeout=60)
    finally:
        os.close(master)
    return code, shown.decode("utf-8", "replace"), (cwd / "stdout").read_bytes()


COMMANDS = {
    "parse --csv": (["parse", "--csv", "--tz", "UTC"], b"time,file,line"),
    "parse --jsonl": (["parse", "--jsonl", "--tz", "UTC"], b'{"kind": "stats"'),
    "parse --kind spec": (["parse", "--kind", "spec", "--jsonl", "--tz", "UTC"], None),
    "parse --kind all": (["parse", "--kind", "all", "--jsonl", "--tz", "UTC"], b'"kind": "info"'),
    "parse --openmetrics": (["parse", "--openmetrics", "--tz", "UTC"], b"# EOF"),
    "summary": (["summary", "--tz", "UTC"], b"running"),
    "compare": (["compare", "--tz", "UTC"], None),
}


@pytest.mark.parametrize("name", list(COMMANDS))
def test_a_big_log_shows_progress_in_a_terminal(name: str, big_log: Path, tmp_path: Path) -> None:
    args, expected = COMMANDS[name]
    code, shown, out = run_in_terminal([*args, str(big_log)], tmp_path)
    assert "Traceback" not in shown, shown
    if name == "parse --kind spec":  # the log has no spec-decode lines: its one-line answer, exit 1
        assert code == 1 and "no spec records" in shown, shown
    else:
        assert code == 0, shown
    assert "B/s" in shown or "%|" in shown, f"no progress bar on the terminal: {shown!r}"
    if expected is not None:
        assert expected in out


def test_a_gzipped_log_and_the_plot_show_progress(big_log: Path, tmp_path: Path) -> None:
    """The stream route (gzip) counts the bytes read from the disk; `plot` reads through the ranges."""
    pytest.importorskip("matplotlib")
    packed = tmp_path / "serve_20261129T192328Z.log.gz"
    with open(big_log, "rb") as src, gzip.open(packed, "wb", compresslevel=1) as dst:
        shutil.copyfileobj(src, dst)
    for args in (["parse", "--csv", "--tz", "UTC", str(packed)],
                 ["plot", "--tz", "UTC", "-o", str(tmp_path / "run.png"), str(big_log)]):
        code, shown, _ = run_in_terminal(args, tmp_path)
        assert code == 0 and "Traceback" not in shown, shown
    assert (tmp_path / "run.png").read_bytes().startswith(b"\x89PNG")


def test_nothing_but_the_output_on_a_pipe(big_log: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "vllm_logwatch", "parse", "--kind", "all", "--jsonl",
                           str(big_log)], capture_output=True, timeout=120)
    assert proc.returncode == 0
    assert proc.stderr == b""


def test_watch_says_once_when_it_has_caught_up(tmp_path: Path) -> None:
    log = tmp_path / "serve_20261129T192328Z.log"
    shutil.copy(REAL, log)
    with run_watch(log, "--from-start", log_dir=tmp_path) as watch:
        poll_until(lambda: "caught up" in watch.stderr(), 20, "the caught-up line")
        lines = REAL.read_bytes().count(b"\n")
        assert f"caught up: {lines} lines of backlog read in" in watch.stderr()
        with open(log, "a") as f:
            f.write(REAL.read_bytes().splitlines()[-1].decode() + "\n")
        poll_until(lambda: watch.get("/api/v1/status").json()["pipeline"]["lines_applied"] > lines, 20,
                   "the new line")
        assert watch.stderr().count("caught up") == 1
