"""The byte strings that mark each kind of vLLM line (the one needle table), and the common shapes of
a line, each written once as pattern text (the parser compiles them as str, the offline range workers
as bytes behind the common header, `HEADER`).

Every reader finds its candidate lines by these before any pattern runs (docs/design.md says which
reader takes which). Pure constants: the offline scanner loads no parser.
"""

from __future__ import annotations

from typing import NamedTuple

from .framing import simd_find

STATS_MARK = b"Avg prompt t"
"""Every stats line with throughputs holds this (`tput` in the Rust front end's): the live needle."""
STATS_NEEDLES: tuple[bytes, ...] = (b"Avg prompt throughput: ",)
"""Every Python stats line contains this (a long needle: fewer false starts for the search)."""
VARIANT_NEEDLES: tuple[bytes, ...] = (b"Avg prompt tput: ", b"] Running: ")
"""The Rust front end's stats line and 0.7.0's stub: searched only in files whose first block has one."""
PREFIX_NEEDLES: tuple[bytes, ...] = (b"Prefix cache hit rate: GPU",)
"""V0's separate prefix-cache line, merged into the stats record before it."""
SPEC_NEEDLES: tuple[bytes, ...] = (b" metrics: ",)
"""`SpecDecoding metrics: `, `Speculative metrics: `, `DiffusionDecoding metrics: ` (and the transfer
lines, which share it)."""
TRANSFER_NEEDLES: tuple[bytes, ...] = (b" Transfer metrics: ",)
"""`KV Transfer metrics: `, `EC Transfer metrics: `."""
FOLLOWER_NEEDLES: tuple[bytes, ...] = PREFIX_NEEDLES + SPEC_NEEDLES
"""Lines that sit right after a stats line: V0's prefix-cache line, speculative-decoding lines."""
STATS_FOLLOWER_NEEDLES: tuple[bytes, ...] = PREFIX_NEEDLES
"""The only follower a stats record needs (V0's prefix-cache line is merged into it): reading stats
alone skips the spec-decode and KV-transfer lines, which would cost a full parse each."""
MFU_NEEDLES: tuple[bytes, ...] = (b"MFU: ",)
"""`Engine 000: MFU: ... TF/s/device ... GB/s/device` (`--enable-mfu-metrics`)."""
ITERATION_NEEDLES: tuple[bytes, ...] = (b"Iteration(",)
"""`[Engine 000: ]Iteration(N): ...` (`--enable-logging-iteration-details`): one line per engine step."""
REQUEST_NEEDLES: tuple[bytes, ...] = (
    b"Received request ", b"Added request ", b"Aborted request", b"Generated response ",
    b"Loaded new LoRA adapter: ",
)
"""A request's lines (`--enable-log-requests`, `--enable-log-outputs`) and a LoRA adapter's load."""
INFO_HOOKS: tuple[str, ...] = (
    "version", "args:", "LLM engine", "KV cache", "concurrency", "blocks:", "took", "Graph capturing",
    "torch.compile", "max model len", "server", "Uvicorn", "startup complete", "api_server_count", " backend",
    "num_gpu_blocks", "DPSupervisor", "EPLB step: ", "Rearranged experts", "\u2580", "\u2584", "\u2588",
    "[FT] ", "rejecting request", "KV offload ", "circuit breaker", "I/O failed for job", "Async EPLB",
    "Mooncake lookup failed", "CUDA_PROCESS_CHECKPOINT", "Draining in-flight", "shutdown signal",
    "AsyncLLM engine", "max_model_len",
)
"""A message that holds none of these is not a start-up fact (`startup.parse_info`'s first test)."""
LEVEL_NEEDLES: tuple[bytes, ...] = (
    b"WARNING", b"ERROR", b"CRITICAL",
    b'"warning"', b'"error"', b'"critical"',  # a JSON record's level as structlog and others write it
)
"""Warnings and errors, counted by level."""
ACCESS_NEEDLE = b"HTTP/"
"""Every uvicorn access line holds it."""
LAUNCH_NEEDLES: tuple[bytes, ...] = (
    b" version ", b"args: ", b"with config: ", b"KV cache size: ", b"Maximum concurrency for ", b" backend",
    b" took ", b"Graph capturing finished", b"torch.compile take", b"Extended KV cache to ",
    b"Memory after warmup: ", b"xtensible KV cache", b"Auto-fit max_model_len", b"--max-model-len auto",
    *MFU_NEEDLES,
)
"""The lines a launch's summary reads besides the stats lines: the version banner (a new launch), the
model, the arguments and engine config, the KV cache size and concurrency, the attention backend, the
start-up durations (model load, torch.compile, graph capture, engine init), the KV cache sized after
warm-up and the auto-fit max_model_len (0.34), and the MFU lines."""
NO_STATS_NEEDLES: tuple[bytes, ...] = (b"disabling stats logging", b"disable_log_stats", b'HTTP/1.1" ')
"""For a log without stats lines, why: vLLM said it disabled stats logging, or served requests anyway."""
LIVE_NEEDLES: tuple[bytes, ...] = (
    STATS_MARK, b"Running: ", *PREFIX_NEEDLES, *SPEC_NEEDLES, *MFU_NEEDLES,
    *(hook.encode() for hook in INFO_HOOKS), *LEVEL_NEEDLES, *ITERATION_NEEDLES, *REQUEST_NEEDLES,
)
"""Every line `parse_line` gives an event for holds one of these, or `ACCESS_NEEDLE`: stats (V1, V0,
the idle Running/Waiting form, V0's prefix-cache line), spec-decode and transfer lines (` metrics: `),
MFU lines, start-up facts, warnings and errors, iteration and request lines. The live scanner hands
over every line holding one."""


