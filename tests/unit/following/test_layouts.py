"""Which sources a folder holds (`following/layouts.py`): kubelet trees, Docker folders, launch scripts."""

from __future__ import annotations

import json
import os
import re
import threading
from pathlib import Path

import pytest

from vllm_logwatch.following.layouts import (
    MAX_LABEL_CHARS,
    detect_layout,
    discover,
    folded_key,
    script_name,
    source_name,
)
from vllm_logwatch.following.openfile import open_regular


def touch(path: Path, text: str = "x\n") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def never(exc: OSError, path: str) -> None:
    raise AssertionError(f"unexpected error on {path}: {exc}")


@pytest.mark.parametrize(("name", "script"), [
    ("serve_qwen_20250705_112901.log", "serve_qwen"),
    ("serve_qwen2.5_2025-07-05T11:29:01.log", "serve_qwen2.5"),
    ("serve_llama-20250705T112901Z.log", "serve_llama"),
    ("vllm.log", "vllm"),
    ("vllm_0.log", "vllm_0"),  # a short number is part of the name
    ("20250705_112901.log", "launch"),  # nothing but a stamp: all such files are one script's
])
def test_a_script_name_is_the_file_name_without_its_timestamp(name: str, script: str) -> None:
    assert script_name(name) == script


def test_the_layout_is_told_from_what_the_folder_holds(tmp_path: Path) -> None:
    assert detect_layout(str(tmp_path / "missing")) is None
    assert detect_layout(str(tmp_path)) is None  # empty: nothing told yet
    touch(tmp_path / "scripts" / "serve_1.log")
    assert detect_layout(str(tmp_path / "scripts")) == "scripts"
    touch(tmp_path / "pods" / "vllm_vllm-0_3f1c2b8e-5d0a-4c11-9e6f-0b1f2a3c4d5e" / "vllm" / "0.log")
    assert detect_layout(str(tmp_path / "pods")) == "pods"
    touch(tmp_path / "static" / "kube-system_etcd-node1_0b1f2a3c4d5e6f708192a3b4c5d6e7f8" / "etcd" / "3.log")
    assert detect_layout(str(tmp_path / "static")) == "pods"  # a static pod: its uid is a hash
    touch(tmp_path / "docker" / ("a" * 64) / f"{'a' * 64}-json.log")
    assert detect_layout(str(tmp_path / "docker")) == "docker"


@pytest.mark.parametrize("archive", [
    "logs_2025_07",  # a dated archive: a_b_c, but no uid
    "old_runs_3f1c2b8e-5d0a-4c11-9e6f-0b1f2a3c4d5e",  # uid-shaped, but no container folder of N.log
])
def test_a_launch_file_folder_with_an_archive_folder_is_scripts_not_a_kubelet_tree(
        tmp_path: Path, archive: str) -> None:
    touch(tmp_path / "serve_qwen_20250705_112901.log")
    touch(tmp_path / "serve_llama_20250705_120000.log")
    touch(tmp_path / archive / "serve_qwen_20250601_080000.log")
    touch(tmp_path / archive / "sub" / "notes.log")
    assert detect_layout(str(tmp_path)) == "scripts"


def test_a_kubelet_tree_has_a_source_per_container_across_pod_uids(tmp_path: Path) -> None:
    touch(tmp_path / "vllm_vllm-0_uid1" / "vllm" / "0.log")
    touch(tmp_path / "vllm_vllm-0_uid1" / "vllm" / "0.log.20250705-112901")  # rotated: not a launch
    touch(tmp_path / "vllm_vllm-0_uid1" / "vllm" / "0.log.20250705-100000.gz")
    touch(tmp_path / "vllm_vllm-0_uid2" / "vllm" / "1.log")  # recreated under the same name
    touch(tmp_path / "vllm_vllm-0_uid1" / "sidecar" / "0.log")
    touch(tmp_path / "kube-system_coredns-7db6_uid3" / "coredns" / "0.log")
    touch(tmp_path / "not-a-pod-folder" / "x" / "0.log")
    found = discover(str(tmp_path), "pods", "*.log", (), never)
    vllm = (("namespace", "vllm"), ("pod", "vllm-0"), ("container", "vllm"))
    assert sorted(source_name(k) for k in found) == [
        "kube-system/coredns-7db6/coredns", "vllm/vllm-0/sidecar", "vllm/vllm-0/vllm"]
    assert [os.path.relpath(f, tmp_path) for f in found[vllm].files] == ["vllm_vllm-0_uid1/vllm/0.log",
                                                                         "vllm_vllm-0_uid2/vllm/1.log"]
    assert len(found[vllm].dirs) == 2
    chosen = discover(str(tmp_path), "pods", "*.log", ["vllm/*/vllm", "*/coredns-*/*"], never)
    assert sorted(source_name(k) for k in chosen) == ["kube-system/coredns-7db6/coredns", "vllm/vllm-0/vllm"]


