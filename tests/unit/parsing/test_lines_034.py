# ruff: noqa: E501  (each record's row is kept whole)
"""vLLM 0.34.0's new lines, as its own formatter and format strings print them (tests/data/vllm-0.34/,
made by its `make_logs.py`): the KV cache sized after warm-up, fault tolerance, KV offload failures and
the connectors' circuit breaker, each record read whole at its line; and the same log as Ray Serve's
driver prints it (nested coloured actor prefixes, `[repeated Nx across cluster]`) read alike."""

from __future__ import annotations

import json
import time
from dataclasses import MISSING, fields
from typing import Any

import pytest
from support import TESTS

from vllm_logwatch.parsing.assemble import iter_events
from vllm_logwatch.parsing.envelope import ray_repeats
from vllm_logwatch.parsing.events import LogMessage, ServerInfo, Unparsed
from vllm_logwatch.parsing.line import parse_line, scan_block
from vllm_logwatch.parsing.needles import LAUNCH_NEEDLES

DATA = TESTS / "data" / "vllm-0.34"
W0, W1, CORE, API = "Worker_TP0", "Worker_TP1", "EngineCore_DP0", "APIServer"
TOKENS_BEFORE, TOKENS_AFTER = 1_167_360, 1_021_440

# line -> (process, level, stamp, every field of the record that is not its default); None: no record
# (a traceback's lines: the fault is the status line before them; its last line names the exception, which
# the assembler keeps on the fault's record).
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
    **dict.fromkeys(range(14, 19)),
    19: (CORE, "INFO", "10:01:00", {"kind": "log", "location": "engine_core_sentinel.py:171",
                                    "exception": "torch.AcceleratorError"}),
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
    **dict.fromkeys(range(29, 34)),
    34: (CORE, "INFO", "10:01:30", {"kind": "log", "location": "engine_core_sentinel.py:171",
                                    "exception": "torch.AcceleratorError"}),
    35: (CORE, "ERROR", "10:01:35", {"ft_recovery_timeout_seconds": 300, "problem": "ft_recovery_timeout"}),
}
RAY_REPEATED = {11: 3, 25: 2, 26: 2}
"""The lines Ray deduplicated in ray_serve.log, and the count of each suffix."""
OFF = {
    1: (API, "INFO", "10:00:00", {"extensible_kv_cache": False}),
    2: (CORE, "WARNING", "10:00:01", {"extensible_kv_cache": False}),
}
KINDS = {"engine": "stats", "available_kv_cache_gib": "info"}
def tb(location: str, exception: str | None = None) -> dict[str, Any]:
    """A line of a worker failure's traceback (each repeats the ERROR header): a log line alone, which the
    assembler folds into the failure's record (`test_a_failure_and_its_traceback_are_one_record`); the
    last names the exception."""
    return {"kind": "log", "location": location, **({"exception": exception} if exception else {})}


def o(name: str, value: float, labels: tuple[str, ...] = (), suffix: str = "") -> dict[str, Any]:
    """An offload sample as `_given` gives it."""
    return {"name": name, "value": value, **({"labels": labels} if labels else {}),
            **({"suffix": suffix} if suffix else {})}


CHECKPOINT = {"checkpoint_event": "control_start", "checkpoint_op": "Lock", "checkpoint_pids": (4301,),
              "checkpoint_monotonic_seconds": 812.25}
