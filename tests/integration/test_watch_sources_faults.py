"""A many-source `logwatch watch` against what a folder may hold: a dated archive folder beside launch
files (not a kubelet tree), a layout that finds nothing (said), a named pipe where Docker's
config.v2.json belongs (never opened: the scrape and SIGTERM are never held up)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from support import poll_until, run_watch

STATS = ("INFO 07-05 11:29:{s:02d} [loggers.py:123] Engine 000: Avg prompt throughput: 0.0 tokens/s, "
         "Avg generation throughput: 100.0 tokens/s, Running: 1 reqs, Waiting: 0 reqs, "
         "GPU KV cache usage: 5.0%, Prefix cache hit rate: 0.0%")


def test_launch_files_beside_a_dated_archive_folder_are_read_as_scripts(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    (logs / "logs_2025_07").mkdir(parents=True)
    (logs / "logs_2025_07" / "serve_old_20250601_080000.log").write_text(STATS.format(s=0) + "\n")
    for name in ("serve_qwen_20250705_112901.log", "serve_llama_20250705_113000.log"):
        (logs / name).write_text(STATS.format(s=1) + "\n")
    with run_watch(logs, "--from-start", log_dir=tmp_path) as watch:
        for script in ("serve_qwen", "serve_llama"):
            watch.wait_sample("vllm_logwatch_log_lines_total", {"script": script}, 1)
        assert watch.status()["follower"]["mode"] == "scripts"


def test_a_layout_that_finds_no_source_in_a_folder_that_is_not_empty_is_said(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "serve_qwen_20250705_112901.log").write_text("x\n")
    with run_watch(logs, "--layout", "pods", log_dir=tmp_path) as watch:
        poll_until(lambda: "finds 0 sources" in watch.stderr(), 5, "the warning")
    line = next(li for li in watch.stderr().splitlines() if "finds 0 sources" in li)
    assert "WARNING" in line and "layout pods" in line and "<namespace>_<pod>_<uid>" in line


def test_a_named_pipe_for_a_docker_config_holds_up_neither_the_scrape_nor_sigterm(tmp_path: Path) -> None:
    root = tmp_path / "containers"
    ids = ["1" * 64, "2" * 64]
    for cid in ids:
        (root / cid).mkdir(parents=True)
        (root / cid / f"{cid}-json.log").write_text(
            json.dumps({"log": STATS.format(s=2) + "\n", "stream": "stdout",
                        "time": "2025-07-05T11:29:02.000000000Z"}) + "\n")
    os.mkfifo(root / ids[0] / "config.v2.json")
    (root / ids[1] / "config.v2.json").write_text(json.dumps({"Name": "/vllm-llama"}))
    with run_watch(root, "--from-start", "--poll-interval", "0.2", log_dir=tmp_path) as watch:
        watch.wait_sample("vllm_logwatch_log_lines_total", {"container": "111111111111"}, 1)
        watch.wait_sample("vllm_logwatch_log_lines_total", {"container": "vllm-llama"}, 1)
        assert watch.get("/healthz").status_code == 200
        assert watch.stop(timeout=10.0) == 0
