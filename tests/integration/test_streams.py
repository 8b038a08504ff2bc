"""Inputs that are not regular files: a pipe on standard input (`-` or `/dev/stdin`), a FIFO, a process
substitution (`<(cat f)`). Each is read as a stream through the same code as files, gzip included,
and gives the rows the file gives; an error reading one is an input error naming it."""

from __future__ import annotations

import csv
import gzip
import io
import json
import os
import shutil
import subprocess
import sys
import threading
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from support import ROOT, TESTS

pytestmark = pytest.mark.timeout(60)

DATA = TESTS / "data"
LOG = DATA / "002.log"
REAL_CPU_LOG = next((DATA / "real-vllm-cpu").glob("serve_*.log"))
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def logwatch(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "vllm_logwatch", *args], input=stdin, capture_output=True,
                          timeout=60, cwd=ROOT, env=ENV)


def rows(csv_text: bytes) -> list[dict[str, str]]:
    """The CSV rows without the file column (a stream's name is not the file's)."""
    return [{k: v for k, v in row.items() if k != "file"}
            for row in csv.DictReader(io.StringIO(csv_text.decode()))]


def records(jsonl: bytes) -> list[dict[str, object]]:
    return [{k: v for k, v in json.loads(line).items() if k != "file"} for line in jsonl.splitlines()]


@pytest.fixture
def fifo(tmp_path: Path) -> Iterator[Callable[[bytes], Path]]:
    """`fifo(data)`: a named pipe that a thread writes `data` to once a reader opens it."""
    writers: list[threading.Thread] = []

    def make(data: bytes) -> Path:
        path = tmp_path / f"serve{len(writers)}.pipe"
        os.mkfifo(path)

        def write() -> None:
            with open(path, "wb") as pipe:  # blocks until the reader opens it
                pipe.write(data)

        writers.append(threading.Thread(target=write, daemon=True))
        writers[-1].start()
        return path

    yield make
    for writer in writers:
        writer.join(5)


def test_csv_from_a_pipe_on_standard_input_equals_the_file() -> None:
    expected = logwatch("parse", "--csv", "--tz", "UTC", str(LOG))
    assert expected.returncode == 0, expected.stderr
    for name in ("-", "/dev/stdin"):
        proc = logwatch("parse", "--csv", "--tz", "UTC", name, stdin=LOG.read_bytes())
        assert proc.returncode == 0, (name, proc.stderr)
        assert proc.stderr == b""
        assert rows(proc.stdout) == rows(expected.stdout) and len(rows(proc.stdout)) == 5


def test_jsonl_from_a_pipe_on_dev_stdin() -> None:
    proc = logwatch("parse", "--jsonl", "--kind", "all", "--tz", "UTC", "/dev/stdin",
                    stdin=REAL_CPU_LOG.read_bytes())
    assert proc.returncode == 0, proc.stderr
    expected = logwatch("parse", "--jsonl", "--kind", "all", "--tz", "UTC", str(REAL_CPU_LOG))
    assert records(proc.stdout) == records(expected.stdout)
    assert {json.loads(line)["file"] for line in proc.stdout.splitlines()} == {"/dev/stdin"}


@pytest.mark.parametrize("name", ["-", "/dev/stdin"])
def test_gzip_on_standard_input_is_detected(name: str) -> None:
    expected = logwatch("parse", "--csv", "--tz", "UTC", str(LOG))
    proc = logwatch("parse", "--csv", "--tz", "UTC", name, stdin=gzip.compress(LOG.read_bytes()))
    assert proc.returncode == 0, proc.stderr
    assert rows(proc.stdout) == rows(expected.stdout)
    proc = logwatch("parse", "--jsonl", "--tz", "UTC", name, stdin=gzip.compress(LOG.read_bytes()))
    assert proc.returncode == 0, proc.stderr
    assert len(proc.stdout.splitlines()) == 5


class Trickle(io.RawIOBase):
    """A pipe whose writer sends one byte at a time: every read returns at most one byte."""

    def __init__(self, data: bytes) -> None:
        super().__init__()
        self.data = data

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        n = min(1, len(self.data), len(buffer))
        buffer[:n], self.data = self.data[:n], self.data[n:]
        return n

    def read(self, size: int = -1) -> bytes:
        out = self.data[:1]
        self.data = self.data[1:]
        return out


def test_gzip_whose_bytes_come_one_at_a_time_is_detected(monkeypatch: pytest.MonkeyPatch) -> None:
    """The magic is read whole even when the pipe delivers it one byte at a time."""
    from vllm_logwatch.offline.reading.inputs import Source, open_source

    monkeypatch.setattr(sys, "stdin", types.SimpleNamespace(buffer=Trickle(gzip.compress(LOG.read_bytes()))))
    with open_source(Source("-")) as stream:
        assert stream.read() == LOG.read_bytes()
    monkeypatch.setattr(sys, "stdin", types.SimpleNamespace(buffer=Trickle(LOG.read_bytes())))
    with open_source(Source("-")) as stream:
        assert stream.read() == LOG.read_bytes()


