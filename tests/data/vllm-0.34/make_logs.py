# ruff: noqa: E501  (vLLM's format strings and its lines are long; each is kept whole)
"""Write this folder's logs through vLLM 0.34.0's own formatter (`vllm/logging_utils/formatter.py`,
`NewLineFormatter`) with its format (`vllm/logger.py` `_FORMAT`, `_DATE_FORMAT`) and the format strings of
the logging calls named beside each record, copied from vLLM 0.34.0's source; then the same lines as Ray
prints a worker's output on the driver (`ray/_private/worker.py` `print_worker_logs`: a coloured
`(Name pid=N[, ip=A])` prefix; `ray/_private/ray_logging` `LogDeduplicator`: a green
` [repeated Nx across cluster]` suffix, the first time with its note).

    pip download --no-deps vllm==0.34.0 -d /tmp/w && unzip -q /tmp/w/*.whl 'vllm/*' -d /tmp/w
    python tests/data/vllm-0.34/make_logs.py /tmp/w/vllm

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


if __name__ == "__main__":
    main()
