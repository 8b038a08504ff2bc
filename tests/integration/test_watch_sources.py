"""Many sources in one real `logwatch watch`: a kubelet tree (rotation with a late write, a container
restart, a pod recreated, a restart of watch with its state file), a Docker containers folder through
json-file rotation, and a folder with two launch scripts' files. Token counters are exact per source:
with `--stats-interval 10`, each stats line of 100 generated tokens/s credits 1000 tokens."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import WatchProcess, poll_until, run_watch

VLLM = {"namespace": "vllm", "container": "vllm"}
_clock = iter(range(10**6))


def stats_line() -> str:
    """A V1 stats line, 10 s after the previous one (the stamps of each file keep going up)."""
    t = next(_clock) * 10
    stamp = f"07-05 {11 + t // 3600 % 12:02d}:{t // 60 % 60:02d}:{t % 60:02d}"
    return (f"(APIServer pid=1) INFO {stamp} [loggers.py:259] Engine 000: "
            "Avg prompt throughput: 50.0 tokens/s, "
            "Avg generation throughput: 100.0 tokens/s, Running: 5 reqs, Waiting: 0 reqs, "
            "GPU KV cache usage: 4.8%, Prefix cache hit rate: 0.0%")


def cri(path: Path, count: int) -> None:
    """Append `count` stats lines as containerd writes them (the long ones in two parts)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as f:
        for _ in range(count):
            line = stats_line()
            f.write(f"2025-07-05T11:29:01.5Z stdout P {line[:40]}\n")
            f.write("2025-07-05T11:29:01.6Z stderr F a stderr line between the parts\n")
            f.write(f"2025-07-05T11:29:01.7Z stdout F {line[40:]}\n")


