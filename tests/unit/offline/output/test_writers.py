"""The CSV writer writes a stats record's row as the csv module would, whatever its cells hold."""

from __future__ import annotations

import csv
import io
import math
from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone

import pytest

from vllm_logwatch.offline.output.writers import _COMPACT_JSON, CsvWriter
from vllm_logwatch.parsing.columns import STATS_COLUMNS
from vllm_logwatch.parsing.events import EngineStats, stats_record, stats_row

BASE = stats_record(datetime(2026, 11, 29, 19, 24, 5, tzinfo=UTC), "serve.log", 12, "11-29 19:24:05",
                    "INFO", "APIServer", 0, 1301.0, 1924.5, 30, 0, "GPU", 4.8, 0.0, None, 12)


def by_csv_module(records: list[EngineStats]) -> str:
    """What `csv.writer` makes of the same rows (the writer's reference)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(STATS_COLUMNS)
    for record in records:
        row = stats_row(record)
        row[-1] = None if row[-1] is None else _COMPACT_JSON(row[-1])
        writer.writerow(row)
    return out.getvalue()


@pytest.mark.parametrize("record", [
    BASE,
    replace(BASE, file='a, "b"\nc.log'),  # every character that needs quoting
    replace(BASE, file=""),
    replace(BASE, file=None, line=None, time=None),
    replace(BASE, engine=None, engines_aggregated=2, running=None, waiting=None, swapped=3),
    replace(BASE, prompt_throughput=math.inf, generation_throughput=math.nan, mm_cache_hit_rate_pct=1e-7),
    replace(BASE, extra={"preemptions": 2.0, 'odd,"key"': 1.5}),
    replace(BASE, time=datetime(2026, 3, 29, 1, 30, 0, 250, tzinfo=timezone(timedelta(hours=-3)))),
], ids=["plain", "quoted-file", "empty-file", "no-file", "aggregated", "odd-numbers", "extra", "odd-time"])
def test_a_stats_row_is_what_the_csv_module_writes(record: EngineStats) -> None:
    out = io.StringIO()
    writer = CsvWriter(out, STATS_COLUMNS)
    for _ in range(3):
        writer.event(record)
    writer.flush()
    assert out.getvalue() == by_csv_module([record] * 3)
