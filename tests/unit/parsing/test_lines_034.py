# ruff: noqa: E501  (each record's row is kept whole)
"""vLLM 0.34.0's new lines, as its own formatter and format strings print them (tests/data/vllm-0.34/,
made by its `make_logs.py`): the KV cache sized after warm-up, fault tolerance, KV offload failures and
the connectors' circuit breaker, each record read whole at its line; and the same log as Ray Serve's
driver prints it (nested coloured actor prefixes, `[repeated Nx across cluster]`) read alike."""

from __future__ import annotations

from typing import Any

import pytest
from support import TESTS

from vllm_logwatch.parsing.envelope import ray_repeats
from vllm_logwatch.parsing.line import parse_line

DATA = TESTS / "data" / "vllm-0.34"
W0, W1, CORE, API = "Worker_TP0", "Worker_TP1", "EngineCore_DP0", "APIServer"
TOKENS_BEFORE, TOKENS_AFTER = 1_167_360, 1_021_440

# line -> (process, level, stamp, every field of the record that is not its default); None: no record
# (a traceback's lines: the fault is the status line before them).
SERVE: dict[int, tuple[str, str, str, dict[str, Any]] | None] = {
    1: (W0, "INFO", "10:00:00", {"available_kv_cache_gib": 71.25}),
    2: (W1, "INFO", "10:00:00", {"available_kv_cache_gib": 71.25}),
    3: (CORE, "INFO", "10:00:01", {"kv_cache_device": "GPU", "kv_cache_tokens": TOKENS_BEFORE,
                                   "max_concurrency": 35.62, "max_concurrency_tokens_per_request": 32768}),
    4: (W0, "WARNING", "10:00:20", {"kv_cap_utilization": 0.9, "kv_cap_gib": 71.28, "kv_cap_withheld_gib": 7.92}),
    5: (W0, "INFO", "10:00:20", {
        "warmup_free_gib": 3.5, "warmup_kv_committed_gib": 60.0, "warmup_transient_gib": 2.75,
        "warmup_peak_gib": 2.5, "warmup_torch_growth_gib": 2.75, "warmup_fit_blocks": 4003,
        "warmup_fit_gib": 62.55, "warmup_requested_gib": 71.28, "warmup_torch_limit_gib": 6.25}),
    6: (W0, "INFO", "10:00:21", {"kv_remap_from_blocks": 4096, "kv_remap_to_blocks": 3990}),
    7: (W0, "INFO", "10:00:21", {"extensible_kv_cache": True, "kv_cache_extended_blocks": 3990,
                                 "kv_cache_extended_gib": 62.34}),
    8: (W1, "INFO", "10:00:21", {"extensible_kv_cache": True, "kv_cache_extended_blocks": 3990,
                                 "kv_cache_extended_gib": 62.34}),
    9: (CORE, "INFO", "10:00:22", {"kv_cache_device": "GPU", "kv_cache_tokens": TOKENS_AFTER,
                                   "max_concurrency": 31.17, "max_concurrency_tokens_per_request": 32768}),
    10: (API, "INFO", "10:00:40", {
        "engine": 0, "prompt_throughput": 1301.0, "generation_throughput": 1924.0, "running": 30, "waiting": 0,
        "gpu_kv_cache_usage_pct": 4.8, "prefix_cache_hit_rate_pct": 0.0, "device": "GPU"}),
    11: (API, "INFO", "10:00:50", {
        "engine": 0, "prompt_throughput": 0.0, "generation_throughput": 2210.4, "running": 30, "waiting": 0,
        "gpu_kv_cache_usage_pct": 8.5, "prefix_cache_hit_rate_pct": 61.5, "device": "GPU"}),
    12: (CORE, "WARNING", "10:01:00", {"ft_fault": "AcceleratorError"}),
    13: (CORE, "INFO", "10:01:00", {"ft_engine": 0, "ft_status": "UNHEALTHY"}),
    **dict.fromkeys(range(14, 20)),
    20: (API, "INFO", "10:01:01", {"rejected_status": "unhealthy", "rejected_request": "cmpl-8f2a-0"}),
    21: (API, "INFO", "10:01:01", {"rejected_status": "unhealthy", "rejected_request": "chatcmpl-77"}),
    22: (W0, "INFO", "10:01:02", {"ft_expert_logical": 256, "ft_ep_world_size": 8, "ft_expert_reassignments": 32}),
    23: (CORE, "INFO", "10:01:03", {"ft_engine": 0, "ft_removed_ranks": (3,), "ft_dead_ranks": (1, 3)}),
    24: (CORE, "INFO", "10:01:04", {"ft_engine": 0, "ft_status": "HEALTHY"}),
    25: (CORE, "WARNING", "10:01:10", {"offload_failed_job": "store", "offload_job_id": 41,
                                       "offload_chunks_dropped": 6}),
    26: (CORE, "WARNING", "10:01:11", {"offload_failed_job": "load", "offload_job_id": 42,
                                       "offload_request": "cmpl-9c1d-0"}),
    27: (W0, "WARNING", "10:01:12", {"breaker": "Mooncake lookup", "breaker_failures": 3,
                                     "breaker_cooldown_seconds": 5.0}),
    28: (CORE, "INFO", "10:01:30", {"ft_engine": 1, "ft_status": "DEAD"}),
    **dict.fromkeys(range(29, 35)),
    35: (CORE, "ERROR", "10:01:35", {"ft_recovery_timeout_seconds": 300, "problem": "ft_recovery_timeout"}),
}
RAY_REPEATED = {11: 3, 25: 2, 26: 2}
"""The lines Ray deduplicated in ray_serve.log, and the count of each suffix."""
OFF = {
    1: (API, "INFO", "10:00:00", {"extensible_kv_cache": False}),
    2: (CORE, "WARNING", "10:00:01", {"extensible_kv_cache": False}),
}
KINDS = {"engine": "stats", "available_kv_cache_gib": "info"}


