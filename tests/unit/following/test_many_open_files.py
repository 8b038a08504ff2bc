"""A many-source watch keeps at most `open_files` files open (`many.py`, `Follower.park`): the others
are parked, their place kept, opened again by inode when they change; every line is read once, through
rotations made while parked."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from podtree import Clock, pod, write

from vllm_logwatch.following import many
from vllm_logwatch.following.many import ManyFollower


def count(blocks: list) -> dict[str, int]:  # type: ignore[type-arg]
    out: dict[str, int] = {}
    for block in blocks:
        name = dict(block.key)["pod"]
        out[name] = out.get(name, 0) + block.count
    return out


def open_logs(root: Path) -> int:
    fds = os.listdir("/proc/self/fd")
    return sum(1 for fd in fds if os.path.realpath(f"/proc/self/fd/{fd}").startswith(str(root)))


def test_at_most_open_files_are_open_and_every_line_is_read_once(tmp_path: Path) -> None:
    for i in range(30):
        write(pod(tmp_path, f"p{i}"), "one", "two")
    follower = ManyFollower(str(tmp_path), layout="pods", from_start=True, open_files=4,
                            clock=Clock(step=1.0))
    try:
        assert count(follower.poll_blocks()) == {f"p{i}": 2 for i in range(30)}
        assert open_logs(tmp_path) <= 4
        for i in range(0, 30, 3):
            write(pod(tmp_path, f"p{i}"), "three")
        assert count(follower.poll_blocks()) == {f"p{i}": 1 for i in range(0, 30, 3)}
        assert open_logs(tmp_path) <= 4
        assert count(follower.poll_blocks()) == {}  # parked and unchanged: nothing read, nothing opened
        assert follower.status()["open_files"] <= 4 and follower.stats.read_errors == 0
    finally:
        follower.close()
    assert open_logs(tmp_path) == 0


def test_a_file_rotated_while_parked_is_drained_by_inode_then_the_new_one_read(tmp_path: Path) -> None:
    logs = [pod(tmp_path, f"p{i}") for i in range(3)]
    for log in logs:
        write(log, "a")
    follower = ManyFollower(str(tmp_path), layout="pods", from_start=True, open_files=1,
                            clock=Clock(step=1.0))
    try:
        follower.poll_blocks()
        rotated = logs[0].with_name("0.log.20250705-112901")
        os.rename(logs[0], rotated)  # kubelet's rotation while p0 is parked, a late write to the old file
        write(rotated, "late")
        write(logs[0], "new1", "new2")
        gone = logs[1].with_name("0.log.20250705-112902")
        os.rename(logs[1], gone)  # rotated and compressed away while parked: its inode is gone
        gone.unlink()
        write(logs[1], "fresh")
        assert count(follower.poll_blocks() + follower.poll_blocks()) == {"p0": 3, "p1": 1}
        # p1's new file may get the inode of the one deleted: then it is the same file truncated and
        # written again (read from 0, counted as such), as for a file kept open
        assert follower.stats.rotations + follower.stats.truncations == 2
        assert count(follower.poll_blocks()) == {}
    finally:
        follower.close()


def test_a_parked_source_resumes_its_partial_line_and_its_state(tmp_path: Path) -> None:
    logs = [pod(tmp_path, f"p{i}") for i in range(2)]
    state = str(tmp_path / "state.json")
    for log in logs:
        write(log, "a")
    with logs[0].open("a") as f:
        f.write("2025-07-05T11:29:01Z stdout F half")  # no newline yet
    follower = ManyFollower(str(tmp_path / "."), layout="pods", from_start=True, open_files=1,
                            state_file=state, clock=Clock(step=1.0))
    try:
        assert count(follower.poll_blocks()) == {"p0": 1, "p1": 1}
        with logs[0].open("a") as f:
            f.write(" done\n")
        assert count(follower.poll_blocks()) == {"p0": 1}
        lines = [b for b in follower.poll_blocks()]
        assert lines == []
    finally:
        follower.close()


def test_a_poll_goes_on_from_the_source_after_the_last_one_read(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """With no file notifications (a degraded waker) every poll lists every source as due; a poll visits
    at most SOURCES_PER_POLL of them, and the next goes on from there: the backlog is read in a few
    polls (the turn moved by one source a poll, so each poll read one new source)."""
    monkeypatch.setattr(many, "SOURCES_PER_POLL", 8)
    for i in range(30):
        write(pod(tmp_path, f"p{i:02d}"), "one")
    follower = ManyFollower(str(tmp_path), layout="pods", from_start=True, clock=Clock(step=1.0))
    try:
        read: dict[str, int] = {}
        for _ in range(4):  # 4 polls of 8
            for name, lines in count(follower.poll_blocks()).items():
                read[name] = read.get(name, 0) + lines
        assert read == {f"p{i:02d}": 1 for i in range(30)}
    finally:
        follower.close()
