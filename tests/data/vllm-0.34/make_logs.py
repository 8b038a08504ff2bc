# ruff: noqa: E501  (vLLM's format strings and its lines are long; each is kept whole)
"""Write this folder's logs through vLLM 0.34.0's own formatter (`vllm/logging_utils/formatter.py`,
`NewLineFormatter`) with its format (`vllm/logger.py` `_FORMAT`, `_DATE_FORMAT`) and the format strings of
the logging calls named beside each record, copied from vLLM 0.34.0's source; then the same lines as Ray
prints a worker's output on the driver (`ray/_private/worker.py` `print_worker_logs`: a coloured
`(Name pid=N[, ip=A])` prefix; `ray/_private/ray_logging` `LogDeduplicator`: a green
` [repeated Nx across cluster]` suffix, the first time with its note).

    pip download --no-deps vllm==0.34.0 -d /tmp/w && unzip -q /tmp/w/*.whl 'vllm/*' -d /tmp/w
    python tests/data/vllm-0.34/make_logs.py /tmp/w/vllm

serve_20261120_100000.log (a 0.34 start-up, faults, offload failures), ray_serve.log (the same through
Ray), extensible_off.log, runtime.log (0.34's other new lines) and v033.log (0.33.0's lines that were read
in part: its formatter and format are the same as 0.34.0's).

Only the formatter module is loaded (it imports `logging` and `pathlib` alone): no torch needed.
"""

from __future__ import annotations

import importlib.util
import logging
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
FORMAT = "(%(vllm_process_name)s pid=%(process)d) %(levelname)s %(asctime)s [%(fileinfo)s:%(lineno)d] %(message)s"
DATE_FORMAT = "%m-%d %H:%M:%S"
T0 = time.mktime((2026, 11, 20, 10, 0, 0, 0, 0, -1))

API, CORE, W0, W1 = ("APIServer", 4100), ("EngineCore_DP0", 4210), ("Worker_TP0", 4301), ("Worker_TP1", 4302)
# (seconds after T0, process, level, file, line, format string, args, traceback text)
Record = tuple[int, tuple[str, int], int, str, int, str, tuple[Any, ...], str | None]
INFO, WARNING, ERROR = logging.INFO, logging.WARNING, logging.ERROR
TRACEBACK = """Traceback (most recent call last):
  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/fault_tolerance/engine_core_sentinel.py", line 512, in run_with_fault_tolerance
    return func(*args, **kwargs)
  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/engine/core.py", line 1204, in run_busy_loop
    self._process_engine_step()
torch.AcceleratorError: CUDA error: an illegal memory access was encountered"""
"""What `exc_info` adds to the status line (a traceback as Python formats it: its text is given so the
log holds no path of the machine that made it)."""


