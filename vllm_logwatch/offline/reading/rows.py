"""The range workers' rows: vLLM's common lines rendered as compact bytes (`Chunk`), all but the time
and the line number (the parent knows the file's clock and how many lines came before the range).

Two shapes are rendered, each read by one compiled pattern (`parsing/shapes.py`): the common V1 stats
line (`Engine NNN: Avg prompt throughput: ..., <DEV> KV cache usage: x%[, Prefix ...][, MM ...]`) as
CSV cells, JSON-lines fields or numbers (`Lane`), and vLLM's iteration line (`parse --kind
iterations`) as CSV cells or JSON-lines fields. Every other line a reader wants is passed on as text for
the general parser, with its place among the rendered rows, so the output is the general path's, row
for row (tests/integration/test_fastcsv.py, tests/unit/offline/test_parse_details.py).
"""

from __future__ import annotations

import math
import re
from array import array
from dataclasses import dataclass
from typing import Literal, NamedTuple

from ...parsing.columns import step_phase
from ...parsing.framing import MAX_LINE_BYTES, hit_lines
from ...parsing.needles import STATS_FOLLOWER_NEEDLES, STATS_NEEDLES, VARIANT_NEEDLES, WANTS
from ...parsing.shapes import CANONICAL_STATS, HEADER, ITERATION_BODY

__all__ = ["CSV_LANE", "ITERATIONS_LANE", "STAMP", "VALUES", "Chunk", "Lane", "keeps_all",
           "render"]

_ROW_NEEDLES = STATS_NEEDLES + VARIANT_NEEDLES + STATS_FOLLOWER_NEEDLES
STAMP = 14
"""Bytes of a `MM-DD HH:MM:SS` stamp."""

@dataclass(frozen=True)
class Lane:
    """What the workers make of the lines: CSV cells (the default), JSON-lines fields, or numbers; of
    which lines: the common stats line, or vLLM's iteration line (`parse --kind iterations`)."""

    shape: Literal["stats", "iterations"] = "stats"
    """The line rendered: `_CANON` (stats rows) or `_ITERATION_LINE` (step rows)."""
    followers: tuple[bytes, ...] = STATS_FOLLOWER_NEEDLES
    """The follower lines a hit takes with it (`framing.hit_lines`): V0's prefix line for stats."""
    json: bool = False
    """Tails are JSON-lines fields (`_JSON_TAIL`) instead of CSV cells."""
    values: bool = False
    """Each rendered row's numbers in `Chunk.values` (`VALUES` per row: the stats records of
    `records.py`), its tail its process name (empty without one), level and KV cache device, spaced."""
    keep: tuple[bytes, ...] = _ROW_NEEDLES
    """Lines not rendered are passed on when they hold one of these."""
    numbers: bool = True
    """Line numbers (and `Chunk.lines`) are counted. Without, the numbers are not the lines' (0, or a
    count within the range) and `lines` is 0, and a sparse range reads at about twice the speed
    (counting newlines costs more than finding the stats lines): for the commands that print no line
    number (`plot`, `parse --openmetrics`)."""


CSV_LANE = Lane()
ITERATIONS_LANE = Lane(shape="iterations", followers=WANTS["iterations"].followers,
                       keep=WANTS["iterations"].needles)
VALUES = 8
"""Numbers per row of `Chunk.values`: engine, prompt and generation throughput, running, waiting, KV cache
usage, prefix and MM cache hit rates (NaN when absent)."""


_CANON = re.compile(rf"(?m)^{HEADER}{CANONICAL_STATS}\r?\n".encode())
"""A whole line of vLLM's own header and the common stats message (`parsing/shapes.py`)."""
_ITERATION_LINE = re.compile(rf"(?m)^{HEADER}{ITERATION_BODY}\r?\n".encode())
"""A whole line of vLLM's own header and the iteration message: its row is rendered here; any other
iteration line goes to the parser."""


