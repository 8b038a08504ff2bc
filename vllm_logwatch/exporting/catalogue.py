"""Every metric name the exporter serves, with its type and meaning: one table for the live
collector, the OpenMetrics backfill writer, the dashboard tests and docs/metrics.md.

Prefix `vllm_logwatch_`; per-engine series carry `engine` and `model_name` (vLLM's own label names).
Percentages from the log become 0-1 ratios; times are seconds.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Literal, NamedTuple

from ..errors import UsageError

PREFIX = "vllm_logwatch_"


class MetricSpec(NamedTuple):
    name: str
    """Full name without the `_total` suffix of counters (prometheus_client adds it)."""
    type: Literal["gauge", "counter", "info", "histogram"]
    labels: tuple[str, ...]
    help: str


_ENGINE = ("engine", "model_name")


def _m(short: str, kind: Literal["gauge", "counter", "info", "histogram"], labels: tuple[str, ...], help_: str) -> MetricSpec:
    return MetricSpec(PREFIX + short, kind, labels, help_)


METRICS: tuple[MetricSpec, ...] = (
    # Last values of the periodic stats line.
    _m("prompt_throughput_tokens_per_second", "gauge", _ENGINE,
       "Avg prompt throughput of the last stats line (vLLM >= 0.16: prefill tokens computed, cache hits excluded)."),
    _m("generation_throughput_tokens_per_second", "gauge", _ENGINE,
       "Avg generation throughput of the last stats line."),
    _m("requests_running", "gauge", _ENGINE, "Requests running at the last stats line."),
    _m("requests_waiting", "gauge", _ENGINE, "Requests waiting at the last stats line (V0: Pending)."),
    _m("requests_swapped", "gauge", _ENGINE, "Requests swapped to CPU at the last stats line (V0 only)."),
    _m("requests_deferred", "gauge", _ENGINE, "Waiting requests deferred for transient reasons (vLLM >= 0.20)."),
    _m("kv_cache_usage_ratio", "gauge", _ENGINE,
       "KV cache usage of the serving device (GPU, XPU, ... or CPU on the CPU backend), 0-1."),
    _m("cpu_swap_kv_cache_usage_ratio", "gauge", _ENGINE, "V0 only: CPU swap-space KV cache usage, 0-1."),
    _m("prefix_cache_hit_ratio", "gauge", _ENGINE,
       "Prefix cache hit rate, 0-1 (V1: window of the last ~1000 requests; V0: cumulative)."),
    _m("external_prefix_cache_hit_ratio", "gauge", _ENGINE, "External (KV connector) prefix cache hit rate, 0-1."),
    _m("mm_cache_hit_ratio", "gauge", _ENGINE, "Multi-modal cache hit rate, 0-1 (window of recent items)."),
    # Counters estimated from the stats lines (the token counters: counted from the step lines when present).
    _m("prompt_tokens", "counter", _ENGINE,
       "Prompt tokens estimated as throughput x stats interval, or the step lines' context tokens when "
       "vLLM prints them (vLLM >= 0.16: computed prefill tokens only)."),
    _m("generation_tokens", "counter", _ENGINE, "Generated tokens estimated as throughput x stats interval, "
       "or counted from the step lines when vLLM prints them."),
    _m("preemptions", "counter", _ENGINE, "Preemptions summed from the stats lines' Preemptions field."),
    _m("stats_lines", "counter", _ENGINE, "Stats lines read for the engine."),
    _m("busy_seconds", "counter", _ENGINE,
       "Seconds of stats windows in which tokens were computed (prompt or generation throughput above 0)."),
    _m("spec_decode_accepted_tokens", "counter", _ENGINE, "Speculative tokens accepted (summed Accepted counts)."),
    _m("spec_decode_drafted_tokens", "counter", _ENGINE, "Speculative tokens drafted (summed Drafted counts)."),
    _m("spec_decode_mean_acceptance_length", "gauge", _ENGINE, "Mean acceptance length of the last spec line."),
    _m("spec_decode_acceptance_ratio", "gauge", _ENGINE, "Draft acceptance rate of the last spec line, 0-1."),
    _m("spec_decode_position_acceptance_ratio", "gauge", (*_ENGINE, "position"),
       "Acceptance rate of each draft position (0 first) of the last spec line, 0-1 (Per-position "
       "acceptance rate; positions past 31 counted in label_overflow)."),
    _m("mfu_flops_per_second", "gauge", _ENGINE,
       "Estimated model FLOP/s per device (GPU) of the last MFU line (--enable-mfu-metrics, vLLM >= 0.14)."),
    _m("mfu_memory_bytes_per_second", "gauge", _ENGINE,
       "Estimated memory bytes read and written per second per device, from the last MFU line (GB/s x 10^9)."),
    # Engine steps and requests, from the detail lines (`--enable-logging-iteration-details`,
    # `--enable-log-requests`, `--enable-log-outputs`): exporting/latency_state.py.
    _m("step_duration_seconds", "histogram", (*_ENGINE, "phase", "batch"),
       "Engine step time from the iteration lines; phase: decode, prefill or mixed; batch: the step's "
       "generation requests, bucketed (0, 1, 2, 3-4, 5-8, ..., 257-512, 513+)."),
    _m("decode_step_seconds", "gauge", _ENGINE, "Elapsed time of the engine's last decode-only step."),
    _m("time_between_tokens_seconds", "histogram", (*_ENGINE, "batch"),
       "From an engine's step line to its next generating step's line (read live, or container stamps), once "
       "per generating stream: the step and what vLLM does between steps (its mean, not single gaps)."),
    _m("requests", "counter", ("model_name", "finish_reason", "lora"),
       "Requests ended (request logging): finish_reason stop, length, abort, ..., unknown (a stream's end "
       "logged without one); lora: an adapter the log loaded, other, or empty for none."),
    _m("request_duration_seconds", "histogram", ("model_name",),
       "End-to-end time of finished requests: Received request line to their last response line."),
    _m("time_to_first_token_seconds", "histogram", ("model_name",),
       "Received request line to the request's first streamed output line (--enable-log-outputs)."),
    _m("requests_untimed", "counter", ("model_name",),
       "Requests counted but not timed: read only by vLLM's 1 s stamps, or their Received line not read."),
    # KV / EC connector transfers (disaggregated prefill, KV offloading): `KV Transfer metrics:` lines.
    _m("transfers", "counter", (*_ENGINE, "cache", "result"),
       "Connector transfers (cache: kv or ec) by result: succeeded, failed, failed_recv."),
    _m("transfer_expired_requests", "counter", (*_ENGINE, "cache"),
       "Requests whose KV blocks expired before the other side fetched them (Num KV expired reqs)."),
    _m("transfer_bytes", "counter", (*_ENGINE, "cache"),
       "Bytes transferred: successful transfers x Avg MB per transfer (MiB, 3 decimals in the log)."),
    _m("transfer_time_seconds", "gauge", (*_ENGINE, "cache", "stat"),
       "Transfer time of the last interval with transfers; stat: avg or p90."),
    _m("transfer_post_time_seconds", "gauge", (*_ENGINE, "cache", "stat"),
       "Time to post a transfer in the last interval with transfers; stat: avg or p90."),
    _m("transfer_throughput_bytes_per_second", "gauge", (*_ENGINE, "cache"),
       "Transfer throughput of the last interval with transfers (bytes / transfer time)."),
    # KV offloading (`--kv-offloading-size`, tiered and simple CPU offload; vLLM 0.33 keys `vllm:kv_offload_*`).
    _m("offload_bytes", "counter", (*_ENGINE, "direction"),
       "Bytes moved by the offloading connector; direction: load (to GPU) or store (from GPU)."),
    _m("offload_time_seconds", "counter", (*_ENGINE, "direction"), "Time spent moving them, by direction."),
    _m("offload_operations", "counter", (*_ENGINE, "direction"), "Offload load and store operations."),
    _m("offload_failures", "counter", (*_ENGINE, "reason"),
       "Offload stores that failed or were dropped; reason: allocation, store_skipped, promotion_allocation, "
       "dropped_cpu_full, dropped_request_gone, dropped_null_block, dropped_not_hashed, other."),
    _m("offload_cpu_cache_usage_ratio", "gauge", _ENGINE, "CPU offload cache usage of the last transfer line, 0-1."),
    _m("offload_tier_bytes", "counter", (*_ENGINE, "tier", "direction"),
       "Bytes read from and written to each secondary tier (tier: vLLM's `N:type`, at most 8, then other)."),
    _m("offload_tier_time_seconds", "counter", (*_ENGINE, "tier", "direction"), "Time of those reads and writes."),
    _m("offload_tier_promotions", "counter", (*_ENGINE, "tier", "result"),
       "Promotions from a tier to the primary one; result: success or failure."),
    _m("offload_tier_promotion_seconds", "counter", (*_ENGINE, "tier", "result"),
       "Summed promotion latency (divide by offload_tier_promotions for the mean)."),
    _m("offload_tier_job_failures", "counter", (*_ENGINE, "tier", "operation"),
       "Failed tier jobs; operation: promotion or cascade."),
    _m("hisparse_lookups", "counter", (*_ENGINE, "result"), "HiSparse hot-buffer lookups; result: hit or miss."),
    _m("hisparse_hit_ratio", "gauge", _ENGINE, "HiSparse hot-buffer hit ratio of the last transfer line, 0-1."),
    _m("hisparse_host_to_device_bytes", "counter", _ENGINE, "Bytes HiSparse copied from host to device."),
    _m("hisparse_host_cache_usage_ratio", "gauge", _ENGINE, "HiSparse host KV cache usage, 0-1."),
    _m("kv_fetch_requests", "gauge", (*_ENGINE, "stage"),
       "Requests fetching KV from a connector at the last stats line (KV fetch field); stage: waiting, "
       "in_progress, completed_waiting."),
    _m("corrupted_requests", "counter", _ENGINE, "Requests with corrupted output, summed from the Corrupted field."),
    # Engine health.
    _m("last_stats_timestamp_seconds", "gauge", _ENGINE, "Unix time of the engine's last stats line."),
    _m("stats_interval_seconds", "gauge", _ENGINE,
       "The interval its tokens are counted with: the configured one (`--stats-interval`; in run mode "
       "`VLLM_LOG_STATS_INTERVAL` when set), else the typical spacing of the engine's stats lines."),
    _m("stats_processes", "gauge", _ENGINE,
       "vLLM processes writing this engine's stats lines at once in the launch (2+: servers share one log; "
       "served only then): tokens are counted per process, the gauges hold whichever wrote last."),
    _m("engine_stalled", "gauge", _ENGINE,
       "1 when requests were running and no stats line came for 3 intervals (idle silence is not a stall)."),
    _m("stats_missing", "gauge", ("reason",),
       "1 when the server runs but prints no stats line; reason: stats_logging_disabled or requests_without_stats."),
    _m("asleep", "gauge", (),
       "1 while the engine sleeps (--enable-sleep-mode: after `fall asleep`, until the KV cache wakes up)."),
    _m("sleep_transitions", "counter", ("transition",), "Sleep-mode lines; transition: sleep, wake_up or discard."),
    _m("sleep_transition_seconds", "gauge", ("transition",), "Duration of the last sleep, wake-up or discard."),
    _m("dp_servers_unhealthy", "gauge", (),
       "DP servers the DP supervisor last found unhealthy (it then shuts down; --data-parallel-supervisor-port)."),
    _m("dp_servers_exited", "gauge", (), "DP servers the DP supervisor last found exited."),
    _m("eplb_balancedness", "gauge", (),
       "Expert load balancedness of the last EPLB step line (mean / max tokens per EP rank; 1 is balanced)."),
    _m("eplb_rearrangement_seconds", "gauge", (),
       "Duration of the last expert rearrangement (EPLB; 0.34's async EPLB's `Async EPLB rearranged` too)."),
    _m("eplb_rearrangements", "counter", (), "Expert rearrangements (EPLB)."),
    _m("engine_fault_tolerance_status", "gauge", ("engine", "status"),
       "1 for the engine's fault-tolerance status from its last `[FT] Engine N status -> S` line (0.34, "
       "--enable-fault-tolerance), 0 for the others; status: healthy, diagnosing, unhealthy, dead, other."),
    _m("engine_faults", "counter", (), "Engine faults (`[FT] Busy loop raised E`), each then recovered or not."),
    _m("rejected_requests", "counter", ("status",),
       "Requests refused because the engine was not healthy (`Engine S - rejecting request R.`); status: "
       "diagnosing, unhealthy, dead, other."),
    _m("kv_offload_job_failures", "counter", ("direction",),
       "KV offload jobs that failed (0.34 offloading connector); direction: store (its chunks dropped) or load."),
    _m("kv_offload_chunks_dropped", "counter", (), "Chunks a failed KV offload store job dropped from the CPU cache."),
    _m("kv_connector_breaker_openings", "counter", ("breaker",),
       "Times a KV connector's circuit breaker opened (e.g. `Mooncake lookup`): it skips requests for a while."),
    # Start-up facts.
    _m("server", "info", ("version", "model_name", "model"), "vLLM version and model from the start-up lines."),
    _m("kv_cache_capacity_tokens", "gauge", ("model_name",), "KV cache size in tokens (start-up line)."),
    _m("kv_cache_blocks", "gauge", ("model_name",),
       "KV cache blocks on the device (start-up: num_gpu_blocks, # GPU blocks)."),
    _m("max_concurrency", "gauge", ("model_name", "tokens_per_request"),
       "Maximum concurrency for max-length requests (start-up line)."),
    _m("kv_cache_capacity_bytes", "gauge", ("model_name", "sizing"),
       "KV cache memory of a worker, x 2^30: sizing after_warmup from `Extended KV cache to N blocks (X GiB)` "
       "(0.34's extensible KV cache), else estimate from `Available KV cache memory: N GiB` (before warm-up)."),
    _m("gpus", "gauge", ("model_name",),
       "GPUs (devices) of the launch: tensor x pipeline x data parallel size from its arguments (1 when unset)."),
    _m("startup_seconds", "gauge", ("model_name", "phase"),
       "Start-up durations of the current launch; phase: model_load, weights_load, torch_compile, "
       "graph_capture, engine_init."),
    _m("launches", "counter", (), "vLLM launches seen (new launch files or start-up banners)."),
    # Requests and messages.
    _m("http_requests", "counter", ("method", "path", "status"), "HTTP requests from uvicorn access lines."),
    _m("log_messages", "counter", ("level",), "WARNING, ERROR and CRITICAL records (a traceback counts once)."),
    _m("problems", "counter", ("problem",), "Known failure lines: engine_dead, out_of_memory, ..."),
    # The exporter itself.
    _m("log_lines", "counter", (), "Log lines read."),
    _m("log_bytes", "counter", (), "Log bytes read."),
    _m("parse_errors", "counter", ("what",),
       "Unreadable lines by kind (ours too); transfer_key: one key of a line. A stats line over 1e9 tokens/s "
       "and a step line whose time is not finite or whose tokens pass 1e9 a second over it are unreadable. "
       "duplicate: a stats line written twice (the same stamp, process, engine and numbers), its copy "
       "left out."),
    _m("unknown_fields", "counter", (), "Stats fields the parser did not know (kept, not lost)."),
    _m("log_rotations", "counter", (), "Log rotations (rename + create) followed."),
    _m("log_truncations", "counter", (), "Log truncations (copytruncate) followed."),
    _m("read_errors", "counter", (), "Errors reading the log files."),
    _m("lines_cut", "counter", (), "Lines longer than the cap, cut."),
    _m("state_errors", "counter", (),
       "Errors reading or writing the state file (--state-file): unreadable at start, or a save that failed."),
    _m("sources", "gauge", ("state",),
       "Sources of a many-source watch (--layout): followed (series of their own), folded (beyond "
       "--max-sources), gone (files gone, series kept for --source-grace)."),
    _m("label_overflow", "counter", ("label",), "Events whose label value was folded into 'other' (bounded labels)."),
    _m("http_invalid_requests", "counter", (),
       "Malformed HTTP requests to this exporter, answered 400 (counted here, not logged)."),
    _m("records_written", "counter", (), "Stats records written to the record stream (--records)."),
    _m("records_dropped", "counter", (),
       "Stats records not written to the record stream (--records): its sink fell behind or a write failed "
       "(or, counted at a restart, the process was killed with them queued)."),
    # Run mode: the supervised vLLM child.
    _m("child_up", "gauge", (), "1 while the supervised vLLM process runs."),
    _m("child_pid", "gauge", (), "PID of the supervised vLLM process."),
    _m("child_start_time_seconds", "gauge", (), "Unix time the supervised vLLM process started."),
    _m("child_restarts", "counter", (), "Restarts of the supervised vLLM process."),
    _m("child_last_exit_code", "gauge", (), "Exit code of the last child (128+N for signal N)."),
    _m("log_file_bytes_written", "counter", (), "Bytes of child output written to the log file."),
    _m("log_file_write_errors", "counter", (), "Failed writes to the log file (full disk, I/O error)."),
    _m("log_file_bytes_dropped", "counter", (), "Bytes of child output not written to the log file."),
    _m("parse_bytes_dropped", "counter", (), "Bytes of child output not parsed because the parser fell behind (file and stdout still got them)."),
    _m("stdout_bytes_dropped", "counter", (), "Bytes of child output not echoed to stdout (its reader went away or fell behind; the log file still got them)."),
)

STARTUP_PHASES: dict[str, str] = {
    "model_load": "model_load_seconds",
    "weights_load": "weights_load_seconds",
    "torch_compile": "torch_compile_seconds",
    "graph_capture": "graph_capture_seconds",
    "engine_init": "init_engine_seconds",
}
"""`startup_seconds{phase}` -> the start-up fact (`parsing/startup.py`) it comes from."""

_BY_SHORT = {m.name[len(PREFIX):]: m for m in METRICS}


def spec(short: str) -> MetricSpec:
    """The table's row of a short name (without the prefix); KeyError for a name not in the table."""
    return _BY_SHORT[short]


def name(short: str) -> str:
    """Full metric name of a short one; KeyError for a name not in the table.

    >>> name("requests_running")
    'vllm_logwatch_requests_running'
    """
    return _BY_SHORT[short].name


_LABEL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def check_const_labels(const_labels: Mapping[str, str]) -> None:
    """Raise `UsageError` for a `--label` name that is not a label name, or one a series has already."""
    reserved = {label for m in METRICS for label in m.labels}
    for key in const_labels:
        if _LABEL_NAME.fullmatch(key) is None or key.startswith("__") or key in reserved:
            raise UsageError(f"--label {key!r}: not a valid label name, or one the exporter uses itself")
