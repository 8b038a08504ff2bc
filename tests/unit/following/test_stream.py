"""The stream source: standard input or a named pipe, read without ever blocking, framed into the
follower's `LineBlock`s (the same partial-line, line-cap and UTF-8 handling as a file), ended once its
writers are gone (a named pipe: read again for its next writer, ended once it is removed). Real
pipes; waits have deadlines, never sleeps."""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import lines_of

from vllm_logwatch.following.openfile import LineBlock
from vllm_logwatch.following.stream import STDIN_NAME, StreamSource

pytestmark = pytest.mark.timeout(30)


@pytest.fixture
def pipe() -> Iterator[tuple[StreamSource, int]]:
    """A source reading the read end of a fresh pipe, and the write end (closed by the test or here)."""
    r, w = os.pipe()
    source = StreamSource(r, poll_interval=0.05)
    yield source, w
    source.close()
    with contextlib.suppress(OSError):
        os.close(w)


def poll_for(source: StreamSource, count: int, timeout: float = 5.0) -> list[LineBlock]:
    """Poll until `count` lines came out (or the source ended); the blocks."""
    blocks: list[LineBlock] = []
    deadline = time.monotonic() + timeout
    while sum(b.count for b in blocks) < count and not source.ended:
        assert time.monotonic() < deadline, f"{sum(b.count for b in blocks)} of {count} lines"
        blocks += source.poll_blocks()
    return blocks


def test_lines_come_out_as_blocks_of_the_stdin_source(pipe: tuple[StreamSource, int]) -> None:
    source, w = pipe
    assert source.poll_blocks() == []  # nothing written yet: no wait, no line
    os.write(w, b"one\ntwo\r\nthr")
    blocks = poll_for(source, 2)
    lines = lines_of(blocks)
    assert [(x.source, x.number, x.offset, x.text) for x in lines] == [
        (STDIN_NAME, 1, 0, "one"), (STDIN_NAME, 2, 4, "two")]
    assert source.status()["held_bytes"] == 3  # the partial line waits for its newline
    os.write(w, b"ee\n")
    assert [(x.number, x.offset, x.text) for x in lines_of(poll_for(source, 1))] == [(3, 9, "three")]
    assert not source.ended and source.status()["ended"] is False
    checkpoint = source.checkpoint()
    assert (checkpoint.state, checkpoint.lines, checkpoint.bytes) == (None, 3, 15)  # no position to save


def test_at_the_end_the_partial_last_line_is_flushed_and_the_source_ended(
    pipe: tuple[StreamSource, int],
) -> None:
    source, w = pipe
    os.write(w, b"a\nno newline at the end")
    os.close(w)
    blocks = poll_for(source, 2)
    assert [x.text for x in lines_of(blocks)] == ["a", "no newline at the end"]
    assert source.ended
    status = source.status()
    assert (status["ended"], status["mode"], status["target"], status["path"]) == (
        True, "stream", STDIN_NAME, STDIN_NAME)
    assert status["held_bytes"] == 0 and status["stats"]["lines"] == 2
    assert source.poll_blocks() == []  # ended: nothing more, ever


def test_giant_lines_are_cut_and_bad_utf8_replaced_as_for_files() -> None:
    r, w = os.pipe()
    source = StreamSource(r, max_line_bytes=8, poll_interval=0.05)
    try:
        os.write(w, b"0123456789abcdef\nok \xff\xfe\n" + b"x" * 20)
        os.close(w)
        lines = lines_of(poll_for(source, 3))
        assert [(x.text, x.cut) for x in lines] == [
            ("01234567", True), ("ok \ufffd\ufffd", False), ("xxxxxxxx", True)]
        assert source.stats.lines_cut == 2
    finally:
        source.close()


def test_a_poll_reads_at_most_poll_bytes(pipe: tuple[StreamSource, int]) -> None:
    source, w = pipe
    source.poll_bytes = 10
    os.write(w, b"line\n" * 6)
    first = source.poll_blocks()
    assert sum(b.count for b in first) == 2
    assert sum(b.count for b in poll_for(source, 4)) == 4


def test_run_blocks_delivers_and_stop_ends_it_while_the_pipe_stays_open(
    pipe: tuple[StreamSource, int],
) -> None:
    source, w = pipe
    source.poll_interval = 30.0  # only stop() can end the wait in time
    got: list[str] = []
    seen = threading.Event()

    def on_blocks(blocks: list[LineBlock]) -> None:
        got.extend(x.text for x in lines_of(blocks))
        seen.set()

    thread = threading.Thread(target=source.run_blocks, args=(on_blocks,), daemon=True)
    thread.start()
    os.write(w, b"hello\n")  # the writer wakes the wait at once
    assert seen.wait(5)
    assert got == ["hello"]
    started = time.monotonic()
    source.stop()
    thread.join(5)
    assert not thread.is_alive() and time.monotonic() - started < 2


