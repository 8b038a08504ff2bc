"""2,000 sources under a limit of 1,024 descriptors (soft and hard: raising it cannot help): the watch
keeps at most half the limit of log files open (`following/many.py`), so `/metrics` and
`/healthz` answer throughout, every line is read, and stderr stays quiet."""

from __future__ import annotations

import os
import resource
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from support import WatchProcess, run_watch

SOURCES = 2000
LIMIT = 1024
BOUND = LIMIT // 2 + 64  # the log files open at most, and the server's own (docs/watch.md)
LINE = "INFO 07-05 11:29:01 [loggers.py:123] Engine 000: Avg prompt throughput: 0.0 tokens/s"


def limit_descriptors() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (LIMIT, LIMIT))


def scripts(root: Path) -> None:
    root.mkdir()
    for i in range(SOURCES):
        (root / f"serve_s{i}_20250705_112901.log").write_text(LINE + "\n")


def pods(root: Path) -> None:
    for i in range(SOURCES):
        folder = root / f"vllm_p{i}_{uuid.uuid5(uuid.NAMESPACE_DNS, str(i))}" / "vllm"
        folder.mkdir(parents=True)
        (folder / "0.log").write_text(f"2025-07-05T11:29:01Z stdout F {LINE}\n")


def lines_read(watch: WatchProcess) -> float:
    return sum(v for (name, _), v in watch.samples().items() if name == "vllm_logwatch_log_lines_total")


def descriptors(watch: WatchProcess) -> int:
    return len(os.listdir(f"/proc/{watch.proc.pid}/fd"))


@pytest.mark.parametrize("layout", [scripts, pods], ids=["scripts", "pods"])
def test_two_thousand_sources_under_a_limit_of_1024_descriptors(
        tmp_path: Path, layout: Callable[[Path], None]) -> None:
    root = tmp_path / "logs"
    layout(root)
    most = 0
    with run_watch(root, "--from-start", "--poll-interval", "0.2", preexec=limit_descriptors,
                   log_dir=tmp_path, startup_timeout=15) as watch:
        deadline = time.monotonic() + 15
        while True:
            most = max(most, descriptors(watch))
            assert watch.get("/healthz").status_code == 200
            if lines_read(watch) == SOURCES:
                break
            assert time.monotonic() < deadline, f"{lines_read(watch)} of {SOURCES} lines read"
        for name in (f"serve_s{i}_20250705_112901.log" for i in range(0, SOURCES, 100)):
            if layout is scripts:
                with (root / name).open("a") as f:
                    f.write(LINE + "\n")
        if layout is scripts:
            while lines_read(watch) < SOURCES + 20:
                most = max(most, descriptors(watch))
                assert time.monotonic() < deadline + 10, "the lines written to parked files"
        most = max(most, descriptors(watch))
        status = watch.status()
        assert status["follower"]["open_files"] <= LIMIT // 2
        assert status["http"]["accept_errors"] == 0
    assert most <= BOUND, f"{most} descriptors open"
    err = watch.stderr()
    assert "Traceback" not in err and "accept" not in err
    # a line for each of the --max-sources (100) with series of their own, one for all those folded
    assert len(err.splitlines()) < 100 + 10, err[-2000:]
    print(f"{layout.__name__}: at most {most} descriptors open")