def lines(name: str) -> list[str]:
    """The file's lines split at `\\n` alone, as every reader splits them (vLLM joins a traceback's lines
    with `\\r\\n`)."""
    return (DATA / name).read_bytes().decode().split("\n")[:-1]


def records(name: str) -> dict[int, dict[str, Any] | None]:
    return {number: None if (e := parse_line(text)) is None else {"kind": e.kind, **e.model_dump(exclude_defaults=True, exclude={"pid"})}
            for number, text in enumerate(lines(name), 1)}


def expected(table: dict[int, Any], repeated: dict[int, int]) -> dict[int, dict[str, Any] | None]:
    out: dict[int, dict[str, Any] | None] = {}
    for number, row in table.items():
        if row is None:
            out[number] = None
            continue
        process, level, clock, fields = row
        out[number] = {"kind": "stats" if "engine" in fields else "info", "stamp": f"11-20 {clock}",
                       "level": level, "process": process,
                       **({"repeated": repeated[number]} if number in repeated else {}), **fields}
    return out


@pytest.mark.parametrize(("name", "table", "repeated"), [
    ("serve_20261120_100000.log", SERVE, {}),
    ("ray_serve.log", SERVE, RAY_REPEATED),
    ("extensible_off.log", OFF, {}),
], ids=["plain", "ray-serve", "extensible-off"])
def test_every_value_of_every_record_at_its_line(
    name: str, table: dict[int, Any], repeated: dict[int, int]
) -> None:
    got = records(name)
    want = expected(table, repeated)
    assert got.keys() == want.keys()
    for number in want:
        assert got[number] == want[number], f"{name}:{number}"


def test_ray_log_reads_like_the_plain_one_but_for_the_count() -> None:
    plain, ray = records("serve_20261120_100000.log"), records("ray_serve.log")
    for number, record in ray.items():
        if record is not None:
            record.pop("repeated", None)
        assert record == plain[number]


@pytest.mark.parametrize(("text", "want"), [
    ("x [repeated 3x across cluster]", ("x", 3)),
    ("x [repeated 12x across cluster] (Ray deduplicates logs by default. Set RAY_DEDUP_LOGS=0 to disable "
     "log deduplication, or see https://docs.ray.io/en/master/x.html#log-deduplication for more options.)",
     ("x", 12)),
    ("x [repeated 3x across cluster]\r", ("x", 3)),
    ("x [repeated 0x across cluster]", ("x [repeated 0x across cluster]", None)),  # Ray prints 2 and more
    ("x [repeated 3x across cluster] and more", ("x [repeated 3x across cluster] and more", None)),
    ("x [repeated ", ("x [repeated ", None)),
    ("no suffix", ("no suffix", None)),
])
def test_ray_repeats(text: str, want: tuple[str, int | None]) -> None:
    assert ray_repeats(text) == want
