"""A source that appeared while a many-source watch was down (a pod started during the watch's own
restart, a DaemonSet rollout) is a new source: with a state file, its lines written meanwhile are read
from its start, as a launch file that appeared while a one-file watch was down is (`statefile.resume_at`:
a file newer than the saved state is one never read): a source a state file read does not name is new.
"""

from __future__ import annotations

from pathlib import Path

from podtree import Clock, pod
from podtree import write as append
from support import save

from vllm_logwatch.following.many import ManyFollower


def write(path: Path, count: int) -> None:
    append(path, *(f"line {i}" for i in range(count)))


def test_a_pod_that_appeared_while_the_watch_was_down_is_read_from_its_start(tmp_path: Path) -> None:
    root, state = tmp_path / "pods", str(tmp_path / "state.json")
    write(pod(root, "a-0"), 2)
    before = ManyFollower(str(root), layout="pods", state_file=state, clock=Clock(step=1.0))
    assert before.poll_blocks() == []  # from the end: no state yet
    assert save(before)  # the state file, as the pipeline writes it
    before.close()
    write(pod(root, "a-0"), 1)  # while the watch is down
    write(pod(root, "b-0"), 3)  # a pod started while the watch is down
    after = ManyFollower(str(root), layout="pods", state_file=state, clock=Clock(step=1.0))
    read: dict[str, int] = {}
    for block in after.poll_blocks():
        name = dict(block.key)["pod"]
        read[name] = read.get(name, 0) + block.count
    after.close()
    assert read == {"a-0": 1, "b-0": 3}