STARTUP: list[Record] = [
    (0, W0, INFO, "gpu_worker.py", 796, "Available KV cache memory: %s GiB", ("71.25",), None),
    (0, W1, INFO, "gpu_worker.py", 796, "Available KV cache memory: %s GiB", ("71.25",), None),
    (1, CORE, INFO, "kv_cache_utils.py", 1168,
     "%s KV cache size: %s tokens, Maximum concurrency for %s tokens per request: %.2fx",
     ("GPU", f"{1_167_360:,}", f"{32_768:,}", 35.625), None),
    (20, W0, WARNING, "extensible_kv_cache.py", 662,
     "gpu_memory_utilization=%s caps this instance at %s GiB, keeping %s GiB of free device memory out of "
     "the KV cache. The extensible KV cache is sized from the memory measured after warmup and CUDA graph "
     "capture, so vLLM's own use needs no headroom below 1.0. Leave gpu_memory_utilization unset unless it "
     "leaves room for memory vLLM does not measure: other processes sharing the GPU (including ones that "
     "allocate on it later), the CPU on a unified-memory device, weight transfer buffers for weight "
     "updates, or a KV connector's own device buffers.",
     (0.9, "71.28", "7.92"), None),
    (20, W0, INFO, "extensible_kv_cache.py", 693,
     "Memory after warmup: %s GiB free, %s GiB committed to the KV cache, %s GiB kept for transient "
     "activations (%s GiB allocated at peak, %s GiB of torch reservation growth); %d KV cache blocks "
     "(%s GiB) fit within the requested %s GiB. Torch may reserve up to %s GiB.",
     ("3.5", "60.0", "2.75", "2.5", "2.75", 4003, "62.55", "71.28", "6.25"), None),
    (21, W0, INFO, "extensible_kv_cache.py", 525,
     "Remapping the KV cache from %d to %d blocks to fit the measured budget.", (4096, 3990), None),
    (21, W0, INFO, "extensible_kv_cache.py", 536, "Extended KV cache to %d blocks (%.2f GiB).",
     (3990, 3990 * 16 * 1048576 / (1 << 30)), None),
    (21, W1, INFO, "extensible_kv_cache.py", 536, "Extended KV cache to %d blocks (%.2f GiB).",
     (3990, 3990 * 16 * 1048576 / (1 << 30)), None),
    (22, CORE, INFO, "kv_cache_utils.py", 1168,
     "%s KV cache size: %s tokens, Maximum concurrency for %s tokens per request: %.2fx",
     ("GPU", f"{1_021_440:,}", f"{32_768:,}", 31.171875), None),
]
OFF: list[Record] = [
    (0, API, INFO, "vllm.py", 3256,
     "Extensible KV cache off: without an IMEX channel, KV transfers within a host (e.g. NIXL) would lose "
     "NVLink and fall back to RDMA or TCP. If transfers only cross hosts, pass --enable-extensible-kv-cache.",
     (), None),
    (1, CORE, WARNING, "abstract.py", 175,
     "Disabling the extensible KV cache: %s. The KV cache will be sized from profiling estimates instead of "
     "measured memory.", ("the KV connector allocates its own memory pool",), None),
]
STATS = (
    "Engine %03d: Avg prompt throughput: %.1f tokens/s, Avg generation throughput: %.1f tokens/s, "
    "Running: %d reqs, Waiting: %d reqs, GPU KV cache usage: %.1f%%, Prefix cache hit rate: %.1f%%"
)
RUNNING: list[Record] = [
    (40, API, INFO, "loggers.py", 259, STATS, (0, 1301.0, 1924.0, 30, 0, 4.8, 0.0), None),
    (50, API, INFO, "loggers.py", 259, STATS, (0, 0.0, 2210.4, 30, 0, 8.5, 61.5), None),
]
FAULTS: list[Record] = [
    (60, CORE, WARNING, "engine_core_sentinel.py", 144, "[FT] Busy loop raised %s. Waiting for recovery.",
     ("AcceleratorError",), None),
    (60, CORE, INFO, "engine_core_sentinel.py", 171, "[FT] Engine %d status -> %s:", (0, "UNHEALTHY"), TRACEBACK),
    (61, API, INFO, "async_llm.py", 359, "Engine %s - rejecting request %s.", ("unhealthy", "cmpl-8f2a-0"), None),
    (61, API, INFO, "async_llm.py", 359, "Engine %s - rejecting request %s.", ("unhealthy", "chatcmpl-77"), None),
    (62, W0, INFO, "gpu_worker_sentinel.py", 283,
     "[FT] Expert redistribution: num_logical=%d, ep_world_size=%d, reassignments=%d", (256, 8, 32), None),
    (63, CORE, INFO, "engine_core_sentinel.py", 311,
     "[FT] Engine %d scale_down complete: removed %s, cumulative dead_dp_ranks=%s", (0, [3], [1, 3]), None),
    (64, CORE, INFO, "engine_core_sentinel.py", 465, "[FT] Engine %d status -> HEALTHY", (0,), None),
    (90, CORE, INFO, "engine_core_sentinel.py", 171, "[FT] Engine %d status -> %s:", (1, "DEAD"), TRACEBACK),
    (95, CORE, ERROR, "engine_core_sentinel.py", 530, "[FT] No recovery within %ds timeout.", (300,), None),
]
OFFLOAD: list[Record] = [
    (70, CORE, WARNING, "scheduler.py", 2210,
     "KV offload store job %d failed; dropping %d chunk(s) from the CPU cache rather than publishing them.",
     (41, 6), None),
    (71, CORE, WARNING, "scheduler.py", 2226,
     "KV offload load job %d failed; request %s will not load from the offloaded cache again.",
     (42, "cmpl-9c1d-0"), None),
    (72, W0, WARNING, "utils.py", 722,
     "%s circuit breaker opened after %d consecutive failures; skipping requests for %s seconds",
     ("Mooncake lookup", 3, 5.0), None),
]

