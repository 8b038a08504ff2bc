"""The many-source state file is bounded when written as when read (`statefile.py`): the largest state
it writes is read back at the restart; one that would not fit is not written (counted), the last one
written is kept. Its writes are spaced by its size (`statefile.save_spacing`), 0.1 s to 1 s apart,
scrapes included."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from podtree import pod, write

from vllm_logwatch.commands.watch import _check_state_file
from vllm_logwatch.exporting.exporter import ExporterMetrics
from vllm_logwatch.following.many import ManyFollower
from vllm_logwatch.following.statefile import (
    MAX_STATE_BYTES,
    SAVE_BYTES_PER_SECOND,
    SAVE_SECONDS_MAX,
    SAVE_SECONDS_MIN,
    Checkpoint,
    SavedState,
    SourcesState,
    StateError,
    encode_sources,
    read_sources,
    write_sources,
)
from vllm_logwatch.live.pipeline import Pipeline


def state_of(sources: int, path_chars: int = 4000) -> SourcesState:
    parts = []
    for i in range(sources):
        key = (("namespace", "n" * 128), ("pod", f"{i:0128d}"), ("container", "c" * 128))
        saved = SavedState(path="/" + "p" * path_chars + f"/{i}/0.log", ino=2**40 + i, offset=2**40,
                           fingerprint="f" * 64, fingerprint_bytes=1024, number=2**40, cut_pending=False,
                           saved_at=0.0, dev=2**40)
        parts.append((key, Checkpoint(saved, 0, 0)))
    return SourcesState(tuple(parts))


def test_the_largest_state_that_can_be_written_is_read_back_at_a_restart(tmp_path: Path) -> None:
    state_file = str(tmp_path / "state.json")
    one = len(encode_sources(state_of(2), 0.0)) - len(encode_sources(state_of(1), 0.0))
    most = (MAX_STATE_BYTES - len(encode_sources(state_of(0), 0.0))) // one  # as many as fit
    write_sources(state_file, state_of(most))
    assert MAX_STATE_BYTES - one < os.path.getsize(state_file) <= MAX_STATE_BYTES
    _check_state_file(state_file)  # the restart's check at start: no exit 2
    saved = read_sources(state_file)
    assert saved is not None and len(saved) == most
    before = Path(state_file).read_bytes()
    with pytest.raises(StateError, match="over the 4 MiB"):
        write_sources(state_file, state_of(most + 1))  # would not be readable: not written
    assert Path(state_file).read_bytes() == before


@pytest.mark.integration  # over 0.2 s (a process, or a day of lines): make test, not smoke
def test_state_writes_of_many_sources_are_spaced_by_size_and_their_bytes_bounded(tmp_path: Path) -> None:
    root, state_file = tmp_path / "pods", tmp_path / "state.json"
    busy = [pod(root, "busy-0"), pod(root, "busy-1")]
    for i in range(40):
        write(pod(root, f"idle-{i}"), "x")
    follower = ManyFollower(str(root), layout="pods", state_file=str(state_file), poll_interval=0.02)
    pipeline = Pipeline(follower, ExporterMetrics(), metrics_for=lambda labels: ExporterMetrics())
    pipeline.start()
    start = time.monotonic()
    scrapes = 0
    try:
        while time.monotonic() - start < 2.5:  # two sources written all the time, scraped often
            for path in busy:
                write(path, "y")
            if int((time.monotonic() - start) * 20) > scrapes:
                scrapes += 1
                pipeline.status()  # forces the pending position to disk first
    finally:
        pipeline.stop()
    lived = time.monotonic() - start
    writes = pipeline.keeper.writes
    size = state_file.stat().st_size
    spacing = min(SAVE_SECONDS_MAX, max(SAVE_SECONDS_MIN, size / SAVE_BYTES_PER_SECOND))
    assert follower.save_interval() == pytest.approx(spacing)
    assert writes <= lived / spacing + 2  # plus the first write and the one at stop
    assert (writes - 2) * size / lived <= SAVE_BYTES_PER_SECOND or spacing == SAVE_SECONDS_MIN
    assert size < 42 * 400  # about 300 bytes a source (with a test folder's long path)
    print(f"{writes} writes in {lived:.1f} s ({writes / lived:.2f}/s), {size} bytes each, "
          f"{writes * size / lived:.0f} bytes/s, {scrapes} scrapes")
    assert read_sources(str(state_file)) is not None


def test_the_spacing_of_state_writes_grows_with_the_state(tmp_path: Path) -> None:
    """A few sources' state is written up to ten times a second (a scrape waits at most 0.1 s for its
    turn); 2,000 sources' (about 600 KB) once a second at most."""
    follower = ManyFollower(str(tmp_path), layout="pods", state_file=str(tmp_path / "state.json"))
    follower._state_bytes = 3 * 300
    assert follower.save_interval() == SAVE_SECONDS_MIN
    follower._state_bytes = 2000 * 300
    assert follower.save_interval() == SAVE_SECONDS_MAX
    follower._state_bytes = 200 * 300
    assert follower.save_interval() == pytest.approx(200 * 300 / SAVE_BYTES_PER_SECOND)
