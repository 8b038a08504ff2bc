"""`logwatch parse --jsonl` and `logwatch summary` as subprocesses: their fast lanes print what the
general path prints (the general path run in-process, on a text stream without a binary buffer)."""

from __future__ import annotations

import contextlib
import io
import subprocess
import sys

import pytest
from support import TESTS

from vllm_logwatch.commands.parse import run_parse
from vllm_logwatch.errors import NoStatsError

DATA = TESTS / "data"
REAL_CPU_LOG = next((DATA / "real-vllm-cpu").glob("serve_*.log"))


def logwatch(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "vllm_logwatch", *args], capture_output=True, text=True,
                          timeout=60)


@pytest.mark.parametrize("logs", [[REAL_CPU_LOG], [DATA / "012.log", REAL_CPU_LOG, DATA / "017.log"]],
                         ids=["real", "three"])
def test_parse_jsonl_equals_general_path(logs: list[object]) -> None:
    paths = [str(p) for p in logs]
    expected = io.StringIO()
    with contextlib.suppress(NoStatsError):
        run_parse(paths, fmt="jsonl", tz="UTC", out=expected, tuning=None)
    proc = logwatch("parse", "--jsonl", "--tz", "UTC", *paths)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == expected.getvalue()


@pytest.mark.parametrize("args", [[], ["--markdown"], ["--json", "--by", "engine"]],
                         ids=["text", "md", "json"])
def test_summary_equals_general_path(args: list[str]) -> None:
    from vllm_logwatch.commands.summary import run_summary

    paths = [str(DATA / "011.log"), str(REAL_CPU_LOG)]
    by = "engine" if "--by" in args else "launch"
    fmt = "markdown" if "--markdown" in args else "json" if "--json" in args else "text"
    expected = io.StringIO()
    run_summary(paths, by=by, fmt=fmt, tz="UTC", out=expected, tuning=None)
    proc = logwatch("summary", *args, "--tz", "UTC", *paths)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == expected.getvalue()
