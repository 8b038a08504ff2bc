"""Start-up facts (`ServerInfo`) and known failure tags, read from a vLLM message.

A table of (pattern, builder) pairs; the first pattern that matches wins. Patterns follow the start-up
lines (version, model, KV cache size, maximum concurrency, compile and graph-capture times) and the
failure messages as vLLM's own source prints them, across versions.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

from orjson import loads

from .events import ServerInfo
from .launchargs import derive, engine_config_facts, read_args
from .masking import masked
from .needles import INFO_HOOKS


def _int(text: str) -> int:
    return int(text.replace(",", ""))


def _listening(m: re.Match[str]) -> dict[str, Any]:
    """The server is up, on the port of the address it names (`m.group(1)`)."""
    port = re.search(r":(\d{1,5})/?$", m.group(1))
    return {"server_listening": True, "port": int(port.group(1)) if port else None}


def _served_name(args: str) -> str | None:
    m = re.search(r"'served_model_name': (?:\[)?'([^']+)'", args)
    if m is None:
        m = re.search(r"served_model_name=(?:\[)?'?([^',\])\s]+)", args)
    return m.group(1) if m and m.group(1) != "None" else None


def _args_facts(m: re.Match[str]) -> dict[str, Any]:
    """`non-default args: {...}` (0.9+) and `args: Namespace(...)` (older)."""
    args = m.group(1)
    facts: dict[str, Any] = {}
    for key in ("port", "tensor_parallel_size", "max_model_len", "api_server_count"):
        km = re.search(rf"(?<![\w'])'?{key}'?[:=] ?(\d{{1,18}})", args)  # not `data_parallel_rpc_port`
        if km:
            facts[key] = int(km.group(1))
    mm = re.search(r"'model': '([^']+)'|\bmodel='([^']+)'", args)
    if mm:
        facts["model"] = mm.group(1) or mm.group(2)
    served = _served_name(args)
    if served:
        facts["served_model_name"] = served
    if re.search(r"'disable_log_stats': True|disable_log_stats=True", args):
        facts["stats_logging_disabled"] = True
    parsed = read_args(args)
    if parsed is not None:
        facts.update(derive(parsed))
        facts["args"] = parsed
    return facts


def _engine_config(m: re.Match[str]) -> dict[str, Any]:
    facts: dict[str, Any] = {"vllm_version": m.group(1)}
    config = m.group(2)
    mm = re.search(r"\bmodel='([^']+)'", config)
    if mm:
        facts["model"] = mm.group(1)
    served = _served_name(config)
    if served:
        facts["served_model_name"] = served
    km = re.search(r"\bmax_seq_len=(\d{1,18})", config)  # its tensor_parallel_size: `engine_config_facts`
    if km:
        facts["max_model_len"] = int(km.group(1))
    return {**engine_config_facts(config), **facts}


def _kv_size(m: re.Match[str]) -> dict[str, Any]:
    facts: dict[str, Any] = {"kv_cache_device": m.group(1), "kv_cache_tokens": _int(m.group(2))}
    if m.group(3):
        facts["max_concurrency_tokens_per_request"] = _int(m.group(3))
        facts["max_concurrency"] = float(m.group(4))
    return facts


def _woken(m: re.Match[str]) -> dict[str, Any]:
    """`It took X seconds to wake up tags T.`: awake once the KV cache is (T is the set of every sleeping
    tag when none were named; `['weights']` alone leaves the KV cache asleep)."""
    tags = m.group(2)
    return {"wake_seconds": float(m.group(1)), "asleep": not (tags.startswith("{") or "kv_cache" in tags)}


def _ranks(text: str) -> tuple[int, ...]:
    """`1, 3` of a printed `[1, 3]` (a sorted list of ranks)."""
    return tuple(int(rank) for rank in text.split(",") if rank.strip())


def _dp(count: str, key: str, tag: str) -> dict[str, Any]:
    n = int(count)
    return {key: n, "problem": tag if n > 0 else None}


_Builder = Callable[[re.Match[str]], dict[str, Any]]
_NUMBER = r"(\d{1,12}(?:\.\d{1,12})?)"
_RUNTIME: tuple[tuple[re.Pattern[str], _Builder], ...] = (
    # Sleep mode (`v1/executor/abstract.py`, 0.7+ ; tags since 0.10).
    (re.compile(rf"^It took {_NUMBER} seconds to fall asleep\.$"),
     lambda m: {"sleep_seconds": float(m.group(1)), "asleep": True}),
    (re.compile(rf"^It took {_NUMBER} seconds to wake up tags ([\[{{][^\]}}]{{0,200}}[\]}}])\.$"), _woken),
    (re.compile(rf"^It took {_NUMBER} seconds to discard tags ([\[{{(][^\]}})]{{0,200}}[\]}})])\.$"),
     lambda m: {"discard_seconds": float(m.group(1)), "asleep": True}),
    # The DP supervisor (0.33, `entrypoints/launchers/dp_supervisor.py`), at INFO before it shuts down.
    (re.compile(r"^DPSupervisor probe found (\d{1,6}) unhealthy DP Servers\.$"),
     lambda m: _dp(m.group(1), "dp_unhealthy_servers", "dp_server_unhealthy")),
    (re.compile(r"^DPSupervisor found (\d{1,6}) exited DP Servers\.$"),
     lambda m: _dp(m.group(1), "dp_exited_servers", "dp_server_exited")),
    (re.compile(r"^DPSupervisor received (SIG[A-Z0-9]{1,12}), shutting down\.$"),
     lambda m: {"dp_received_signal": m.group(1)}),
    (re.compile(r"^DPSupervisor forwarding (SIG[A-Z0-9]{1,12}) to DP Servers\.$"),
     lambda m: {"dp_forwarded_signal": m.group(1)}),
    # EPLB (`distributed/eplb/eplb_state.py`, with `log_balancedness`).
    (re.compile(rf"^EPLB step: (\d{{1,12}}) for model (\S{{0,256}}): avg_tokens={_NUMBER}, "
                rf"max_tokens=(\d{{1,15}}), "
                rf"balancedness={_NUMBER}, steps until the next rearrangement: (-?\d{{1,12}})$"),
     lambda m: {"eplb_step": int(m.group(1)), "eplb_model": m.group(2),
                "eplb_avg_tokens": float(m.group(3)),
                "eplb_max_tokens": int(m.group(4)), "eplb_balancedness": float(m.group(5)),
                "eplb_steps_to_rearrangement": int(m.group(6))}),
    (re.compile(rf"^Rearranged experts {{1,3}}(\(profile\) {{1,2}})?in {_NUMBER} s\.$"),
     lambda m: {"eplb_rearrange_seconds": float(m.group(2)), "eplb_profile": m.group(1) is not None}),
    (re.compile(rf"^Async EPLB rearranged (\d{{1,9}})/(\d{{1,9}}) layers of (\S{{0,256}}) "
                rf"in {_NUMBER} s\.$"),
     lambda m: {"eplb_layers_rearranged": int(m.group(1)), "eplb_layers": int(m.group(2)),
                "eplb_model": m.group(3), "eplb_rearrange_seconds": float(m.group(4)), "eplb_async": True}),
    # Fault tolerance (0.34, `v1/fault_tolerance/engine_core_sentinel.py`, `v1/worker/sentinel/`).
    (re.compile(r"^\[FT\] Engine (\d{1,6}) status -> ([A-Z_]{1,32}):?$"),
     lambda m: {"ft_engine": int(m.group(1)), "ft_status": m.group(2)}),
    (re.compile(r"^\[FT\] Busy loop raised ([A-Za-z_][\w.]{0,127})\. Waiting for recovery\.$"),
     lambda m: {"ft_fault": m.group(1)}),
    (re.compile(r"^\[FT\] Engine (\d{1,6}) scale_down complete: removed \[([\d, ]{0,400})\], "
                r"cumulative dead_dp_ranks=\[([\d, ]{0,400})\]$"),
     lambda m: {"ft_engine": int(m.group(1)), "ft_removed_ranks": _ranks(m.group(2)),
                "ft_dead_ranks": _ranks(m.group(3))}),
    (re.compile(r"^\[FT\] No recovery within (\d{1,9})s timeout\.$"),
     lambda m: {"ft_recovery_timeout_seconds": int(m.group(1)), "problem": "ft_recovery_timeout"}),
    (re.compile(r"^\[FT\] Expert redistribution: num_logical=(\d{1,9}), ep_world_size=(\d{1,9}), "
                r"reassignments=(\d{1,9})$"),
     lambda m: {"ft_expert_logical": int(m.group(1)), "ft_ep_world_size": int(m.group(2)),
                "ft_expert_reassignments": int(m.group(3))}),
    (re.compile(r"^Engine ([a-z_]{1,32}) - rejecting request (\S{1,256})\.$"),  # `v1/engine/async_llm.py`
     lambda m: {"rejected_status": m.group(1), "rejected_request": m.group(2)}),
    # KV offloading (0.34, `kv_connector/v1/offloading/scheduler.py`) and the connectors' circuit breaker.
    (re.compile(r"^KV offload store job (\d{1,18}) failed; dropping (\d{1,18}) chunk\(s\) from the CPU cache "
                r"rather than publishing them\.$"),
     lambda m: {"offload_failed_job": "store", "offload_job_id": int(m.group(1)),
                "offload_chunks_dropped": int(m.group(2))}),
    (re.compile(r"^KV offload load job (\d{1,18}) failed; request (\S{1,256}) will not load from the "
                r"offloaded cache again\.$"),
     lambda m: {"offload_failed_job": "load", "offload_job_id": int(m.group(1)),
                "offload_request": m.group(2)}),
    (re.compile(rf"^([\w. -]{{1,64}}?) circuit breaker opened after (\d{{1,9}}) consecutive failures; "
                rf"skipping requests for {_NUMBER} seconds$"),
     lambda m: {"breaker": m.group(1), "breaker_failures": int(m.group(2)),
                "breaker_cooldown_seconds": float(m.group(3))}),
    # KV offload workers (0.34 `v1/kv_offload/fs/worker.py`, `cpu/gpu_worker.py`), each with a traceback.
    (re.compile(r"^I/O failed for job (\d{1,18})$"),
     lambda m: {"offload_worker_job": int(m.group(1)), "offload_worker_stage": "io"}),
    (re.compile(r"^KV offload (GPU->CPU|CPU->GPU) transfer failed for job (\d{1,18})"
                r"( while polling for completion)?$"),
     lambda m: {"offload_worker_job": int(m.group(2)),
                "offload_worker_direction": "store" if m.group(1) == "GPU->CPU" else "load",
                "offload_worker_stage": "polling" if m.group(3) else "transfer"}),
    (re.compile(r"^KV offload transfer for job (\d{1,18}) failed while waiting for it to complete$"),
     lambda m: {"offload_worker_job": int(m.group(1)), "offload_worker_stage": "waiting"}),
    # The tiered offload's tier-poll thread (`v1/kv_offload/tiering/manager.py`).
    (re.compile(r"^KV offload tier-poll round failed$"), lambda m: {"tier_poll_failed": True}),
    (re.compile(rf"^KV offload tier-poll thread has failed (\d{{1,12}}) consecutive rounds \({_NUMBER}s\); "
                r"still retrying"),
     lambda m: {"tier_poll_failed_rounds": int(m.group(1)), "tier_poll_failing_seconds": float(m.group(2))}),
    (re.compile(rf"^KV offload tier-poll thread backing off to {_NUMBER}s after {_NUMBER}s of consecutive "
                r"failures; "),
     lambda m: {"tier_poll_backoff_seconds": float(m.group(1)),
                "tier_poll_failing_seconds": float(m.group(2)),
                "problem": "kv_tier_poll_failing"}),
    (re.compile(rf"^KV offload tier-poll thread stopping after {_NUMBER}s of consecutive failures; "),
     lambda m: {"tier_poll_failing_seconds": float(m.group(1)), "tier_poll_stopped": True,
                "problem": "kv_tier_poll_failing"}),
    (re.compile(r"^(?:Async )?Mooncake lookup failed for (\S{1,256}): "),
     lambda m: {"kv_lookup_failed_request": m.group(1)}),
    (re.compile(r"^CUDA_PROCESS_CHECKPOINT (\{.{0,4000}\})$"), lambda m: checkpoint_facts(m.group(1))),
    # The gRPC server's shutdown (0.34 `entrypoints/launchers/grpc_server.py`).
    (re.compile(r"^Draining in-flight requests \(shutdown_timeout=(\d{1,9})s\)$"),
     lambda m: {"grpc_drain_timeout_seconds": int(m.group(1))}),
    (re.compile(r"^Received another shutdown signal; cancelling RPCs$"),
     lambda m: {"grpc_drain_cancelled": True}),
    (re.compile(r"^(gRPC server|AsyncLLM engine) stopped$"),
     lambda m: {"grpc_stopped": "server" if m.group(1) == "gRPC server" else "engine"}),
)
_GIB = r"(\d{1,12}(?:\.\d{1,12})?(?:e-?\d{1,3})?)"
"""vLLM's `format_gib`: `str(round(bytes / 2**30, 2))`."""
_KV_MEMORY = rf"{_GIB} GiB ([A-Z]{{1,16}})(?: \+ {_GIB} GiB host)?"
"""The auto-fit lines' KV cache memory: `X GiB GPU[ + Y GiB host]` (three groups)."""
_TENTATIVE = r"; the final length is set after CUDA graph capture and warmup"


