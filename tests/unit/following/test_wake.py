"""Wakers: the watchdog path wakes at once, the poll backstop always fires, and each is a `Waker`.

Waits are bounded by events with deadlines, never by sleeps; the only time measured is a wait that is
supposed to time out.
"""

from __future__ import annotations

import errno
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from vllm_logwatch.following import wakers as wake
from vllm_logwatch.following.wakers import Waker, WatchdogWaker

pytestmark = pytest.mark.timeout(30)


@pytest.fixture
def watchdog_waker() -> Iterator[Callable[[float], WatchdogWaker]]:
    made: list[WatchdogWaker] = []

    def make(interval: float) -> WatchdogWaker:
        waker = WatchdogWaker(interval)
        waker.start()
        made.append(waker)
        return waker

    yield make
    for waker in made:
        waker.close()


def wait_in_thread(waker: Waker, timeout: float | None) -> tuple[threading.Thread, list[tuple[bool, float]]]:
    """Start ``waker.wait(timeout)`` in a thread; the result and elapsed seconds land in the list."""
    result: list[tuple[bool, float]] = []

    def target() -> None:
        start = time.monotonic()
        woke = waker.wait(timeout)
        result.append((woke, time.monotonic() - start))

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread, result


def test_every_waker_satisfies_the_protocol() -> None:
    waker = WatchdogWaker(1.0)
    assert isinstance(waker, Waker)
    waker.close()


def test_unstarted_waker_times_out_after_the_interval() -> None:
    waker = WatchdogWaker(0.05)
    start = time.monotonic()
    assert waker.wait(None) is False
    assert waker.wait(3600.0) is False  # never longer than the interval
    assert 0.09 <= time.monotonic() - start < 5.0


def test_unstarted_waker_wake_from_another_thread_ends_the_wait() -> None:
    waker = WatchdogWaker(30.0)
    thread, result = wait_in_thread(waker, None)
    waker.wake()
    thread.join(5.0)
    assert not thread.is_alive()
    assert result[0][0] is True
    assert result[0][1] < 5.0


def test_unstarted_waker_close_releases_waiters_for_good() -> None:
    waker = WatchdogWaker(30.0)
    waker.close()
    start = time.monotonic()
    assert waker.wait(None) is True
    assert waker.wait(None) is True
    assert time.monotonic() - start < 5.0


def test_watchdog_waker_wakes_on_a_write_in_a_watched_folder(
    tmp_path: Path, watchdog_waker: Callable[[float], WatchdogWaker]
) -> None:
    waker = watchdog_waker(30.0)
    if waker.degraded_reason:
        pytest.skip(f"no file notifications here: {waker.degraded_reason}")
    waker.watch([str(tmp_path)])
    thread, result = wait_in_thread(waker, 30.0)
    (tmp_path / "serve.log").write_text("Engine 000: Avg prompt throughput: 1.0 tokens/s\n")
    thread.join(5.0)
    assert not thread.is_alive(), "a write did not wake the waker within 5 s (interval is 30 s)"
    assert result[0][0] is True
    assert result[0][1] < 5.0


def test_watchdog_waker_still_returns_after_the_interval_without_events(
    tmp_path: Path, watchdog_waker: Callable[[float], WatchdogWaker]
) -> None:
    waker = watchdog_waker(0.2)
    waker.watch([str(tmp_path)])
    start = time.monotonic()
    assert waker.wait(None) is False
    assert 0.15 <= time.monotonic() - start < 5.0


def test_watchdog_waker_is_not_woken_by_reads(
    tmp_path: Path, watchdog_waker: Callable[[float], WatchdogWaker]
) -> None:
    # The follower reads the files it watches: opens and reads must not wake it, or it would spin.
    log = tmp_path / "serve.log"
    log.write_text("a line\n")
    waker = watchdog_waker(0.3)
    waker.watch([str(tmp_path)])
    waker.wait(0.0)  # forget anything queued before the watch existed
    assert log.read_text() == "a line\n"
    assert waker.wait(None) is False


def test_watchdog_waker_watches_a_folder_once_it_exists(
    tmp_path: Path, watchdog_waker: Callable[[float], WatchdogWaker]
) -> None:
    waker = watchdog_waker(30.0)
    if waker.degraded_reason:
        pytest.skip(f"no file notifications here: {waker.degraded_reason}")
    logs = tmp_path / "logs"
    waker.watch([str(logs)])  # missing: no error, polling covers it
    assert waker.degraded_reason is None
    logs.mkdir()
    waker.watch([str(logs)])  # same set, now there: watched
    waker.watch([str(logs)])  # idempotent
    thread, result = wait_in_thread(waker, 30.0)
    (logs / "serve.log").write_text("x\n")
    thread.join(5.0)
    assert not thread.is_alive()
    assert result[0][0] is True


def test_watchdog_waker_stop_wakes_the_waiter(watchdog_waker: Callable[[float], WatchdogWaker]) -> None:
    waker = watchdog_waker(30.0)
    thread, result = wait_in_thread(waker, None)
    waker.close()
    thread.join(5.0)
    assert not thread.is_alive()
    assert result[0][0] is True


def test_watchdog_waker_falls_back_to_polling_when_watchdog_cannot_start(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    def no_observer() -> None:
        raise OSError(errno.EMFILE, "inotify instance limit reached")

    monkeypatch.setattr(wake, "Observer", no_observer)
    waker = WatchdogWaker(0.05)
    waker.start()
    try:
        assert waker.degraded_reason == (
            "file notifications unavailable, polling only: [Errno 24] inotify instance limit reached"
        )
        waker.watch([str(tmp_path)])
        assert waker.wait(None) is False  # plain polling still works
        waker.wake()
        assert waker.wait(None) is True
    finally:
        waker.close()


def test_watchdog_waker_falls_back_to_polling_when_a_folder_cannot_be_watched(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    class FullObserver:
        daemon = False

        def start(self) -> None:
            pass

        def schedule(self, *args: object, **kwargs: object) -> object:
            raise OSError(errno.ENOSPC, "inotify watch limit reached")

        def stop(self) -> None:
            pass

        def join(self, timeout: float | None = None) -> None:
            pass

    monkeypatch.setattr(wake, "Observer", FullObserver)
    waker = WatchdogWaker(0.05)
    waker.start()
    try:
        assert waker.degraded_reason is None
        waker.watch([str(tmp_path)])
        assert waker.degraded_reason == (
            f"cannot watch {tmp_path}, polling it: [Errno 28] inotify watch limit reached"
        )
        assert waker.wait(None) is False
    finally:
        waker.close()


def test_a_watchdog_waker_starts_its_thread_in_start_not_in_init() -> None:
    import threading

    before = threading.active_count()
    waker = WatchdogWaker(0.05)
    try:
        assert threading.active_count() == before
        waker.start()
        assert waker.degraded_reason is not None or threading.active_count() > before
    finally:
        waker.close()
