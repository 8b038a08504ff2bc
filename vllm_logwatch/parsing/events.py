"""One record per kind of vLLM log line: a slotted dataclass, made once a line (the parser's fields, then
the Assembler's file, line and time) and never changed after (`dataclasses.replace` makes a changed
copy): no validation, the parser gives each field its type.

The parser (`parsing/line.py`) turns a line into one of these; everything downstream (metrics, CSV, JSONL,
summaries) reads them. Values keep the units vLLM prints: percent stays percent (`*_pct`), throughput
is tokens/s. No model ever carries free log text: logs hold users' prompts.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields, is_dataclass
from datetime import datetime
from math import isfinite
from operator import attrgetter
from typing import Any, Literal, get_args

from ..shown import json_safe
from .columns import STATS_COLUMNS, Phase, step_phase
from .stamps import iso_time


@dataclass(slots=True)
class _Record:
    """Where a line came from and when vLLM wrote it."""

    time: datetime | None = None
    """Full timestamp, once the year and zone are known (see `stamps.py`)."""
    file: str | None = None
    line: int | None = None
    """1-based line number in `file`."""
    stamp: str | None = None
    """vLLM's own year-less `MM-DD HH:MM:SS`, as printed."""
    level: str | None = None
    """Log level of the line (`INFO`, `DEBUG`, ... ; `None` when the line has no vLLM header)."""
    process: str | None = None
    """vLLM process name from the `(Name pid=N)` prefix, e.g. `APIServer`."""
    pid: int | None = None
    """The process id of that prefix: tells two servers writing one log apart (never a label nor output)."""
    repeated: int | None = None
    """N of Ray's `[repeated Nx across cluster]` (`envelope.ray_repeats`): the line stands for N prints."""


@dataclass(slots=True)
class EngineStats(_Record):
    """The periodic stats line: `Engine 000: Avg prompt throughput: ...` and every older shape."""

    kind: Literal["stats"] = "stats"
    engine: int | None = None
    engines_aggregated: int | None = None
    """`N` of an `N Engines Aggregated:` line (then `engine` is None)."""
    prompt_throughput: float | None = None
    generation_throughput: float | None = None
    running: int | None = None
    waiting: int | None = None
    swapped: int | None = None
    gpu_kv_cache_usage_pct: float | None = None
    cpu_kv_cache_usage_pct: float | None = None
    prefix_cache_hit_rate_pct: float | None = None
    prefix_cache_hit_rate_cpu_pct: float | None = None
    mm_cache_hit_rate_pct: float | None = None
    extra: dict[str, float] = field(default_factory=dict)
    """Fields without a column: known ones (`preemptions`, `deferred`, ...) and unknown ones."""
    unknown_fields: int = 0
    """How many fields of the line the parser did not know (they are kept in `extra`)."""
    device: str | None = None
    """The device word of the KV usage field (`GPU`, `CPU`, `XPU`, ...)."""

    @property
    def is_v0(self) -> bool:
        """V0 engine lines name `Swapped:` / `Pending:` (there `CPU KV cache` is swap space)."""
        return self.swapped is not None

    @property
    def kv_cache_usage_pct(self) -> float | None:
        """The KV cache usage of the device that serves (V1 on CPU reports `CPU KV cache usage`)."""
        if self.gpu_kv_cache_usage_pct is not None:
            return self.gpu_kv_cache_usage_pct
        if not self.is_v0:
            return self.cpu_kv_cache_usage_pct
        return None


def stats_record(time: datetime | None, file: str | None, line: int | None, stamp: str, level: str,
                 process: str | None, engine: int, prompt: float, generation: float, running: int,
                 waiting: int, device: str, kv: float, prefix: float | None, mm: float | None,
                 pid: int | None = None) -> EngineStats:
    """The `EngineStats` of vLLM's common V1 stats line (`needles.CANONICAL_STATS`) from the numbers and
    words its pattern read: the parser's and the range workers' (`offline/reading/records.py`) one
    record (V1 on CPU reports its KV cache usage as `CPU KV cache usage`). Its fields are given by
    position, in their order: a call by keyword costs twice as much, and `parse --csv` makes one a line."""
    cpu = device == "CPU"
    return EngineStats(time, file, line, stamp, level, process, pid, None,  # repeated
                       "stats", engine, None,  # engines_aggregated
                       prompt, generation, running, waiting, None,  # swapped
                       None if cpu else kv, kv if cpu else None, prefix,
                       None,  # prefix_cache_hit_rate_cpu_pct
                       mm, {}, 0, device)  # extra, unknown_fields


