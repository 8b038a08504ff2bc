"""A log file whose name is not valid UTF-8 (`serve_\\xff.log`): every command shows the name with the
undecodable bytes replaced (U+FFFD), and none fails on it: not the status API, the page, CSV, JSON
lines, OpenMetrics, summary, plot or the log messages."""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support import ROOT, TESTS

from vllm_logwatch.shown import shown_path

pytestmark = pytest.mark.timeout(60)

DATA = TESTS / "data"
SHOWN = "serve_\ufffd.log"
# A user's UTF-8 terminal: stdout is strict (the C.UTF-8 locale would let surrogates through).
STRICT = {**os.environ, "PYTHONIOENCODING": "utf-8"}


def odd_log(folder: Path, source: Path = DATA / "002.log") -> str:
    """`folder/serve_\\xff.log`, made through bytes paths; returns its name as Python's str of it."""
    raw = os.fsencode(folder) + b"/serve_\xff.log"
    shutil.copyfile(os.fsencode(source), raw)
    return os.fsdecode(raw)


def logwatch(*args: str, cwd: Path) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "vllm_logwatch", *args], capture_output=True, timeout=120,
                          cwd=cwd, env={**STRICT, "PYTHONPATH": str(ROOT)})


def test_shown_path_replaces_undecodable_bytes_and_keeps_the_rest() -> None:
    assert shown_path(os.fsdecode(b"logs/serve_\xff\xfe.log")) == "logs/serve_\ufffd\ufffd.log"
    assert shown_path(b"a\xffb") == "a\ufffdb"
    assert shown_path("plain/ünïcode.log") == "plain/ünïcode.log"
    assert shown_path("lone \ud800 surrogate") == "lone \ufffd\ufffd\ufffd surrogate"
    assert shown_path(Path("x.log")) == "x.log"


@pytest.mark.parametrize("args", [["parse", "--csv"], ["parse", "--jsonl"], ["parse", "--kind", "all"]],
                         ids=["csv", "jsonl", "all"])