OSERROR = """Traceback (most recent call last):
  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/kv_offload/fs/worker.py", line 139, in _run
    self._io(t)
OSError: [Errno 5] Input/output error"""
TIMEOUT = """Traceback (most recent call last):
  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/kv_offload/tiering/manager.py", line 434, in _tier_poll_loop
    self.poll_tiers()
TimeoutError: tier 1:fs did not answer"""
TIERED = ", ".join(f"{k}={v}" for k, v in {  # `OffloadingConnectorStats.reduce` (0.34: two deferred-release keys)
    "vllm:kv_offload_store_bytes": 2097152, "vllm:kv_offload_store_time": 0.0125,
    "vllm:kv_offload_tiering_read_bytes:('1:fs',)": 1048576,
    "vllm:kv_offload_tiering_promotion_job_failures:('1:fs',)": 1,
    "vllm:kv_offload_tiering_deferred_release_chunks:('1:fs',)": 4,
    "vllm:kv_offload_tiering_deferred_release_hold_seconds:('1:fs',)_count": 2,
    "vllm:kv_offload_tiering_deferred_release_hold_seconds:('1:fs',)_sum": 0.35,
}.items())
CHECKPOINT = "CUDA_PROCESS_CHECKPOINT %s"  # `v1/executor/cuda_checkpoint_executor.py`, json.dumps(event)
RUNTIME: list[Record] = [  # vLLM 0.34's other new lines, each with the file and line that prints it
    (0, API, INFO, "metrics.py", 108, "KV Transfer metrics: %s", (TIERED,), None),
    (1, W0, ERROR, "worker.py", 144, "I/O failed for job %d", (17,), OSERROR),
    (2, W0, ERROR, "gpu_worker.py", 941, "KV offload %s transfer failed for job %d", ("GPU->CPU", 18), OSERROR),
    (2, W0, ERROR, "gpu_worker.py", 950, "KV offload %s transfer failed for job %d while polling for completion",
     ("CPU->GPU", 19), OSERROR),
    (3, W0, ERROR, "gpu_worker.py", 958, "KV offload transfer for job %d failed while waiting for it to complete",
     (20,), OSERROR),
    (4, CORE, ERROR, "manager.py", 443, "KV offload tier-poll round failed", (), TIMEOUT),
    (14, CORE, WARNING, "manager.py", 445,
     "KV offload tier-poll thread has failed %d consecutive rounds (%.0fs); still retrying so peers are served "
     "while the engine is idle.", (12, 10.4), None),
    (34, CORE, ERROR, "manager.py", 459,
     "KV offload tier-poll thread backing off to %.1fs after %.0fs of consecutive failures; it keeps retrying "
     "so peers are still served while the engine is idle.", (5.0, 30.0), None),
    (35, W0, ERROR, "worker.py", 2933, "Mooncake lookup failed for %s: %s", ("cmpl-5e1f-0", "Mooncake lookup timed out"),
     None),
    (36, W0, INFO, "async_worker.py", 225, "Async EPLB rearranged %d/%d layers of %s in %.2f s.",
     (48, 48, "Qwen/Qwen3-30B-A3B", 2.3456), None),
    (37, CORE, INFO, "cuda_checkpoint_executor.py", 148, CHECKPOINT,
     ('{"kind": "control_start", "pid": 4301, "op": "Lock", "monotonic_s": 812.25}',), None),
    (37, CORE, INFO, "cuda_checkpoint_executor.py", 148, CHECKPOINT,
     ('{"kind": "control", "pid": 4301, "op": "Lock", "rc": 0, "error": "CUDA_SUCCESS", "before": {"rc": 0, '
      '"value": 0}, "after": {"rc": 0, "value": 1}, "time_s": 0.0123, "monotonic_s": 812.5}',), None),
    (38, CORE, INFO, "cuda_checkpoint_executor.py", 148, CHECKPOINT,
     ('{"kind": "boundary", "stage": "Checkpoint", "pids": [4301, 4302], "monotonic_s": 813.75}',), None),
    (39, CORE, INFO, "cuda_checkpoint_executor.py", 148, CHECKPOINT,
     ('{"kind": "control_failed", "pids": [4301, 4302], "op": "Restore", "error": "TimeoutError(\'CUDA '
      'controller deadline exceeded\')", "monotonic_s": 844.0}',), None),
    (40, CORE, INFO, "cuda_checkpoint_executor.py", 148, CHECKPOINT,
     ('{"pid": 4302, "op": "Unlock", "error": "RuntimeError(\'cuInit: 3\')", "monotonic_s": 845.5}',), None),
    (50, CORE, INFO, "kv_cache_planning.py", 1466,
     "Auto-fit max_model_len: full model context length %d fits in available KV cache memory (%s)%s",
     (40960, "70.12 GiB GPU", "; the final length is set after CUDA graph capture and warmup"), None),
    (51, CORE, INFO, "kv_cache_planning.py", 1478,
     "Auto-fit max_model_len: reduced from %d to %d to fit in available KV cache memory (%s)%s",
     (131072, 65536, "30.5 GiB GPU + 8.0 GiB host", "; the final length is set after CUDA graph capture and warmup"),
     None),
    (52, CORE, INFO, "kv_cache_planning.py", 1458,
     "Auto-fit max_model_len: using max_model_len=%d, which fits in the KV cache memory left after CUDA graph "
     "capture and warmup (%s).", (65536, "28.25 GiB GPU"), None),
    (53, CORE, INFO, "kv_cache_planning.py", 1494, "--max-model-len auto reduced max_model_len from %d to %d (%s).",
     (131072, 49152, "24.0 GiB GPU left for the KV cache after CUDA graph capture and warmup"), None),
    (54, CORE, WARNING, "kv_cache_planning.py", 1506,
     "--max-model-len auto reduced max_model_len from %d to %d (%s). Requests longer than %d tokens will be "
     "rejected. %s", (131072, 2048, "0.5 GiB GPU available for the KV cache", 2048,
                      "Increase `gpu_memory_utilization` or set --max-model-len explicitly."), None),
    (55, CORE, INFO, "kv_cache_planning.py", 1407,
     "Auto-fit max_model_len: attention-free model, using derived max_model_len=%d", (2048,), None),
    (60, API, INFO, "grpc_server.py", 147, "Draining in-flight requests (shutdown_timeout=%ds)", (30,), None),
    (61, API, INFO, "grpc_server.py", 263, "Received another shutdown signal; cancelling RPCs", (), None),
    (62, API, INFO, "grpc_server.py", 155, "AsyncLLM engine stopped", (), None),
    (63, API, INFO, "grpc_server.py", 159, "gRPC server stopped", (), None),
]
"""Written to runtime.log; the lines 0.33.0 printed that were not read whole, to v033.log (0.33.0's formatter
and format are the same as 0.34.0's)."""
SUP, EP = ("DPSupervisor", 4000), ("Worker_DP0_EP0", 4400)
V033: list[Record] = [
    (0, API, INFO, "startup.py", 96, "non-default args: %s",
     ({"model_tag": "Qwen/Qwen3-8B", "model": "Qwen/Qwen3-8B", "max_model_len": -1},), None),
    (1, EP, INFO, "eplb_state.py", 634,
     "EPLB step: %d for model %s: avg_tokens=%.2f, max_tokens=%d, balancedness=%.4f, steps until the next "
     "rearrangement: %d", (3000, "Qwen/Qwen3-30B-A3B", 1234.5678, 1500, 0.82301, 0), None),
    (2, EP, INFO, "eplb_state.py", 958, "Rearranged experts %s in %.2f s.", (" (profile) ", 0.5), None),
    (3, EP, INFO, "eplb_state.py", 958, "Rearranged experts %s in %.2f s.", (" ", 1.234), None),
    (4, API, INFO, "metrics.py", 108, "KV Transfer metrics: %s", (", ".join(f"{k}={v}" for k, v in {
        "Num transfers task": 5, "Num save task success": 3, "Num save task failed": 1, "Num load task success": 1,
        "Num load task failed": 2, "Avg save duration (ms)": 4.5, "P90 save duration (ms)": 6.0,
        "Avg load duration (ms)": 2.0, "P90 load duration (ms)": 2.5}.items()),), None),
    (5, W0, ERROR, "worker.py", 2436, "Async Mooncake lookup failed for %s: %s", ("cmpl-77-0", "timed out"), None),
    (10, SUP, INFO, "dp_supervisor.py", 389, "DPSupervisor received %s, shutting down.", ("SIGTERM",), None),
    (10, SUP, INFO, "dp_supervisor.py", 525, "DPSupervisor forwarding %s to DP Servers.", ("SIGTERM",), None),
    (11, CORE, ERROR, "manager.py", 460,
     "KV offload tier-poll thread stopping after %.0fs of consecutive failures; falling back to per-step "
     "servicing.", (30.0,), None),
]