def test_run_blocks_waits_for_stop_after_the_end(pipe: tuple[StreamSource, int]) -> None:
    source, w = pipe
    polls = threading.Semaphore(0)
    stop = threading.Event()
    thread = threading.Thread(target=source.run_blocks, args=(lambda _: None, stop),
                              kwargs={"on_poll": polls.release}, daemon=True)
    thread.start()
    os.close(w)
    deadline = time.monotonic() + 5
    while not source.ended:
        assert time.monotonic() < deadline
        assert polls.acquire(timeout=5)
    assert polls.acquire(timeout=5)  # still polling (at the poll interval), never spinning on the end
    assert thread.is_alive()
    stop.set()
    source.stop()
    thread.join(5)
    assert not thread.is_alive()


def test_a_named_pipe_is_read_again_for_each_next_writer_and_ends_when_removed(tmp_path: Path) -> None:
    fifo = tmp_path / "vllm.pipe"
    os.mkfifo(fifo)
    source = StreamSource.open_fifo(str(fifo), poll_interval=0.05)  # no writer yet: does not block
    try:
        for _ in range(3):
            assert source.poll_blocks() == [] and not source.ended  # no writer yet is not the end
        with open(fifo, "wb") as writer:
            writer.write(b"first\nsecond\nhalf")
        lines = lines_of(poll_for(source, 3))  # the writer's half line, flushed at its end
        assert [(x.source, x.number, x.text) for x in lines] == [
            (str(fifo), 1, "first"), (str(fifo), 2, "second"), (str(fifo), 3, "half")]
        # A next writer (a restarted vLLM) never waits for a reader, and loses nothing, whether it
        # comes before or after the end of the last one was seen.
        for text, number in ((b"third\n", 4), (b"fourth\nfifth\n", 5)):
            writer_fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)  # ENXIO if the pipe had no reader
            os.write(writer_fd, text)
            os.close(writer_fd)
            got = lines_of(poll_for(source, text.count(b"\n")))
            assert [(x.number, x.text) for x in got] == [
                (number + i, t.decode()) for i, t in enumerate(text.split(b"\n")[:-1])]
            assert not source.ended
        deadline = time.monotonic() + 5
        while source.stats.files_opened < 3:  # each writer's end seen: the pipe opened again
            assert time.monotonic() < deadline, source.stats
            assert source.poll_blocks() == []
        writer_fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        os.write(writer_fd, b"last\n")
        fifo.unlink()  # removed: no next writer can come
        os.close(writer_fd)
        assert [x.text for x in lines_of(poll_for(source, 2))] == ["last"]
        poll_for(source, 1)
        assert source.ended and source.status()["target"] == str(fifo)
        assert source.stats.read_errors == 1 and "no such file" in str(source.stats.last_error)
    finally:
        source.close()


def test_stop_and_close_are_safe_in_any_order_and_twice(pipe: tuple[StreamSource, int]) -> None:
    source, _ = pipe
    source.stop()
    source.close()
    source.close()
    source.stop()
    assert source.poll_blocks() == []
    assert source.state_file is None and source.checkpoint().state is None


def test_a_named_pipe_removed_while_no_writer_is_connected_ends(tmp_path: Path) -> None:
    """No writer, so no end of file to see: the removal itself is noticed at the next poll."""
    fifo = tmp_path / "vllm.pipe"
    os.mkfifo(fifo)
    source = StreamSource.open_fifo(str(fifo), poll_interval=0.05)
    try:
        with open(fifo, "wb") as writer:
            writer.write(b"one\n")
        poll_for(source, 1)
        deadline = time.monotonic() + 5
        while source.stats.files_opened < 1:  # the writer's end seen: opened again, no writer now
            assert time.monotonic() < deadline, source.stats
            source.poll_blocks()
        assert not source.ended
        fifo.unlink()
        assert source.poll_blocks() == []
        assert source.ended and "no such file" in str(source.stats.last_error)
    finally:
        source.close()


def test_a_named_pipe_made_again_at_its_path_is_the_one_read(tmp_path: Path) -> None:
    fifo = tmp_path / "vllm.pipe"
    os.mkfifo(fifo)
    source = StreamSource.open_fifo(str(fifo), poll_interval=0.05)
    try:
        fifo.unlink()
        os.mkfifo(fifo)  # a new pipe: a writer opening the path reaches it, not the old one
        assert source.poll_blocks() == [] and not source.ended
        writer_fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)  # ENXIO unless the new pipe has a reader
        os.write(writer_fd, b"new\n")
        os.close(writer_fd)
        assert [x.text for x in lines_of(poll_for(source, 1))] == ["new"]
    finally:
        source.close()
