"""`parse_line(text) -> Event | None`: one vLLM log line to one event. Pure: no I/O, no clock.

A line is `[outer prefixes] [(Proc pid=N) ] LEVEL MM-DD HH:MM:SS [file.py:N] message`, but any part
before the message may be missing or different (docker, journald, compose, ANSI colours, old
`file.py:N]` locations, JSON records). So the header is *searched for*, never counted from the
start, and messages are recognised by their own first words. Stats fields are read by name: an
unknown field lands in `extra` and is counted, so a new vLLM release never breaks parsing.

`scan_block` reads a block of complete lines at once: a busy server's log is mostly uvicorn access
lines, counted by one pattern over the block (`ACCESS_LINE`) with no parse each; the few other lines
worth a parse are found by needle search. The result is that of `parse_line` on every line
(docs/design.md, test_blocks.py).
"""

from __future__ import annotations

import json
import logging
import math
import re
import traceback
from collections import Counter
from dataclasses import replace
from typing import Any, Literal, cast

from .envelope import ray_repeats
from .events import (
    EngineStats,
    Event,
    HttpAccess,
    LogMessage,
    MfuStats,
    PrefixCacheRates,
    SpecDecodeStats,
    Unparsed,
    UnparsedKind,
    stats_record,
)
from .fields import MAX_EXTRA, SPEC_FIELDS, STATS_FIELDS, Unreadable, as_kind, named_fields, read_number, slug
from .framing import hit_lines, simd_count, trim_partial_utf8
from .needles import ACCESS_NEEDLE, CANONICAL_STATS, LIVE_NEEDLES, MFU_BODY, MFU_START, STATS_MARK, kind_of
from .requests import ITERATION_START, REQUEST_STARTS, parse_iteration, parse_request_line
from .startup import parse_info, problem_of
from .transfer import TRANSFER_START, parse_transfer