RUNTIME: dict[int, tuple[str, str, str, dict[str, Any]] | None] = {
    1: (API, "INFO", "10:00:00", {"kind": "transfer", "cache": "kv", "offload": (
        o("kv_offload_store_bytes", 2097152), o("kv_offload_store_time", 0.0125),
        o("kv_offload_tiering_read_bytes", 1048576, ("1:fs",)),
        o("kv_offload_tiering_promotion_job_failures", 1, ("1:fs",)),
        o("kv_offload_tiering_deferred_release_chunks", 4, ("1:fs",)),
        o("kv_offload_tiering_deferred_release_hold_seconds", 2, ("1:fs",), "count"),
        o("kv_offload_tiering_deferred_release_hold_seconds", 0.35, ("1:fs",), "sum"))}),
    2: (W0, "ERROR", "10:00:01", {"offload_worker_job": 17, "offload_worker_stage": "io"}),
    **{n: (W0, "ERROR", "10:00:01", tb("worker.py:144")) for n in range(3, 6)},
    6: (W0, "ERROR", "10:00:01", tb("worker.py:144", "OSError")),
    7: (W0, "ERROR", "10:00:02", {"offload_worker_job": 18, "offload_worker_direction": "store",
                                  "offload_worker_stage": "transfer"}),
    **{n: (W0, "ERROR", "10:00:02", tb("gpu_worker.py:941")) for n in range(8, 11)},
    11: (W0, "ERROR", "10:00:02", tb("gpu_worker.py:941", "OSError")),
    12: (W0, "ERROR", "10:00:02", {"offload_worker_job": 19, "offload_worker_direction": "load",
                                   "offload_worker_stage": "polling"}),
    **{n: (W0, "ERROR", "10:00:02", tb("gpu_worker.py:950")) for n in range(13, 16)},
    16: (W0, "ERROR", "10:00:02", tb("gpu_worker.py:950", "OSError")),
    17: (W0, "ERROR", "10:00:03", {"offload_worker_job": 20, "offload_worker_stage": "waiting"}),
    **{n: (W0, "ERROR", "10:00:03", tb("gpu_worker.py:958")) for n in range(18, 21)},
    21: (W0, "ERROR", "10:00:03", tb("gpu_worker.py:958", "OSError")),
    22: (CORE, "ERROR", "10:00:04", {"tier_poll_failed": True}),
    **{n: (CORE, "ERROR", "10:00:04", tb("manager.py:443")) for n in range(23, 26)},
    26: (CORE, "ERROR", "10:00:04", tb("manager.py:443", "TimeoutError")),
    27: (CORE, "WARNING", "10:00:14", {"tier_poll_failed_rounds": 12, "tier_poll_failing_seconds": 10.0}),
    28: (CORE, "ERROR", "10:00:34", {"tier_poll_backoff_seconds": 5.0, "tier_poll_failing_seconds": 30.0,
                                     "problem": "kv_tier_poll_failing"}),
    29: (W0, "ERROR", "10:00:35", {"kv_lookup_failed_request": "cmpl-5e1f-0"}),
    30: (W0, "INFO", "10:00:36", {"eplb_layers_rearranged": 48, "eplb_layers": 48, "eplb_model": "Qwen/Qwen3-30B-A3B",
                                  "eplb_rearrange_seconds": 2.35, "eplb_async": True}),
    31: (CORE, "INFO", "10:00:37", CHECKPOINT),
    32: (CORE, "INFO", "10:00:37", {**CHECKPOINT, "checkpoint_event": "control", "checkpoint_rc": 0,
                                    "checkpoint_error": "CUDA_SUCCESS", "checkpoint_state_before": 0,
                                    "checkpoint_rc_before": 0, "checkpoint_state_after": 1,
                                    "checkpoint_rc_after": 0, "checkpoint_seconds": 0.0123,
                                    "checkpoint_monotonic_seconds": 812.5}),
    33: (CORE, "INFO", "10:00:38", {"checkpoint_event": "boundary", "checkpoint_op": "Checkpoint",
                                    "checkpoint_pids": (4301, 4302), "checkpoint_monotonic_seconds": 813.75}),
    34: (CORE, "INFO", "10:00:39", {"checkpoint_event": "control_failed", "checkpoint_op": "Restore",
                                    "checkpoint_pids": (4301, 4302), "checkpoint_monotonic_seconds": 844.0,
                                    "problem": "cuda_checkpoint_failed"}),
    35: (CORE, "INFO", "10:00:40", {"checkpoint_event": "stage_error", "checkpoint_op": "Unlock",
                                    "checkpoint_pids": (4302,), "checkpoint_monotonic_seconds": 845.5,
                                    "problem": "cuda_checkpoint_failed"}),
    36: (CORE, "INFO", "10:00:50", {"max_model_len": 40960, "autofit": "fits", "autofit_kv_gib": 70.12,
                                    "autofit_kv_device": "GPU", "autofit_after_warmup": False,
                                    "autofit_tentative": True}),
    37: (CORE, "INFO", "10:00:51", {"autofit_from_len": 131072, "max_model_len": 65536, "autofit": "reduced",
                                    "autofit_kv_gib": 30.5, "autofit_kv_device": "GPU", "autofit_host_gib": 8.0,
                                    "autofit_after_warmup": False, "autofit_tentative": True}),
    38: (CORE, "INFO", "10:00:52", {"max_model_len": 65536, "autofit": "fits", "autofit_kv_gib": 28.25,
                                    "autofit_kv_device": "GPU", "autofit_after_warmup": True}),
    39: (CORE, "INFO", "10:00:53", {"autofit_from_len": 131072, "max_model_len": 49152, "autofit": "reduced",
                                    "autofit_kv_gib": 24.0, "autofit_kv_device": "GPU",
                                    "autofit_after_warmup": True, "autofit_tentative": False}),
    40: (CORE, "WARNING", "10:00:54", {"autofit_from_len": 131072, "max_model_len": 2048, "autofit": "reduced",
                                       "autofit_kv_gib": 0.5, "autofit_kv_device": "GPU",
                                       "autofit_after_warmup": False, "autofit_tentative": False}),
    41: (CORE, "INFO", "10:00:55", {"max_model_len": 2048, "autofit": "attention_free"}),
    42: (API, "INFO", "10:01:00", {"grpc_drain_timeout_seconds": 30}),
    43: (API, "INFO", "10:01:01", {"grpc_drain_cancelled": True}),
    44: (API, "INFO", "10:01:02", {"grpc_stopped": "engine"}),
    45: (API, "INFO", "10:01:03", {"grpc_stopped": "server"}),
}
"""runtime.log: vLLM 0.34's other new lines (tiered offload's two new transfer keys, the offload workers'
failures with their tracebacks, the tier-poll thread, MooncakeStore's lookup error, async EPLB, CUDA
process checkpoints, the auto-fit max_model_len, the gRPC server's drain)."""
EP, SUP = "Worker_DP0_EP0", "DPSupervisor"
V033: dict[int, tuple[str, str, str, dict[str, Any]] | None] = {
    1: (API, "INFO", "10:00:00", {"model": "Qwen/Qwen3-8B", "max_model_len_auto": True}),
    2: (EP, "INFO", "10:00:01", {"eplb_step": 3000, "eplb_model": "Qwen/Qwen3-30B-A3B", "eplb_avg_tokens": 1234.57,
                                 "eplb_max_tokens": 1500, "eplb_balancedness": 0.823,
                                 "eplb_steps_to_rearrangement": 0}),
    3: (EP, "INFO", "10:00:02", {"eplb_rearrange_seconds": 0.5, "eplb_profile": True}),
    4: (EP, "INFO", "10:00:03", {"eplb_rearrange_seconds": 1.23, "eplb_profile": False}),
    5: (API, "INFO", "10:00:04", {"kind": "transfer", "cache": "kv", "successful_transfers": 4,
                                  "failed_transfers": 3, "extra": {
                                      "num_transfers_task": 5.0, "num_save_task_success": 3.0,
                                      "num_save_task_failed": 1.0, "num_load_task_success": 1.0,
                                      "num_load_task_failed": 2.0, "avg_save_duration_ms": 4.5,
                                      "p90_save_duration_ms": 6.0, "avg_load_duration_ms": 2.0,
                                      "p90_load_duration_ms": 2.5}}),
    6: (W0, "ERROR", "10:00:05", {"kv_lookup_failed_request": "cmpl-77-0"}),
    7: (SUP, "INFO", "10:00:10", {"dp_received_signal": "SIGTERM"}),
    8: (SUP, "INFO", "10:00:10", {"dp_forwarded_signal": "SIGTERM"}),
    9: (CORE, "ERROR", "10:00:11", {"tier_poll_failing_seconds": 30.0, "tier_poll_stopped": True,
                                    "problem": "kv_tier_poll_failing"}),
}
"""v033.log: the lines of vLLM 0.33.0 that were read in part (the DP supervisor's signal, the EPLB step's
step and steps to the next rearrangement, `Rearranged experts`' profile run, HF3FS's saves and loads
apart, `--max-model-len auto` in the arguments) or not at all."""