def _kv_memory(m: re.Match[str], first: int) -> dict[str, Any]:
    host = m.group(first + 2)
    return {"autofit_kv_gib": float(m.group(first)), "autofit_kv_device": m.group(first + 1),
            "autofit_host_gib": float(host) if host else None}


_CHECKPOINT_OPS = frozenset({"Lock", "Checkpoint", "Restore", "Unlock"})
_CUDA_NAME = re.compile(r"CUDA_[A-Z0-9_]{1,64}")
_WORD_KIND = re.compile(r"[a-z_]{1,32}")


def _integer(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and abs(value) < 1 << 62 else None


def _seconds(value: Any) -> float | None:
    number = value if isinstance(value, (int, float)) and not isinstance(value, bool) else None
    return float(number) if number is not None and math.isfinite(number) else None


def _state(value: Any) -> tuple[int | None, int | None]:
    """`{"rc": 0, "value": 1}` of a process's checkpoint state: (value, rc)."""
    if not isinstance(value, dict):
        return None, None
    return _integer(value.get("value")), _integer(value.get("rc"))


def checkpoint_facts(text: str) -> dict[str, Any]:
    """The numbers and states of a `CUDA_PROCESS_CHECKPOINT {json}` event (free text, such as a failed
    call's exception repr, is left out). An event that is no JSON object gives only `checkpoint_event`
    `unreadable`."""
    try:
        event = loads(text)
    except ValueError:
        event = None
    if not isinstance(event, dict):
        return {"checkpoint_event": "unreadable"}
    kind = event.get("kind")
    op = event.get("op", event.get("stage"))
    pids = event.get("pids", [event.get("pid")])
    error = event.get("error")
    before, rc_before = _state(event.get("before"))
    after, rc_after = _state(event.get("after"))
    facts: dict[str, Any] = {
        "checkpoint_event": kind if isinstance(kind, str) and _WORD_KIND.fullmatch(kind) else "stage_error",
        "checkpoint_op": op if op in _CHECKPOINT_OPS else None,
        "checkpoint_pids": tuple(pid for pid in map(_integer, pids[:64]) if pid is not None)
        if isinstance(pids, list) else None,
        "checkpoint_rc": _integer(event.get("rc")),
        "checkpoint_error": error if isinstance(error, str) and _CUDA_NAME.fullmatch(error) else None,
        "checkpoint_state_before": before, "checkpoint_rc_before": rc_before,
        "checkpoint_state_after": after, "checkpoint_rc_after": rc_after,
        "checkpoint_seconds": _seconds(event.get("time_s")),
        "checkpoint_monotonic_seconds": _seconds(event.get("monotonic_s")),
    }
    failed = facts["checkpoint_event"] in ("control_failed", "stage_error") or bool(facts["checkpoint_rc"])
    return {**facts, "problem": "cuda_checkpoint_failed" if failed else None}
_WARMUP: tuple[tuple[re.Pattern[str], _Builder], ...] = (
    # The KV cache sized after warm-up (0.34, `v1/worker/extensible_kv_cache.py`, on by default on CUDA).
    (re.compile(rf"^Memory after warmup: {_GIB} GiB free, {_GIB} GiB committed to the KV cache, {_GIB} GiB "
                rf"kept for transient activations \({_GIB} GiB allocated at peak, {_GIB} GiB of torch "
                rf"reservation growth\); (\d{{1,18}}) KV cache blocks \({_GIB} GiB\) fit within the "
                rf"requested {_GIB} GiB\. Torch may reserve up to {_GIB} GiB\.$"),
     lambda m: {key: (int if key == "warmup_fit_blocks" else float)(value) for key, value in zip(
         ("warmup_free_gib", "warmup_kv_committed_gib", "warmup_transient_gib", "warmup_peak_gib",
          "warmup_torch_growth_gib", "warmup_fit_blocks", "warmup_fit_gib", "warmup_requested_gib",
          "warmup_torch_limit_gib"), m.groups(), strict=True)}),
    (re.compile(r"^Remapping the KV cache from (\d{1,18}) to (\d{1,18}) blocks to fit the measured "
                r"budget\.$"),
     lambda m: {"kv_remap_from_blocks": int(m.group(1)), "kv_remap_to_blocks": int(m.group(2))}),
    (re.compile(r"^Extended KV cache to (\d{1,18}) blocks \((\d{1,15}\.\d\d) GiB\)\.$"),
     lambda m: {"kv_cache_extended_blocks": int(m.group(1)), "kv_cache_extended_gib": float(m.group(2)),
                "extensible_kv_cache": True}),
    (re.compile(rf"^gpu_memory_utilization={_NUMBER} caps this instance at {_GIB} GiB, keeping {_GIB} GiB of "
                r"free device memory out of the KV cache\. "),
     lambda m: {"kv_cap_utilization": float(m.group(1)), "kv_cap_gib": float(m.group(2)),
                "kv_cap_withheld_gib": float(m.group(3))}),
    (re.compile(r"^(?:Extensible KV cache off: |Disabling the extensible KV cache: )"),
     lambda m: {"extensible_kv_cache": False}),
    # The auto-fit `max_model_len` (`--max-model-len auto`; 0.34 `v1/core/kv_cache_planning.py`).
    (re.compile(r"^Auto-fit max_model_len: attention-free model, using derived max_model_len=(\d{1,18})$"),
     lambda m: {"max_model_len": int(m.group(1)), "autofit": "attention_free"}),
    (re.compile(rf"^Auto-fit max_model_len: using max_model_len=(\d{{1,18}}), which fits in the KV cache "
                rf"memory left after CUDA graph capture and warmup \({_KV_MEMORY}\)\.$"),
     lambda m: {"max_model_len": int(m.group(1)), "autofit": "fits", "autofit_after_warmup": True,
                **_kv_memory(m, 2)}),
    (re.compile(rf"^Auto-fit max_model_len: full model context length (\d{{1,18}}) fits in available KV "
                rf"cache memory \({_KV_MEMORY}\)({_TENTATIVE})?$"),
     lambda m: {"max_model_len": int(m.group(1)), "autofit": "fits", "autofit_after_warmup": False,
                **_kv_memory(m, 2), "autofit_tentative": m.group(5) is not None}),
    (re.compile(rf"^Auto-fit max_model_len: reduced from (\d{{1,18}}) to (\d{{1,18}}) to fit in available "
                rf"KV cache memory \({_KV_MEMORY}\)({_TENTATIVE})?$"),
     lambda m: {"autofit_from_len": int(m.group(1)), "max_model_len": int(m.group(2)), "autofit": "reduced",
                "autofit_after_warmup": False, **_kv_memory(m, 3),
                "autofit_tentative": m.group(6) is not None}),
    (re.compile(rf"^--max-model-len auto reduced max_model_len from (\d{{1,18}}) to (\d{{1,18}}) "
                rf"\({_KV_MEMORY} "
                r"(left for the KV cache after CUDA graph capture and warmup|available for the KV cache)\)\."
                r"(?:$| Requests longer than \d{1,18} tokens will be rejected\. )"),
     lambda m: {"autofit_from_len": int(m.group(1)), "max_model_len": int(m.group(2)), "autofit": "reduced",
                **_kv_memory(m, 3), "autofit_after_warmup": m.group(6).startswith("left"),
                "autofit_tentative": False}),
)
_TABLE: tuple[tuple[re.Pattern[str], _Builder], ...] = (
    # Anchored at the message start: a request log line quoting a prompt must never match.
    (re.compile(r"^vLLM server version ([0-9][\w.+-]{0,63}), serving model (\S{1,256})"),
     lambda m: {"vllm_version": m.group(1), "model": m.group(2), "new_launch": True}),
    (re.compile(r"^vLLM API server version ([0-9][\w.+-]{0,63})"),
     lambda m: {"vllm_version": m.group(1), "new_launch": True}),
    # 0.16+ start-up logo: two of its art lines end in the version and the model.
    (re.compile(r"^[\s\u2580-\u259f]+\s version ([0-9][\w.+-]{0,63})\s*$"),
     lambda m: {"vllm_version": m.group(1), "new_launch": True}),
    (re.compile(r"^[\s\u2580-\u259f]+\s model\s+(\S{1,256})\s*$"), lambda m: {"model": m.group(1)}),
    (re.compile(r"^(?:non-default |vLLM gRPC server )?args: (.*)$"), _args_facts),
    (re.compile(r"^Initializing an? (?:V[01] )?LLM engine \(v([^)\s]+)\) with config: (.*)$"),
     _engine_config),
    (re.compile(
        r"^([A-Za-z]+(?: \+ host)?) KV cache size: ([\d,]{1,24}) tokens"
        r"(?:, Maximum concurrency for ([\d,]{1,24}) tokens per request: ([\d.]+)x)?"),
     _kv_size),
    (re.compile(r"^Maximum concurrency for ([\d,]{1,24}) tokens per request: ([\d.]+)x"),
     lambda m: {"max_concurrency_tokens_per_request": _int(m.group(1)),
                "max_concurrency": float(m.group(2))}),
    (re.compile(r"^# ([A-Za-z]+) blocks: (\d{1,18}), # CPU blocks: (\d{1,18})"),
     lambda m: {"gpu_blocks": int(m.group(2)), "cpu_blocks": int(m.group(3))}),
    (re.compile(r"^# GPU blocks: (\d{1,18})$"), lambda m: {"gpu_blocks": int(m.group(1))}),
    # 0.9-0.11 per engine, 0.11.1+ once from the aggregated logger (the per-engine one went to DEBUG).
    (re.compile(r"^(?:Engine \d{3,6}|\d{1,6} Engines): vllm cache_config_info with initialization after "
                r"num_gpu_blocks is: (\d{1,15})$"),
     lambda m: {"gpu_blocks": int(m.group(1))}),
    (re.compile(r"^Available KV cache memory: ([\d.]+) GiB"),
     lambda m: {"available_kv_cache_gib": float(m.group(1))}),
    # "GB" of 0.4-0.8.2 is vLLM's misnomer: it divides by 2**30, so the number already is GiB.
    (re.compile(r"^Model loading took ([\d.]+) Gi?B(?: memory)? and ([\d.]+) seconds"),
     lambda m: {"model_load_gib": float(m.group(1)), "model_load_seconds": float(m.group(2))}),
    (re.compile(r"^Loading model weights took ([\d.]+) GB"),
     lambda m: {"model_load_gib": float(m.group(1))}),
    (re.compile(r"^Loading weights took ([\d.]+) seconds"),
     lambda m: {"weights_load_seconds": float(m.group(1))}),
    (re.compile(r"^Graph capturing finished in ([\d.]+) secs(?:, took ([\d.]+) GiB)?"),
     lambda m: {"graph_capture_seconds": float(m.group(1)),
                **({"graph_capture_gib": float(m.group(2))} if m.group(2) else {})}),
    (re.compile(r"^init engine \(profile, create kv cache, warmup model\) took ([\d.]+) s"),
     lambda m: {"init_engine_seconds": float(m.group(1))}),
    (re.compile(r"^(?:\[[^\]]*\] )?torch\.compile (?:takes|took) ([\d.]+) s in total"),
     lambda m: {"torch_compile_seconds": float(m.group(1))}),
    (re.compile(r"^Using max model len (\d{1,18})"), lambda m: {"max_model_len": int(m.group(1))}),
    # The attention backend vLLM chose: `Using FLASH_ATTN attention backend out of potential backends:
    # [...]` (0.11+), `Using FLASH_ATTN backend.` (--attention-backend), `Using Flash Attention backend
    # on V1 engine.` / `Using XFormers backend.` (older). Not the MLA prefill nor the ViT backend.
    (re.compile(r"^Using ((?!.*\b(?:prefill|MLA prefill)\b)[A-Za-z][\w-]{0,31}(?: [\w-]{1,31}){0,2}?) "
                r"(?:attention )?backend(?: on V1 engine)?(?:\.$| out of potential backends)"),
     lambda m: {"attention_backend": m.group(1).replace(" ", "_")}),
    (re.compile(r"^Starting vLLM (?:API )?server (?:\d+ )?on (https?://\S+)"), _listening),
    (re.compile(r"(?:^|INFO:\s+)Uvicorn running on (https?://\S+)"), _listening),
    (re.compile(r"(?:^|INFO:\s+)Application startup complete"), lambda m: {"server_listening": True}),
    (re.compile(r"^AsyncLLM created with api_server_count more than 1; disabling stats logging"),
     lambda m: {"stats_logging_disabled": True}),
    (re.compile(r"^Defaulting api_server_count to data_parallel_size \((\d{1,18})\)"),
     lambda m: {"api_server_count": int(m.group(1))}),
    (re.compile(r"^vLLM gRPC server started on (\S{1,300})$"), _listening),
    *_RUNTIME,
    *_WARMUP,
)


def parse_info(msg: str, common: dict[str, Any]) -> ServerInfo | None:
    """A start-up fact from a message, or None. Its values are masked (`masking.masked`): no secret
    nor URL credential of the model name goes further."""
    if not any(h in msg for h in INFO_HOOKS):
        return None
    for pattern, build in _TABLE:
        m = pattern.search(msg)
        if m is not None:
            facts = {k: masked(v) for k, v in build(m).items() if v is not None}
            return ServerInfo(**facts, **common)
    return None


_PROBLEMS: tuple[tuple[str, str], ...] = (
    ("EngineCore encountered a fatal error", "engine_fatal"),
    ("EngineCore failed to start", "engine_start_failed"),
    ("Engine core initialization failed", "engine_start_failed"),
    ("EngineDeadError", "engine_dead"),
    ("EngineCore encountered an issue", "engine_dead"),
    ("output_handler failed", "engine_dead"),
    ("Background loop", "engine_dead"),
    ("Engine background task failed", "engine_dead"),
    ("Engine loop", "engine_dead"),
    ("died unexpectedly", "process_died"),
    ("out of memory", "out_of_memory"),
    ("OutOfMemoryError", "out_of_memory"),
    ("not enough GPU memory", "out_of_memory"),
    ("No available memory for the cache blocks", "no_kv_memory"),
    ("stored in KV cache", "kv_cache_too_small"),
    ("larger than the available KV cache memory", "kv_cache_too_small"),
    ("is preempted by", "preemption"),
    ("disabling stats logging", "stats_logging_disabled"),
    ("unhealthy DP Servers", "dp_server_unhealthy"),
    ("exited DP Servers", "dp_server_exited"),
    ("[FT] No recovery within", "ft_recovery_timeout"),
    ("tier-poll thread backing off", "kv_tier_poll_failing"),
    ("tier-poll thread stopping after", "kv_tier_poll_failing"),
    ('CUDA_PROCESS_CHECKPOINT {"kind": "control_failed"', "cuda_checkpoint_failed"),
)


PROBLEM_TAGS: tuple[str, ...] = tuple(dict.fromkeys(tag for _, tag in _PROBLEMS))
"""Every tag `problem_of` can give, in table order (the metrics export each from 0)."""


def problem_of(msg: str) -> str | None:
    """A short tag for the failures operators alert on; None for other messages."""
    for needle, tag in _PROBLEMS:
        if needle in msg:
            return tag
    return None
