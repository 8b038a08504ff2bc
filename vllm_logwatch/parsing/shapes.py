"""The common shapes of vLLM's lines, each written once as pattern text: the parser compiles them as
str (`line.py`), the offline range workers as bytes behind the common header (`HEADER`).

Pure constants, no import: the range workers load no parser.
"""

from __future__ import annotations

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