class Chunk(NamedTuple):
    """The rows of a block of lines, as compact bytes (cheap to send from a worker).

    Rendered rows: `stamps` (14 bytes each), `tails` (the cells after the line number, joined by
    newlines), `numbers` (array('Q') bytes). Other lines: `others` (joined by newlines), their
    `other_numbers`, and `positions`: how many rendered rows come before each. Numbers are relative
    to the block's `base`; `lines` is how many lines the block had.
    """

    stamps: bytes
    tails: bytes
    numbers: bytes
    others: bytes
    other_numbers: bytes
    positions: bytes
    lines: int
    values: bytes = b""
    """array('d') bytes of the rows' numbers, with `Lane(values=True)`."""


def _num(text: bytes, empty: bytes) -> bytes:
    """The cell the general path writes for a number: `repr(float(x))`, which is the text itself for
    vLLM's `%.1f` and `%.2f` below 16 digits without a last 0 in two decimals or a leading one (and costs
    a conversion otherwise); `empty` (its empty cell: b"" in CSV, b"null" in JSON) for a number too
    large for a float, as the general path writes an infinity."""
    n, dot = len(text), text.rfind(b".")
    decimals = n - 1 - dot if dot > 0 else 0
    if n < 16 and (decimals == 1 or (decimals == 2 and text[-1] != 0x30)) and (text[0] != 0x30 or dot == 1):
        return text
    value = float(text)
    return empty if math.isinf(value) else repr(value).encode()


_JSON_TAIL = (b', "engine": %d, "prompt_throughput": %s, "generation_throughput": %s, "running": %d, '
              b'"waiting": %d, "swapped": null, "gpu_kv_cache_usage_pct": %s, "cpu_kv_cache_usage_pct": %s, '
              b'"prefix_cache_hit_rate_pct": %s, "prefix_cache_hit_rate_cpu_pct": null, '
              b'"mm_cache_hit_rate_pct": %s, "extra": null}')
"""A rendered row's JSON-lines fields after `line` (`parse --jsonl`): the general path's keys, order and
spacing (`json.dumps(..., separators=(", ", ": "))`), numbers as `repr(float)` like the CSV cells."""


def keeps_all(lane: Lane, needles: tuple[bytes, ...]) -> bool:
    """Every line found by `needles` (and `lane.followers`) is one `lane` passes on when not rendered."""
    return set(needles) | set(lane.followers) <= set(lane.keep)


