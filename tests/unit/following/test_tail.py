"""Follower tests on real files, stepped with explicit poll() calls (mtail's filestream tests are the model).

Every test compares the exact lines delivered. Nothing sleeps to synchronise: a ManualWaker never
blocks, and the few tests with threads or a child process wait on events or on the child's output.
"""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import threading
import time
import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from support import ROOT, LogLine, ManualWaker, lines_of, poll, save

from vllm_logwatch.following.follower import Follower
from vllm_logwatch.following.openfile import OpenFile

pytestmark = pytest.mark.timeout(30)

REPO = ROOT
OLD = "serve_20261129_120000.log"
NEW = "serve_20261129_130000.log"

MakeFollower = Callable[..., Follower]


@pytest.fixture
def follow() -> Iterator[MakeFollower]:
    """Make followers stepped by a ManualWaker; close them all at the end."""
    made: list[Follower] = []

    def make(target: Path | str, **kwargs: Any) -> Follower:
        kwargs.setdefault("waker", ManualWaker())
        follower = Follower(str(target), **kwargs)
        made.append(follower)
        return follower

    yield make
    for follower in made:
        follower.close()


def append(path: Path, data: str | bytes) -> None:
    with open(path, "ab") as f:
        f.write(data.encode() if isinstance(data, str) else data)


def texts(lines: list[LogLine]) -> list[str]:
    return [line.text for line in lines]


def set_mtime(path: Path, mtime: float) -> None:
    os.utime(path, (mtime, mtime))


# -- reading -------------------------------------------------------------------------------------------


def test_default_start_is_the_end_and_appended_lines_follow(tmp_path: Path, follow: MakeFollower) -> None:
    log = tmp_path / "serve.log"
    log.write_text("old 1\nold 2\n")
    follower = follow(log)
    assert poll(follower) == []
    append(log, "new 1\nnew 2\n")
    assert poll(follower) == [
        LogLine(str(log), 12, 1, "new 1", False),
        LogLine(str(log), 18, 2, "new 2", False),
    ]
    assert poll(follower) == []
    assert (follower.stats.lines, follower.stats.bytes, follower.stats.files_opened) == (2, 12, 1)


def test_from_start_reads_the_whole_file(tmp_path: Path, follow: MakeFollower) -> None:
    log = tmp_path / "serve.log"
    log.write_text("old 1\nold 2\n")
    follower = follow(log, from_start=True)
    assert poll(follower) == [
        LogLine(str(log), 0, 1, "old 1", False),
        LogLine(str(log), 6, 2, "old 2", False),
    ]
    append(log, "new\n")
    assert poll(follower) == [LogLine(str(log), 12, 3, "new", False)]


def test_starting_at_the_end_mid_line_skips_that_lines_tail(tmp_path: Path, follow: MakeFollower) -> None:
    log = tmp_path / "serve.log"
    log.write_text("old\nhalf a li")
    follower = follow(log)
    assert poll(follower) == []
    append(log, "ne\nnew\n")
    assert poll(follower) == [LogLine(str(log), 16, 1, "new", False)]


def test_partial_last_line_is_held_until_its_newline(tmp_path: Path, follow: MakeFollower) -> None:
    log = tmp_path / "serve.log"
    log.write_text("")
    follower = follow(log)
    assert poll(follower) == []
    append(log, "hel")
    assert poll(follower) == []
    assert follower.status()["held_bytes"] == 3
    assert follower.status()["offset"] == 0
    append(log, "lo\nwor")
    assert poll(follower) == [LogLine(str(log), 0, 1, "hello", False)]
    assert follower.status()["offset"] == 6
    append(log, "ld\n")
    assert poll(follower) == [LogLine(str(log), 6, 2, "world", False)]
    assert follower.status()["held_bytes"] == 0


