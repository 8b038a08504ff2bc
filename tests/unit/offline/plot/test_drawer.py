"""`logwatch plot`'s drawing process (`Drawer`): the image of the data, errors as the caller's
errors, and it never outlives its caller (closed, interrupted or killed)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from zoneinfo import ZoneInfo

import pytest
from support import TESTS, poll_until

pytest.importorskip("matplotlib")

from vllm_logwatch.errors import OutputError
from vllm_logwatch.offline.plot.collect import Drawer, collect, draw
from vllm_logwatch.offline.reading.launches import iter_summary_records
from vllm_logwatch.parsing.stamps import local_zone

REAL_CPU_LOG = next((TESTS / "data" / "real-vllm-cpu").glob("serve_*.log"))


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie not yet reaped is gone too
        with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def data(tz: str | None = "UTC") -> object:
    return collect(iter_summary_records([str(REAL_CPU_LOG)], tz=tz))


@pytest.mark.integration  # over 0.2 s (a process, or a day of lines): make test, not smoke
def test_the_image_is_the_figure_drawn_here() -> None:
    import io

    here = io.BytesIO()
    draw(collect(iter_summary_records([str(REAL_CPU_LOG)], tz="UTC"))).savefig(here, format="png", dpi=100)
    with Drawer() as drawer:
        image = drawer.image(data(), "png", dpi=100)  # type: ignore[arg-type]
    assert image == here.getvalue()


@pytest.mark.integration  # over 0.2 s (a process, or a day of lines): make test, not smoke
def test_this_machines_zone_read_from_a_file_goes_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TZ", "/usr/share/zoneinfo/America/New_York")
    zone = local_zone()
    assert isinstance(zone, ZoneInfo)
    with Drawer() as drawer:  # a zone from a file cannot be pickled as it is
        assert drawer.image(data(None), "png")[:8] == b"\x89PNG\r\n\x1a\n"  # type: ignore[arg-type]


@pytest.mark.integration  # over 0.2 s (a process, or a day of lines): make test, not smoke
def test_an_unknown_format_is_a_value_error() -> None:
    with Drawer() as drawer, pytest.raises(ValueError, match="bmpx"):
        drawer.image(data(), "bmpx")  # type: ignore[arg-type]


@pytest.mark.integration  # over 0.2 s (a process, or a day of lines): make test, not smoke
def test_ctrl_c_is_ignored_and_closing_ends_it() -> None:
    """Ctrl-C reaches the whole process group: the drawing process ignores it from its first
    instruction (SIGINT blocked across the fork), so the caller's interrupt alone decides."""
    drawer = Drawer()
    for _ in range(200):  # from the fork on, while it starts
        os.kill(drawer.pid, signal.SIGINT)
    assert drawer.image(data(), "png")[:4] == b"\x89PNG"  # type: ignore[arg-type]
    drawer.close()
    assert not alive(drawer.pid)


def test_closed_before_any_data_it_exits() -> None:
    drawer = Drawer()
    pid = drawer.pid
    drawer.close()
    assert not alive(pid)


def test_a_killed_drawer_is_a_one_line_error() -> None:
    with Drawer() as drawer:
        os.kill(drawer.pid, signal.SIGKILL)
        with pytest.raises(OutputError, match=r"the drawing process ended without an image \(exit code -9\)"):
            drawer.image(data(), "png")  # type: ignore[arg-type]


ORPHAN = """
import sys, time
from vllm_logwatch.offline.plot.collect import Drawer
drawer = Drawer()
print(drawer.pid, flush=True)
time.sleep(60)
"""


@pytest.mark.integration  # a process killed: over 0.2 s
def test_it_ends_with_its_caller_killed() -> None:
    with subprocess.Popen([sys.executable, "-c", ORPHAN], stdout=subprocess.PIPE, text=True) as proc:
        assert proc.stdout is not None
        pid = int(proc.stdout.readline())
        proc.kill()
        proc.wait(10)
    poll_until(lambda: not alive(pid), timeout=10, what="the drawing process to end with its caller")
