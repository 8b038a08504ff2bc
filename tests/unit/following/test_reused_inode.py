"""A launch file on the inode of a file read before (removed since) is a new launch, read.

ext4 and xfs give a new file the inode number of one just removed. A file the follower read is never
read again from its start, even under another name: it is known by (device, inode), forgotten once no
listing shows that inode. So when a read file is removed and a new one created between two listings
(kubelet removing restart N-1's log as restart N+1 starts; a launch folder's old files cleaned as a
new launch starts), the new file must not be taken for the old one: its first bytes tell them apart.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import pytest
from podtree import Clock, write

from vllm_logwatch.following.follower import Follower
from vllm_logwatch.following.many import ManyFollower
from vllm_logwatch.following.openfile import LineBlock


def replace_on_same_inode(old: Path, new: Path, text: str) -> None:
    """Remove `old`, create `new` (with a line): on its inode, or skip where the file system does not
    reuse inode numbers at once (tmpfs)."""
    ino = old.stat().st_ino
    old.unlink()
    write(new, text)
    if new.stat().st_ino != ino:
        pytest.skip("this file system did not give the new file the removed file's inode")


def texts(blocks: list[LineBlock]) -> list[bytes]:
    return [line for block in blocks for line in block.data.splitlines()]


def test_a_pods_restart_file_on_the_inode_of_a_removed_restart_file_is_read(tmp_path: Path) -> None:
    folder = tmp_path / "vllm_qwen-0_uid" / "vllm"
    folder.mkdir(parents=True)
    write(folder / "0.log", "first launch")
    follower = ManyFollower(str(tmp_path), layout="pods", from_start=True, clock=Clock(step=1.0))
    assert texts(follower.poll_blocks())[-1].endswith(b"first launch")
    write(folder / "1.log", "second launch")  # a restart
    assert texts(follower.poll_blocks())[-1].endswith(b"second launch")
    replace_on_same_inode(folder / "0.log", folder / "2.log", "third launch")  # kubelet keeps two
    assert [t[-12:] for t in texts(follower.poll_blocks())] == [b"third launch"]
    follower.close()


def test_a_launch_file_on_the_inode_of_a_removed_launch_file_is_read(tmp_path: Path) -> None:
    first, second = tmp_path / "serve_20250705_0001.log", tmp_path / "serve_20250705_0002.log"
    write(first, "first launch")
    with contextlib.closing(Follower(str(tmp_path), from_start=True)) as follower:
        assert texts(follower.poll_blocks())[-1].endswith(b"first launch")
        write(second, "second launch")
        os.utime(second, ns=(first.stat().st_mtime_ns + 10**9,) * 2)
        assert texts(follower.poll_blocks())[-1].endswith(b"second launch")
        third = tmp_path / "serve_20250705_0003.log"
        replace_on_same_inode(first, third, "third launch")
        os.utime(third, ns=(second.stat().st_mtime_ns + 10**9,) * 2)
        assert [t[-12:] for t in texts(follower.poll_blocks())] == [b"third launch"]
