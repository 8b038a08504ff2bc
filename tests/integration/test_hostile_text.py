"""Hostile text on stderr and in tables: malformed HTTP requests are counted, not logged; a file name
holding a newline or a terminal escape is shown escaped in every message; `compare` escapes control
characters of the arguments (text and Markdown) and `|` in Markdown tables."""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from support import ROOT, TESTS, poll_until, run_watch

pytestmark = pytest.mark.timeout(60)

DATA = TESTS / "data"
HOSTILE = "serve\n\x1b[31mFAKE ERROR\x1b[0m.log"


def test_malformed_requests_are_counted_not_logged(tmp_path: Path) -> None:
    log = tmp_path / "serve.log"
    shutil.copyfile(DATA / "002.log", log)
    with run_watch(log, "--from-start", log_dir=tmp_path) as watch:
        for _ in range(300):
            with socket.create_connection(("127.0.0.1", watch.port), timeout=5) as sock:
                sock.sendall(b"\x16\x03\x01 not http\r\n\r\n")
                sock.recv(1024)  # uvicorn's 400
        count = watch.wait_sample("vllm_logwatch_http_invalid_requests_total", expected=300, timeout=10)
        assert count == 300
        assert "Invalid HTTP request" not in watch.stderr()


def logwatch(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "vllm_logwatch", *args], capture_output=True, text=True,
                          timeout=120, cwd=cwd, env={**os.environ, "PYTHONPATH": str(ROOT)})


def test_an_error_naming_a_hostile_file_stays_one_line(tmp_path: Path) -> None:
    (tmp_path / f"{HOSTILE}.gz").write_bytes(b"\x1f\x8b not really gzip")
    proc = logwatch("parse", f"{HOSTILE}.gz", cwd=tmp_path)
    assert proc.returncode == 2
    assert "\x1b" not in proc.stderr and proc.stderr.count("\n") == 1, repr(proc.stderr)
    assert "serve\\n\\x1b[31mFAKE ERROR" in proc.stderr


def test_watch_messages_show_a_hostile_file_name_escaped(tmp_path: Path) -> None:
    folder = tmp_path / "logs"
    folder.mkdir()
    shutil.copyfile(DATA / "002.log", folder / HOSTILE)
    with run_watch(folder, "--from-start", log_dir=tmp_path) as watch:
        poll_until(lambda: "FAKE ERROR" in watch.stderr(), 20, "the message naming the file")
        stderr = watch.stderr()
    assert "\x1b" not in stderr, stderr
    assert not any(line.startswith("\x1b") or line.startswith("[31mFAKE") for line in stderr.splitlines())
    assert "serve\\n\\x1b[31mFAKE ERROR" in stderr


ARGS = re.compile(r"non-default args: \{.*\}$", re.M)


def test_compare_escapes_control_characters_and_pipes(tmp_path: Path) -> None:
    logs = []
    for name, value in (("a", "x\x1b[2J\ny"), ("b", "p|q\r\n## forged")):
        scenario = "mns16-prefix" if name == "a" else "mns8-prefix"
        source = next((DATA / "compare" / scenario).glob("serve_*.log"))
        added = f", 'chat_template': {value!r}}}"
        text = ARGS.sub(lambda m, a=added: m.group(0)[:-1] + a, source.read_text(), count=1)
        path = tmp_path / f"serve_{name}.log"
        path.write_text(text)
        logs.append(str(path))
    for fmt in ([], ["--markdown"]):
        proc = logwatch("compare", *logs, *fmt, "--tz", "UTC", cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        out = proc.stdout
        assert "\x1b" not in out and "\r" not in out, repr(out)
        row = next(line for line in out.splitlines() if line.lstrip("| ").startswith("chat_template"))
        assert "x\\x1b[2J\\ny" in row and "\\r\\n## forged" in row, row
        if fmt:
            assert "p\\|q" in row and row.count(" | ") == 2, row
