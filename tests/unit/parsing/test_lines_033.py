"""vLLM 0.33.0's lines around the stats line, written as its format strings print them (our own
examples, from the source): the offloading connectors' transfer keys with label tuples, HiSparse,
MooncakeStore and HF3FS, the DP supervisor, the gRPC launcher, sleep mode, EPLB, the aggregated
num_gpu_blocks line, JSON records' `vllm_process_name`, and the six-line start-up logo."""

from __future__ import annotations

import json
import time
from dataclasses import asdict
from typing import Any

import pytest
from test_parse_line import check, p

from vllm_logwatch.parsing import needles
from vllm_logwatch.parsing.events import OffloadSample, TransferStats
from vllm_logwatch.parsing.line import parse_line, scan_block
from vllm_logwatch.parsing.needles import LIVE_NEEDLES as NEEDLES

H = "(APIServer pid=1) INFO 12-01 10:00:00 [metrics.py:108] "
CORE = "(EngineCore_DP0 pid=88) INFO 12-01 10:00:00 [abstract.py:408] "
SUP = "(DPSupervisor pid=7) INFO 12-01 10:00:00 [dp_supervisor.py:450] "


def o(name: str, value: float, labels: tuple[str, ...] = (), suffix: str = "") -> OffloadSample:
    return OffloadSample(name=name, labels=labels, value=value, suffix=suffix)  # type: ignore[arg-type]