def render(data: bytes | bytearray, size: int, numbers: array[int] | None, *, start: int = 0,
           first_number: int = 1, lane: Lane = CSV_LANE, every: bool = False) -> Chunk:
    """The chunk of the whole lines in `data[start:size]`; `numbers`: their line numbers, or None for
    consecutive lines numbered from `first_number`. Lines over `MAX_LINE_BYTES` bytes are left out.
    `lane`: what to render (CSV cells, JSON-lines fields or numbers) and which other lines to pass on.
    `every`: each line of `data` is one to pass on (lines found by needles that `lane.keep` holds,
    `keeps_all`), taken as they are instead of searched for again."""
    stamps: list[bytes] = []
    tails: list[bytes] = []
    canon = array("Q")
    others: list[bytes] = []
    other_numbers = array("Q")
    positions = array("Q")
    values = array("d")
    k, pos = 0, start
    json, keep, nan = lane.json, lane.keep, math.nan
    steps = lane.shape == "iterations"

    def gap(stop: int) -> None:  # the lines between two rendered rows: those holding a `keep` needle
        nonlocal k
        if every:
            for line in data[pos:stop].split(b"\n")[:-1]:
                others.append(bytes(line))
                other_numbers.append(numbers[k] if numbers is not None else k + first_number)
                positions.append(len(canon))
                k += 1
            return
        counted = pos
        for start in hit_lines(data, pos, stop, keep, limit=MAX_LINE_BYTES)[0]:
            k += data.count(b"\n", counted, start)
            counted = start
            others.append(bytes(data[start:data.find(b"\n", start, stop)]))
            other_numbers.append(numbers[k] if numbers is not None else k + first_number)
            positions.append(len(canon))
        k += data.count(b"\n", counted, stop)

    for m in (_ITERATION_LINE if steps else _CANON).finditer(data, start, size):
        if m.start() > pos:
            gap(m.start())
        if steps:
            stamps.append(m.group(2))
            tails.append(_step_tail(m.groups()[2:], json))
            canon.append(numbers[k] if numbers is not None else k + first_number)
            k += 1
            pos = m.end()
            continue
        process, stamp, engine, prompt, gen, running, waiting, device, kv, prefix, mm = m.groups()
        stamps.append(stamp)
        if lane.values:  # the tail: the header's process name and level, and the KV cache's device
            tails.append(b"%s %s %s" % (process or b"", b"DEBUG" if data[m.start(2) - 2] == 0x47 else b"INFO",
                                        device))
            values.extend((int(engine), float(prompt), float(gen), int(running), int(waiting), float(kv),
                           float(prefix) if prefix else nan, float(mm) if mm else nan))
        elif json:
            cpu = device == b"CPU"
            null = b"null"
            tails.append(_JSON_TAIL % (
                int(engine), _num(prompt, null), _num(gen, null), int(running), int(waiting),
                null if cpu else _num(kv, null), _num(kv, null) if cpu else null,
                _num(prefix, null) if prefix else null, _num(mm, null) if mm else null,
            ))
        else:
            kv_cells = (b"," + _num(kv, b"")) if device == b"CPU" else (_num(kv, b"") + b",")
            tails.append(b",%d,%s,%s,%s,%s,,%s,%s,,%s," % (
                int(engine), _num(prompt, b""), _num(gen, b""), running, waiting, kv_cells,
                _num(prefix, b"") if prefix else b"", _num(mm, b"") if mm else b"",
            ))
        canon.append(numbers[k] if numbers is not None else k + first_number)
        k += 1
        pos = m.end()
    if pos < size:
        gap(size)
    return Chunk(b"".join(stamps), b"\n".join(tails), canon.tobytes(), b"\n".join(others),
                 other_numbers.tobytes(), positions.tobytes(), k, values.tobytes())


_STEP_CSV = b",%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s"
_STEP_JSON = (b', "engine": %s, "iteration": %s, "context_requests": %s, "context_tokens": %s, '
              b'"generation_requests": %s, "generation_tokens": %s, "elapsed_ms": %s, "phase": %s, '
              b'"dummy": %s, "kv_cache_usage_pct": %s, "device": %s, "encoder_inputs": %s, '
              b'"encoder_embeddings": %s}')
"""A step row's cells after `line` (`offline/reading/details.py` `ITERATION_COLUMNS`), CSV or JSON
lines' fields: the general path's text (`csv.writer` / `json.dumps` of `iteration_row`)."""


_PHASES = {p: p.encode() for p in ("decode", "prefill", "mixed", "idle")}


def _step_tail(groups: tuple[bytes | None, ...], json: bool) -> bytes:
    """A step row's rendered cells from the 12 groups of `ITERATION_BODY`."""
    engine, it, creq, ctok, greq, gtok, ms, dummy, device, kv, enc_in, enc_out = groups
    empty = b"null" if json else b""
    ctx, gen = _int(creq), _int(greq)
    phase = _PHASES[step_phase(ctx != b"0", gen != b"0")]
    flag = (b"true" if dummy else b"false") if json else (b"True" if dummy else b"False")
    name = device.upper() if device else None
    return (_STEP_JSON if json else _STEP_CSV) % (
        _int(engine) if engine is not None else empty, _int(it), ctx, _int(ctok), gen, _int(gtok),
        _num(ms or b"", empty), b'"%s"' % phase if json else phase, flag, _num(kv, empty) if kv else empty,
        (b'"%s"' % name if json else name) if name else empty,
        _int(enc_in) if enc_in else empty, _int(enc_out) if enc_out else empty)


def _int(text: bytes | None) -> bytes:
    """The cell of a count: its digits, without leading zeros (`int`'s text)."""
    assert text is not None  # the pattern's groups that are not optional
    return text if text[0] != 0x30 or len(text) == 1 else b"%d" % int(text)


