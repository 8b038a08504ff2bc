"""The e2e tests' one-real-vLLM-a-machine lock (`tests/e2e/vllm_env.server_lock`): a test waits while
another process holds it, and is let through when it runs under `flock` of the same file."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support import poll_until

E2E = Path(__file__).resolve().parent.parent / "e2e"
TAKE = ("import sys; sys.path.insert(0, sys.argv[1]); import vllm_env\n"
        "with vllm_env.server_lock(timeout=float(sys.argv[2])): print('held')\n")


def take(lock: Path, timeout: float, *wrap: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "LOGWATCH_VLLM_LOCK": str(lock)}
    return subprocess.run([*wrap, sys.executable, "-c", TAKE, str(E2E), str(timeout)], env=env,
                          capture_output=True, text=True, timeout=60, check=False)


def held(lock: Path) -> bool:
    """Does another process hold `lock` now?"""
    with open(lock, "a") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(fh, fcntl.LOCK_UN)
        return False


@pytest.mark.skipif(shutil.which("flock") is None, reason="needs flock(1) (util-linux)")
def test_the_lock_waits_for_another_holder_and_lets_flock_through(tmp_path: Path) -> None:
    lock = tmp_path / "vllm.lock"
    assert take(lock, 5).stdout == "held\n"  # free: taken
    assert take(lock, 5, "flock", str(lock)).stdout == "held\n"  # our parent holds it: let through
    holder = subprocess.Popen(["flock", str(lock), "sleep", "30"])
    try:
        poll_until(lambda: held(lock), timeout=10)
        busy = take(lock, 1.5)
        assert busy.returncode != 0 and "TimeoutError: another real vLLM held" in busy.stderr
    finally:
        holder.kill()
        holder.wait()
