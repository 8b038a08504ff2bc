"""Every stats record of the real vLLM logs in tests/data, checked against its hand-made answer key.

`logwatch parse --jsonl` runs in this interpreter (`cli.main`, its output captured at the descriptor),
not one interpreter per log."""

from __future__ import annotations

import json

import pytest
from support import TESTS

from vllm_logwatch.cli import main

DATA = TESTS / "data"
LOGS = sorted(p.stem.split(".")[0] for p in DATA.glob("*.expected.jsonl"))
REAL_CPU_LOG = next((DATA / "real-vllm-cpu").glob("serve_*.log"))
KEYS = (
    "engine", "prompt_throughput", "generation_throughput", "running", "waiting", "swapped",
    "gpu_kv_cache_usage_pct", "cpu_kv_cache_usage_pct", "prefix_cache_hit_rate_pct", "mm_cache_hit_rate_pct",
)


def logwatch_jsonl(capfd: pytest.CaptureFixture[str], *args: str) -> tuple[int, list[dict[str, object]], str]:
    """`logwatch parse --jsonl ARGS`: (exit code, the records, stderr)."""
    capfd.readouterr()
    code = main(["parse", "--jsonl", *args])
    out, err = capfd.readouterr()
    return code, [json.loads(line) for line in out.splitlines()], err


def stamp_of(record: dict[str, object]) -> str:
    time = str(record["time"])  # ISO 8601: YYYY-MM-DDTHH:MM:SS+zz:zz
    return f"{time[5:10]} {time[11:19]}"


@pytest.mark.parametrize("name", LOGS)
def test_parse_matches_answer_key(name: str, capfd: pytest.CaptureFixture[str]) -> None:
    expected = [json.loads(line) for line in (DATA / f"{name}.expected.jsonl").read_text().splitlines()]
    code, records, err = logwatch_jsonl(capfd, str(DATA / f"{name}.log"), "--tz", "UTC")
    if not expected:
        assert code == 1 and records == [] and err.count("\n") == 1, err
        return
    assert code == 0, err
    assert [r["kind"] for r in records] == ["stats"] * len(expected)
    for got, want in zip(records, expected, strict=False):
        assert {k: got[k] for k in KEYS} == {k: want[k] for k in KEYS}
        assert got["prefix_cache_hit_rate_cpu_pct"] == want.get("prefix_cache_hit_rate_cpu_pct")
        assert stamp_of(got) == want["timestamp_text"]


@pytest.mark.parametrize("name", sorted(p.stem.split(".")[0] for p in DATA.glob("*.spec.jsonl")))
def test_spec_lines_match_answer_key(name: str, capfd: pytest.CaptureFixture[str]) -> None:
    expected = [json.loads(line) for line in (DATA / f"{name}.spec.jsonl").read_text().splitlines()]
    _, records, err = logwatch_jsonl(capfd, str(DATA / f"{name}.log"), "--kind", "spec", "--tz", "UTC")
    assert len(records) == len(expected), err
    for got, want in zip(records, expected, strict=False):
        assert stamp_of(got) == want["timestamp_text"]
        assert got["format"] == want["format"]
        if want["format"] == "v0":
            assert got["draft_acceptance_rate_pct"] == pytest.approx(want["draft_acceptance_rate"] * 100)
            assert got["system_efficiency"] == want["system_efficiency"]
            assert got["num_speculative_tokens"] == want["num_speculative_tokens"]
            assert got["accepted_tokens"] == want["num_accepted_tokens"]
            assert got["drafted_tokens"] == want["num_draft_tokens"]
            assert got["emitted_tokens"] == want["num_emitted_tokens"]
            assert got["cumulative"] is True
        else:
            for key in ("mean_acceptance_length", "accepted_throughput", "drafted_throughput",
                        "accepted_tokens", "drafted_tokens", "per_position_acceptance_rate"):
                assert got[key] == want[key], key
            assert got["draft_acceptance_rate_pct"] == want["avg_draft_acceptance_rate_pct"]
            assert got["engine"] == 0  # attributed to the Engine 000 line before it


def test_real_vllm_032_cpu_log(capfd: pytest.CaptureFixture[str]) -> None:
    """A real vLLM 0.32 (CPU build) log: 78 stats records, KV usage in the CPU column."""
    code, records, err = logwatch_jsonl(capfd, str(REAL_CPU_LOG), "--tz", "UTC")
    assert code == 0, err
    assert len(records) == 78
    lines = [line for line in REAL_CPU_LOG.read_text().splitlines() if "Engine 000: Avg prompt" in line]
    for record, line in zip(records, lines, strict=False):
        assert record["engine"] == 0
        assert record["gpu_kv_cache_usage_pct"] is None
        assert f"CPU KV cache usage: {record['cpu_kv_cache_usage_pct']}%" in line
        assert f"Avg generation throughput: {record['generation_throughput']} tokens/s" in line
        assert f"Running: {record['running']} reqs, Waiting: {record['waiting']} reqs" in line
        assert stamp_of(record) in line
        # year and zone from the launch script's file name: serve_20261129T192328Z.log
        assert str(record["time"]).startswith("2026-11-29T")
    assert (records[0]["line"], records[0]["time"]) == (136, "2026-11-29T19:23:55+00:00")