TIERED = (
    "KV Transfer metrics: vllm:kv_offload_store_bytes=2097152, vllm:kv_offload_store_time=0.0125, "
    "vllm:kv_offload_store_size_count=2, vllm:kv_offload_store_size_sum=2097152, "
    "vllm:kv_offload_lookup_sync_delay_seconds_count=40, "
    "vllm:kv_offload_lookup_sync_delay_seconds_sum=0.0031, "
    "vllm:kv_offload_cpu_cache_usage_perc=0.375, vllm:kv_offload_tiering_read_bytes:('1:fs',)=1048576, "
    "vllm:kv_offload_tiering_read_time:('1:fs',)=0.02, "
    "vllm:kv_offload_tiering_promotion_latency_seconds:('1:fs', 'success')_count=3, "
    "vllm:kv_offload_tiering_promotion_latency_seconds:('1:fs', 'success')_sum=0.061, "
    "vllm:kv_offload_tiering_promotion_job_failures:('1:fs',)=1, vllm:kv_offload_allocation_failure=2"
)
CASES = [
    p(
        H + TIERED,
        "transfer",
        {
            "cache": "kv",
            "unreadable_keys": 0,
            "extra": {},
            "successful_transfers": None,
            "offload": (
                o("kv_offload_store_bytes", 2097152),
                o("kv_offload_store_time", 0.0125),
                o("kv_offload_store_size", 2, suffix="count"),
                o("kv_offload_store_size", 2097152, suffix="sum"),
                o("kv_offload_lookup_sync_delay_seconds", 40, suffix="count"),
                o("kv_offload_lookup_sync_delay_seconds", 0.0031, suffix="sum"),
                o("kv_offload_cpu_cache_usage_perc", 0.375),
                o("kv_offload_tiering_read_bytes", 1048576, ("1:fs",)),
                o("kv_offload_tiering_read_time", 0.02, ("1:fs",)),
                o("kv_offload_tiering_promotion_latency_seconds", 3, ("1:fs", "success"), "count"),
                o("kv_offload_tiering_promotion_latency_seconds", 0.061, ("1:fs", "success"), "sum"),
                o("kv_offload_tiering_promotion_job_failures", 1, ("1:fs",)),
                o("kv_offload_allocation_failure", 2),
            ),
        },
        id="kv-transfer-offloading-tiered-0.33-two-label-keys",
    ),
    p(
        H
        + "KV Transfer metrics: vllm:kv_offload_load_bytes=4096, what is this, "
          "vllm:kv_offload_load_time=0.5, "
        "Num successful transfers=oops, vllm:kv_offload_tiering_write_bytes:('2:obj',)=8192",
        "transfer",
        {
            "unreadable_keys": 2,
            "offload": (
                o("kv_offload_load_bytes", 4096),
                o("kv_offload_load_time", 0.5),
                o("kv_offload_tiering_write_bytes", 8192, ("2:obj",)),
            ),
        },
        id="kv-transfer-unknown-key-counted-rest-kept",
    ),
    p(
        H + "KV Transfer metrics: vllm:simple_kv_offload_save_outcomes_total:('stored',)=12, "
        "vllm:simple_kv_offload_save_outcomes_total:('dropped_cpu_full',)=3, "
        "vllm:simple_kv_offload_load_blocks_total=7, "
        "vllm:simple_kv_offload_used_blocks=100, vllm:simple_kv_offload_pending_store_blocks=4",
        "transfer",
        {
            "offload": (
                o("simple_kv_offload_save_outcomes_total", 12, ("stored",)),
                o("simple_kv_offload_save_outcomes_total", 3, ("dropped_cpu_full",)),
                o("simple_kv_offload_load_blocks_total", 7),
                o("simple_kv_offload_used_blocks", 100),
                o("simple_kv_offload_pending_store_blocks", 4),
            ),
        },
        id="kv-transfer-simple-offload-0.33",
    ),
    p(
        H + "KV Transfer metrics: HiSparse hot-buffer hits=900, HiSparse hot-buffer misses=100, "
        "HiSparse host-to-device bytes=52428800, HiSparse host KV cache usage %=41.5",
        "transfer",
        {
            "hisparse_hits": 900,
            "hisparse_misses": 100,
            "hisparse_host_to_device_bytes": 52428800,
            "hisparse_host_cache_usage_pct": 41.5,
            "extra": {},
        },
        id="kv-transfer-hisparse-0.33",
    ),
    p(
        H
        + "KV Transfer metrics: load_get_count=4, load_get_avg_ms=1.25, load_get_p90_ms=2.5, "
          "load_get_total_keys=16, "
        "load_get_total_bytes=65536, load_get_failed_keys=1, load_get_error_count=1, save_put_count=2, "
        "save_put_avg_ms=3.0, save_put_p90_ms=3.5, save_put_total_keys=8, save_put_total_bytes=32768, "
        "save_put_failed_keys=0, save_put_error_count=2",
        "transfer",
        {
            "failed_transfers": 3,
            "unreadable_keys": 0,
        },
        id="kv-transfer-mooncake-store-0.33",
    ),
    p(
        H + "KV Transfer metrics: Num transfers task=5, Num save task success=3, Num save task failed=1, "
        "Num load task success=1, Num load task failed=2, Avg save duration (ms)=4.5, P90 save "
        "duration (ms)=6.0, "
        "Avg load duration (ms)=2.0, P90 load duration (ms)=2.5",
        "transfer",
        {
            "successful_transfers": 4,
            "failed_transfers": 3,
            "extra": {  # the saves and loads apart too (each sum alone lost two of the four counts)
                "num_transfers_task": 5.0,
                "num_save_task_success": 3.0,
                "num_save_task_failed": 1.0,
                "num_load_task_success": 1.0,
                "num_load_task_failed": 2.0,
                "avg_save_duration_ms": 4.5,
                "p90_save_duration_ms": 6.0,
                "avg_load_duration_ms": 2.0,
                "p90_load_duration_ms": 2.5,
            },
        },
        id="kv-transfer-hf3fs-0.33",
    ),
    p(
        H + "KV Transfer metrics: NixlConnector={'Num successful transfers': 3, 'Avg xfer time (ms)': 1.5}, "
        "OffloadingConnector={'vllm:kv_offload_store_bytes': 4096, "
        "\"vllm:kv_offload_tiering_chunk_hits:('0:primary',)\": 6}",
        "transfer",
        {
            "successful_transfers": 3,
            "avg_transfer_ms": 1.5,
            "unreadable_keys": 0,
            "offload": (
                o("kv_offload_store_bytes", 4096),
                o("kv_offload_tiering_chunk_hits", 6, ("0:primary",)),
            ),
        },
        id="kv-transfer-multiconnector-offloading-dict-0.33",
    ),
    # The DP supervisor (`--data-parallel-supervisor-port`), at INFO.
    p(
        SUP + "DPSupervisor probe found 2 unhealthy DP Servers.",
        "info",
        {"dp_unhealthy_servers": 2, "problem": "dp_server_unhealthy", "process": "DPSupervisor"},
        id="dp-unhealthy",
    ),
    p(
        SUP + "DPSupervisor found 1 exited DP Servers.",
        "info",
        {"dp_exited_servers": 1, "problem": "dp_server_exited"},
        id="dp-exited",
    ),
    # `vllm serve --grpc`
    p(
        "(MainProcess pid=1) INFO 12-01 10:00:00 [grpc_server.py:64] vLLM gRPC server args: "
        "Namespace(model='Qwen/"
        "Qwen3-0.6B', host='0.0.0.0', port=50051, max_model_len=4096, tensor_parallel_size=2, "
        "data_parallel_size=1, disable_log_stats=False)",
        "info",
        {"model": "Qwen/Qwen3-0.6B", "port": 50051, "max_model_len": 4096, "tensor_parallel_size": 2},
        id="grpc-args",
    ),
    p(
        "(MainProcess pid=1) INFO 12-01 10:00:00 [grpc_server.py:131] vLLM gRPC server started on "
        "0.0.0.0:50051",
        "info",
        {"server_listening": True, "port": 50051},
        id="grpc-started",
    ),
    # Sleep mode (`--enable-sleep-mode`).
    p(
        CORE + "It took 2.345678 seconds to fall asleep.",
        "info",
        {"asleep": True, "sleep_seconds": 2.345678},
        id="sleep-fall-asleep",
    ),
    p(
        CORE + "It took 0.812345 seconds to wake up tags ['weights'].",
        "info",
        {"asleep": True, "wake_seconds": 0.812345},
        id="sleep-wake-weights-only",
    ),
    p(
        CORE + "It took 1.250000 seconds to wake up tags ['kv_cache'].",
        "info",
        {"asleep": False, "wake_seconds": 1.25},
        id="sleep-wake-kv-cache",
    ),
    p(
        CORE + "It took 1.500000 seconds to wake up tags {'weights', 'kv_cache'}.",
        "info",
        {"asleep": False, "wake_seconds": 1.5},
        id="sleep-wake-all",
    ),
    p(
        CORE + "It took 0.100000 seconds to discard tags {'kv_cache'}.",
        "info",
        {"asleep": True, "discard_seconds": 0.1},
        id="sleep-discard",
    ),
    # EPLB with log_balancedness.
    p(
        "(Worker_DP0_EP0 pid=90) INFO 12-01 10:00:00 [eplb_state.py:634] EPLB step: 3000 for model "
        "Qwen/Qwen3-30B-A3B: avg_tokens=1234.56, max_tokens=1500, balancedness=0.8230, steps until the next "
        "rearrangement: 0",
        "info",
        {"eplb_balancedness": 0.823, "eplb_avg_tokens": 1234.56, "eplb_max_tokens": 1500},
        id="eplb-step",
    ),
    p(
        "(Worker_DP0_EP0 pid=90) INFO 12-01 10:00:00 [eplb_state.py:958] Rearranged experts   in 1.23 s.",
        "info",
        {"eplb_rearrange_seconds": 1.23},
        id="eplb-rearranged",
    ),
    p(
        "(Worker_DP0_EP0 pid=90) INFO 12-01 10:00:00 [eplb_state.py:958] Rearranged experts  "
        "(profile)  in 0.50 s.",
        "info",
        {"eplb_rearrange_seconds": 0.5},
        id="eplb-rearranged-profile",
    ),
    # JSON records (`--logging-config.formatter json`) carry vLLM's own process name.
    p(
        json.dumps(
            {
                "asctime": "2026-12-01 10:00:00,123",
                "levelname": "INFO",
                "name": "vllm.v1.metrics.loggers",
                "processName": "MainProcess",
                "process": 1,
                "vllm_process_name": "APIServer",
                "message": "Engine 000: Avg prompt throughput: 1.0 tokens/s, Avg generation throughput: 2.0 "
                "tokens/s, Running: 1 reqs, Waiting: 0 reqs, GPU KV cache usage: 1.0%, Prefix cache "
                "hit rate: 0.0%",
            }
        ),
        "stats",
        {"process": "APIServer", "running": 1},
        id="json-vllm-process-name",
    ),
]