@dataclass(slots=True, kw_only=True)
class PrefixCacheRates(_Record):
    """V0's separate `Prefix cache hit rate: GPU: x%, CPU: y%` line (merged into the stats before it)."""

    kind: Literal["prefix"] = "prefix"
    gpu_pct: float
    cpu_pct: float


@dataclass(slots=True, kw_only=True)
class SpecDecodeStats(_Record):
    """Speculative decoding: V0 `Speculative metrics:`, V1 `SpecDecoding metrics:` (all variants),
    and `DiffusionDecoding metrics:`.

    V1 counts are per interval; V0 counts are cumulative since engine start (`cumulative`).
    """

    kind: Literal["spec"] = "spec"
    format: Literal["v0", "v1", "diffusion"]
    cumulative: bool = False
    engine: int | None = None
    mean_acceptance_length: float | None = None
    accepted_throughput: float | None = None
    drafted_throughput: float | None = None
    accepted_tokens: int | None = None
    drafted_tokens: int | None = None
    draft_acceptance_rate_pct: float | None = None
    per_position_acceptance_rate: tuple[float, ...] | None = None
    system_efficiency: float | None = None
    num_speculative_tokens: int | None = None
    emitted_tokens: int | None = None
    extra: dict[str, float] = field(default_factory=dict)


@dataclass(slots=True, kw_only=True)
class OffloadSample:
    """One key of an offloading connector: vLLM's metric name without `vllm:`, its label values, the
    `_count` / `_sum` of a histogram (empty for a counter or gauge), and the interval's value."""

    name: str
    labels: tuple[str, ...] = ()
    suffix: Literal["", "count", "sum"] = ""
    value: float


@dataclass(slots=True, kw_only=True)
class TransferStats(_Record):
    """`KV Transfer metrics: k=v, ...` (KV connectors such as NIXL and Mooncake, vLLM >= 0.11) and
    `EC Transfer metrics: ...` (encoder-cache connector, >= 0.31): one interval's transfers, given the
    engine of the stats line before them. Keys vLLM documents get a field; others land in `extra`
    (a MultiConnector's per-connector dicts as `connector__key`)."""

    kind: Literal["transfer"] = "transfer"
    cache: Literal["kv", "ec"]
    engine: int | None = None
    successful_transfers: int | None = None
    failed_transfers: int | None = None
    """Transfers (and, 0.31+, handshakes and notifications) that failed in the interval."""
    failed_recvs: int | None = None
    expired_requests: int | None = None
    """`Num KV expired reqs`: requests whose KV blocks expired before the other side fetched them."""
    notifications_after_expiry: int | None = None
    avg_transfer_ms: float | None = None
    p90_transfer_ms: float | None = None
    avg_post_ms: float | None = None
    p90_post_ms: float | None = None
    avg_mb_per_transfer: float | None = None
    """MiB (vLLM divides by 2**20), rounded to 3 decimals."""
    throughput_mb_per_s: float | None = None
    avg_descriptors: float | None = None
    hisparse_hits: int | None = None
    """HiSparse (`HiSparse hot-buffer hits`, 0.33+): device hot-buffer hits in the interval."""
    hisparse_misses: int | None = None
    hisparse_host_to_device_bytes: int | None = None
    hisparse_host_cache_usage_pct: float | None = None
    offload: tuple[OffloadSample, ...] = ()
    """The offloading connectors' metric-like keys (`vllm:kv_offload_store_bytes=N`,
    `vllm:kv_offload_tiering_read_bytes:('1:fs',)=N`, `..._count`, `..._sum`), each read whole."""
    unreadable_keys: int = 0
    """Pieces of the line that could not be read (skipped and counted; the rest of the line is kept)."""
    extra: dict[str, float] = field(default_factory=dict)


