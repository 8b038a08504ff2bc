"""A real `logwatch watch --from-start` over a log of vLLM 0.33.0's new lines (as its format strings
print them): each new metric is on /metrics with the type and labels the catalogue (and so
docs/metrics.md) gives it, with the values the lines carry."""

from __future__ import annotations

from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families
from support import run_watch

from vllm_logwatch.exporting.catalogue import METRICS

H = "(APIServer pid=1) INFO 12-01 10:00:{s:02d} [loggers.py:257] "
STATS = (
    "Engine 000: Avg prompt throughput: 10.0 tokens/s, Avg generation throughput: 20.0 tokens/s, Running: 2 "
    "reqs, Waiting: 0 reqs, GPU KV cache usage: 5.0%, Prefix cache hit rate: 0.0%, KV fetch: 1 waiting to "
    "start, 2 in progress, 3 completed waiting, Corrupted: 1 reqs"
)
LINES = [
    "(APIServer pid=1) INFO 12-01 10:00:00 [grpc_server.py:64] vLLM gRPC server args: Namespace(model='Qwen/"
    "Qwen3-0.6B', port=50051, max_model_len=4096)",
    "(APIServer pid=1) INFO 12-01 10:00:00 [loggers.py:427] 1 Engines: vllm cache_config_info with "
    "initialization "
    "after num_gpu_blocks is: 4096",
    H.format(s=1) + STATS,
    H.format(s=1) + "KV Transfer metrics: vllm:kv_offload_store_bytes=2048, vllm:kv_offload_load_bytes=1024, "
    "vllm:kv_offload_store_time=0.5, vllm:kv_offload_store_size_count=2, "
    "vllm:kv_offload_allocation_failure=1, "
    "vllm:kv_offload_cpu_cache_usage_perc=0.25, vllm:kv_offload_tiering_read_bytes:('1:fs',)=4096, "
    "vllm:kv_offload_tiering_write_time:('1:fs',)=0.125, "
    "vllm:kv_offload_tiering_promotion_latency_seconds:('1:fs', 'success')_count=3, "
    "vllm:kv_offload_tiering_promotion_latency_seconds:('1:fs', 'success')_sum=0.75, "
    "vllm:kv_offload_tiering_cascade_job_failures:('1:fs',)=1, an odd key, "
    "HiSparse hot-buffer hits=75, HiSparse hot-buffer misses=25, HiSparse host-to-device bytes=8192, "
    "HiSparse host KV cache usage %=50.0",
    "(EngineCore_DP0 pid=2) INFO 12-01 10:00:02 [abstract.py:408] It took 1.500000 seconds to fall asleep.",
    "(Worker_DP0_EP0 pid=3) INFO 12-01 10:00:03 [eplb_state.py:634] EPLB step: 10 for model Qwen/Qwen3-0.6B: "
    "avg_tokens=100.00, max_tokens=125, balancedness=0.8000, steps until the next rearrangement: 5",
    "(Worker_DP0_EP0 pid=3) INFO 12-01 10:00:03 [eplb_state.py:958] Rearranged experts   in 2.50 s.",
    "(DPSupervisor pid=4) INFO 12-01 10:00:04 [dp_supervisor.py:450] DPSupervisor probe found 1 unhealthy DP "
    "Servers.",
    "(DPSupervisor pid=4) INFO 12-01 10:00:04 [dp_supervisor.py:488] DPSupervisor found 2 exited DP Servers.",
]
E = {"engine": "0", "model_name": "Qwen/Qwen3-0.6B"}
EXPECTED: list[tuple[str, dict[str, str], float]] = [
    ("offload_bytes", {**E, "direction": "store"}, 2048),
    ("offload_bytes", {**E, "direction": "load"}, 1024),
    ("offload_time_seconds", {**E, "direction": "store"}, 0.5),
    ("offload_operations", {**E, "direction": "store"}, 2),
    ("offload_failures", {**E, "reason": "allocation"}, 1),
    ("offload_cpu_cache_usage_ratio", E, 0.25),
    ("offload_tier_bytes", {**E, "tier": "1:fs", "direction": "read"}, 4096),
    ("offload_tier_time_seconds", {**E, "tier": "1:fs", "direction": "write"}, 0.125),
    ("offload_tier_promotions", {**E, "tier": "1:fs", "result": "success"}, 3),
    ("offload_tier_promotion_seconds", {**E, "tier": "1:fs", "result": "success"}, 0.75),
    ("offload_tier_job_failures", {**E, "tier": "1:fs", "operation": "cascade"}, 1),
    ("hisparse_lookups", {**E, "result": "hit"}, 75),
    ("hisparse_lookups", {**E, "result": "miss"}, 25),
    ("hisparse_hit_ratio", E, 0.75),
    ("hisparse_host_to_device_bytes", E, 8192),
    ("hisparse_host_cache_usage_ratio", E, 0.5),
    ("kv_fetch_requests", {**E, "stage": "in_progress"}, 2),
    ("corrupted_requests", E, 1),
    ("asleep", {}, 1),
    ("sleep_transitions", {"transition": "sleep"}, 1),
    ("sleep_transition_seconds", {"transition": "sleep"}, 1.5),
    ("dp_servers_unhealthy", {}, 1),
    ("dp_servers_exited", {}, 2),
    ("eplb_balancedness", {}, 0.8),
    ("eplb_rearrangement_seconds", {}, 2.5),
    ("eplb_rearrangements", {}, 1),
    ("kv_cache_blocks", {"model_name": "Qwen/Qwen3-0.6B"}, 4096),
    ("problems", {"problem": "dp_server_unhealthy"}, 1),
    ("problems", {"problem": "dp_server_exited"}, 1),
    ("parse_errors", {"what": "transfer_key"}, 1),
    ("engine_stalled", E, 0),
]


def test_each_new_metric_is_served_with_its_type_and_labels(tmp_path: Path) -> None:
    log = tmp_path / "serve_20261201_100000.log"
    log.write_text("\n".join(LINES) + "\n", encoding="utf-8")
    specs = {m.name: m for m in METRICS}
    with run_watch(log, "--from-start", "--poll-interval", "0.1", log_dir=tmp_path) as watch:
        watch.wait_sample("vllm_logwatch_dp_servers_exited", {}, 2)
        families = {f.name: f for f in text_string_to_metric_families(watch.get("/metrics").text)}
    for short, labels, value in EXPECTED:
        spec = specs["vllm_logwatch_" + short]
        family = families[spec.name]
        assert family.type == spec.type, short
        found = [
            s
            for s in family.samples
            if not s.name.endswith("_created") and all(s.labels.get(k) == v for k, v in labels.items())
        ]
        assert found, (short, labels)
        assert set(found[0].labels) == set(spec.labels), (short, found[0].labels)
        assert found[0].value == value, (short, labels, found[0].value)