@pytest.mark.parametrize(("line", "kind", "fields"), CASES)
def test_033_line_table(line: str, kind: str | None, fields: dict[str, Any]) -> None:
    check(parse_line(line), kind, fields)
    assert scan_block(line.encode(), 1)[1]  # the live scanner hands it over


def test_every_needle_of_a_new_kind_is_live() -> None:
    """The transfer lines hold the transfer needle; the others pass the live needle table."""
    for case in CASES:
        line, kind = case.values[0], case.values[1]
        if kind == "transfer":
            assert any(n in line.encode() for n in needles.TRANSFER_NEEDLES)
        assert any(n in line.encode() for n in NEEDLES) or "HTTP/" in line


LOGO_033 = [  # `log_version_and_model` with the monochrome template: six physical lines, \r\n between
    "(APIServer pid=1) INFO 12-01 10:00:00 [startup.py:38] \r",
    "(APIServer pid=1) INFO 12-01 10:00:00 [startup.py:38]        █     █     █▄   ▄█\r",
    "(APIServer pid=1) INFO 12-01 10:00:00 [startup.py:38]  ▄▄ ▄█ █     █     █ ▀▄▀ █  version 0.33.0\r",
    "(APIServer pid=1) INFO 12-01 10:00:00 [startup.py:38]   █▄█▀ █     █     █     █  model   "
    "Qwen/Qwen3-0.6B\r",
    "(APIServer pid=1) INFO 12-01 10:00:00 [startup.py:38]    ▀▀  ▀▀▀▀▀ ▀▀▀▀▀ ▀     ▀\r",
    "(APIServer pid=1) INFO 12-01 10:00:00 [startup.py:38] ",
]


