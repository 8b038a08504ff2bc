"""vLLM's per-step and per-request lines, read for ids, counts, timings, finish reasons and adapter
names only: never the prompt or the output they carry.

    Engine 000: Iteration(7): 0 context requests, 0 context tokens, 4 generation requests,
        4 generation tokens, iteration elapsed time: 7.54 ms, CPU KV cache usage: 0.3%
                        (`--enable-logging-iteration-details`; 0.26+ from the front end's stats logger,
                        `GPU` hard-coded until 0.29, then the KV cache's device; optional ` (dummy)` after
                        the time and `, encoder inputs: N, encoder output embeddings: M` at the end)
    Iteration(7): 0 context requests, ... iteration elapsed time: 7.54 ms
                        (0.14-0.25, from the engine core: no engine, no KV usage)
    Received request ID: params: SamplingParams(...), lora_request: None.       (--enable-log-requests)
    Added request ID.
    Aborted request(s) ID,ID.                  (0.10.1+; `Aborted request ID.` before)
    Generated response ID (streaming delta): output: '...', output_token_ids: ..., finish_reason: R
    Generated response ID (streaming complete): output: '...', ..., finish_reason: R
    Generated response ID: output: '...', ..., finish_reason: R       (--enable-log-outputs)
    Loaded new LoRA adapter: name 'X', path 'Y'

A request line is kilobytes of the user's text: every pattern here is matched at the message's start
(a literal) or read from its end, and none can backtrack over the text (no nested or adjacent
unbounded repeats).
"""

from __future__ import annotations

import re
from collections.abc import Container
from typing import Any

from .events import IterationStats, RequestEventKind, RequestLine, Unparsed
from .needles import ITERATION_BODY, REQUEST_NEEDLES

_ITERATION = re.compile(ITERATION_BODY + "$")
ITERATION_START = re.compile(r"(?:Engine \d{1,6}: )?Iteration\(")
"""A message that starts like an iteration line (then read whole, or counted as unreadable)."""

REQUEST_STARTS = tuple(needle.decode() for needle in REQUEST_NEEDLES)
"""The first words of the request lines (the message's start)."""

_ID = r"([A-Za-z0-9][A-Za-z0-9._~+=@/-]{0,255})"
"""A request id as vLLM prints it (`chatcmpl-<hex>`, `cmpl-<hex>-0`, a client's `X-Request-Id`): a
bounded run of characters that cannot start a quote or a colon; anything else is not kept."""
_RECEIVED = re.compile(rf"Received request {_ID}: ")
_ADDED = re.compile(rf"Added request {_ID}[ \t]*$")
_ABORTED = re.compile(r"Aborted request(?:\(s\))? ([A-Za-z0-9._~+=@/, -]{1,4096})$")
_GENERATED = re.compile(rf"Generated response {_ID}( \(streaming delta\)| \(streaming complete\))?: ")
_REASON = re.compile(r", finish_reason: ([A-Za-z_]{1,32}|None)[ \t.]*$")
_LORA_NAME = re.compile(r"LoRARequest\(lora_name='([A-Za-z0-9._:/+-]{1,128})'")
_LORA_LOADED = re.compile(r"Loaded new LoRA adapter: name '([A-Za-z0-9._:/+-]{1,128})'")
_LORA_TAIL = ", lora_request: "
_REASON_TAIL = 64
"""How far from the end of a response line its finish reason sits (the rest is the output)."""


def aborted_ids(ids: tuple[str, ...], known: Container[str]) -> tuple[str, ...]:
    """The requests an abort line ends: those of its `ids` that are `known` (read before), once each, by
    the front end's id (vLLM 0.32 adds `-<8 hex>` to it for the engine); when none is, one request, its
    first id. vLLM joins an abort's ids with commas and takes a client's `X-Request-Id` verbatim, so a
    client's id with commas reads as many ids: it must not count as many requests.

    >>> aborted_ids(("a-1a2b3c4d", "b", "a", "c"), {"a", "b"}), aborted_ids(("x0", "x1", "x2"), set())
    (('a', 'b'), ('x0',))
    """
    found: dict[str, None] = {}
    for rid in ids:
        if rid not in known:
            rid = rid.rpartition("-")[0]
            if rid not in known:
                continue
        found[rid] = None
    return tuple(found) or ids[:1]


