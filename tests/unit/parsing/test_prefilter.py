"""The live path's block scanner (`blocks.scan_block`, by the needle table) never hides a line that
`parse_line` reads: checked on every sample line of every kind and on every line of every real log;
and run mode, which filters through it, learns the same start-up facts from the same bytes as watch mode."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import TESTS
from test_parse_line import (
    ACCESS_CASES,
    INFO_CASES,
    LOG_CASES,
    NONE_CASES,
    PREFIX_SPEC_CASES,
    STATS_CASES,
    TRANSFER_CASES,
)

from vllm_logwatch.exporting.exporter import ExporterMetrics
from vllm_logwatch.live.feed import LineFeeder
from vllm_logwatch.parsing.assemble import Assembler
from vllm_logwatch.parsing.line import parse_line, scan_block
from vllm_logwatch.parsing.stamps import YearClock, resolve_zone

DATA = TESTS / "data"
REAL_LOGS = sorted(DATA.glob("*.log")) + sorted((DATA / "real-vllm-cpu").glob("*.log"))


def handed_over(raw: bytes) -> bool:
    """Whether the live scanner counts the line as an access line or hands it to the parser."""
    access, hits = scan_block(raw, 1)
    return bool(access) or bool(hits)


CASES = [c.values[0] for c in STATS_CASES + PREFIX_SPEC_CASES + TRANSFER_CASES + INFO_CASES + ACCESS_CASES
         + LOG_CASES + NONE_CASES]


@pytest.mark.parametrize("line", CASES)
def test_every_sample_line_that_parses_passes_the_filter(line: object) -> None:
    assert isinstance(line, str)
    if parse_line(line) is not None:
        assert handed_over(line.encode())


@pytest.mark.parametrize("key", ["levelname", "level"])
@pytest.mark.parametrize("level", ["WARNING", "warning", "ERROR", "error", "CRITICAL", "critical"])
def test_a_json_records_warning_passes_the_filter_in_either_case(key: str, level: str) -> None:
    """vLLM's JSON logging (python-json-logger: `levelname` upper case) and other JSON formatters
    (structlog: `level` lower case): the warning is counted live as offline."""
    line = json.dumps({"asctime": "2026-11-29 19:26:05", key: level, "message": "Engine core failed"})
    event = parse_line(line)
    assert event is not None and event.level == level.upper()
    assert handed_over(line.encode())


@pytest.mark.parametrize("log", REAL_LOGS, ids=lambda p: p.name)
def test_every_real_line_that_parses_passes_the_filter(log: Path) -> None:
    hidden = [line for line in log.read_bytes().split(b"\n")
              if not handed_over(line) and parse_line(line.decode("utf-8", "replace")) is not None]
    assert hidden == []


def _facts_watch_way(data: bytes) -> dict[str, object]:
    metrics = ExporterMetrics()
    metrics.new_launch("serve.log")
    assembler = Assembler("serve.log", YearClock.for_source("serve.log", resolve_zone("UTC")), hold=False)
    for number, line in enumerate(data.split(b"\n"), 1):
        event = parse_line(line.decode("utf-8", "replace"))
        if event is not None:
            for done in assembler.feed(event, number):
                metrics.apply(done)
    for done in assembler.flush():
        metrics.apply(done)
    server: dict[str, object] = metrics.status()["server"]
    return server


@pytest.mark.parametrize("log", REAL_LOGS, ids=lambda p: p.name)
def test_run_mode_learns_the_start_up_facts_watch_mode_learns(log: Path) -> None:
    data = log.read_bytes()
    metrics = ExporterMetrics()
    feeder = LineFeeder(metrics, resolve_zone("UTC"))
    feeder.start()
    feeder.relaunch("serve.log")
    feeder.put(data)
    feeder.close(timeout=30)
    assert metrics.status()["server"] == _facts_watch_way(data)