@dataclass(slots=True, kw_only=True)
class ServerInfo(_Record):
    """Facts from start-up lines, and what a running server logs (`RUNTIME_FIELDS`). One line gives one or a
    few of them; the rest stay None. The line that fills each is its pattern in `startup.py`'s table."""

    kind: Literal["info"] = "info"
    vllm_version: str | None = None
    model: str | None = None
    served_model_name: str | None = None
    port: int | None = None
    kv_cache_device: str | None = None
    kv_cache_tokens: int | None = None
    max_concurrency: float | None = None
    max_concurrency_tokens_per_request: int | None = None
    gpu_blocks: int | None = None
    cpu_blocks: int | None = None
    available_kv_cache_gib: float | None = None
    model_load_gib: float | None = None
    model_load_seconds: float | None = None
    weights_load_seconds: float | None = None
    graph_capture_seconds: float | None = None
    graph_capture_gib: float | None = None
    init_engine_seconds: float | None = None
    torch_compile_seconds: float | None = None
    max_model_len: int | None = None
    tensor_parallel_size: int | None = None
    pipeline_parallel_size: int | None = None
    data_parallel_size: int | None = None
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    quantization: str | None = None
    dtype: str | None = None
    kv_cache_dtype: str | None = None
    attention_backend: str | None = None
    gpu_memory_utilization: float | None = None
    enable_prefix_caching: bool | None = None
    speculative_method: str | None = None
    num_speculative_tokens: int | None = None
    """The facts above from `max_num_seqs` on: read from the arguments and the engine's config line
    (`parsing/launchargs.py`), each a number or a short validated word."""
    args: dict[str, Any] | None = None
    """The launch's arguments as the `non-default args:` / `args: Namespace(...)` line gives them
    (secrets masked, bounded). Left out of `facts` and `event_to_dict`, so the exporter's facts and `parse
    --jsonl` never carry them; the summary and compare read them by name."""
    api_server_count: int | None = None
    server_listening: bool | None = None
    """`Starting vLLM server on ...` / `Application startup complete.`: the server is up."""
    stats_logging_disabled: bool | None = None
    """vLLM's own warning that it will print no stats line (more than one API server)."""
    new_launch: bool = False
    """The first line of a vLLM start-up (version banner): per-engine state starts over."""
    asleep: bool | None = None
    """Sleep mode: True once asleep, False once the KV cache is awake (a wake-up of the weights alone
    leaves it asleep)."""
    sleep_seconds: float | None = None
    wake_seconds: float | None = None
    discard_seconds: float | None = None
    dp_unhealthy_servers: int | None = None
    dp_exited_servers: int | None = None
    dp_received_signal: str | None = None
    dp_forwarded_signal: str | None = None
    eplb_balancedness: float | None = None
    """EPLB: mean over max tokens per expert-parallel rank, 1 when balanced."""
    eplb_avg_tokens: float | None = None
    eplb_max_tokens: int | None = None
    eplb_step: int | None = None
    eplb_model: str | None = None
    eplb_steps_to_rearrangement: int | None = None
    eplb_rearrange_seconds: float | None = None
    eplb_profile: bool | None = None
    eplb_async: bool | None = None
    eplb_layers_rearranged: int | None = None
    eplb_layers: int | None = None
    max_model_len_auto: bool | None = None
    """`--max-model-len auto` (`'max_model_len': -1` in the arguments): vLLM fits the length to the KV
    cache (the `Auto-fit max_model_len` lines say how: `autofit`)."""
    autofit: Literal["attention_free", "fits", "reduced"] | None = None
    """How the auto-fit lines (0.34) fitted `max_model_len`: to the KV cache memory (`autofit_kv_gib`),
    reduced from `autofit_from_len`, or with no KV cache needed; `autofit_tentative` before warm-up."""
    autofit_from_len: int | None = None
    autofit_kv_gib: float | None = None
    autofit_kv_device: str | None = None
    autofit_host_gib: float | None = None
    autofit_after_warmup: bool | None = None
    autofit_tentative: bool | None = None
    extensible_kv_cache: bool | None = None
    """0.34: False after `Extensible KV cache off: ...` or `Disabling the extensible KV cache: ...` (the KV
    cache is then sized from the profiling estimate), True once it was extended after warm-up."""
    warmup_free_gib: float | None = None
    warmup_kv_committed_gib: float | None = None
    warmup_transient_gib: float | None = None
    warmup_peak_gib: float | None = None
    warmup_torch_growth_gib: float | None = None
    warmup_fit_blocks: int | None = None
    warmup_fit_gib: float | None = None
    warmup_requested_gib: float | None = None
    warmup_torch_limit_gib: float | None = None
    kv_remap_from_blocks: int | None = None
    kv_remap_to_blocks: int | None = None
    kv_cache_extended_blocks: int | None = None
    """`Extended KV cache to N blocks (X GiB).`: the KV cache's size after warm-up, per worker."""
    kv_cache_extended_gib: float | None = None
    kv_cap_utilization: float | None = None
    kv_cap_gib: float | None = None
    kv_cap_withheld_gib: float | None = None
    ft_engine: int | None = None
    ft_status: str | None = None
    ft_removed_ranks: tuple[int, ...] | None = None
    ft_dead_ranks: tuple[int, ...] | None = None
    ft_fault: str | None = None
    ft_recovery_timeout_seconds: int | None = None
    ft_expert_logical: int | None = None
    ft_ep_world_size: int | None = None
    ft_expert_reassignments: int | None = None
    rejected_status: str | None = None
    rejected_request: str | None = None
    offload_failed_job: Literal["store", "load"] | None = None
    offload_job_id: int | None = None
    offload_chunks_dropped: int | None = None
    offload_request: str | None = None
    breaker: str | None = None
    """A KV connector's circuit breaker opened: a warning, but no problem tag (a counter counts it)."""
    breaker_failures: int | None = None
    breaker_cooldown_seconds: float | None = None
    offload_worker_job: int | None = None
    """A KV offload worker's failed job (0.34); its traceback is not kept."""
    offload_worker_direction: Literal["store", "load"] | None = None
    offload_worker_stage: Literal["io", "transfer", "polling", "waiting"] | None = None
    tier_poll_failed: bool | None = None
    """The tiered offload's tier-poll thread failing; its traceback is not kept."""
    tier_poll_failed_rounds: int | None = None
    tier_poll_failing_seconds: float | None = None
    tier_poll_backoff_seconds: float | None = None
    tier_poll_stopped: bool | None = None
    kv_lookup_failed_request: str | None = None
    """MooncakeStore's failed lookup: the request (the error's text is not kept)."""
    checkpoint_event: str | None = None
    """A CUDA checkpoint executor's event (0.34 `CUDA_PROCESS_CHECKPOINT {json}`): numbers, states and a
    `CUDA_...` error name only, never an exception's text."""
    checkpoint_op: str | None = None
    checkpoint_pids: tuple[int, ...] | None = None
    checkpoint_rc: int | None = None
    checkpoint_error: str | None = None
    checkpoint_state_before: int | None = None
    checkpoint_rc_before: int | None = None
    checkpoint_state_after: int | None = None
    checkpoint_rc_after: int | None = None
    checkpoint_seconds: float | None = None
    checkpoint_monotonic_seconds: float | None = None
    grpc_drain_timeout_seconds: int | None = None
    grpc_drain_cancelled: bool | None = None
    grpc_stopped: Literal["server", "engine"] | None = None
    problem: str | None = None
    """A failure tag an INFO line carries (`dp_server_unhealthy`, `dp_server_exited`): counted as the
    problem of a WARNING line is."""
    exception: str | None = None
    """The exception type of the traceback printed after the line (`torch.AcceleratorError`), as
    `LogMessage.exception`."""

    def facts(self, purpose: FactsFor) -> dict[str, Any]:
        """The facts this line gives, by name (None fields left out; never where or when it was written,
        the banner's `new_launch`, nor a traceback's `exception`). `server`: the running server's facts
        (the status page, the API, the fact series), not what the server did while running
        (`RUNTIME_FIELDS`: counted and gauged, not facts). `launch`: a launch's facts (summary, compare,
        audit), without whether it listened or logged stats (`server_listening`,
        `stats_logging_disabled`: the summary says that on its own)."""
        left_out = _NOT_FACTS[purpose]
        return {name: value for name in _INFO_FIELDS
                if name not in left_out and (value := getattr(self, name)) is not None}