class _At(logging.Filter):
    """Gives each record its process name, pid and time (vLLM sets `vllm_process_name` the same way)."""

    def __init__(self) -> None:
        super().__init__()
        self.at: tuple[float, tuple[str, int]] = (T0, API)

    def filter(self, record: logging.LogRecord) -> bool:
        when, (name, pid) = self.at
        record.created, record.msecs, record.process = when, 0.0, pid
        record.vllm_process_name = name
        return True


def render(formatter: logging.Formatter, records: list[Record]) -> list[str]:
    """Each record as vLLM's handler writes it (a traceback's lines joined by `\\r\\n` and the prefix)."""
    logger = logging.Logger("vllm.made")
    at = _At()
    out: list[str] = []

    class _Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            out.append(self.format(record))

    handler = _Keep()
    handler.setFormatter(formatter)
    handler.addFilter(at)
    logger.addHandler(handler)
    for seconds, process, level, file, line, fmt, args, traceback in sorted(records, key=lambda r: r[0]):
        at.at = (T0 + seconds, process)
        record = logger.makeRecord("vllm.made", level, file, line, fmt, args, None)
        record.filename, record.exc_text = file, traceback
        logger.handle(record)
    return out


CYAN, GREEN, RESET = "\x1b[36m", "\x1b[32m", "\x1b[0m"
NOTE = (" (Ray deduplicates logs by default. Set RAY_DEDUP_LOGS=0 to disable log deduplication, or see "
        "https://docs.ray.io/en/master/ray-observability/user-guides/configure-logging.html#log-deduplication "
        "for more options.)")