def lines(name: str) -> list[str]:
    """The file's lines split at `\\n` alone, as every reader splits them (vLLM joins a traceback's lines
    with `\\r\\n`)."""
    return (DATA / name).read_bytes().decode().split("\n")[:-1]


def _given(e: Any) -> dict[str, Any]:
    """A record's fields that differ from their defaults (its offload samples' too), but its pid and args."""
    out = {}
    for f in fields(e):
        value = getattr(e, f.name)
        if f.name not in ("pid", "args") and value != (f.default if f.default_factory is MISSING else f.default_factory()):
            out[f.name] = tuple(_given(s) for s in value) if f.name == "offload" else value
    return out


def records(name: str) -> dict[int, dict[str, Any] | None]:
    return {number: None if (e := parse_line(text)) is None else {"kind": e.kind, **_given(e)}
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
    ("runtime.log", RUNTIME, {}),
    ("v033.log", V033, {}),
], ids=["plain", "ray-serve", "extensible-off", "runtime", "v0.33"])
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


def test_a_failure_and_its_traceback_are_one_record() -> None:
    """A worker's failure read as a fact (`I/O failed for job 17`, ERROR) and the traceback after it (its
    lines repeat the ERROR header) are one record: the traceback was a second error record of its own,
    so each offload worker failure counted as two errors. No record keeps the traceback's text."""
    events = list(iter_events(lines("runtime.log")))
    assert [e.line for e in events if e.level == "ERROR"] == [2, 7, 12, 17, 22, 28, 29]
    assert not [e for e in events if isinstance(e, (LogMessage, Unparsed))]
    assert "Input/output" not in repr(events) and "did not answer" not in repr(events)