FactsFor = Literal["server", "launch"]
"""Whose facts `ServerInfo.facts` gives."""
_INFO_FIELDS = tuple(f.name for f in fields(ServerInfo))
RUNTIME_FIELDS = frozenset(name for name in _INFO_FIELDS if name.startswith((
    "asleep", "sleep_", "wake_", "discard_", "dp_", "eplb_", "problem", "ft_", "rejected_", "offload_",
    "breaker", "tier_poll_", "kv_lookup_", "checkpoint_", "grpc_")))
"""What a running server logs, not a fact about it (its fields named by subsystem): sleep mode, the DP
supervisor, EPLB, fault tolerance, KV offload and connector failures, CUDA checkpoints, the gRPC server's
drain, problem tags (`RuntimeState` in `exporting/exporter.py` counts and gauges them)."""
_NOT_RECORD_FACTS = {*(f.name for f in fields(_Record)), "kind", "new_launch", "exception", "args"}
_NOT_FACTS: dict[str, set[str]] = {
    "server": _NOT_RECORD_FACTS | RUNTIME_FIELDS,
    "launch": _NOT_RECORD_FACTS | {"server_listening", "stats_logging_disabled"},
}


@dataclass(slots=True, kw_only=True)
class MfuStats(_Record):
    """`Engine 000: MFU: 12.3 TF/s/device 456.7 GB/s/device` (`--enable-mfu-metrics`, vLLM 0.14+;
    `TF/s/GPU` until 0.29): the interval's estimated model FLOPs and memory traffic per device."""

    kind: Literal["mfu"] = "mfu"
    engine: int | None = None
    tflops_per_device: float
    gbps_per_device: float
    """GB/s (10**9 bytes) read and written per device."""


