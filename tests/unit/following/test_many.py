"""Many sources from one thread (`following/many.py`): which source is polled when, the cap, the grace,
the budget shared in turn, and every source's place in one state file."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterable
from pathlib import Path

import pytest
from podtree import Clock, pod, write

from vllm_logwatch.following.many import ManyFollower
from vllm_logwatch.following.openfile import LineBlock
from vllm_logwatch.following.statefile import SourcesState

A = (("namespace", "vllm"), ("pod", "a-0"), ("container", "vllm"))
B = (("namespace", "vllm"), ("pod", "b-0"), ("container", "vllm"))


class ToldWaker:
    """A waker that says which folders had events and which gained or lost an entry (as watchdog's
    does), or None: not known."""

    def __init__(self) -> None:
        self.changed: set[str] | None = set()
        self.entries: set[str] = set()
        self.watched: frozenset[str] = frozenset()
        self.degraded_reason: str | None = None

    def take_changed(self) -> tuple[set[str], set[str]] | None:
        changed, entries = self.changed, self.entries
        self.changed, self.entries = (set() if changed is not None else None), set()
        return None if changed is None else (changed | entries, entries)

    def wait(self, timeout: float | None) -> bool:
        return False

    def watch(self, paths: Iterable[str]) -> None:
        self.watched = frozenset(paths)

    def wake(self) -> None:
        pass

    def close(self) -> None:
        pass


def lines(blocks: list[LineBlock]) -> dict[tuple[tuple[str, str], ...], int]:
    out: dict[tuple[tuple[str, str], ...], int] = {}
    for block in blocks:
        out[block.key] = out.get(block.key, 0) + block.count
    return out


def many(root: Path, **kw: object) -> tuple[ManyFollower, Clock, ToldWaker]:
    clock, waker = Clock(), ToldWaker()
    follower = ManyFollower(str(root), layout="pods", waker=waker, clock=clock, **kw)  # type: ignore[arg-type]
    return follower, clock, waker


def test_each_source_is_read_under_its_labels(tmp_path: Path) -> None:
    write(pod(tmp_path, "a-0"), "one", "two")
    write(pod(tmp_path, "b-0"), "three")
    follower, _, waker = many(tmp_path, from_start=True)
    assert lines(follower.poll_blocks()) == {A: 2, B: 1}
    assert str(tmp_path) in waker.watched and str(pod(tmp_path, "a-0").parent) in waker.watched
    assert follower.source_counts() == {"followed": 2, "folded": 0, "gone": 0}
    assert follower.stats.lines == 3
    assert follower.checkpoint().lines == 3 and isinstance(follower.checkpoint().state, SourcesState)


def test_a_file_event_polls_only_its_source_and_the_backstop_all(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import vllm_logwatch.following.many as many_module
    from vllm_logwatch.following.layouts import discover

    a, b = pod(tmp_path, "a-0"), pod(tmp_path, "b-0")
    write(a, "x")
    write(b, "y")
    follower, clock, waker = many(tmp_path, from_start=True, rescan_seconds=10.0)
    follower.poll_blocks()
    follower.poll_blocks()  # the listing once more, after watching the folders found
    write(a, "a1")
    write(b, "b1")
    waker.changed = {str(a.parent)}
    clock.now += 1
    listed = []
    monkeypatch.setattr(many_module, "discover", lambda *args: listed.append(args) or discover(*args))
    assert lines(follower.poll_blocks()) == {A: 1}  # b's folder had no event: not polled
    assert listed == []  # a write is no change of entries: no listing
    clock.now += 10
    assert lines(follower.poll_blocks()) == {B: 1}  # the backstop checks every source
    write(b, "b2")
    waker.changed = None  # notifications not known to work: every poll interval checks all
    clock.now += 1
    assert lines(follower.poll_blocks()) == {B: 1}


def test_a_new_source_and_a_restart_are_read_from_their_start(tmp_path: Path) -> None:
    write(pod(tmp_path, "a-0"), "old")  # there at start: read from its end
    follower, clock, waker = many(tmp_path)
    assert follower.poll_blocks() == []
    write(pod(tmp_path, "b-0"), "new", "pod")
    write(pod(tmp_path, "a-0", restart=1), "restarted")
    waker.entries = {str(tmp_path), str(pod(tmp_path, "a-0").parent)}
    clock.now += 1
    assert lines(follower.poll_blocks()) == {A: 1, B: 2}
    assert follower.source_stats()[1][A].file_switches == 1


def test_sources_beyond_the_cap_are_read_folded(tmp_path: Path) -> None:
    for name in ("a-0", "b-0", "c-0"):
        write(pod(tmp_path, name), name)
    follower, _, _ = many(tmp_path, from_start=True, max_sources=1)
    assert sum(lines(follower.poll_blocks()).values()) == 3
    folded = (("namespace", "_folded"), ("pod", "_folded"), ("container", "_folded"))
    assert follower.labels_of(A) == A and follower.labels_of(B) == folded
    assert follower.source_counts() == {"followed": 1, "folded": 2, "gone": 0}


def test_a_vanished_source_is_dropped_after_its_grace(tmp_path: Path) -> None:
    write(pod(tmp_path, "a-0"), "a")
    write(pod(tmp_path, "b-0"), "b")
    follower, clock, waker = many(tmp_path, from_start=True, grace=60.0)
    follower.poll_blocks()
    shutil.rmtree(pod(tmp_path, "b-0").parent.parent)
    waker.entries = {str(tmp_path)}
    clock.now += 1
    follower.poll_blocks()
    assert follower.source_counts() == {"followed": 1, "folded": 0, "gone": 1}
    assert follower.take_dropped() == []
    clock.now += 59.5  # gone since the second poll: not yet
    waker.changed = None
    follower.poll_blocks()
    assert follower.take_dropped() == []
    clock.now += 1  # the next listing (at most a backstop later) drops it
    follower.poll_blocks()
    assert follower.take_dropped() == [B]
    assert follower.source_counts() == {"followed": 1, "folded": 0, "gone": 0}


def test_one_poll_shares_its_budget_in_turn(tmp_path: Path) -> None:
    a, b = pod(tmp_path, "a-0"), pod(tmp_path, "b-0")
    write(a, *["a" * 100] * 50)
    write(b, *["b" * 100] * 50)
    follower, clock, _ = many(tmp_path, from_start=True, poll_bytes=2000)
    seen = [lines(follower.poll_blocks()) for _ in range(6)]
    assert all(sum(poll.values()) > 0 for poll in seen)
    assert A in seen[0] and B in seen[1]  # the next poll begins with the other source
    while any(follower.poll_blocks() for _ in range(3)):
        clock.now += 0.01
    assert follower.source_stats()[1][A].lines == 50 and follower.source_stats()[1][B].lines == 50


def test_every_source_resumes_from_one_state_file(tmp_path: Path) -> None:
    root, state = tmp_path / "pods", str(tmp_path / "state.json")
    write(pod(root, "a-0"), "a1", "a2")
    write(pod(root, "b-0"), "b1")
    follower, _, _ = many(root, from_start=True, state_file=state)
    follower.poll_blocks()
    checkpoint = follower.checkpoint()
    assert checkpoint.state is not None and follower.write_checkpoint(checkpoint.state)
    follower.close()
    saved = json.loads(Path(state).read_text())
    assert saved["version"] == 2 and len(saved["sources"]) == 2
    write(pod(root, "a-0"), "a3")
    write(pod(root, "b-0"), "b2", "b3")
    again, _, _ = many(root, from_start=True, state_file=state)
    assert lines(again.poll_blocks()) == {A: 1, B: 2}  # what came while down, nothing twice


def test_a_one_file_state_is_told_and_ignored(tmp_path: Path) -> None:
    root, state = tmp_path / "pods", tmp_path / "state.json"
    write(pod(root, "a-0"), "a1")
    state.write_text(json.dumps({"version": 1, "path": "x", "ino": 1, "offset": 0, "fingerprint": "",
                                 "fingerprint_bytes": 0, "number": 0, "saved_at": 0}))
    follower, _, _ = many(root, state_file=str(state))
    assert follower.poll_blocks() == []  # from the end, as without a state file
    assert follower.stats.state_errors == 1
    assert "not of many sources" in (follower.stats.last_state_error or "")


def test_watchdog_tells_a_write_from_a_new_entry(tmp_path: Path) -> None:
    from support import poll_until

    from vllm_logwatch.following.wakers import WatchdogWaker

    log = tmp_path / "0.log"
    log.write_text("x\n")
    waker = WatchdogWaker(60.0)
    waker.start()
    try:
        waker.watch([str(tmp_path)])
        with log.open("a") as f:
            f.write("y\n")
        def written() -> tuple[set[str], set[str]] | None:
            told = waker.take_changed()
            return told if told is not None and told[0] else None

        assert poll_until(written, 5, "the write's event") == ({str(tmp_path)}, set())
        (tmp_path / "1.log").write_text("z\n")
        got: tuple[set[str], set[str]] = (set(), set())

        def entries() -> bool:
            told = waker.take_changed()
            assert told is not None
            got[0].update(told[0])
            got[1].update(told[1])
            return str(tmp_path) in got[1]

        poll_until(entries, 5, "the new file's event")
    finally:
        waker.close()


def test_a_pod_recreated_under_its_name_is_read_without_waiting_for_the_backstop(tmp_path: Path) -> None:
    write(pod(tmp_path, "a-0"), "first")
    follower, clock, waker = many(tmp_path, from_start=True)
    follower.poll_blocks()
    again = tmp_path / "vllm_a-0_uid-second" / "vllm" / "0.log"  # the same pod, another uid
    again.parent.mkdir(parents=True)
    write(again, "second", "launch")
    waker.entries = {str(tmp_path)}  # only the root's event: the new folders were not watched yet
    clock.now += 1
    first = lines(follower.poll_blocks())
    clock.now += 0.01
    second = lines(follower.poll_blocks())  # the listing once more, after watching the new folders
    assert first.get(A, 0) + second.get(A, 0) == 2
    assert str(again.parent) in waker.watched


def test_nothing_is_written_before_the_first_poll_and_an_unopened_source_keeps_its_place(
        tmp_path: Path) -> None:
    """A state write before a source has its file open must not drop that source's saved
    position: the restart would read it from its start and count its lines again."""
    root, state = tmp_path / "pods", tmp_path / "state.json"
    write(pod(root, "a-0"), "a1", "a2")
    first, _, _ = many(root, from_start=True, state_file=str(state))
    first.poll_blocks()
    assert first.checkpoint().state is not None and first.write_checkpoint(first.checkpoint().state)
    first.close()
    saved = state.read_text()
    early, _, _ = many(root, from_start=True, state_file=str(state))
    assert early.checkpoint().state is None  # nothing for the state keeper to write yet
    early.close()
    assert state.read_text() == saved
    write(pod(root, "a-0"), "a3")
    again, _, _ = many(root, from_start=True, state_file=str(state))
    assert lines(again.poll_blocks()) == {A: 1}


def test_a_state_file_that_cannot_be_written_is_counted_not_raised(tmp_path: Path) -> None:
    root, folder = tmp_path / "pods", tmp_path / "state"
    folder.mkdir()
    write(pod(root, "a-0"), "a1")
    follower, _, _ = many(root, from_start=True, state_file=str(folder / "state.json"))
    follower.poll_blocks()
    folder.rmdir()  # gone under it, as a full or unmounted disk would fail the write
    state = follower.checkpoint().state
    assert state is not None and follower.write_checkpoint(state) is False
    assert follower.stats.state_errors == 1
    assert "cannot save state" in (follower.stats.last_state_error or "")
    follower.close()


def test_folders_polled_before_run_blocks_are_watched_once_it_starts(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Polls before `run_blocks` (a pipeline's `step()`, as `logwatch top` reads a folder to its end
    first) had no waker to tell which folders to watch: once it starts, its waker is told, so a line
    appended then waits for no 10 s backstop."""
    import threading

    import vllm_logwatch.following.source as source_module

    write(pod(tmp_path, "a-0"), "INFO first\n")
    follower = ManyFollower(str(tmp_path), layout="pods", from_start=True)
    follower.poll_blocks()
    waker = ToldWaker()
    monkeypatch.setattr(source_module, "own_waker", lambda _waker, _interval: (waker, True))
    stop = threading.Event()
    follower.run_blocks(lambda _blocks: None, stop, on_poll=stop.set)
    assert waker.watched, "the waker made by run_blocks was never told what to watch"