def test_crlf_loses_its_carriage_return(tmp_path: Path, follow: MakeFollower) -> None:
    log = tmp_path / "serve.log"
    log.write_bytes(b"a\r\nb\r\nin\rside\r\nc\r")
    follower = follow(log, from_start=True)
    assert texts(poll(follower)) == ["a", "b", "in\rside"]
    append(log, "\n")
    assert poll(follower) == [LogLine(str(log), 15, 4, "c", False)]


def test_invalid_utf8_is_replaced_not_fatal(tmp_path: Path, follow: MakeFollower) -> None:
    log = tmp_path / "serve.log"
    log.write_bytes(b"ok \xff\xfe end\ncaf\xc3\xa9\n\xc3\n")
    follower = follow(log, from_start=True)
    assert texts(poll(follower)) == ["ok \ufffd\ufffd end", "café", "\ufffd"]
    assert follower.stats.read_errors == 0


def test_line_over_the_cap_is_cut_counted_and_the_next_line_is_intact(
    tmp_path: Path, follow: MakeFollower
) -> None:
    log = tmp_path / "serve.log"
    log.write_text("short\n" + "x" * 40 + "\n" + "y" * 16 + "\nnext\n")
    follower = follow(log, from_start=True, max_line_bytes=16)
    assert poll(follower) == [
        LogLine(str(log), 0, 1, "short", False),
        LogLine(str(log), 6, 2, "x" * 16, True),
        LogLine(str(log), 47, 3, "y" * 16, False),  # exactly the cap: not cut
        LogLine(str(log), 64, 4, "next", False),
    ]
    assert follower.stats.lines_cut == 1


def test_cut_never_splits_a_multibyte_character(tmp_path: Path, follow: MakeFollower) -> None:
    log = tmp_path / "serve.log"
    log.write_text("a" * 9 + "é and more\nok\n")  # é is bytes 10 and 11; the cap falls between them
    follower = follow(log, from_start=True, max_line_bytes=10)
    assert poll(follower) == [
        LogLine(str(log), 0, 1, "a" * 9, True),
        LogLine(str(log), 21, 2, "ok", False),
    ]


def test_ten_megabyte_line_without_newline_keeps_memory_bounded(tmp_path: Path, follow: MakeFollower) -> None:
    cap = 64 * 1024
    log = tmp_path / "serve.log"
    log.write_text("")
    follower = follow(log, max_line_bytes=cap)
    assert poll(follower) == []
    megabyte = b"x" * (1 << 20)
    delivered: list[LogLine] = []
    tracemalloc.start()
    try:
        for _ in range(10):
            append(log, megabyte)
            tracemalloc.reset_peak()
            delivered += poll(follower)
            _, peak = tracemalloc.get_traced_memory()
            assert follower.status()["held_bytes"] <= cap
            assert peak < 4 << 20, f"poll() peaked at {peak} bytes for a 1 MiB read"
    finally:
        tracemalloc.stop()
    assert delivered == [LogLine(str(log), 0, 1, "x" * cap, True)]
    append(log, "\nafter\n")
    assert poll(follower) == [LogLine(str(log), 10 * (1 << 20) + 1, 2, "after", False)]
    assert follower.stats.lines_cut == 1


def test_binary_file_is_read_as_text(tmp_path: Path, follow: MakeFollower) -> None:
    data = bytes(range(256)) * 64 + b"\xff" * 100
    (tmp_path / "blob.log").write_bytes(data)
    follower = follow(tmp_path, from_start=True)
    expected = [part.decode("utf-8", "replace") for part in data.split(b"\n")[:-1]]
    lines = poll(follower)
    assert texts(lines) == expected
    assert len(lines) == 64
    assert follower.status()["held_bytes"] == 245 + 100  # the last piece has no newline yet


