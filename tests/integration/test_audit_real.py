"""`logwatch audit` on real benchmark results against the real vLLM logs they ran against
(tests/data/audit/, made by its make_audit_data.py): the audit's Running in each window equals the log's
own, taken here with a plain regex (the answer key, not logwatch's reader), and the verdicts are the ones
the numbers call for; bad inputs are one line on stderr with the documented exit code."""

from __future__ import annotations

import json
import os
import re
import shutil
import statistics
import subprocess
import sys
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from support import ROOT

DATA = ROOT / "tests" / "data" / "audit"
ROOMY = sorted((DATA / "roomy").glob("serve_*.log"))
TIGHT = sorted((DATA / "tight-kv").glob("serve_*.log"))
STATS = re.compile(r" INFO (\d\d-\d\d \d\d:\d\d:\d\d) \[loggers\.py:\d+\] Engine 000: .*Running: (\d+) reqs, "
                   r"Waiting: (\d+) reqs, CPU KV cache usage: ([\d.]+)%")


def audit(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TZ": "UTC"}
    return subprocess.run([sys.executable, "-m", "vllm_logwatch", "audit", "--tz", "UTC", *args], cwd=cwd,
                          capture_output=True, text=True, env=env, timeout=60)


def key(log: Path, start: datetime, end: datetime) -> list[tuple[int, int, float]]:
    """The answer key: (Running, Waiting, KV %) of every stats line of `log` stamped within the window."""
    rows = []
    for line in log.read_text().splitlines():
        m = STATS.search(line)
        if m:
            t = datetime.strptime(f"{start.year}-{m[1]}", "%Y-%m-%d %H:%M:%S")
            if start <= t <= end:
                rows.append((int(m[2]), int(m[3]), float(m[4])))
    return rows


def window(result: dict[str, Any]) -> tuple[datetime, datetime]:
    start = datetime.fromisoformat(result["start"]).replace(tzinfo=None)
    return start, datetime.fromisoformat(result["end"]).replace(tzinfo=None)


def nearest_rank(values: list[int], q: float) -> int:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


@pytest.fixture(scope="module")
def audited() -> dict[str, Any]:
    results = [str(p) for p in sorted(DATA.glob("*/*.json"))]
    proc = audit(*results, "--log", str(DATA / "*" / "serve_*.log"), "--json")
    assert proc.returncode == 0, proc.stderr
    return {Path(r["source"]).name: r for r in json.loads(proc.stdout)["runs"]}


def test_every_window_has_the_logs_running_waiting_and_kv(audited: dict[str, Any]) -> None:
    assert len(audited) == 4
    for name, run in audited.items():
        log = (TIGHT if name == "vllm-bench-c12.json" else ROOMY)[0]
        rows = key(log, *window(run))
        running = [r[0] for r in rows]
        server = run["server"]
        assert server["lines"] == len(rows) >= 3, name
        assert server["running_median"] == statistics.median(running), name
        assert (server["running_p10"], server["running_p90"]) == (nearest_rank(running, 0.1),
                                                                   nearest_rank(running, 0.9)), name
        assert server["waiting_share"] == pytest.approx(sum(1 for r in rows if r[1]) / len(rows)), name
        assert server["kv_peak_pct"] == max(r[2] for r in rows), name


HAND_KEY = {  # tests/data/audit/README.md's answer key: each window's Running, line by line
    "vllm-bench-c2.json": [2, 2, 2, 2, 2, 1, 2, 2, 2, 2, 2, 2],
    "vllm-bench-c8.json": [4] * 9,
    "guidellm-benchmarks.json": [0, 2, 1, 2, 3, 3, 3, 3, 2],
    "vllm-bench-c12.json": [3, 2, 3, 3, 3, 3, 0],
}


def test_the_regex_key_is_the_hand_made_one(audited: dict[str, Any]) -> None:
    for name, running in HAND_KEY.items():
        log = (TIGHT if name == "vllm-bench-c12.json" else ROOMY)[0]
        assert [r[0] for r in key(log, *window(audited[name]))] == running, name
        assert audited[name]["server"]["running_median"] == statistics.median(running), name


def test_the_run_above_max_num_seqs_is_capped_and_the_tight_kv_run_throttled(audited: dict[str, Any]) -> None:
    kinds = {name: [v["kind"] for v in run["verdicts"]] for name, run in audited.items()}
    within, above = kinds["vllm-bench-c2.json"], kinds["vllm-bench-c8.json"]
    tight = kinds["vllm-bench-c12.json"]
    assert "capped by max-num-seqs" in above
    assert "KV-throttled" in tight
    assert not {"capped by max-num-seqs", "KV-throttled"} & set(within)
    assert audited["vllm-bench-c8.json"]["server"]["max_num_seqs"] == 4


def test_guidellm_run_is_read_to_the_same_figures(audited: dict[str, Any]) -> None:
    run = audited["guidellm-benchmarks.json"]
    assert (run["client"], run["model"], run["concurrency"]) == ("guidellm", "tiny-llama", 3)
    assert run["completed"] == 24 and run["failed"] == 0
    rows = key(ROOMY[0], *window(run))
    assert run["server"]["running_median"] == statistics.median(r[0] for r in rows)
    assert run["client_output_tok_s"] > 0


def test_text_markdown_and_image(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    results = [str(p) for p in sorted((DATA / "roomy").glob("vllm-bench-*.json"))]
    text = audit(*results, "--log", str(ROOMY[0]), "-o", str(tmp_path / "a.png"))
    assert text.returncode == 0, text.stderr
    assert "capped by max-num-seqs: asked 8 concurrent, --max-num-seqs 4" in text.stdout
    assert (tmp_path / "a.png").read_bytes()[:4] == b"\x89PNG"
    md = audit(*results, "--log", str(ROOMY[0]), "--markdown")
    assert md.stdout.startswith("| run | asked |")


def test_the_docs_example_is_the_commands_output() -> None:
    page = (ROOT / "docs" / "audit.md").read_text()
    shown = page.split("$ logwatch audit tests/data/audit/*/*.json --log 'tests/data/audit/*/serve_*.log' "
                       "--tz UTC\n", 1)[1].split("```", 1)[0]
    results = sorted(str(p.relative_to(ROOT)) for p in DATA.glob("*/*.json"))
    proc = audit(*results, "--log", "tests/data/audit/*/serve_*.log")
    assert proc.stdout == shown


def one_line_error(proc: subprocess.CompletedProcess[str], code: int, text: str) -> None:
    assert proc.returncode == code, proc.stderr
    assert proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert text in proc.stderr, proc.stderr


def test_no_matching_window_says_what_the_logs_cover() -> None:
    result = str(DATA / "tight-kv" / "vllm-bench-c12.json")
    one_line_error(audit(result, "--log", str(ROOMY[0])), 1, "no run's window")
    one_line_error(audit(result, "--log", str(ROOMY[0])), 1, "the logs' stats lines run from")


def test_a_log_of_another_model_is_named(tmp_path: Path) -> None:
    other = tmp_path / ROOMY[0].name
    other.write_text(ROOMY[0].read_text().replace("tiny-llama", "other-llama"))
    result = str(DATA / "roomy" / "vllm-bench-c2.json")
    one_line_error(audit(result, "--log", str(other)), 1,
                   "the logs serve another model in the benchmark's windows: other-llama (the benchmark's: "
                   "tiny-llama)")


def test_with_a_clock_offset_the_window_moves(audited: dict[str, Any]) -> None:
    result = str(DATA / "roomy" / "vllm-bench-c2.json")
    proc = audit(result, "--log", str(ROOMY[0]), "--json", "--clock-offset", "3600")
    one_line_error(proc, 1, "with --clock-offset 3600")
    start, end = window(audited["vllm-bench-c2.json"])
    assert key(ROOMY[0], start + timedelta(hours=1), end + timedelta(hours=1)) == []


def test_truncated_and_unknown_results_are_one_line(tmp_path: Path) -> None:
    cut = tmp_path / "cut.json"
    cut.write_text((DATA / "roomy" / "vllm-bench-c2.json").read_text()[:200])
    one_line_error(audit(str(cut), "--log", str(ROOMY[0])), 2, "a truncated result file?")
    cut_guide = tmp_path / "guide.json"
    cut_guide.write_text((DATA / "roomy" / "guidellm-benchmarks.json").read_text()[:5000])
    one_line_error(audit(str(cut_guide), "--log", str(ROOMY[0])), 2, "a truncated result file?")
    unknown = tmp_path / "other.json"
    shutil.copy(ROOMY[0], unknown)
    one_line_error(audit(str(unknown), "--log", str(ROOMY[0])), 2, "looked for vllm bench serve JSON")