FAULTS = {"serve_20261120_100000.log": {13: "torch.AcceleratorError", 28: "torch.AcceleratorError"},
          "runtime.log": {2: "OSError", 7: "OSError", 12: "OSError", 17: "OSError", 22: "TimeoutError"}}


@pytest.mark.parametrize("name", ["serve_20261120_100000.log", "ray_serve.log", "runtime.log"])
def test_a_fault_keeps_its_tracebacks_exception_type(name: str) -> None:
    """A fault and its traceback are one record that keeps the traceback's exception type (its last
    line's `Type:`), and nothing of the exception's message; `parse --jsonl --kind all` shows it. The
    type was dropped with the rest of the traceback. No INFO line of a traceback is a record of its own."""
    events = list(iter_events(lines(name)))
    got = {e.line: e.exception for e in events if isinstance(e, (ServerInfo, LogMessage)) and e.exception}
    assert got == FAULTS.get(name, FAULTS["serve_20261120_100000.log"])
    assert not [e for e in events if isinstance(e, LogMessage)]
    assert "illegal memory" not in repr(events) and "Input/output" not in repr(events)


def test_parse_jsonl_shows_a_faults_exception_type(capsys: pytest.CaptureFixture[str]) -> None:
    from vllm_logwatch.cli import main

    assert main(["parse", "--jsonl", "--kind", "all", "--tz", "UTC", str(DATA / "serve_20261120_100000.log")]) == 0
    rows = [json.loads(row) for row in capsys.readouterr().out.splitlines()]
    assert {row["line"]: row["exception"] for row in rows if "exception" in row} == FAULTS[
        "serve_20261120_100000.log"]


@pytest.mark.parametrize("name", ["serve_20261120_100000.log", "ray_serve.log", "extensible_off.log",
                                  "runtime.log", "v033.log"])
def test_nothing_unparsed(name: str) -> None:
    assert not [e.line for e in iter_events(lines(name)) if isinstance(e, Unparsed)]


def test_a_checkpoint_event_keeps_no_free_text() -> None:
    """`CUDA_PROCESS_CHECKPOINT`'s error is an exception's repr when a call failed: only a `CUDA_...` name
    is kept; a damaged event gives no number."""
    head = "(EngineCore_DP0 pid=1) INFO 11-20 10:00:00 [cuda_checkpoint_executor.py:148] CUDA_PROCESS_CHECKPOINT "
    got = parse_line(head + '{"kind": "control", "pid": 7, "op": "Lock", "rc": 2, "error": "<b>x</b>", '
                            '"time_s": "1", "before": [1]}')
    assert isinstance(got, ServerInfo) and (got.checkpoint_rc, got.checkpoint_error, got.checkpoint_seconds,
                                            got.checkpoint_state_before) == (2, None, None, None)
    assert got.problem == "cuda_checkpoint_failed"
    broken = parse_line(head + '{"kind": "control", "pid": }')
    assert isinstance(broken, ServerInfo) and broken.checkpoint_event == "unreadable"


@pytest.mark.parametrize("name", ["runtime.log", "v033.log"])
def test_the_live_scanner_hands_over_every_line_read(name: str) -> None:
    """Each line that gives a record holds a live needle (the one needle table's hooks), so watch reads
    it too; a start-up fact's line holds a launch needle where summary needs it (auto-fit, arguments)."""
    for number, text in enumerate(lines(name), 1):
        if parse_line(text) is not None:
            assert scan_block(text.encode(), 1)[1], f"{name}:{number}"
        if ("max_model_len" in text and "Auto-fit" in text) or "args:" in text:
            assert any(n in text.encode() for n in LAUNCH_NEEDLES), f"{name}:{number}"


def test_long_damaged_lines_of_the_new_kinds_are_read_in_linear_time() -> None:
    head = "(W pid=1) ERROR 11-20 10:00:00 [x.py:1] "
    damaged = [
        "CUDA_PROCESS_CHECKPOINT {" + '"a": [' * 50_000, "CUDA_PROCESS_CHECKPOINT {" + " " * 100_000 + "}",
        "Async EPLB rearranged " + "1" * 100_000, "Mooncake lookup failed for " + "x" * 100_000,
        "Auto-fit max_model_len: reduced from 1 to 2 to fit in available KV cache memory (" + "1" * 100_000,
        "--max-model-len auto reduced max_model_len from 1 to 2 (" + "1.5 GiB GPU + " * 20_000,
        "KV offload tier-poll thread backing off to " + "9" * 100_000,
    ]
    start = time.perf_counter()
    for text in damaged:
        parse_line(head + text)
    assert time.perf_counter() - start < 1.0