def test_a_large_backlog_is_read_in_bounded_steps(
    tmp_path: Path, follow: MakeFollower, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "serve.log"
    log.write_text("".join(f"line {i:05d}\n" for i in range(1, 501)))  # 11 bytes a line, 5500 bytes
    follower = follow(log, from_start=True, poll_bytes=1000, read_bytes=300)
    batches = [poll(follower) for _ in range(7)]
    assert [len(batch) for batch in batches] == [90, 91, 91, 91, 91, 46, 0]
    assert texts([line for batch in batches for line in batch]) == [f"line {i:05d}" for i in range(1, 501)]


# -- rotation, truncation, missing files ----------------------------------------------------------------


def test_rename_and_create_rotation_drains_the_old_file_first(tmp_path: Path, follow: MakeFollower) -> None:
    log, rotated = tmp_path / "serve.log", tmp_path / "serve.log.1"
    log.write_text("")
    follower = follow(log)
    assert poll(follower) == []
    append(log, "1\n2\n")
    assert texts(poll(follower)) == ["1", "2"]
    log.rename(rotated)
    append(rotated, "3\n")  # the writer still has the old file open
    assert poll(follower) == [LogLine(str(log), 4, 3, "3", False)]
    assert follower.status()["waiting_for_path"] is True
    append(rotated, "4\n")
    log.write_text("5\n6\n")
    assert poll(follower) == [
        LogLine(str(log), 6, 4, "4", False),
        LogLine(str(log), 0, 1, "5", False),
        LogLine(str(log), 2, 2, "6", False),
    ]
    assert follower.stats.rotations == 1
    assert follower.status()["waiting_for_path"] is False


def test_rotation_delivers_a_partial_last_line_of_the_old_file(tmp_path: Path, follow: MakeFollower) -> None:
    log = tmp_path / "serve.log"
    log.write_text("")
    follower = follow(log)
    poll(follower)
    append(log, "1\nkilled mid-li")
    assert texts(poll(follower)) == ["1"]
    log.rename(tmp_path / "serve.log.1")
    log.write_text("2\n")
    assert texts(poll(follower)) == ["killed mid-li", "2"]


def test_copytruncate_reads_again_from_the_start(tmp_path: Path, follow: MakeFollower) -> None:
    log = tmp_path / "serve.log"
    log.write_text("1\n2\n3\n")
    follower = follow(log, from_start=True)
    assert texts(poll(follower)) == ["1", "2", "3"]
    with open(log, "r+b") as f:  # what logrotate's copytruncate does after copying
        f.truncate(0)
    append(log, "4\n")
    assert poll(follower) == [LogLine(str(log), 0, 1, "4", False)]
    assert (follower.stats.truncations, follower.stats.rotations) == (1, 0)


def test_copytruncate_then_a_refill_past_the_old_offset_is_read_from_the_start(
    tmp_path: Path, follow: MakeFollower
) -> None:
    # Truncated and written again, up to beyond our offset, between two polls: the size alone says
    # nothing happened; the first bytes (the fingerprint) say it is another content.
    log = tmp_path / "serve.log"
    log.write_text("old 1\nold 2\n")
    follower = follow(log, from_start=True)
    assert texts(poll(follower)) == ["old 1", "old 2"]
    with open(log, "r+b") as f:
        f.truncate(0)
    append(log, "new 1\nnew 2\nnew 3\n")
    assert poll(follower) == [LogLine(str(log), offset, n, f"new {n}", False)
                               for n, offset in ((1, 0), (2, 6), (3, 12))]
    assert (follower.stats.truncations, follower.stats.rotations) == (1, 0)
    append(log, "new 4\n")
    assert texts(poll(follower)) == ["new 4"], "the same content is not read again"
    assert follower.stats.truncations == 1


@pytest.mark.parametrize("read", ["new", "old"])
def test_a_copytruncate_while_a_poll_reads_counts_no_line_twice_and_loses_none(
    tmp_path: Path, follow: MakeFollower, monkeypatch: pytest.MonkeyPatch, read: str
) -> None:
    # The file is truncated and refilled past our offset just after a poll checked its first bytes:
    # its read at the old offset found the new content's last two lines, handed out, then read again
    # from 0 at the next poll (lines of one length: whole lines). Or just after the read: the old
    # content's line it read is new, and counted.
    log = tmp_path / "serve.log"
    log.write_text("old 1\nold 2\n")
    follower = follow(log, from_start=True)
    assert texts(poll(follower)) == ["old 1", "old 2"]
    append(log, "old 3\n")
    checked, checks = OpenFile.head_changed, []

    def copytruncate() -> None:
        monkeypatch.setattr(OpenFile, "head_changed", checked)
        with open(log, "r+b") as f:
            f.truncate(0)
        append(log, "new 1\nnew 2\nnew 3\nnew 4\n")

    def copytruncate_at_a_check(self: OpenFile) -> bool:
        checks.append(1)
        if read == "old" and len(checks) == 2:
            copytruncate()  # after the read, before the check that follows it
        changed = checked(self)
        if read == "new":
            copytruncate()  # after the poll's first check, before its read
        return changed

    monkeypatch.setattr(OpenFile, "head_changed", copytruncate_at_a_check)
    got = texts(poll(follower) + poll(follower))
    assert got == ["old 3"] * (read == "old") + ["new 1", "new 2", "new 3", "new 4"]
    assert (follower.stats.truncations, follower.stats.lines) == (1, len(got) + 2)


def test_delete_and_recreate_reads_the_new_file_from_its_start(tmp_path: Path, follow: MakeFollower) -> None:
    log = tmp_path / "serve.log"
    log.write_text("1\n")
    follower = follow(log, from_start=True)
    assert texts(poll(follower)) == ["1"]
    log.unlink()
    assert poll(follower) == []
    assert follower.status()["waiting_for_path"] is True
    log.write_text("2\n3\n")
    assert poll(follower) == [LogLine(str(log), 0, 1, "2", False), LogLine(str(log), 2, 2, "3", False)]
    assert follower.stats.rotations == 1


def test_a_file_that_does_not_exist_yet_is_read_from_its_start(tmp_path: Path, follow: MakeFollower) -> None:
    log = tmp_path / "serve.log"
    waker = ManualWaker()
    follower = follow(log, waker=waker)
    assert poll(follower) == []
    assert follower.status()["waiting_for_path"] is True
    assert waker.watched == frozenset({str(tmp_path)})
    log.write_text("a\nb\n")
    assert poll(follower) == [LogLine(str(log), 0, 1, "a", False), LogLine(str(log), 2, 2, "b", False)]


# -- folders and globs -----------------------------------------------------------------------------------


def test_folder_switches_to_a_newer_launch_after_draining_the_old_one(
    tmp_path: Path, follow: MakeFollower
) -> None:
    old, new = tmp_path / OLD, tmp_path / NEW
    old.write_text("old 1\n")
    set_mtime(old, 1_000_000)
    waker = ManualWaker()
    follower = follow(tmp_path, waker=waker)
    assert poll(follower) == []
    assert waker.watched == frozenset({str(tmp_path)})
    append(old, "old 2\n")
    set_mtime(old, 1_000_010)
    assert poll(follower) == [LogLine(str(old), 6, 1, "old 2", False)]

    append(old, "old 3\n")
    set_mtime(old, 1_000_020)
    new.write_text("new 1\nnew 2\n")
    set_mtime(new, 1_000_030)
    (tmp_path / "notes.txt").write_text("not a log\n")
    assert poll(follower) == [
        LogLine(str(old), 12, 2, "old 3", False),
        LogLine(str(new), 0, 1, "new 1", False),
        LogLine(str(new), 6, 2, "new 2", False),
    ]
    assert follower.stats.file_switches == 1

    append(old, "late line of the old server\n")  # never go back to the old launch
    set_mtime(old, 1_000_040)
    assert poll(follower) == []
    append(new, "new 3\n")
    assert poll(follower) == [LogLine(str(new), 12, 3, "new 3", False)]
    assert follower.status()["path"] == str(new)


def test_folder_start_follows_the_newest_file_only(tmp_path: Path, follow: MakeFollower) -> None:
    old, new = tmp_path / OLD, tmp_path / NEW
    old.write_text("old\n")
    new.write_text("new 1\n")
    set_mtime(old, 1_000_000)
    set_mtime(new, 1_000_000)  # same mtime: the name decides
    follower = follow(tmp_path, from_start=True)
    assert poll(follower) == [LogLine(str(new), 0, 1, "new 1", False)]


def test_folder_rotation_to_a_matching_name_is_not_read_again(tmp_path: Path, follow: MakeFollower) -> None:
    log, rotated = tmp_path / "serve.log", tmp_path / "serve.1.log"
    log.write_text("1\n")
    follower = follow(tmp_path, from_start=True)
    assert texts(poll(follower)) == ["1"]
    log.rename(rotated)  # the rotated name matches *.log too
    append(rotated, "2\n")
    log.write_text("3\n")
    set_mtime(log, 1_000_000)
    set_mtime(rotated, 1_000_010)
    assert poll(follower) == [LogLine(str(log), 2, 2, "2", False), LogLine(str(log), 0, 1, "3", False)]
    append(rotated, "written to the old file after we moved on\n")
    set_mtime(rotated, 1_000_020)
    assert poll(follower) == []
    assert (follower.stats.rotations, follower.stats.file_switches) == (1, 0)


def test_folder_that_does_not_exist_yet(tmp_path: Path, follow: MakeFollower) -> None:
    logs = tmp_path / "logs"
    follower = follow(logs)
    assert poll(follower) == []
    logs.mkdir()
    (logs / OLD).write_text("a\n")
    assert poll(follower) == [LogLine(str(logs / OLD), 0, 1, "a", False)]
    assert follower.mode == "dir"


def test_folder_resumes_from_state_then_reads_a_launch_made_while_down(
    tmp_path: Path, follow: MakeFollower
) -> None:
    old, new, state = tmp_path / OLD, tmp_path / NEW, tmp_path / "state.json"
    old.write_text("1\n2\n")
    first = follow(tmp_path, from_start=True, state_file=str(state))
    assert texts(poll(first)) == ["1", "2"]
    save(first)
    first.close()
    append(old, "3\n")  # written while we were down
    set_mtime(old, 1_000_000)
    new.write_text("n1\n")
    set_mtime(new, 1_000_010)
    second = follow(tmp_path, state_file=str(state))
    assert poll(second) == [LogLine(str(old), 4, 3, "3", False), LogLine(str(new), 0, 1, "n1", False)]
    assert second.stats.file_switches == 1


def test_glob_follows_the_newest_match(tmp_path: Path, follow: MakeFollower) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    old, new, other = logs / OLD, logs / NEW, logs / "other_20261129_140000.log"
    old.write_text("old 1\n")
    set_mtime(old, 1_000_000)
    waker = ManualWaker()
    follower = follow(logs / "serve_*.log", waker=waker)
    assert poll(follower) == []
    assert waker.watched == frozenset({str(logs)})
    append(old, "old 2\n")
    other.write_text("ignored\n")
    assert poll(follower) == [LogLine(str(old), 6, 1, "old 2", False)]
    new.write_text("new 1\n")
    set_mtime(new, time.time() + 60)
    assert poll(follower) == [LogLine(str(new), 0, 1, "new 1", False)]
    assert follower.stats.file_switches == 1


# -- errors ----------------------------------------------------------------------------------------------


def test_unreadable_file_is_a_counted_error_and_recovers(
    tmp_path: Path, follow: MakeFollower, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "serve.log"
    log.write_text("old\n")
    log.chmod(0)
    try:
        with open(log, "rb"):
            pass
    except PermissionError:
        pass
    else:  # root ignores file modes: refuse the open ourselves
        real_open = os.open

        def refuse(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
            if os.fspath(path) == str(log):
                raise PermissionError(errno.EACCES, "Permission denied", str(log))
            return real_open(path, flags, *args, **kwargs)

        monkeypatch.setattr(os, "open", refuse)
    follower = follow(log)
    assert poll(follower) == []
    assert poll(follower) == []
    assert follower.stats.read_errors == 2
    assert follower.stats.last_error == f"permission denied: {log}"
    append(log, "written while unreadable\n")

    monkeypatch.undo()
    log.chmod(0o644)
    assert poll(follower) == [LogLine(str(log), 4, 1, "written while unreadable", False)]
    assert follower.stats.read_errors == 2


def test_read_error_mid_file_is_counted_and_retried(
    tmp_path: Path, follow: MakeFollower, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "serve.log"
    log.write_text("")
    follower = follow(log)
    poll(follower)
    append(log, "1\n2\n")
    real_read = os.read

    def failing_read(fd: int, n: int) -> bytes:
        monkeypatch.setattr(os, "read", real_read)
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(os, "read", failing_read)
    assert poll(follower) == []
    assert follower.stats.read_errors == 1
    assert follower.stats.last_error == f"input/output error: {log}"
    assert texts(poll(follower)) == ["1", "2"]


# -- state file ------------------------------------------------------------------------------------------


def test_state_file_round_trip_resumes_after_the_last_delivered_line(
    tmp_path: Path, follow: MakeFollower
) -> None:
    log, state = tmp_path / "serve.log", tmp_path / "state.json"
    log.write_text("1\n2\n3\n")
    first = follow(log, from_start=True, state_file=str(state))
    assert texts(poll(first)) == ["1", "2", "3"]
    append(log, "4")  # no newline yet: must not be saved as delivered
    assert poll(first) == []
    assert save(first) is True
    saved = json.loads(state.read_text())
    assert (saved["path"], saved["offset"], saved["number"]) == (str(log), 6, 3)
    assert (saved["ino"], saved["dev"]) == (log.stat().st_ino, log.stat().st_dev)
    first.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["serve.log", "state.json"]  # no temp file left

    append(log, "\n5\n")
    second = follow(log, state_file=str(state))  # from_start=False: the state wins
    assert poll(second) == [LogLine(str(log), 6, 4, "4", False), LogLine(str(log), 8, 5, "5", False)]


def test_state_survives_a_cut_line(tmp_path: Path, follow: MakeFollower) -> None:
    log, state = tmp_path / "serve.log", tmp_path / "state.json"
    log.write_text("1\n" + "x" * 50)
    first = follow(log, from_start=True, state_file=str(state), max_line_bytes=10)
    assert texts(poll(first)) == ["1", "x" * 10]
    save(first)
    first.close()
    append(log, "y" * 20 + "\n2\n")
    second = follow(log, state_file=str(state), max_line_bytes=10)
    assert poll(second) == [LogLine(str(log), 73, 3, "2", False)]  # the cut line's tail is not a line


def test_state_mismatch_after_the_file_was_replaced(tmp_path: Path, follow: MakeFollower) -> None:
    log, state = tmp_path / "serve.log", tmp_path / "state.json"
    log.write_text("old 1\nold 2\n")
    first = follow(log, from_start=True, state_file=str(state))
    assert texts(poll(first)) == ["old 1", "old 2"]
    save(first)
    first.close()
    saved_at = json.loads(state.read_text())["saved_at"]

    log.unlink()
    log.write_text("new 1\nnew 2\n")  # same size, other content (and maybe the same inode number)
    set_mtime(log, saved_at + 10)
    newer = follow(log, state_file=str(state))
    assert texts(poll(newer)) == ["new 1", "new 2"]  # written after the state: all of it is new
    save(newer)
    newer.close()

    first_again = follow(log, from_start=True, state_file=str(state))
    poll(first_again)
    save(first_again)
    first_again.close()
    log.unlink()
    log.write_text("other 1\n")
    set_mtime(log, json.loads(state.read_text())["saved_at"] - 1000)
    older = follow(log, state_file=str(state))  # older than the state: from_start decides (the end)
    assert poll(older) == []
    append(log, "other 2\n")
    assert texts(poll(older)) == ["other 2"]


def test_corrupt_state_file_is_counted_and_ignored(tmp_path: Path, follow: MakeFollower) -> None:
    log, state = tmp_path / "serve.log", tmp_path / "state.json"
    log.write_text("1\n")
    state.write_text("{not json")
    follower = follow(log, from_start=True, state_file=str(state))
    assert texts(poll(follower)) == ["1"]
    assert follower.stats.state_errors == 1
    assert follower.stats.last_state_error == f"state file unreadable, ignored: {state}"
    assert follower.stats.last_error is None, "a read error is another thing"


def test_state_write_error_is_counted_not_raised(tmp_path: Path, follow: MakeFollower) -> None:
    log = tmp_path / "serve.log"
    log.write_text("1\n")
    state = tmp_path / "missing-dir" / "state.json"
    follower = follow(log, from_start=True, state_file=str(state))
    assert texts(poll(follower)) == ["1"]
    assert save(follower) is False
    assert follower.stats.state_errors == 1
    assert follower.stats.last_state_error is not None
    assert follower.stats.last_state_error.startswith("cannot save state: no such file or directory: ")


_READ_STATES = """
import os, resource, sys
resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))  # an unbounded read fails here, not the machine
from vllm_logwatch.following.statefile import StateError, read_state
for path in sys.argv[1:]:
    try:
        print(read_state(path))
    except StateError as exc:
        print(exc)
"""


def test_reading_a_state_file_is_bounded_and_never_blocks(tmp_path: Path) -> None:
    fifo, big, link = tmp_path / "fifo.json", tmp_path / "big.json", tmp_path / "null.json"
    os.mkfifo(fifo)
    big.write_text('{"path": "' + "x" * (5 << 20) + '"}')
    link.symlink_to("/dev/null")
    paths = ["/dev/zero", "/dev/full", str(fifo), str(big), str(link)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", _READ_STATES, *paths], capture_output=True, text=True,
                          env=env, timeout=20)
    assert done.stderr == ""
    assert done.stdout.splitlines() == [
        "cannot read state: not a regular file: /dev/zero",
        "cannot read state: not a regular file: /dev/full",
        f"cannot read state: not a regular file: {fifo}",
        f"cannot read state: larger than a state file can be (4 MiB): {big}",
        f"cannot read state: a symbolic link, not the file itself: {link}",
    ]


def test_state_is_never_written_through_a_path_that_is_not_a_regular_file(
    tmp_path: Path, follow: MakeFollower
) -> None:
    log, state = tmp_path / "serve.log", tmp_path / "state.json"
    log.write_text("1\n")
    follower = follow(log, from_start=True, state_file=str(state))
    assert texts(poll(follower)) == ["1"]
    assert save(follower) is True
    state.unlink()
    os.mkfifo(state)  # swapped for a pipe (or a device, or a link) after start
    assert save(follower) is False
    assert state.is_fifo(), "not replaced by a regular file"
    state.unlink()
    state.symlink_to("/dev/null")
    assert save(follower) is False
    assert state.is_symlink()
    assert follower.stats.state_errors == 2
    assert follower.stats.last_state_error == (
        f"cannot save state: a symbolic link, not the file itself: {state}")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["serve.log", "state.json"]  # no temp file left


_CHILD = """
import sys
from vllm_logwatch.following import follower as tail

# many small batches, so the kill lands in the middle
follower = tail.Follower(sys.argv[1], from_start=True, state_file=sys.argv[2],
                         poll_bytes=64 * 1024, read_bytes=16 * 1024)
while blocks := follower.poll_blocks():
    for block in blocks:
        for number, text in enumerate(block.data.decode().split("\\n")[:-1], block.number):
            sys.stdout.write(f"L {number} {text}\\n")
    sys.stdout.flush()
    follower.write_checkpoint(follower.checkpoint().state)
    sys.stdout.write("S\\n")
    sys.stdout.flush()
print("DONE", flush=True)
"""


@pytest.mark.integration  # over 0.2 s (a process, or a day of lines): make test, not smoke
def test_restart_after_sigkill_neither_skips_nor_repeats(tmp_path: Path, follow: MakeFollower) -> None:
    total = 200_000
    log, state = tmp_path / "serve.log", tmp_path / "state.json"
    log.write_text("".join(f"line {i}\n" for i in range(1, total + 1)))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    printed: list[int] = []
    saved_markers: list[int] = []  # how many lines the child had printed at each "saved" marker
    with subprocess.Popen(
        [sys.executable, "-c", _CHILD, str(log), str(state)],
        stdout=subprocess.PIPE,
        env=env,
        text=True,
    ) as child:
        assert child.stdout is not None
        for row in child.stdout:
            if row == "S\n":
                saved_markers.append(len(printed))
                if len(saved_markers) == 3:
                    child.send_signal(signal.SIGKILL)
                    break
            else:
                _, number, text = row.split(" ", 2)
                assert text == f"line {number}\n"
                printed.append(int(number))
        rest = child.stdout.read()  # what the child printed before the kill landed
        child.wait()
    assert child.returncode == -signal.SIGKILL
    assert "DONE" not in rest, "the child finished before the kill; make the file bigger"
    for row in rest.splitlines():
        if row.startswith("L "):
            printed.append(int(row.split(" ")[1]))
        else:
            saved_markers.append(len(printed))
    assert printed == list(range(1, len(printed) + 1))  # the child delivered lines in order

    saved = json.loads(state.read_text())["number"]
    assert saved_markers[-1] <= saved <= len(printed)  # never saved past what was delivered
    restarted = follow(log, state_file=str(state))
    after: list[LogLine] = []
    while batch := poll(restarted):
        after += batch
    assert [line.number for line in after] == list(range(saved + 1, total + 1))
    assert texts(after) == [f"line {i}" for i in range(saved + 1, total + 1)]
    assert set(range(1, saved + 1)) | {line.number for line in after} == set(range(1, total + 1))


# -- run() -----------------------------------------------------------------------------------------------


def test_run_delivers_and_stops(tmp_path: Path, follow: MakeFollower) -> None:
    log = tmp_path / "serve.log"
    log.write_text("1\n2\n")
    waker = ManualWaker()
    follower = follow(log, from_start=True, waker=waker)
    got: list[list[str]] = []

    def on_lines(lines: list[LogLine]) -> None:
        got.append(texts(lines))
        follower.stop()

    follower.run_blocks(lambda blocks: on_lines(lines_of(blocks)))
    assert got == [["1", "2"]]
    assert waker.wakes == 1

    stop = threading.Event()
    append(log, "3\n")
    other = follow(log, from_start=True)

    def on_lines_then_stop(lines: list[LogLine]) -> None:
        got.append(texts(lines))
        stop.set()

    other.run_blocks(lambda blocks: on_lines_then_stop(lines_of(blocks)), stop)
    assert got[-1] == ["1", "2", "3"]


def test_run_wakes_on_an_append_through_watchdog(tmp_path: Path) -> None:
    log = tmp_path / "serve.log"
    log.write_text("first\n")
    follower = Follower(str(log), from_start=True, poll_interval=30.0)  # default waker: watchdog
    first_seen, second_seen = threading.Event(), threading.Event()
    got: list[str] = []

    def on_lines(lines: list[LogLine]) -> None:
        got.extend(texts(lines))
        (second_seen if "second" in got else first_seen).set()

    thread = threading.Thread(target=follower.run_blocks, args=(lambda blocks: on_lines(lines_of(blocks)),),
                              daemon=True)
    thread.start()
    try:
        assert first_seen.wait(5.0)
        if follower.status()["waker_degraded_reason"]:
            pytest.skip("no file notifications here")
        start = time.monotonic()
        append(log, "second\n")
        assert second_seen.wait(5.0), "an append was not seen within 5 s (poll interval is 30 s)"
        assert time.monotonic() - start < 5.0
        assert got == ["first", "second"]
    finally:
        follower.stop()
        thread.join(5.0)
        follower.close()
    assert not thread.is_alive()