def test_a_docker_container_is_named_by_its_config(tmp_path: Path) -> None:
    ids = ["a" * 64, "b" * 64, "c" * 64, "d" * 64]
    for cid in ids:
        touch(tmp_path / cid / f"{cid}-json.log")
    touch(tmp_path / ids[0] / f"{ids[0]}-json.log.1")  # rotated: not a launch
    touch(tmp_path / ids[0] / "config.v2.json", json.dumps({"Name": "/vllm-qwen", "Id": ids[0]}))
    touch(tmp_path / ids[1] / "config.v2.json", "{not json")
    touch(tmp_path / ids[2] / "config.v2.json", json.dumps({"Name": "/bad name\n"}))
    names: dict[str, tuple[int, str]] = {}
    found = discover(str(tmp_path), "docker", "*.log", (), never, names)
    assert sorted(source_name(k) for k in found) == [
        "bbbbbbbbbbbb", "cccccccccccc", "dddddddddddd", "vllm-qwen"]
    assert found[(("container", "vllm-qwen"),)].files == (str(tmp_path / ids[0] / f"{ids[0]}-json.log"),)
    assert len(names) == 3  # cached by mtime: read again only when the config changes
    assert list(discover(str(tmp_path), "docker", "*.log", ["vllm*"], never, names)) == [
        (("container", "vllm-qwen"),)]


def test_launch_scripts_are_one_source_each(tmp_path: Path) -> None:
    for name in ("serve_qwen_20250705_112901.log", "serve_qwen_20250706_080000.log",
                 "serve_llama_20250705_120000.log", "notes.txt"):
        touch(tmp_path / name)
    found = discover(str(tmp_path), "scripts", "*.log", (), never)
    assert {source_name(k): len(f.files) for k, f in found.items()} == {"serve_qwen": 2, "serve_llama": 1}


def test_label_values_are_valid_utf8_and_bounded(tmp_path: Path) -> None:
    long = "p" * 200
    touch(tmp_path / f"ns_{long}_uid" / "c" / "0.log")
    touch(Path(os.fsdecode(bytes(tmp_path) + b"/ns\xff_pod_uid/c/0.log")))
    touch(tmp_path / f"ns_{long}x_uid" / "c" / "0.log")  # alike in its first 128 characters
    touch(Path(os.fsdecode(bytes(tmp_path) + b"/ns_pod\n\x1b[31m_uid/c/0.log")))
    found = discover(str(tmp_path), "pods", "*.log", (), never)
    pods = sorted(dict(k)["pod"] for k in found)
    assert len(found) == 4 and len(set(pods)) == 4, pods
    assert all(len(p) <= MAX_LABEL_CHARS and "\n" not in p and "\x1b" not in p for p in pods)
    longs = [p for p in pods if p.startswith("p" * 100)]
    assert len(longs) == 2 and all(re.fullmatch(r"p{119}~[0-9a-f]{8}", p) for p in longs), longs
    assert "pod\\n\\x1b[31m~" in " ".join(pods), "control characters escaped, and the name marked changed"
    namespaces = sorted(dict(k)["namespace"] for k in found)
    assert namespaces[:3] == ["ns"] * 3 and re.fullmatch(r"ns\ufffd~[0-9a-f]{8}", namespaces[3])


def test_a_source_named_like_the_folded_one_keeps_its_own_series(tmp_path: Path) -> None:
    touch(tmp_path / "_folded_20250101T000000Z.log")
    touch(tmp_path / "serve_20250101T000000Z.log")
    found = discover(str(tmp_path), "scripts", "*.log", (), never)
    scripts = sorted(dict(k)["script"] for k in found)
    assert len(scripts) == 2 and "_folded" not in scripts and scripts[0].startswith("_folded~"), scripts
    assert folded_key("scripts") not in found


def test_a_folder_that_cannot_be_listed_is_an_error_told_not_raised(tmp_path: Path) -> None:
    errors: list[str] = []
    target = touch(tmp_path / "file")  # not a folder: listing it fails
    assert discover(str(target), "pods", "*.log", (), lambda exc, path: errors.append(path)) == {}
    assert errors == [str(target)]
    assert folded_key("pods") == (("namespace", "_folded"), ("pod", "_folded"), ("container", "_folded"))


def test_a_fifo_where_a_config_belongs_is_never_opened(tmp_path: Path) -> None:
    """A named pipe in place of config.v2.json (or a log) would block open() until a writer comes,
    under the lock a scrape needs: it is never opened; the container is named by its short id."""
    cid = "e" * 64
    touch(tmp_path / cid / f"{cid}-json.log")
    os.mkfifo(tmp_path / cid / "config.v2.json")
    result: list[dict[object, object]] = []
    worker = threading.Thread(
        target=lambda: result.append(discover(str(tmp_path), "docker", "*.log", (), never)), daemon=True)
    worker.start()
    worker.join(5.0)
    if worker.is_alive():  # unblock the listing so the test run can end, then fail
        os.close(os.open(tmp_path / cid / "config.v2.json", os.O_WRONLY | os.O_NONBLOCK))
        pytest.fail("the listing blocked in open() on a named pipe")
    assert [source_name(k) for k in result[0]] == ["eeeeeeeeeeee"]
    with pytest.raises(OSError, match="not a regular file"):
        open_regular(str(tmp_path / cid / "config.v2.json"))