def test_parse_shows_the_name_replaced(tmp_path: Path, args: list[str]) -> None:
    name = odd_log(tmp_path)
    proc = logwatch(*args, os.path.basename(name), "--tz", "UTC", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == b""
    out = proc.stdout.decode("utf-8")  # strict: no surrogate escaped into the output
    if "--csv" in args:
        rows = list(csv.DictReader(io.StringIO(out)))
        assert len(rows) == 5 and {row["file"] for row in rows} == {SHOWN}
    else:
        records = [json.loads(line) for line in out.splitlines()]
        assert records and {r["file"] for r in records} == {SHOWN}


def test_parse_csv_of_a_big_file_takes_the_parallel_path_and_shows_the_name(tmp_path: Path) -> None:
    name = odd_log(tmp_path)
    code = ("import sys, vllm_logwatch.offline.reading.ranges as f, vllm_logwatch.commands.parse as p; "
            "p.run_parse([sys.argv[1]], tz='UTC', tuning=f.Tuning(parallel_min_bytes=1))")
    proc = subprocess.run([sys.executable, "-c", code, os.path.basename(name)], capture_output=True,
                          timeout=60, cwd=tmp_path, env={**STRICT, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr
    rows = list(csv.DictReader(io.StringIO(proc.stdout.decode("utf-8"))))
    assert len(rows) == 5 and {row["file"] for row in rows} == {SHOWN}


@pytest.mark.parametrize("fmt", [[], ["--json"], ["--markdown"]], ids=["text", "json", "markdown"])
def test_summary_shows_the_name_replaced(tmp_path: Path, fmt: list[str]) -> None:
    name = odd_log(tmp_path)
    proc = logwatch("summary", os.path.basename(name), "--tz", "UTC", *fmt, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == b""
    out = proc.stdout.decode("utf-8")
    if fmt == ["--json"]:
        assert {group["launch"] for group in json.loads(out)["groups"]} == {SHOWN}
    else:
        assert SHOWN in out


def test_openmetrics_of_such_a_file(tmp_path: Path) -> None:
    name = odd_log(tmp_path)
    proc = logwatch("parse", "--openmetrics", os.path.basename(name), "--tz", "UTC", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.decode("utf-8").endswith("# EOF\n")


def test_input_errors_name_the_file_replaced(tmp_path: Path) -> None:
    raw = os.fsencode(tmp_path) + b"/serve_\xff.log.gz"
    with open(raw, "wb") as f:
        f.write(b"\x1f\x8b not really gzip")
    proc = logwatch("parse", os.fsdecode(b"serve_\xff.log.gz"), cwd=tmp_path)
    assert proc.returncode == 2
    err = proc.stderr.decode("utf-8")
    assert err.startswith("logwatch parse: serve_\ufffd.log.gz: corrupt or truncated gzip data"), err
    assert err.count("\n") == 1


def test_plot_titles_and_legends_show_the_name_replaced(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    from vllm_logwatch.offline.plot.collect import collect, draw
    from vllm_logwatch.offline.reading.launches import iter_summary_records

    name = odd_log(tmp_path)
    figure = draw(collect(iter_summary_records([name], tz="UTC", year=None)))
    texts = [figure.get_suptitle()] + [t.get_text() for ax in figure.axes for t in ax.texts]
    assert any(SHOWN in text for text in texts), texts
    image = tmp_path / "run.png"
    proc = logwatch("plot", os.path.basename(name), "-o", str(image), "--tz", "UTC", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == b""
    assert image.read_bytes().startswith(b"\x89PNG")


def test_watch_status_and_page_answer_200_for_such_a_file(
    tmp_path: Path, logwatch_watch: Callable[..., Any], poll_until: Callable[..., Any]
) -> None:
    folder = tmp_path / "logs"
    folder.mkdir()
    odd_log(folder)
    with logwatch_watch(folder, "--from-start", "--tz", "UTC", env={"PYTHONIOENCODING": "utf-8"}) as watch:
        watch.wait_sample("vllm_logwatch_requests_running", {"engine": "0", "model_name": "unknown"}, 20)
        response = watch.get("/api/v1/status")
        assert response.status_code == 200, response.text
        status = json.loads(response.content.decode("utf-8"))
        assert status["follower"]["path"].endswith("/logs/" + SHOWN)
        assert status["pipeline"]["source"].endswith("/logs/" + SHOWN)
        page = watch.get("/")
        assert page.status_code == 200
        assert SHOWN in page.content.decode("utf-8")
        assert watch.get("/metrics").status_code == 200
        poll_until(lambda: SHOWN in watch.stderr(), what="the start-up message naming the file")
    stderr = watch.stderr()
    assert "\\udcff" not in stderr and "Traceback" not in stderr, stderr



def test_watch_a_folder_and_a_state_file_whose_names_are_not_utf8(
    tmp_path: Path, logwatch_watch: Callable[..., Any],
) -> None:
    """The command line and the environment give such names as they are (Python keeps the bytes as
    surrogates; the settings take them): TARGET, --state-file, and LOGWATCH_TARGET alike."""
    folder = os.fsdecode(os.fsencode(tmp_path) + b"/logs_\xff")
    os.mkdir(folder)
    shutil.copyfile(DATA / "002.log", os.path.join(folder, "serve.log"))
    state = os.path.join(folder, "state_\udcfe.json")
    e0 = {"engine": "0", "model_name": "unknown"}
    with logwatch_watch(folder, "--from-start", "--tz", "UTC", "--state-file", state,
                        env={"PYTHONIOENCODING": "utf-8"}) as watch:
        watch.wait_sample("vllm_logwatch_requests_running", e0, 20)
        assert watch.get("/api/v1/status").status_code == 200
    assert os.path.exists(state)
    assert "Traceback" not in watch.stderr()


def test_run_writes_its_launch_file_into_a_folder_whose_name_is_not_utf8(tmp_path: Path) -> None:
    folder = os.fsdecode(os.fsencode(tmp_path) + b"/launches_\xff")
    command = [sys.executable, "-m", "vllm_logwatch", "run", "--listen", "127.0.0.1", "--port", "0",
               "--log-dir", folder, "--", sys.executable, "-c", "print('INFO 11-29 19:26:05 [x.py:1] hi')"]
    proc = subprocess.run(command, capture_output=True, timeout=60, env={**STRICT, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr
    files = os.listdir(os.fsencode(folder))
    assert len(files) == 1 and files[0].startswith(b"vllm_") and files[0].endswith(b".log")
    with open(os.path.join(os.fsencode(folder), files[0]), "rb") as launch:
        assert b"hi" in launch.read()
    assert b"Traceback" not in proc.stderr and b"\\udcff" not in proc.stderr