def json_file(path: Path, count: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as f:
        for _ in range(count):
            record = {"log": stats_line() + "\n", "stream": "stdout",
                      "time": "2025-07-05T11:29:01.123456789Z"}
            f.write(json.dumps(record) + "\n")


def tokens(watch: WatchProcess, labels: dict[str, str]) -> float | None:
    return watch.sample("vllm_logwatch_generation_tokens_total",
                        {"engine": "0", "model_name": "unknown", **labels})


def wait_tokens(watch: WatchProcess, labels: dict[str, str], expected: float) -> None:
    poll_until(lambda: tokens(watch, labels) == expected, 15, f"{expected} tokens for {labels}")


@pytest.fixture
def tree(tmp_path: Path) -> Iterator[Path]:
    root = tmp_path / "pods"
    cri(root / "vllm_a-0_uid-a1" / "vllm" / "0.log", 3)
    cri(root / "vllm_b-0_uid-b1" / "vllm" / "0.log", 3)
    cri(root / "kube-system_coredns-1_uid-c" / "coredns" / "0.log", 1)
    yield root


def test_a_kubelet_tree_with_two_pods_through_rotation_restarts_and_a_restart_of_watch(
        tree: Path, tmp_path: Path) -> None:
    a, b = {**VLLM, "pod": "a-0"}, {**VLLM, "pod": "b-0"}
    a_dir, b_dir = tree / "vllm_a-0_uid-a1" / "vllm", tree / "vllm_b-0_uid-b1" / "vllm"
    state = str(tmp_path / "state.json")
    args = ("--layout", "pods", "--select", "vllm/*/*", "--stats-interval", "10", "--state-file", state)
    with run_watch(tree, *args, "--from-start", log_dir=tmp_path) as watch:
        wait_tokens(watch, a, 3000)
        wait_tokens(watch, b, 3000)
        # kubelet's rotation, with a write to the renamed file before the new one appears
        os.rename(a_dir / "0.log", a_dir / "0.log.20250705-112901")
        cri(a_dir / "0.log.20250705-112901", 2)
        cri(a_dir / "0.log", 2)
        wait_tokens(watch, a, 7000)
        assert watch.sample("vllm_logwatch_log_rotations_total", a) == 1
        # a container restart: the next restart file is a new launch of the same source
        cri(b_dir / "1.log", 2)
        wait_tokens(watch, b, 5000)
        poll_until(lambda: watch.sample("vllm_logwatch_launches_total", b) == 2, 10, "b's second launch")
        # the pod recreated under the same name (a StatefulSet): the same source, a new launch
        cri(tree / "vllm_a-0_uid-a2" / "vllm" / "0.log", 1)
        wait_tokens(watch, a, 8000)
        assert watch.sample("vllm_logwatch_sources", {"state": "followed"}) == 2
        dns = {"namespace": "kube-system", "pod": "coredns-1", "container": "coredns"}
        assert tokens(watch, dns) is None
        assert "kube-system" not in watch.get("/metrics").text  # not selected: never read
    cri(tree / "vllm_a-0_uid-a2" / "vllm" / "0.log", 1)  # while watch is down
    cri(b_dir / "1.log", 2)
    with run_watch(tree, *args, log_dir=tmp_path) as watch:
        wait_tokens(watch, a, 1000)
        wait_tokens(watch, b, 2000)  # what came while down, nothing counted twice
        one = {"engine": "0", "model_name": "unknown", **a}
        poll_until(lambda: watch.sample("vllm_logwatch_stats_lines_total", one) == 1, 5, "a's one line")


def test_a_docker_containers_folder_through_json_file_rotation(tmp_path: Path) -> None:
    root = tmp_path / "containers"
    ids = {"vllm-qwen": "1" * 64, "vllm-llama": "2" * 64}
    for name, cid in ids.items():
        (root / cid).mkdir(parents=True)
        (root / cid / "config.v2.json").write_text(json.dumps({"ID": cid, "Name": f"/{name}"}))
        json_file(root / cid / f"{cid}-json.log", 2)
    with run_watch(root, "--stats-interval", "10", "--from-start", log_dir=tmp_path) as watch:  # auto: docker
        wait_tokens(watch, {"container": "vllm-qwen"}, 2000)
        wait_tokens(watch, {"container": "vllm-llama"}, 2000)
        log = root / ids["vllm-qwen"] / f"{ids['vllm-qwen']}-json.log"
        os.rename(log, f"{log}.1")  # Docker's max-size rotation
        json_file(Path(f"{log}.1"), 1)
        json_file(log, 3)
        wait_tokens(watch, {"container": "vllm-qwen"}, 6000)
        assert watch.sample("vllm_logwatch_log_rotations_total", {"container": "vllm-qwen"}) == 1
        assert tokens(watch, {"container": "vllm-llama"}) == 2000
        status = watch.status()
        assert sorted(status["engines"]) == ["vllm-llama #0", "vllm-qwen #0"]
        assert sorted(s["labels"]["container"] for s in status["sources"]) == ["vllm-llama", "vllm-qwen"]
        page = watch.get("/").text
        assert "vllm-qwen: engine 0" in page and "vllm-llama: engine 0" in page


def test_a_folder_with_two_launch_scripts_has_a_source_each(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    qwen, llama = logs / "serve_qwen_20250705_112901.log", logs / "serve_llama_20250705_113000.log"
    for path in (qwen, llama):
        path.write_text("".join(stats_line() + "\n" for _ in range(2)))
    with run_watch(logs, "--stats-interval", "10", "--from-start", log_dir=tmp_path) as watch:
        wait_tokens(watch, {"script": "serve_qwen"}, 2000)
        wait_tokens(watch, {"script": "serve_llama"}, 2000)
        (logs / "serve_qwen_20250706_080000.log").write_text("".join(stats_line() + "\n" for _ in range(3)))
        wait_tokens(watch, {"script": "serve_qwen"}, 5000)
        poll_until(lambda: watch.sample("vllm_logwatch_launches_total", {"script": "serve_qwen"}) == 2, 10,
                   "qwen's new launch")
        assert watch.sample("vllm_logwatch_launches_total", {"script": "serve_llama"}) == 1
        assert tokens(watch, {"script": "serve_llama"}) == 2000
        with llama.open("a") as f:
            f.write(stats_line() + "\n")
        wait_tokens(watch, {"script": "serve_llama"}, 3000)
        charted = watch.get("/api/v1/history").json()  # the page's charts: each source's engines
        assert sorted(charted["engines"]) == ["serve_llama #0", "serve_qwen #0"]
        assert len(charted["engines"]["serve_qwen #0"]["time"]) >= 3 and charted["series_left_out"] == 0


def test_sources_beyond_the_cap_are_folded_and_counted(tmp_path: Path) -> None:
    root = tmp_path / "pods"
    for name in ("a-0", "b-0", "c-0"):
        cri(root / f"vllm_{name}_uid-{name}" / "vllm" / "0.log", 1)
    with run_watch(root, "--layout", "pods", "--max-sources", "1", "--stats-interval", "10", "--from-start",
                   log_dir=tmp_path) as watch:
        folded = {"namespace": "_folded", "pod": "_folded", "container": "_folded"}
        poll_until(lambda: watch.sample("vllm_logwatch_log_lines_total", folded) == 6, 10, "the folded lines")
        assert watch.sample("vllm_logwatch_sources", {"state": "folded"}) == 2
        assert watch.sample("vllm_logwatch_sources", {"state": "followed"}) == 1
        assert tokens(watch, {**VLLM, "pod": "a-0"}) == 1000
        status = watch.status()
        assert status["follower"]["sources"] == 3 and status["follower"]["folded"] == 2


@pytest.mark.parametrize("option", [("--layout", "pods"), ("--select", "vllm*")])
def test_a_stream_with_a_many_source_option_is_a_usage_error(option: tuple[str, ...]) -> None:
    import subprocess
    import sys

    command = [sys.executable, "-m", "vllm_logwatch", "watch", "-", "--port", "0", *option]
    done = subprocess.run(command, capture_output=True, text=True, timeout=30, input="")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr == (f"logwatch watch: {option[0]}: a stream (-, a pipe) is one source: give the "
                           "folder that holds the sources instead\n")


@pytest.mark.parametrize(("args", "message"), [
    (("--layout", "pods", "--label", "pod=x"),
     "--label pod: the sources of a folder have that label already"),
    (("--select", "vllm*"), "is not a folder: there is only one source to follow"),
    (("--layout", "docker"), "is a file, not a folder of sources"),
])
def test_options_that_cannot_apply_are_usage_errors(tmp_path: Path, args: tuple[str, ...],
                                                    message: str) -> None:
    import subprocess
    import sys

    target = tmp_path / "pods" if args[0] == "--layout" and "pod=x" in args else tmp_path / "one.log"
    target.mkdir() if target.suffix == "" else target.write_text("")
    done = subprocess.run([sys.executable, "-m", "vllm_logwatch", "watch", str(target), "--port", "0", *args],
                          capture_output=True, text=True, timeout=30)
    assert done.returncode == 2 and message in done.stderr and "Traceback" not in done.stderr
