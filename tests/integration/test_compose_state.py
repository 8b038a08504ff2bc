"""deploy/docker/compose.yaml's logwatch as Docker would run it: its command (paths moved under
tmp_path), under the file's `user` and with its `cap_drop`, over a state folder made as the Dockerfile
makes it, saves its state; and a state file that cannot be saved is said once, counted, and shown in
the status. Needs root (to take the file's uid/gid) and util-linux's `setpriv`; skipped without."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from support import ROOT, free_port, poll_until
from test_container_image import compose_service, last_stage

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None,
                                reason="needs root and setpriv to run as the compose file's user")

STATE_DIR = "/var/lib/vllm-logwatch"


def image_state_folder() -> tuple[int, int, int]:
    """(uid, gid, mode) the Dockerfile gives the state folder (`install -d -o U -g G -m MODE`)."""
    [run] = [c.value[0] for c in last_stage() if c.cmd == "RUN" and STATE_DIR in c.value[0]]
    found = re.search(r"install -d -o (\d+) -g (\d+) -m (0\d+) " + STATE_DIR, run)
    assert found, run
    return int(found[1]), int(found[2]), int(found[3], 8)


def as_in_compose(service: dict[str, Any]) -> list[str]:
    """setpriv's options for the service's `user` and `cap_drop`."""
    uid, _, gid = str(service["user"]).partition(":")
    prefix = ["setpriv", f"--reuid={uid}", f"--regid={gid or uid}", "--clear-groups"]
    if service.get("cap_drop") == ["ALL"]:
        prefix += ["--inh-caps=-all", "--bounding-set=-all"]
    return prefix


def docker_containers(root: Path) -> None:
    """A Docker containers folder with one running vLLM, with Docker's modes (root's, 0710 and 0600)."""
    [bundled] = (ROOT / "vllm_logwatch" / "data").glob("serve_*.log")
    cid = "c" * 64
    folder = root / cid
    folder.mkdir(parents=True)
    records = "".join(json.dumps({"log": line + "\n", "stream": "stdout",
                                  "time": f"2026-12-01T10:00:{i % 60:02d}.{i:09d}Z"}) + "\n"
                      for i, line in enumerate(bundled.read_text(encoding="utf-8").splitlines()[:200]))
    (folder / f"{cid}-json.log").write_text(records, encoding="utf-8")
    (folder / "config.v2.json").write_text(json.dumps({"ID": cid, "Name": "/vllm"}), encoding="utf-8")
    os.chmod(folder / "config.v2.json", 0o600)
    os.chmod(folder / f"{cid}-json.log", 0o640)
    for path in (folder, root):
        os.chmod(path, 0o710)


@contextmanager
def compose_logwatch(tmp_path: Path, state_dir: Path) -> Iterator[tuple[subprocess.Popen[bytes], int, Path]]:
    service = compose_service("logwatch")
    containers = tmp_path / "containers"
    docker_containers(containers)
    moved = {"/var/lib/docker/containers": str(containers),
             f"{STATE_DIR}/state.json": str(state_dir / "state.json")}
    args = [moved.get(word, word) for word in service["command"]]
    assert args[0] == "watch" and str(state_dir / "state.json") in args
    port = free_port()
    err = tmp_path / "stderr"
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOGWATCH_")}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    with open(err, "wb") as out:
        proc = subprocess.Popen([*as_in_compose(service), sys.executable, "-m", "vllm_logwatch", *args,
                                 "--from-start", "--listen", "127.0.0.1", "--port", str(port)],
                                stdout=out, stderr=out, env=env, cwd=tmp_path)
    try:
        yield proc, port, err
    finally:
        proc.terminate()
        proc.wait(30)


def status(port: int) -> dict[str, Any] | None:
    try:
        got: dict[str, Any] = httpx.get(f"http://127.0.0.1:{port}/api/v1/status", timeout=2).json()
        return got
    except httpx.HTTPError:
        return None


def test_the_compose_command_under_its_user_and_no_capabilities_saves_its_state(tmp_path: Path) -> None:
    uid, gid, mode = image_state_folder()
    state_dir = tmp_path / "state"  # the named volume: it starts with the image folder's owner and mode
    state_dir.mkdir()
    os.chown(state_dir, uid, gid)
    os.chmod(state_dir, mode)
    with compose_logwatch(tmp_path, state_dir) as (proc, port, err):
        def saved() -> bool:
            assert proc.poll() is None, err.read_text()
            got = status(port)
            return (got is not None and (state_dir / "state.json").exists()
                    and got["pipeline"]["state_file"]["saved"])

        poll_until(saved, timeout=20, what="the state file saved")
        assert json.loads((state_dir / "state.json").read_text())["version"] == 2  # every source's position
        assert "cannot" not in err.read_text()


def test_a_state_that_cannot_be_saved_is_said_once_counted_and_shown(tmp_path: Path) -> None:
    state_dir = tmp_path / "state"
    state_dir.mkdir()
    os.chown(state_dir, 65533, 65533)  # nobody the compose user is: no write, and no capability to override
    os.chmod(state_dir, 0o755)
    with compose_logwatch(tmp_path, state_dir) as (proc, port, err):
        def failing() -> dict[str, Any] | None:
            assert proc.poll() is None, err.read_text()
            got = status(port)
            return got if got is not None and got["counters"].get("state_errors", 0) >= 3 else None

        got = poll_until(failing, timeout=20, what="three failed state writes")
        assert got["pipeline"]["state_file"]["saved"] is False
        assert got["pipeline"]["state_file"]["failing_since"] <= time.time()
        said = [line for line in err.read_text().splitlines() if "cannot save state" in line]
        assert len(said) == 1, said
