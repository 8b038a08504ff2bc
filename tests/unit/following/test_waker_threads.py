"""File notifications for many folders cost a bounded number of threads (`wakers.py`): a tree of pods is
watched through one recursive watch, however many folders it has; a watch that cannot start its thread
leaves the follower polling."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from podtree import Clock, pod, write

from vllm_logwatch.following.many import ManyFollower
from vllm_logwatch.following.wakers import WatchdogWaker


def threads_watching(root: Path, pods: int) -> int:
    for i in range(pods):
        write(pod(root, f"p{i}"), "x")
    waker = WatchdogWaker(interval=0.5)
    waker.start()
    follower = ManyFollower(str(root), layout="pods", waker=waker, select=["vllm/p0/*"],
                            clock=Clock(step=1.0))
    try:
        follower.poll_blocks()
        follower.poll_blocks()  # the folders found are watched now
        assert waker.degraded_reason is None
        return threading.active_count()
    finally:
        follower.close()
        waker.close()


def test_threads_do_not_grow_with_the_folders_watched(tmp_path: Path) -> None:
    few = threads_watching(tmp_path / "few", 2)
    many = threads_watching(tmp_path / "many", 60)  # 121 folders
    assert many == few


def test_a_watch_whose_thread_cannot_start_leaves_the_follower_polling(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    a = pod(tmp_path, "a-0")
    write(a, "one")
    waker = WatchdogWaker(interval=0.5)
    waker.start()
    observer = waker._observer
    assert observer is not None

    def no_thread(*args: object, **kwargs: object) -> None:
        raise RuntimeError("can't start new thread")

    monkeypatch.setattr(observer, "schedule", no_thread)
    follower = ManyFollower(str(tmp_path), layout="pods", waker=waker, from_start=True, clock=Clock(step=1.0))
    try:
        assert sum(b.count for b in follower.poll_blocks()) == 1
        follower.poll_blocks()
        assert waker.degraded_reason is not None and "can't start new thread" in waker.degraded_reason
        assert waker.take_changed() is None  # not known: every source is polled at the backstop
        write(a, "two")
        assert sum(b.count for b in follower.poll_blocks()) == 1
    finally:
        follower.close()
        waker.close()