@dataclass(slots=True, kw_only=True)
class IterationStats(_Record):
    """One engine step (`--enable-logging-iteration-details`): `Iteration(N): A context requests, B context
    tokens, C generation requests, D generation tokens, iteration elapsed time: X ms`."""

    kind: Literal["iteration"] = "iteration"
    engine: int | None = None
    """None before vLLM 0.26 (the engine core printed the line, without `Engine NNN: `)."""
    iteration: int
    context_requests: int
    """Requests prefilling in the step (their prompt, or a chunk of it)."""
    context_tokens: int
    generation_requests: int
    """Requests decoding in the step: the running streams."""
    generation_tokens: int
    elapsed_ms: float
    """vLLM's `iteration elapsed time`, in ms (2 decimals)."""
    dummy: bool = False
    """` (dummy)`: a padding step of a data-parallel rank with nothing to run."""
    kv_cache_usage_pct: float | None = None
    device: str | None = None
    encoder_inputs: int | None = None
    encoder_embeddings: int | None = None

    @property
    def phase(self) -> Phase:
        """`columns.step_phase`: decode, prefill, mixed or idle."""
        return step_phase(self.context_requests, self.generation_requests)


RequestEventKind = Literal["received", "added", "aborted", "delta", "complete", "response", "lora_loaded"]


@dataclass(slots=True, kw_only=True)
class RequestLine(_Record):
    """A request's line (`--enable-log-requests`, `--enable-log-outputs`) or a LoRA adapter's load: ids,
    finish reason, adapter name. Never the prompt, its parameters or the output (users' text)."""

    kind: Literal["request"] = "request"
    event: RequestEventKind
    """`received` (the front end got it), `added` (given to the engine), `aborted`, `delta` (a
    streamed piece of output), `complete` (the end of a stream), `response` (a whole response),
    `lora_loaded` (`Loaded new LoRA adapter`: then `request_id` is empty)."""
    request_id: str
    aborted: tuple[str, ...] = ()
    """Every id of an `Aborted request(s) a,b.` line."""
    finish_reason: str | None = None
    lora: str | None = None
    """The adapter a `received` request asked for, or the one `lora_loaded` loaded."""


@dataclass(slots=True, kw_only=True)
class HttpAccess(_Record):
    """A uvicorn access line. The client address is not kept."""

    kind: Literal["access"] = "access"
    method: str
    path: str
    """Request path without the query string."""
    status: int


@dataclass(slots=True, kw_only=True)
class LogMessage(_Record):
    """A WARNING / ERROR / CRITICAL line: its level, where it was logged and, for the failures we
    know, a short `problem` tag. Never the message text."""

    kind: Literal["log"] = "log"
    location: str | None = None
    """`file.py:N` of the logging call."""
    problem: str | None = None
    """`engine_dead`, `out_of_memory`, `worker_died`, ... for known failure lines."""
    exception: str | None = None
    """The exception type of the record's traceback: its last line's `Type` of `Type: message`
    (`torch.AcceleratorError`, `OSError`; a dotted Python name of at most `EXCEPTION_CHARS`, never the
    message). The parser gives it for the line alone (and gives an INFO line of that shape as a
    `LogMessage` too); the Assembler keeps a record's last one on the record and gives no INFO line on.
    Not a metric label: exception types are unbounded."""


UnparsedKind = Literal[
    "stats", "spec", "prefix", "transfer", "mfu", "info", "access", "log", "envelope", "iteration", "request",
    "duplicate"]
