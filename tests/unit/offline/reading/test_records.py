"""The stats records of the offline readers (`offline/reading/records.py`): the range workers' rows
become the parser's own records, field for field."""

from __future__ import annotations

from dataclasses import asdict
from datetime import UTC
from pathlib import Path

import pytest
from support import TESTS

from vllm_logwatch.offline.reading.events import iter_source_events
from vllm_logwatch.offline.reading.inputs import resolve_inputs
from vllm_logwatch.offline.reading.ranges import DEFAULT_TUNING
from vllm_logwatch.offline.reading.records import source_records
from vllm_logwatch.parsing.needles import ITERATION_NEEDLES

LOGS = sorted((TESTS / "data").glob("*.log")) + sorted((TESTS / "data" / "real-vllm-cpu").glob("*.log"))
EDGES = (  # a CPU engine, a DEBUG line, no process, a line written twice, an MFU line between stats lines
    "(EngineCore_DP0 pid=7) INFO 11-29 19:23:40 [loggers.py:259] Engine 000: Avg prompt throughput: 1.0 "
    "tokens/s, Avg generation throughput: 2.5 tokens/s, Running: 3 reqs, Waiting: 0 reqs, CPU KV cache "
    "usage: 4.2%, Prefix cache hit rate: 9.0%\n"
    "DEBUG 11-29 19:23:50 [loggers.py:259] Engine 001: Avg prompt throughput: 0.0 tokens/s, Avg generation "
    "throughput: 0.0 tokens/s, Running: 0 reqs, Waiting: 1 reqs, GPU KV cache usage: 0.0%, MM cache hit "
    "rate: 50.0%\n"
    "(APIServer pid=7) INFO 11-29 19:23:50 [loggers.py:248] Engine 000: MFU: 1.5 TF/s/device "
    "2.5 GB/s/device\n"
) * 2


def _records(path: Path, general: bool) -> list[str]:
    sources, _ = resolve_inputs([str(path)], "UTC")
    if general:
        events = iter_source_events(sources[0], "launches", UTC, None,
                                    ITERATION_NEEDLES, repeats=True)
    else:
        events = source_records(sources[0], UTC, None, DEFAULT_TUNING, steps=True)
    return [f"{type(e).__name__} {asdict(e)}" for e in events]


@pytest.mark.parametrize("path", LOGS, ids=lambda p: p.name)
def test_rows_are_the_parsers_records(path: Path) -> None:
    assert _records(path, general=False) == _records(path, general=True)


def test_rows_are_the_parsers_records_on_their_edges(tmp_path: Path) -> None:
    path = tmp_path / "serve_20261129T192328Z.log"
    path.write_text(EDGES)
    records = _records(path, general=False)
    assert records == _records(path, general=True)
    assert sum(r.startswith("EngineStats") for r in records) == 2  # the second copy counted once
    assert "'device': 'CPU'" in records[0] and "'level': 'DEBUG'" in records[1]


def _stats_line(stamp: str, generation: float) -> str:
    return (f"(APIServer pid=7) INFO 11-29 {stamp} [loggers.py:259] Engine 000: Avg prompt throughput: 0.0 "
            f"tokens/s, Avg generation throughput: {generation} tokens/s, Running: 1 reqs, Waiting: 0 reqs, "
            "GPU KV cache usage: 4.2%\n")


def test_lines_written_twice_are_counted_once_when_the_stamps_go_back(tmp_path: Path) -> None:
    """A run of rows whose stamps rise has only its first row of each engine compared with the line
    before (`_repeats`); a run whose stamps go back (two logs one after the other) has every row
    compared: a line written twice is one record on both, as the parser makes them."""
    mfu = ("(APIServer pid=7) INFO 11-29 19:23:55 [loggers.py:248] Engine 000: MFU: 1.5 TF/s/device "
           "2.5 GB/s/device\n")
    lines = [_stats_line("19:23:40", 1.0), _stats_line("19:23:50", 2.0), mfu,
             _stats_line("19:23:50", 2.0),  # the line before the MFU line again: the run's first row
             _stats_line("19:24:00", 3.0), _stats_line("19:24:10", 4.0),
             _stats_line("19:00:00", 5.0), _stats_line("19:00:10", 6.0),  # back: another log
             _stats_line("19:00:10", 6.0), _stats_line("19:00:20", 7.0)]  # a line twice after it
    path = tmp_path / "serve_20261129T192328Z.log"
    path.write_text("".join(lines))
    records, general = _records(path, general=False), _records(path, general=True)
    assert sorted(records) == sorted(general)  # the duplicates' marks come first in their run of rows
    def kept(found: list[str]) -> list[str]:
        return [r for r in found if not r.startswith("Unparsed")]

    assert kept(records) == kept(general)
    assert sum(r.startswith("EngineStats") for r in records) == 7


def test_an_hours_later_stamps_are_the_stamps_datetimes() -> None:
    """`_Times` (a stamp after one of the same steady hour: that hour's start plus its minutes and
    seconds) gives what a fresh reading of each stamp gives, on the daylight-saving days of two zones
    and in UTC: values, offsets and folds."""
    from zoneinfo import ZoneInfo

    from vllm_logwatch.offline.reading.records import _Times
    from vllm_logwatch.parsing.stamps import YearClock

    days = ("10-25", "11-01", "03-08", "03-29")
    stamps = [f"{day} {h:02d}:{m:02d}:{s:02d}"
              for day in days for h in range(24) for m in range(0, 60, 7) for s in range(0, 60, 13)]
    stamps += ["11-01 01:61:00", "11-01 01:05:00"]  # a stamp no datetime has, then its hour again
    for zone in (UTC, ZoneInfo("America/New_York"), ZoneInfo("Europe/Berlin")):
        clocks = [YearClock.for_source(None, zone, 2026, first_stamp="10-25 00:00:00") for _ in range(2)]
        times, each = (_Times(lambda _s, c=c: c) for c in clocks)  # type: ignore[misc]
        got = [times(stamp) for stamp in stamps]
        fresh = [each._time(stamp) for stamp in stamps]  # each stamp read by the clock
        assert [(t, t and t.isoformat(), t and t.fold) for t in got] == \
            [(t, t and t.isoformat(), t and t.fold) for t in fresh]