def ray(lines: list[str]) -> list[str]:
    """The lines as Ray Serve's driver prints them: the replica's actor prefix (its engine and workers
    behind vLLM's own prefix, nested; workers on another node with their `ip=`), coloured; the second
    stats line and the offload failures deduplicated (3 and 2 prints), the first suffix with Ray's note."""
    out: list[str] = []
    noted = False
    for text in lines:
        actor = "(ServeReplica:default:VLLMDeployment pid=3900)"
        if "(Worker_TP" in text:
            actor = "(RayWorkerWrapper pid=5120, ip=10.0.0.7)"
        suffix = ""
        if "Prefix cache hit rate: 61.5%" in text or "KV offload" in text:
            count = 3 if "Engine 000" in text else 2
            suffix = f"{GREEN} [repeated {count}x across cluster]{'' if noted else NOTE}{RESET}"
            noted = True
        out.extend(f"{CYAN}{actor}{RESET} {part}{suffix if i == text.count(chr(10)) else ''}"
                   for i, part in enumerate(text.split("\n")))  # Ray reads lines by `\n` alone
    return out


def main() -> None:
    spec = importlib.util.spec_from_file_location("formatter", Path(sys.argv[1]) / "logging_utils/formatter.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    formatter = module.NewLineFormatter(FORMAT, DATE_FORMAT)
    plain = render(formatter, STARTUP + RUNNING + FAULTS + OFFLOAD)
    (HERE / "serve_20261120_100000.log").write_text("\n".join(plain) + "\n", newline="")
    (HERE / "extensible_off.log").write_text("\n".join(render(formatter, OFF)) + "\n", newline="")
    (HERE / "ray_serve.log").write_text("\n".join(ray(plain)) + "\n", newline="")
    (HERE / "runtime.log").write_text("\n".join(render(formatter, RUNTIME)) + "\n", newline="")
    (HERE / "v033.log").write_text("\n".join(render(formatter, V033)) + "\n", newline="")


if __name__ == "__main__":
    main()
