"""Wrap plain vLLM lines as container logs, the way Docker and the CRI runtimes write them, for tests.

`wrap(lines, fmt, rng)` gives the envelope file's bytes and the container instant of each input line
(its first part's stamp). Every line is cut where the runtime cuts it (json-file and containerd at
16 KiB, CRI-O at 8 KiB) and, at random, in more places (a block-buffered stdout flushed mid-line);
stderr lines come between the parts of stdout lines, and long stdout noise lines (split as well)
come between the real lines. Cuts never split a UTF-8 character (Docker writes valid JSON strings).
"""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

FORMATS = ("docker-json", "containerd", "cri-o")
SPLIT = {"docker-json": 16 << 10, "containerd": 16 << 10, "cri-o": 8 << 10}
BASE = datetime(2025, 7, 5, 11, 29, 1, 123456, tzinfo=UTC)
_DATA = Path(__file__).parent / "data"
EXPECTED_LOGS = sorted(p.name.split(".")[0] for p in _DATA.glob("*.expected.jsonl"))
"""The real logs with an answer key (`tests/data/NAME.expected.jsonl`), wrapped by the envelope tests."""
STATS_KEYS = (
    "engine", "prompt_throughput", "generation_throughput", "running", "waiting", "swapped",
    "gpu_kv_cache_usage_pct", "cpu_kv_cache_usage_pct", "prefix_cache_hit_rate_pct", "mm_cache_hit_rate_pct",
)
"""The fields of a stats record the envelope tests compare with the answer key."""
NOISE_STDERR = b"Loading safetensors checkpoint shards:  50% Completed | 1/2 [00:01<00:01,  1.50s/it]\n"


def _rfc3339(when: datetime, fmt: str, rng: random.Random) -> str:
    """The runtime's stamp of `when`: json-file UTC with trailing zeros dropped; containerd any zone,
    trailing zeros dropped (Go's RFC3339Nano); CRI-O nine digits and an offset."""
    if fmt == "docker-json":
        zone = UTC
    elif fmt == "containerd":
        zone = rng.choice([UTC, timezone(timedelta(hours=2)), timezone(timedelta(hours=-5))])
    else:
        hours = rng.choice([0, 9, -4])
        zone = timezone(timedelta(hours=hours))
    local = when.astimezone(zone)
    nanos = f"{local.microsecond:06d}{rng.randrange(1000):03d}"
    frac = nanos if fmt == "cri-o" else nanos.rstrip("0")
    body = local.strftime("%Y-%m-%dT%H:%M:%S") + (f".{frac}" if frac else "")
    if fmt != "cri-o" and local.utcoffset() == timedelta(0):
        return body + "Z"
    offset = local.strftime("%z")
    return body + offset[:3] + ":" + offset[3:]


def _cuts(line: bytes, limit: int, rng: random.Random) -> list[bytes]:
    """`line` in pieces of at most `limit` bytes, some cut at random places too, on character starts."""
    pieces: list[bytes] = []
    rest = line
    while rest:
        end = min(len(rest), limit)
        if rng.random() < 0.3 and len(rest) > 2:
            end = rng.randrange(1, min(len(rest), limit))
        while 0 < end < len(rest) and rest[end] & 0xC0 == 0x80:
            end -= 1
        if end == 0:
            end = min(len(rest), limit)
        pieces.append(rest[:end])
        rest = rest[end:]
    return pieces


def _record(fmt: str, stream: str, stamp: str, piece: bytes, last: bool, rng: random.Random) -> bytes:
    if fmt == "docker-json":
        record: dict[str, object] = {"log": piece.decode(), "stream": stream}
        if rng.random() < 0.2:
            record["attrs"] = {"tag": "vllm"}
        record["time"] = stamp
        return json.dumps(record, separators=(",", ":")).encode() + b"\n"
    body = piece[:-1] if last and piece.endswith(b"\n") else piece
    return f"{stamp} {stream} {'F' if last else 'P'} ".encode() + body + b"\n"


def wrap(
    lines: list[bytes], fmt: str, rng: random.Random, base: datetime = BASE
) -> tuple[bytes, list[datetime]]:
    """The envelope file of `lines` (each ends in a newline, but the last may not) and each line's
    container instant."""
    limit = SPLIT[fmt]
    out: list[bytes] = []
    times: list[datetime] = []
    step = timedelta(seconds=1, microseconds=1)
    for index, line in enumerate(lines):
        if index == len(lines) // 2 or rng.random() < 0.02:  # a long stdout noise line, cut as well
            noise = b"x" * rng.randrange(limit, 3 * limit) + b"\n"
            stamp = _rfc3339(base + index * step, fmt, rng)
            parts = _cuts(noise, limit, rng)
            for i, piece in enumerate(parts):
                out.append(_record(fmt, "stdout", stamp, piece, i == len(parts) - 1, rng))
        when = base + index * step + timedelta(milliseconds=500)
        times.append(when)
        parts = _cuts(line, limit, rng)
        first = _rfc3339(when, fmt, rng)
        for i, piece in enumerate(parts):
            last = i == len(parts) - 1 and line.endswith(b"\n")
            # Docker: every part carries the first part's time; CRI: each part its own write time
            later = when + timedelta(microseconds=i)
            stamp = first if fmt == "docker-json" or i == 0 else _rfc3339(later, fmt, rng)
            out.append(_record(fmt, "stdout", stamp, piece, last, rng))
            if not last and rng.random() < 0.5:  # stderr between the parts of a stdout line
                out.append(_record(fmt, "stderr", _rfc3339(when, fmt, rng), NOISE_STDERR, True, rng))
    return b"".join(out), times