def test_the_six_line_logo_gives_the_version_and_the_model_and_nothing_else() -> None:
    events = [parse_line(line) for line in LOGO_033]
    got = [
        {k: v for k, v in asdict(e).items() if v is not None and k not in {"stamp", "level", "process", "pid",
                                                                            "kind"}} if e else None
        for e in events
    ]
    assert got == [
        None,
        None,
        {"vllm_version": "0.33.0", "new_launch": True},
        {"model": "Qwen/Qwen3-0.6B", "new_launch": False},
        None,
        None,
    ]


def test_hostile_transfer_and_runtime_lines_are_read_in_linear_time() -> None:
    """Long damaged lines of the new kinds (open brackets, endless label tuples, long numbers) stay fast."""
    lines = [
        H + "KV Transfer metrics: " + "vllm:kv_offload_x:('" * 20_000 + "=1",
        H
        + "KV Transfer metrics: "
        + ", ".join(["vllm:kv_offload_tiering_read_bytes:('1:fs', 'a'"] * 20_000)
        + "=1",
        H + "KV Transfer metrics: a=1, " + "(" * 100_000 + ", b=2",
        CORE + "It took " + "1" * 100_000 + " seconds to fall asleep.",
        SUP + "DPSupervisor probe found " + "9" * 100_000 + " unhealthy DP Servers.",
        "(W pid=1) INFO 12-01 10:00:00 [eplb_state.py:634] EPLB step: 1 for model " + "m" * 100_000,
    ]
    start = time.perf_counter()
    events = [parse_line(line) for line in lines]
    assert time.perf_counter() - start < 2.0
    third = events[2]
    assert (
        isinstance(third, TransferStats)
        and third.extra == {"a": 1.0, "b": 2.0}
        and third.unreadable_keys == 1
    )
