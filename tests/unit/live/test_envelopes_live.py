"""watch over container logs, the pipeline in-process: every real log of tests/data wrapped as Docker
json-file, containerd and CRI-O files (lines cut at random and at the runtime's limit, stderr between
the parts) reaches the metrics as exactly its answer key's stats records, each at its container
stamp's instant, with the zone vLLM logged in set to New York; bad records and joined lines over the
cap are counted."""

from __future__ import annotations

import json
import random
from collections.abc import Iterable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from envelopes import EXPECTED_LOGS, FORMATS, STATS_KEYS, wrap
from prometheus_client import CollectorRegistry
from support import TESTS, ManualWaker

from vllm_logwatch.exporting.exporter import ExporterMetrics
from vllm_logwatch.following.follower import Follower
from vllm_logwatch.live.pipeline import Pipeline
from vllm_logwatch.offline.reading.events import iter_source_events
from vllm_logwatch.offline.reading.inputs import Source
from vllm_logwatch.parsing.events import EngineStats, Event
from vllm_logwatch.parsing.stamps import resolve_zone

pytestmark = pytest.mark.timeout(60)

DATA = TESTS / "data"
LOGS, KEYS = EXPECTED_LOGS, STATS_KEYS
UTC = resolve_zone("UTC")


class Spy(ExporterMetrics):
    """The metrics, keeping the stats records they were given."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.records: list[EngineStats] = []

    def apply_many(self, events: Iterable[Event], *args: Any, **kwargs: Any) -> Any:
        events = list(events)
        self.records.extend(e for e in events if isinstance(e, EngineStats))
        return super().apply_many(events, *args, **kwargs)


@pytest.fixture
def watch() -> Iterator[Any]:
    pipelines: list[Pipeline] = []

    def make(path: Path, **follower: Any) -> tuple[Pipeline, Spy, CollectorRegistry]:
        metrics = Spy()
        pipeline = Pipeline(Follower(str(path), from_start=True, waker=ManualWaker(), **follower), metrics,
                            zone=resolve_zone("America/New_York"))
        registry = CollectorRegistry()
        pipeline.register(registry)
        pipelines.append(pipeline)
        return pipeline, metrics, registry

    yield make
    for pipeline in pipelines:
        pipeline.stop()


def drain(pipeline: Pipeline) -> None:
    while pipeline.step():
        pass


def real_lines(name: str) -> list[bytes]:
    """The log's lines, the last one ended too (the follower waits for a last line's newline)."""
    return [line + b"\n" for line in (DATA / f"{name}.log").read_bytes().rstrip(b"\n").split(b"\n")]


def stats_lines(name: str) -> list[int]:
    """The line number of each answer's stats line, from the offline reader of the plain log."""
    events = iter_source_events(Source(str(DATA / f"{name}.log")), "stats", UTC, None)
    return [e.line for e in events if isinstance(e, EngineStats) and e.line is not None]


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("name", LOGS)
def test_answer_keys_at_container_instants(tmp_path: Path, watch: Any, name: str, fmt: str) -> None:
    lines = real_lines(name)
    data, times = wrap(lines, fmt, random.Random(f"live/{name}/{fmt}"))
    path = tmp_path / "container.log"
    path.write_bytes(data)
    pipeline, metrics, registry = watch(path, read_bytes=4096)  # many blocks: parts cross them
    drain(pipeline)
    expected = [json.loads(line) for line in (DATA / f"{name}.expected.jsonl").read_text().splitlines()]
    got = metrics.records
    # live, V0's prefix-cache line is applied on its own, not merged into the record before it
    merged = "prefix_cache_hit_rate_cpu_pct"
    keys = [tuple(k for k in KEYS if not (k == "prefix_cache_hit_rate_pct" and merged in e))
            for e in expected]
    assert [{k: getattr(r, k) for k in ks} for r, ks in zip(got, keys, strict=False)] == [
        {k: e[k] for k in ks} for e, ks in zip(expected, keys, strict=True)]
    assert len(got) == len(expected)
    assert [r.time for r in got] == [times[n - 1] for n in stats_lines(name)]
    if got:
        engine = {"engine": str(got[-1].engine or 0), "model_name": "unknown"}
        last = registry.get_sample_value("vllm_logwatch_last_stats_timestamp_seconds", engine)
        assert last == pytest.approx(times[stats_lines(name)[-1] - 1].timestamp())
    assert registry.get_sample_value("vllm_logwatch_parse_errors_total", {"what": "envelope"}) in (None, 0.0)


def test_bad_records_and_long_joined_lines_are_counted(tmp_path: Path, watch: Any) -> None:
    path = tmp_path / "container.log"
    stats = (b"INFO 07-05 11:29:01 [loggers.py:1] Engine 000: Avg prompt throughput: 1.0 tokens/s, "
             b"Avg generation throughput: 2.0 tokens/s, Running: 1 reqs, Waiting: 0 reqs, "
             b"GPU KV cache usage: 1.0%, Prefix cache hit rate: 0.0%")
    part = b"2025-07-05T13:29:04Z stdout P " + b"x" * (400 << 10) + b"\n"
    path.write_bytes(
        b"2025-07-05T13:29:01.5+02:00 stdout P " + stats[:40] + b"\n"
        b"not a CRI line\n"
        b"2025-07-05T13:29:02+02:00 stderr F noise\n"
        b"2025-07-05T13:29:03+02:00 stdout F " + stats[40:] + b"\n"
        + part * 3 + b"2025-07-05T13:29:04Z stdout F end\n"
        + b"2025-07-05T13:29:05Z stdout P " + stats + b"\n")  # a dangling part: applied at the end
    pipeline, metrics, registry = watch(path)
    drain(pipeline)
    assert [r.time for r in metrics.records] == [datetime.fromisoformat("2025-07-05T11:29:01.5+00:00")]
    assert [r.line for r in metrics.records] == [4]
    assert registry.get_sample_value("vllm_logwatch_parse_errors_total", {"what": "envelope"}) == 1
    assert registry.get_sample_value("vllm_logwatch_lines_cut_total") == 1
    pipeline.readers.flush_all()  # the end of the launch (a new file, stdin's end)
    assert [r.line for r in metrics.records] == [4, 9]
    assert registry.get_sample_value("vllm_logwatch_stats_lines_total",
                                     {"engine": "0", "model_name": "unknown"}) == 2


def test_run_mode_reads_every_block_as_plain() -> None:
    from vllm_logwatch.live.ingest import LaunchReader
    from vllm_logwatch.parsing.assemble import Assembler

    reader = LaunchReader(ExporterMetrics(), Assembler("x"), envelopes=False)
    reader.read(b"2025-07-05T11:29:01Z stdout F INFO a line of a child that prints stamps\n")
    assert reader.format == "plain"