def parse_iteration(msg: str, common: dict[str, Any]) -> IterationStats | Unparsed:
    """The event of a message `ITERATION_START` matched.

    >>> e = parse_iteration("Engine 000: Iteration(3): 0 context requests, 0 context tokens, 4 generation "
    ...                     "requests, 4 generation tokens, iteration elapsed time: 7.54 ms, CPU KV cache "
    ...                     "usage: 0.3%", {})
    >>> e.engine, e.generation_requests, e.elapsed_ms, e.phase, e.kv_cache_usage_pct, e.device
    (0, 4, 7.54, 'decode', 0.3, 'CPU')
    """
    m = _ITERATION.match(msg)
    if m is None:
        return Unparsed(what="iteration", **common)
    engine, it, creq, ctok, greq, gtok, ms, dummy, device, kv, enc_in, enc_out = m.groups()
    return IterationStats(
        engine=int(engine) if engine is not None else None, iteration=int(it),
        context_requests=int(creq), context_tokens=int(ctok), generation_requests=int(greq),
        generation_tokens=int(gtok), elapsed_ms=float(ms), dummy=dummy is not None,
        device=device.upper() if device else None, kv_cache_usage_pct=float(kv) if kv else None,
        encoder_inputs=int(enc_in) if enc_in else None,
        encoder_embeddings=int(enc_out) if enc_out else None, **common)


def parse_request_line(msg: str, common: dict[str, Any]) -> RequestLine | Unparsed | None:
    """The event of a message that starts with one of `REQUEST_STARTS`: ids, finish reason and adapter
    name; the prompt, the parameters and the output are never read into it.

    >>> parse_request_line("Added request chatcmpl-9f.", {}).request_id
    'chatcmpl-9f'
    >>> e = parse_request_line("Generated response chatcmpl-9f (streaming complete): output: 'x, "
    ...                        "finish_reason: stop', output_token_ids: None, finish_reason: length", {})
    >>> e.event, e.finish_reason
    ('complete', 'length')
    """
    c = msg[0]
    if c == "R":
        m = _RECEIVED.match(msg)
        if m is None:
            return Unparsed(what="request", **common)
        lora = None
        tail = msg.rfind(_LORA_TAIL)
        if tail >= 0:
            lm = _LORA_NAME.match(msg, tail + len(_LORA_TAIL))
            lora = lm.group(1) if lm is not None else None
        return RequestLine(event="received", request_id=m.group(1), lora=lora, **common)
    if c == "A":
        if msg.startswith("Added request "):
            m = _ADDED.match(msg)
            if m is None:
                return Unparsed(what="request", **common)
            return RequestLine(event="added", request_id=m.group(1).rstrip("."), **common)
        m = _ABORTED.match(msg)
        if m is None:
            return Unparsed(what="request", **common)
        ids = tuple(i.strip() for i in m.group(1).rstrip(" \t.").split(",") if i.strip())
        return RequestLine(event="aborted", request_id=ids[0] if ids else "", aborted=ids, **common)
    if c == "G":
        m = _GENERATED.match(msg)
        if m is None:
            return Unparsed(what="request", **common)
        variant = m.group(2)
        event: RequestEventKind = ("response" if variant is None else "delta" if "delta" in variant
                                   else "complete")
        rm = _REASON.search(msg, max(m.end(), len(msg) - _REASON_TAIL))
        reason = rm.group(1) if rm is not None and rm.group(1) != "None" else None
        return RequestLine(event=event, request_id=m.group(1), finish_reason=reason, **common)
    if c == "L":
        m = _LORA_LOADED.match(msg)
        if m is None:
            return Unparsed(what="request", **common)
        return RequestLine(event="lora_loaded", request_id="", lora=m.group(1), **common)
    return None