class Want(NamedTuple):
    """The lines a reader wants: those holding one of `needles`, and the line right after such a line
    when it holds one of `followers` (`blocks.hit_lines`)."""

    needles: tuple[bytes, ...]
    followers: tuple[bytes, ...]


_LAUNCHES = Want(STATS_NEEDLES + SPEC_NEEDLES + LAUNCH_NEEDLES, FOLLOWER_NEEDLES)
WANTS: dict[str, Want] = {
    "stats": Want(STATS_NEEDLES, STATS_FOLLOWER_NEEDLES),
    "spec": Want(STATS_NEEDLES + SPEC_NEEDLES, FOLLOWER_NEEDLES),
    "transfer": Want(STATS_NEEDLES + TRANSFER_NEEDLES, FOLLOWER_NEEDLES),
    "mfu": Want(STATS_NEEDLES + MFU_NEEDLES, FOLLOWER_NEEDLES),
    "launches": _LAUNCHES,
    "iterations": Want(ITERATION_NEEDLES, ()),
    "requests": Want(REQUEST_NEEDLES, ()),
}
"""What each reader parses: a `parse --kind` (the kinds not here read every line), and `launches`:
the stats, spec-decode and start-up lines that summary, compare, plot and the backfill read."""

_MARKS: tuple[tuple[str, tuple[str, ...]], ...] = tuple(
    (kind, tuple(needle.decode() for needle in needles)) for kind, needles in (
        ("request", REQUEST_NEEDLES), ("iteration", ITERATION_NEEDLES),
        ("prefix", PREFIX_NEEDLES), ("stats", (STATS_MARK, b"Running: ")),
        ("transfer", TRANSFER_NEEDLES), ("spec", SPEC_NEEDLES), ("mfu", MFU_NEEDLES),
        ("access", (ACCESS_NEEDLE,)),
        ("info", tuple(hook.encode() for hook in INFO_HOOKS)),
    )
)


def kind_of(text: str) -> str:
    """The kind of a line by its needles, the first that matches in this order (for a line whose
    reading failed, counted under its kind).

    >>> kind_of("Engine 000: Avg prompt throughput: x"), kind_of("Loading weights")
    ('stats', 'log')
    """
    for kind, marks in _MARKS:
        if any(mark in text for mark in marks):
            return kind
    return "log"


def with_variants(needles: tuple[bytes, ...], head: bytes | bytearray) -> tuple[bytes, ...]:
    """`needles` and, for a reader of stats lines (`STATS_NEEDLES` among them), the variant needles that
    `head` (a file's first block) holds (SIMD search: CPython's `in` took 6 ms over 8 MiB of log)."""
    if STATS_NEEDLES[0] not in needles:
        return needles
    end = len(head)
    return needles + tuple(n for n in VARIANT_NEEDLES if n not in needles and simd_find(head, n, 0, end) > -1)


CANONICAL_STATS = (
    r"Engine (\d{3,12}): Avg prompt throughput: (\d+\.\d+) tokens/s, Avg generation throughput: (\d+\.\d+) "
    r"tokens/s, Running: (\d{1,15}) reqs, Waiting: (\d{1,15}) reqs, ([A-Z]+) KV cache usage: (\d+\.\d+)%"
    r"(?:, Prefix cache hit rate: (\d+\.\d+)%)?(?:, MM cache hit rate: (\d+\.\d+)%)?"
)
"""The common V1 stats message, read in one match (the general field reader gives the same record;
tests check it line for line): engine, prompt and generation throughput, running, waiting, the KV
cache's device and usage, prefix and MM cache hit rates. Counts have at most 15 digits, so they read
as exactly as through float."""
HEADER = r"(?:\((\w+ pid=[1-9]\d{0,11})\) )?(?:INFO|DEBUG) (\d\d-\d\d \d\d:\d\d:\d\d) \[[\w./]+:\d+\] "
"""vLLM's own header at the start of a line, as its logging config prints it: the process (`Name
pid=N`, the parser's `Assembler.who`) and the stamp (groups 1 and 2). Lines with any other prefix take
the general parser."""
MFU_START = r"(?:Engine (\d{3,12}): )?MFU: "
"""The start of an MFU message (`--enable-mfu-metrics`); the engine is absent in the Rust front end's."""
_NUMBER = r"(\d+(?:\.\d+)?|nan|inf)"
MFU_BODY = rf"{_NUMBER} TF/s/(?:GPU|device) {_NUMBER} GB/s/(?:GPU|device)"
"""The rest of an MFU message: TF/s and GB/s per device."""
ITERATION_BODY = (
    r"(?:Engine (\d{1,6}): )?Iteration\((\d{1,15})\): (\d{1,15}) context requests, "
    r"(\d{1,15}) context tokens, (\d{1,15}) generation requests, (\d{1,15}) generation tokens, "
    r"iteration elapsed time: (\d+(?:\.\d+)?) ms"
    r"( \(dummy\))?(?:, ([A-Za-z]{1,16}) KV cache usage: (\d+(?:\.\d+)?)%)?"
    r"(?:, encoder inputs: (\d{1,15}), encoder output embeddings: (\d{1,15}))?[ \t.]*"
)
"""The iteration message, its 12 groups: engine, iteration, context requests and tokens, generation
requests and tokens, elapsed ms, ` (dummy)`, KV device and usage, encoder inputs and embeddings. Counts
have at most 15 digits (a longer one is no vLLM count: the line is left unread and counted, never an
integer conversion past Python's limit)."""