"""The kinds of line an `Unparsed` can be: what was being read when it failed (`envelope`: a line of a
container log that is not a record of its format, `parsing/envelope.py`; `duplicate`: a stats line
written twice, its second copy left out, `assemble.Assembler`)."""


@dataclass(slots=True, kw_only=True)
class Unparsed(_Record):
    """A line that starts like a stats or spec line but could not be read: counted, never raised."""

    kind: Literal["unparsed"] = "unparsed"
    what: UnparsedKind


Event = (
    EngineStats | PrefixCacheRates | SpecDecodeStats | TransferStats | MfuStats | ServerInfo | HttpAccess
    | LogMessage | IterationStats | RequestLine | Unparsed
)


_STATS_VALUES = attrgetter(*STATS_COLUMNS)
"""A stats record's values in `STATS_COLUMNS` order (the columns are its fields' names)."""


def stats_row(e: EngineStats) -> list[Any]:
    """The CSV row of a stats record, in `STATS_COLUMNS` order (None for an empty cell; numbers as `finite`
    gives them, its test inlined: `parse --csv` makes a row per stats line)."""
    (time, file, line, engine, prompt, generation, running, waiting, swapped, gpu_kv, cpu_kv, prefix,
     prefix_cpu, mm, extra) = _STATS_VALUES(e)
    return [
        iso_time(time) if time else None,
        file,
        line,
        engine,
        prompt if prompt is None or isfinite(prompt) else None,
        generation if generation is None or isfinite(generation) else None,
        running,
        waiting,
        swapped,
        gpu_kv if gpu_kv is None or isfinite(gpu_kv) else None,
        cpu_kv if cpu_kv is None or isfinite(cpu_kv) else None,
        prefix if prefix is None or isfinite(prefix) else None,
        prefix_cpu if prefix_cpu is None or isfinite(prefix_cpu) else None,
        mm if mm is None or isfinite(mm) else None,
        json_safe(extra) if extra else None,
    ]


_KIND_STATS_COLUMNS = ("kind", *STATS_COLUMNS)
_DROP = {"stamp", "process", "pid", "level", "kind"}


def event_to_dict(e: Event) -> dict[str, Any]:
    """The JSON-lines object of an event: `kind` first, then its fields (stats: the CSV columns)."""
    if isinstance(e, EngineStats):
        row = dict(zip(_KIND_STATS_COLUMNS, ("stats", *stats_row(e)), strict=True))
        if e.repeated is not None:
            row["repeated"] = e.repeated
        return row
    data = {name: _plain(getattr(e, name)) for name in _FIELDS[type(e)]}
    for name in _DROP if e.kind != "log" else _DROP - {"level"}:
        del data[name]
    if e.repeated is None:
        del data["repeated"]
    data["time"] = iso_time(e.time) if e.time else None
    if isinstance(e, ServerInfo):
        data = {k: v for k, v in data.items() if v is not None and k != "args"}
    return {"kind": e.kind, **json_safe(data)}


def _plain(value: Any) -> Any:
    """A field's value as `asdict` gives it, without its deep copy of every value (a time whose zone was
    read from a file, `--tz` or /etc/localtime, cannot be copied)."""
    if isinstance(value, tuple):
        return tuple(_plain(v) for v in value)
    return asdict(value) if is_dataclass(value) and not isinstance(value, type) else value


def json_fields(e: Event, exclude: set[str]) -> dict[str, Any]:
    """A record's fields but `exclude` and the None ones, for JSON (the status page's and the API's last
    line): tuples as lists, a time in ISO 8601 with `Z` for UTC, as they have always been served."""
    out: dict[str, Any] = {}
    for name in _FIELDS[type(e)]:
        value = getattr(e, name)
        if value is None or name in exclude:
            continue
        if isinstance(value, datetime):
            value = value.isoformat()
            value = value[:-6] + "Z" if value.endswith("+00:00") else value
        out[name] = list(value) if isinstance(value, tuple) else value
    return out


_FIELDS: dict[type, tuple[str, ...]] = {kind: tuple(f.name for f in fields(kind)) for kind in get_args(Event)}


json_line = json.JSONEncoder(separators=(", ", ": ")).encode
"""A JSON-lines object's text (no newline): `parse --jsonl`'s and the `--records` file's spacing (one
encoder made once: `json.dumps` makes one per call)."""