# Colour codes, with or without the ESC byte (some collectors drop it: `[1;36m(APIServer ...)[0;0m`).
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]|\[[0-9][0-9;]*m")
_LEVELS = ("TRACE", "DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
# A level word not inside a longer word; the look-behinds (one per level: each has a fixed width) follow
# the word so the search skips to a level's first letter instead of trying each character of a long line.
_HEADER = re.compile(
    "(" + "|".join(_LEVELS) + ")" + "".join(rf"(?<![A-Za-z]{level})" for level in _LEVELS) + " "
    r"(\d\d-\d\d \d\d:\d\d:\d\d)(?:[.,]\d{1,9})? {1,32}"
    r"\[?([^\s\[\]]{1,256}?:\d{1,9})\] ?"
)
# `(Name pid=N)`; Name may hold one level of parentheses (Ray actor repr: `(Wrapper(rank=0) pid=N, ip=..)`).
_PROCESS = re.compile(r"\(((?:[^()]|\([^()]{0,256}\)){0,256}?) pid=(\d{1,12})[^()]{0,256}\)")
_UVICORN_LEVEL = re.compile(r"(?<![A-Za-z])(?:INFO|WARNING|ERROR|CRITICAL|DEBUG):\s+")
_ACCESS = re.compile(
    r"(?<![A-Za-z])(?:INFO|WARNING|ERROR):\s+\S+ - \"([A-Z]{3,10}) (\S+) HTTP/[\d.]+\" (\d{3})"
)
_STATS_START = re.compile(
    r"(?:Engine (\d{3,12}): |(\d{1,12}) Engines Aggregated: )?"
    r"(?=Avg prompt t|Running: \d+ reqs, Waiting: \d+ reqs\s*$)"
)
_CANONICAL = re.compile(CANONICAL_STATS)
# Searched only near its needle (`_stats_anywhere`): the optional engine prefix would otherwise be tried
# at every character of a long line.
_STATS_ANYWHERE = re.compile(
    r"(?:Engine \d{3,12}: |(?<!\d)\d{1,12} Engines Aggregated: )?Avg prompt t(?:hroughput|put): "
)
_STATS_NEEDLE = STATS_MARK.decode()
_STATS_REACH = 34
"""The longest engine prefix before the needle (`999999999999 Engines Aggregated: `), and more than the
rest of the match after it."""
_V0_PREFIX = re.compile(  # on a stripped message; a number has one point at most (`1.2.3` is no number)
    r"Prefix cache hit rate: GPU: (-?(?:\d+(?:\.\d+)?|\.\d+)|nan)%, CPU: (-?(?:\d+(?:\.\d+)?|\.\d+)|nan)%"
    r"(?:\s*\.)?$"
)
_MFU = re.compile(MFU_START)
_MFU_BODY = re.compile(rf"{MFU_BODY}\s*$")
_KV_USAGE = re.compile(r"^([A-Za-z]+(?: \+ host)?) kv cache (?:usage|used)$", re.IGNORECASE)
_KV_FETCH = re.compile(r"(\d+) waiting to start, (\d+) in progress, (\d+) completed waiting")

KNOWN_EXTRA: dict[str, str] = {
    "preemptions": "preemptions",
    "deferred": "deferred",
    "corrupted": "corrupted",
    "external prefix cache hit rate": "external_prefix_cache_hit_rate_pct",
}
"""Stats fields vLLM documents that have no CSV column: kept in `extra` under these keys."""
_KV_FETCH_KEYS = ("kv_fetch_waiting", "kv_fetch_in_progress", "kv_fetch_completed_waiting")
KNOWN_EXTRA_KEYS = frozenset(KNOWN_EXTRA.values()) | frozenset(_KV_FETCH_KEYS)

ACCESS_LINE = re.compile(
    rb"^(?:INFO|WARNING|ERROR):[ \t]+[0-9A-Fa-f.:\[\]]+ - "
    rb'"([A-Z]{3,10} [!-Z\\-~]+ HTTP/[0-9.]+" [0-9]{3})[ A-Za-z\'-]*\r?$',
    re.MULTILINE,
)
"""The common uvicorn access line, whole, as bytes (one line per match in a block, `re.MULTILINE`); its
one group is `METHOD PATH HTTP/V" STATUS`, four words (one group: `findall` makes one object a line).
`parse_line` reads every line it matches as `HttpAccess(method, path up to "?", status)` and nothing
else (tests check it), so a block's access lines can be counted without a parse. Narrow on purpose: the
client address has no letter past `f`, the path is printable ASCII without `[`, nothing but a reason
phrase follows the status; so no colour code, vLLM header, JSON record or non-ASCII space can hide in
it. Other access lines (docker or compose prefixes, JSON records, odd paths) go through `parse_line`."""
def parse_line(text: str) -> Event | None:
    """Parse one line of vLLM output; None when the line carries nothing we count.

    Never raises: a line that starts like a stats line but cannot be read gives `Unparsed`; so does
    a bug of ours on any line, counted under the kind of line it was (`what`), and logged once
    (our traceback, never the line).

    >>> e = parse_line("(APIServer pid=1) INFO 11-29 19:26:05 [loggers.py:335] Engine 000: "
    ...                "Avg prompt throughput: 915.2 tokens/s, Avg generation throughput: 2198.7 tokens/s, "
    ...                "Running: 16 reqs, Waiting: 8 reqs, CPU KV cache usage: 1.1%")
    >>> e.engine, e.generation_throughput, e.running, e.cpu_kv_cache_usage_pct
    (0, 2198.7, 16, 1.1)
    """
    try:
        return _parse(text)
    except Exception as exc:
        what = cast(UnparsedKind, kind_of(text))  # the kind of line it was, by its needles
        if not _internal_errors:
            _log.error("internal error reading a %s line: %s (line withheld: it may hold a prompt); it is "
                       "counted as a parse error, later ones only counted\n%s", what, type(exc).__name__,
                       "".join(traceback.format_tb(exc.__traceback__)).rstrip())
        _internal_errors.append(what)
        del _internal_errors[:-1]  # only whether one happened is kept
        return Unparsed(what=what)


_log = logging.getLogger(__name__)
_internal_errors: list[str] = []


_PADDING = " \t\r\n\v\f\x00"
"""Trailing bytes that are no part of a line: whitespace, and the NUL bytes a preallocated file (or
one written again after a crash) has after its last line."""


def _parse(text: str) -> Event | None:
    line, repeated = ray_repeats((_ANSI.sub("", text) if "[" in text else text).rstrip(_PADDING))
    event = _parse_unwrapped(line)
    if repeated is None or event is None:
        return event
    return replace(event, repeated=repeated)


def _parse_unwrapped(line: str) -> Event | None:
    stripped = line.strip()
    if stripped.endswith("}"):
        brace = stripped.find("{")
        if brace == 0:
            return _parse_json(stripped)
        if brace > 0 and stripped[brace:].startswith('{"') and _HEADER.search(stripped, 0, brace) is None:
            # a JSON record behind an outer prefix (docker --timestamps, compose, journald)
            event = _parse_json(stripped[brace:])
            if event is not None:
                return event
    m = _HEADER.search(line)
    if m is None or _in_request_line(line, m.start()):
        return _parse_headerless(line)
    level, stamp, location = m.group(1), m.group(2), m.group(3)
    process, pid = None, None
    for pm in _PROCESS.finditer(line, 0, m.start()):  # the innermost one is vLLM's (Ray puts its own first)
        process, pid = pm.group(1).strip(), int(pm.group(2))
    return _parse_message(line[m.end():].rstrip(), level, stamp, location, process, pid)


def _parse_message(
    msg: str, level: str | None, stamp: str | None, location: str | None, process: str | None,
    pid: int | None = None,
) -> Event | None:
    common: dict[str, Any] = {"stamp": stamp, "level": level, "process": process, "pid": pid}
    cm = _CANONICAL.fullmatch(msg)
    if cm is not None:
        return _canonical_stats(cm, common)
    sm = _STATS_START.match(msg)
    if sm is not None:
        return _parse_stats(msg, sm, common)
    if msg.startswith(REQUEST_STARTS):
        return parse_request_line(msg, common)
    if ITERATION_START.match(msg) is not None:
        return parse_iteration(msg, common)
    if msg.startswith("Prefix cache hit rate: GPU:"):
        pm = _V0_PREFIX.match(msg)
        if pm is None:
            return Unparsed(what="prefix", **common)
        return PrefixCacheRates(gpu_pct=float(pm.group(1)), cpu_pct=float(pm.group(2)), **common)
    spm = _SPEC_START.match(msg)
    if spm is not None:
        return _parse_spec(msg, spm, common)
    tm = TRANSFER_START.match(msg)
    if tm is not None:
        return parse_transfer(msg, tm, common)
    mm = _MFU.match(msg) if "MFU: " in msg else None
    if mm is not None:
        return _parse_mfu(msg, mm, common)
    info = parse_info(msg, common)
    if info is not None:
        return info
    if level in ("WARNING", "ERROR", "CRITICAL"):
        return LogMessage(location=location, problem=problem_of(msg), exception=exception_of(msg), **common)
    exception = exception_of(msg)  # an INFO traceback's last line: the Assembler folds it into its record
    return None if exception is None else LogMessage(location=location, exception=exception, **common)


EXCEPTION_CHARS = 120
"""The longest exception type kept (`LogMessage.exception`)."""
_EXCEPTION = re.compile(
    r"((?:[A-Za-z_]\w{0,59}\.){0,5}[A-Z]\w{0,59}(?:Error|Exception|ExceptionGroup|Exit|Interrupt|Iteration|Timeout))"
    r"(?::(?: .*)?)?", re.ASCII | re.DOTALL)


def exception_of(msg: str) -> str | None:
    """The exception type of a line shaped like a traceback's last line (`Type: message` or `Type`, the
    type a dotted Python name ending as exception classes do); None for any other line.

    >>> exception_of("torch.AcceleratorError: CUDA error"), exception_of("KeyboardInterrupt")
    ('torch.AcceleratorError', 'KeyboardInterrupt')
    >>> exception_of("Route: /health, Methods: GET"), exception_of("Traceback (most recent call last):")
    (None, None)
    """
    m = _EXCEPTION.fullmatch(msg)
    return m.group(1) if m is not None and len(m.group(1)) <= EXCEPTION_CHARS else None


def _parse_headerless(line: str) -> Event | None:
    am = _ACCESS.search(line) if "HTTP/" in line else None
    if am is not None:
        return _access(am)
    sm = _stats_anywhere(line)
    if sm is not None and not _in_request_line(line, sm.start()):
        # a custom format without vLLM's header: no time, but the numbers count
        return _parse_message(line[sm.start():].rstrip(), None, None, None, None)
    if "Uvicorn running on" in line or "Application startup complete" in line:
        um = _UVICORN_LEVEL.search(line)
        msg = line[um.end():] if um else line
        return parse_info(msg.strip(), {"stamp": None, "level": None, "process": None})
    if line.startswith(("WARNING:", "ERROR:", "CRITICAL:")):
        return LogMessage(level=line.split(":", 1)[0], problem=problem_of(line))
    return None


def _access(am: re.Match[str], **common: Any) -> HttpAccess:
    """The record of an access line `_ACCESS` matched: its path without the query string."""
    method, path, status = am.groups()
    return HttpAccess(method=method, path=path.split("?", 1)[0], status=int(status), **common)


def _in_request_line(line: str, at: int) -> bool:
    """Whether `line[at:]` follows a request line's first words: a client's stop strings, prompt or
    output, never a line of vLLM's own (a custom format without vLLM's header, or a header forged inside
    the text)."""
    return any(line.find(words, 0, at) >= 0 for words in REQUEST_STARTS)


def _stats_anywhere(line: str) -> re.Match[str] | None:
    """`_STATS_ANYWHERE.search(line)` in time linear in the length of the line: the pattern runs only
    in a bounded window around each occurrence of its needle."""
    i = line.find(_STATS_NEEDLE)
    while i >= 0:
        m = _STATS_ANYWHERE.search(line, max(0, i - _STATS_REACH), i + _STATS_REACH)
        if m is not None:
            return m
        i = line.find(_STATS_NEEDLE, i + 1)
    return None


def _parse_json(text: str) -> Event | None:
    """0.32+ `--logging-config.formatter json` or a custom JSON config: read its `message`."""
    try:
        record = json.loads(text)
    except ValueError:
        return None
    if not isinstance(record, dict):
        return None
    msg = record.get("message") or record.get("msg")
    if not isinstance(msg, str):
        return None
    level = record.get("levelname") or record.get("level")
    level = level.upper() if isinstance(level, str) else None
    stamp = None
    asctime = record.get("asctime")
    if isinstance(asctime, str) and re.match(r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d", asctime):
        stamp = f"{asctime[:10]} {asctime[11:19]}"  # with its year: the clock takes it as it is
    process = record.get("vllm_process_name") or record.get("processName")  # 0.31+: the `(Name pid=N)` name
    pid = record.get("process")  # Python logging's pid, when the format holds it
    am = _ACCESS.search(f"INFO:     {msg}") if " HTTP/" in msg else None
    if am is not None:
        return _access(am, stamp=stamp, level=level)
    return _parse_message(
        msg.rstrip(), level, stamp, None, process if isinstance(process, str) else None,
        pid if type(pid) is int and 0 <= pid < 1 << 63 else None,
    )


def _parse_stats(msg: str, sm: re.Match[str], common: dict[str, Any]) -> Event:
    values: dict[str, Any] = {}
    extra: dict[str, float] = {}
    unknown = 0
    try:
        for name, value in named_fields(msg[sm.end():]):
            lname = name.lower()
            typed = STATS_FIELDS.get(lname)
            if typed is not None:
                values[typed[0]] = as_kind(typed[1], read_number(value)[0])
                continue
            kv = _KV_USAGE.match(name)
            if kv is not None:
                device = kv.group(1).upper()
                column = "cpu_kv_cache_usage_pct" if device == "CPU" else "gpu_kv_cache_usage_pct"
                values[column] = read_number(value)[0]
                if device != "CPU" or "device" not in values:
                    values["device"] = device
                continue
            if lname == "kv fetch":
                fm = _KV_FETCH.search(value)
                if fm is None:
                    raise Unreadable(value)
                extra.update(zip(_KV_FETCH_KEYS, (float(g) for g in fm.groups()), strict=False))
                continue
            known = KNOWN_EXTRA.get(lname)
            if known is not None:
                extra[known] = read_number(value)[0]
                continue
            unknown += 1
            if len(extra) < MAX_EXTRA:
                try:
                    number, unit = read_number(value)
                except Unreadable:
                    number, unit = math.nan, None
                extra[slug(name, unit)] = number
    except Unreadable:
        return Unparsed(what="stats", **common)
    if not values:
        return Unparsed(what="stats", **common)
    engine = sm.group(1)
    aggregated = sm.group(2)
    return EngineStats(
        engine=int(engine) if engine else None,
        engines_aggregated=int(aggregated) if aggregated else None,
        extra=extra,
        unknown_fields=unknown,
        **values,
        **common,
    )


def _canonical_stats(cm: re.Match[str], common: dict[str, Any]) -> EngineStats:
    engine, prompt, generation, running, waiting, device, kv, prefix, mm = cm.groups()
    return stats_record(None, None, None, common["stamp"], common["level"], common["process"], int(engine),
                        float(prompt), float(generation), int(running), int(waiting), device, float(kv),
                        None if prefix is None else float(prefix), None if mm is None else float(mm),
                        common["pid"])


def _parse_mfu(msg: str, start: re.Match[str], common: dict[str, Any]) -> MfuStats | Unparsed:
    """The MFU event of a message that `_MFU` matched at its start: the line of
    `--enable-mfu-metrics` (vLLM 0.14+), after its engine's stats line each interval, `Engine 000: MFU:
    123.4 TF/s/GPU 456.7 GB/s/GPU` (0.14-0.29; the Rust front end's has no engine), `TF/s/device` and
    `GB/s/device` from 0.30.

    >>> m = "Engine 001: MFU: 12.5 TF/s/device 300.1 GB/s/device"
    >>> e = _parse_mfu(m, _MFU.match(m), {})
    >>> e.engine, e.tflops_per_device, e.gbps_per_device
    (1, 12.5, 300.1)
    """
    body = _MFU_BODY.match(msg, start.end())
    if body is None:
        return Unparsed(what="mfu", **common)
    engine = start.group(1)
    return MfuStats(engine=int(engine) if engine else None, tflops_per_device=float(body.group(1)),
                    gbps_per_device=float(body.group(2)), **common)


_SPEC_START = re.compile(r"(?:Engine (\d{3,12}): )?(SpecDecoding|Speculative|DiffusionDecoding) metrics: ")


def _parse_spec(msg: str, spm: re.Match[str], common: dict[str, Any]) -> Event:
    kind = spm.group(2)
    fmt: Literal["v0", "v1", "diffusion"] = (
        "v1" if kind == "SpecDecoding" else "v0" if kind == "Speculative" else "diffusion"
    )
    values: dict[str, Any] = {}
    extra: dict[str, float] = {}
    try:
        for name, value in named_fields(msg[spm.end():]):
            lname = name.lower().replace("tokens tokens", "tokens")
            if lname == "per-position acceptance rate":
                rates = tuple(read_number(v)[0] for v in value.split(", ") if v.strip())
                values["per_position_acceptance_rate"] = rates
                continue
            typed = SPEC_FIELDS.get(lname) if fmt != "diffusion" else None
            if typed is None:
                if len(extra) < MAX_EXTRA:
                    number, unit = read_number(value)
                    extra[slug(lname, unit)] = number
                continue
            number = read_number(value)[0]
            if fmt == "v0" and typed[0] == "draft_acceptance_rate_pct":
                number = round(number * 100.0, 9)  # V0 prints a fraction (3 decimals); the field is percent
            values[typed[0]] = as_kind(typed[1], number)
    except Unreadable:
        return Unparsed(what="spec", **common)
    if not values and not extra:
        return Unparsed(what="spec", **common)
    engine = spm.group(1)
    return SpecDecodeStats(
        format=fmt,
        cumulative=fmt == "v0",
        engine=int(engine) if engine else None,
        extra=extra,
        **values,
        **common,
    )


AccessCounts = dict[tuple[str, str, int], int]
"""Access lines by (method, path without its query, status): what `HttpAccess` says of each."""


def scan_block(
    data: bytes, first: int, *, cap: int | None = None
) -> tuple[AccessCounts, list[tuple[int, str]]]:
    """(the access lines of `data` counted, `(line number, text)` of every other line worth a parse).

    `data` holds complete lines (a last line without its newline is read as one); `first` is the number
    of its first line. Texts lose one trailing `\\r`; bad UTF-8 is replaced. With `cap`, a line longer
    than `cap` bytes is handed over cut to its first `cap` bytes.
    """

    found = ACCESS_LINE.findall(data)
    access: AccessCounts = {}
    for request, n in Counter(found).items():
        method, path, _, status = request.split(b" ")  # no other space: ACCESS_LINE says so
        key = (method.decode(), path.decode().split("?", 1)[0], int(status))
        access[key] = access.get(key, 0) + n
    end = len(data)
    needles = LIVE_NEEDLES
    if simd_count(data, ACCESS_NEEDLE, 0, end) != len(found):
        needles = (*needles, ACCESS_NEEDLE)  # access lines the pattern does not read: parse them
    starts, _ = hit_lines(data, 0, end, needles)
    hits: list[tuple[int, str]] = []
    number, counted = first, 0
    for start in starts:
        if found and ACCESS_LINE.match(data, start) is not None:
            continue  # counted above (an `ERROR:` access line, a path that holds a needle)
        number += simd_count(data, b"\n", counted, start)
        counted = start
        stop = data.find(b"\n", start)
        raw = data[start:stop if stop >= 0 else end]
        if cap is not None and len(raw) > cap:
            raw = trim_partial_utf8(raw[:cap])
        elif raw.endswith(b"\r"):
            raw = raw[:-1]
        hits.append((number, raw.decode("utf-8", "replace")))
    return access, hits


_SHUTDOWN = re.compile(
    rb"(?m)^(?:\([^)\n]{1,64}\) )?INFO [0-9-]{5} [0-9:.]{8,12} \[[\w.]{1,64}:\d{1,6}\] "
    rb"(?:\[shutdown\] API server: shutdown triggered|Shutting down FastAPI HTTP server)"
    rb"|^INFO:\s+Application shutdown complete"
)


def shutdown_at(data: bytes) -> int | None:
    """The offset of the first line of vLLM's shutdown in `data` (complete lines), or None: the launch
    ended (the status page says `ended`). vLLM 0.1x-0.2x logs `Shutting down FastAPI HTTP server.`, 0.3x
    `[shutdown] API server: shutdown triggered`, uvicorn `INFO:     Application shutdown complete.`;
    anchored to the line's own header, so a request line quoting these words (a prompt) ends nothing.

    >>> shutdown_at(b"x\\nINFO 06-11 11:46:39 [launcher.py:80] Shutting down FastAPI HTTP server.\\n")
    2
    >>> shutdown_at(b"INFO 06-11 11:46:39 [logger.py:39] Received request: "
    ...             b"'Shutting down FastAPI HTTP server'")
    """
    found = _SHUTDOWN.search(data)
    return None if found is None else found.start()