def test_summary_of_dev_stdin_is_the_summary_of_the_file() -> None:
    expected = logwatch("summary", "--json", "--tz", "UTC", str(LOG))
    proc = logwatch("summary", "--json", "--tz", "UTC", "/dev/stdin", stdin=LOG.read_bytes())
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == b""
    ours, theirs = json.loads(proc.stdout), json.loads(expected.stdout)
    assert ours["groups"][0].pop("launch") == "stdin"  # names are shown without their folder
    assert theirs["groups"][0].pop("launch") == "002.log"
    for launch in ours["launches"] + theirs["launches"]:  # each launch names where it was read
        launch.pop("file"), launch.pop("launch")
    for curve in ours["answers"]["pareto"] + theirs["answers"]["pareto"]:  # and each Pareto curve
        curve.pop("launch")
    assert ours == theirs and ours["groups"][0]["lines"] == 5


def test_gzip_summary_on_standard_input() -> None:
    proc = logwatch("summary", "--json", "--tz", "UTC", "-", stdin=gzip.compress(LOG.read_bytes()))
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["groups"][0]["lines"] == 5


def test_plot_from_a_pipe(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    image = tmp_path / "run.png"
    proc = logwatch("plot", "/dev/stdin", "-o", str(image), "--tz", "UTC", stdin=REAL_CPU_LOG.read_bytes())
    assert proc.returncode == 0, proc.stderr
    assert image.read_bytes().startswith(b"\x89PNG")


@pytest.mark.parametrize("args", [["parse", "--csv"], ["parse", "--jsonl"], ["summary", "--json"]],
                         ids=["csv", "jsonl", "summary"])
def test_a_fifo_is_read_as_a_stream(fifo: Callable[[bytes], Path], args: list[str]) -> None:
    path = fifo(LOG.read_bytes())
    proc = subprocess.Popen([sys.executable, "-m", "vllm_logwatch", *args, "--tz", "UTC", str(path)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT, env=ENV)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert err == b""
    if args == ["parse", "--csv"]:
        assert len(rows(out)) == 5 and {r["file"] for r in csv.DictReader(io.StringIO(out.decode()))} == {
            str(path)}
    elif args == ["parse", "--jsonl"]:
        assert len(records(out)) == 5
    else:
        assert json.loads(out)["groups"][0]["lines"] == 5


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash for <(...)")
@pytest.mark.parametrize("args", [
    "parse --csv", "parse --jsonl", "summary --json", "parse --csv --kind stats",
], ids=["csv", "jsonl", "summary", "csv-gzip"])
def test_process_substitution(tmp_path: Path, args: str) -> None:
    log = tmp_path / "x.log"
    if args.endswith("--kind stats"):
        log = tmp_path / "x.log.gz"
        log.write_bytes(gzip.compress(LOG.read_bytes()))
    else:
        shutil.copy(LOG, log)
    script = f'"$PY" -m vllm_logwatch {args} --tz UTC <(cat "$LOG")'
    proc = subprocess.run(["bash", "-c", script], capture_output=True, timeout=60, cwd=ROOT,
                          env={**ENV, "PY": sys.executable, "LOG": str(log)})
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == b""
    if args.startswith("summary"):
        assert json.loads(proc.stdout)["groups"][0]["lines"] == 5
    elif "--jsonl" in args:
        assert len(records(proc.stdout)) == 5
    else:
        assert len(rows(proc.stdout)) == 5


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash for <(...)")
def test_plot_of_a_process_substitution(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    image = tmp_path / "run.png"
    proc = subprocess.run(["bash", "-c", '"$PY" -m vllm_logwatch plot --tz UTC -o "$OUT" <(cat "$LOG")'],
                          capture_output=True, timeout=120, cwd=ROOT,
                          env={**ENV, "PY": sys.executable, "LOG": str(REAL_CPU_LOG), "OUT": str(image)})
    assert proc.returncode == 0, proc.stderr
    assert image.read_bytes().startswith(b"\x89PNG")


@pytest.mark.parametrize("command", ["parse", "summary"])
def test_corrupt_gzip_on_a_pipe_is_an_input_error_naming_it(command: str) -> None:
    for name, shown in (("-", "<stdin>"), ("/dev/stdin", "/dev/stdin")):
        proc = logwatch(command, name, stdin=gzip.compress(LOG.read_bytes())[:60])
        assert proc.returncode == 2
        err = proc.stderr.decode()
        assert err.startswith(f"logwatch {command}: {shown}: corrupt or truncated gzip data"), err
        assert "cannot write the output" not in err and err.count("\n") == 1


def test_gzip_fifo(fifo: Callable[[bytes], Path]) -> None:
    proc = logwatch("parse", "--csv", "--tz", "UTC", str(fifo(gzip.compress(LOG.read_bytes()))))
    assert proc.returncode == 0, proc.stderr
    assert len(rows(proc.stdout)) == 5


def test_empty_pipe_is_no_stats() -> None:
    proc = logwatch("parse", "/dev/stdin", stdin=b"")
    assert proc.returncode == 1
    assert proc.stderr.decode().startswith("logwatch parse: no stats lines in 1 file")
