"""Offline over container logs: every real log of tests/data wrapped as Docker json-file, containerd
and CRI-O files (lines cut at random and at the runtime's limit, stderr between the parts) gives
exactly its answer key's stats records, each at its container stamp's instant, whatever `--tz` says;
through the stats lanes of `parse --csv`/`--jsonl` and the general path alike."""

from __future__ import annotations

import csv
import io
import json
import random
from datetime import datetime
from pathlib import Path

import pytest
from envelopes import EXPECTED_LOGS, FORMATS, STATS_KEYS, wrap
from support import TESTS

from vllm_logwatch.commands.parse import run_parse
from vllm_logwatch.errors import NoStatsError
from vllm_logwatch.offline.reading.events import iter_source_events
from vllm_logwatch.offline.reading.inputs import Source
from vllm_logwatch.offline.reading.launches import iter_summary_records
from vllm_logwatch.offline.reading.ranges import DEFAULT_TUNING
from vllm_logwatch.parsing.events import EngineStats
from vllm_logwatch.parsing.stamps import resolve_zone

DATA = TESTS / "data"
LOGS, KEYS = EXPECTED_LOGS, STATS_KEYS
UTC = resolve_zone("UTC")


def split_lines(data: bytes) -> list[bytes]:
    lines = [line + b"\n" for line in data.split(b"\n")]
    lines[-1] = lines[-1][:-1]
    return lines if lines[-1] else lines[:-1]


def wrapped(tmp_path: Path, name: str, fmt: str) -> tuple[Path, list[dict[str, object]], list[datetime]]:
    """The wrapped file, the answer key, and the container instant of each answer's stats line."""
    plain = DATA / f"{name}.log"
    data, times = wrap(split_lines(plain.read_bytes()), fmt, random.Random(f"{name}/{fmt}"))
    path = tmp_path / f"{name}-{fmt}.log"
    path.write_bytes(data)
    expected = [json.loads(line) for line in (DATA / f"{name}.expected.jsonl").read_text().splitlines()]
    lines = [e.line for e in iter_source_events(Source(str(plain)), "stats", UTC, None)
             if isinstance(e, EngineStats)]
    assert len(lines) == len(expected)
    return path, expected, [times[n - 1] for n in lines if n is not None]


def parse(path: Path, fmt: str, kind: str = "stats") -> list[dict[str, object]]:
    buffer = io.BytesIO()
    out = io.TextIOWrapper(buffer, encoding="utf-8", newline="")
    run_parse([str(path)], fmt=fmt, kind=kind, tz="America/New_York", out=out)  # type: ignore[arg-type]
    out.flush()
    text = buffer.getvalue().decode()
    if fmt == "jsonl":
        return [r for r in map(json.loads, text.splitlines()) if r["kind"] == "stats"]
    rows = list(csv.DictReader(io.StringIO(text)))
    return [{k: _cell(v) for k, v in row.items()} for row in rows]


def _cell(value: str) -> object:
    if value == "":
        return None
    try:
        return int(value)
    except ValueError:
        try:
            return float(value)
        except ValueError:
            return value


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("name", LOGS)
@pytest.mark.parametrize(("out", "kind"), [("jsonl", "stats"), ("csv", "stats"), ("jsonl", "all")])
def test_answer_keys_at_container_instants(tmp_path: Path, name: str, fmt: str, out: str, kind: str) -> None:
    path, expected, instants = wrapped(tmp_path, name, fmt)
    if not expected:
        with pytest.raises(NoStatsError):
            parse(path, out, kind)
        return
    records = parse(path, out, kind)
    assert [{k: r[k] for k in KEYS} for r in records] == [{k: e[k] for k in KEYS} for e in expected]
    assert [r["prefix_cache_hit_rate_cpu_pct"] for r in records] == [
        e.get("prefix_cache_hit_rate_cpu_pct") for e in expected]
    assert [datetime.fromisoformat(str(r["time"])) for r in records] == instants


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("name", [n for n in LOGS if (DATA / f"{n}.expected.jsonl").stat().st_size])
def test_summary_reads_the_records_at_container_instants(tmp_path: Path, name: str, fmt: str) -> None:
    path, expected, instants = wrapped(tmp_path, name, fmt)
    records = [r for _, r in iter_summary_records([str(path)], tz="America/New_York",
                                                 fast=DEFAULT_TUNING) if r.kind == "stats"]
    assert [r.generation_throughput for r in records] == [e["generation_throughput"] for e in expected]
    assert [r.time for r in records] == instants


def test_a_bad_record_is_an_envelope_parse_error(tmp_path: Path) -> None:
    path = tmp_path / "c-json.log"
    path.write_bytes(
        b'{"log":"INFO 07-05 11:29:01 [loggers.py:1] Engine 000: Avg prompt throughput: 1.0 tokens/s, '
        b'Avg generation throughput: 2.0 tokens/s, Running: 1 reqs, Waiting: 0 reqs, '
        b'GPU KV cache usage: 1.0%, '
        b'Prefix cache hit rate: 0.0%\\n","stream":"stdout","time":"2025-07-05T11:29:01.5Z"}\n'
        b'{"log":"cut off\n'
        b'{"log":"a dangling part","stream":"stderr","time":"2025-07-05T11:29:02Z"}\n')
    events = list(iter_source_events(Source(str(path)), "all", UTC, None))
    assert [(e.kind, e.line) for e in events] == [("stats", 1), ("unparsed", 2)]
    assert events[0].time == datetime.fromisoformat("2025-07-05T11:29:01.5+00:00")
