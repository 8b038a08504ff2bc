"""`logwatch parse --openmetrics`: valid OpenMetrics, the exporter's numbers, and a real backfill.

The backfill test runs the real tools: `promtool tsdb create-blocks-from openmetrics`, then a real
`prometheus` on those blocks, queried over HTTP. Without them it skips, unless
LOGWATCH_REQUIRE_PROMETHEUS is set (CI, where the Debian `prometheus` package provides both): then
it fails.
"""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.openmetrics.parser import text_string_to_metric_families
from prometheus_client.parser import text_string_to_metric_families as prometheus_text_families
from support import TESTS, required_tool, serve_prometheus

from vllm_logwatch.cli import main
from vllm_logwatch.commands.parse import run_openmetrics
from vllm_logwatch.exporting.catalogue import METRICS, name

DATA = TESTS / "data"
REAL_CPU_LOG = next((DATA / "real-vllm-cpu").glob("serve_*.log"))
_RAW = re.compile(
    r"INFO (\d\d)-(\d\d) (\d\d):(\d\d):(\d\d) \[loggers\.py:\d+\] Engine 000: Avg prompt throughput: [\d.]+ "
    r"tokens/s, Avg generation throughput: ([\d.]+) tokens/s, Running: (\d+) reqs"
)


def logged_values() -> list[tuple[int, float, int]]:
    """(unix time, generation tok/s, running) of each stats line, read with a plain regex.

    The file is named serve_20261129T192328Z.log: year 2026, times in UTC.
    """
    out = []
    for m in _RAW.finditer(REAL_CPU_LOG.read_text()):
        mo, d, h, mi, s = (int(g) for g in m.groups()[:5])
        stamp = int(datetime(2026, mo, d, h, mi, s, tzinfo=UTC).timestamp())
        out.append((stamp, float(m[6]), int(m[7])))
    return out


def openmetrics_text(*paths: Path, year: int | None = None) -> str:
    out = io.StringIO()
    run_openmetrics([str(p) for p in paths], tz="UTC", year=year, out=out)
    return out.getvalue()


def test_output_is_valid_openmetrics_with_the_exporter_names() -> None:
    text = openmetrics_text(REAL_CPU_LOG)
    assert text.endswith("\n# EOF\n")
    families = list(text_string_to_metric_families(text))  # the strict OpenMetrics parser
    known = {m.name: m.type for m in METRICS}
    assert {f.name for f in families} <= set(known)
    assert all(known[f.name] == f.type for f in families)
    by_name = {f.name: f for f in families}
    raw = logged_values()
    running = by_name[name("requests_running")].samples
    assert [(float(s.timestamp), s.value) for s in running] == [(t, r) for t, _, r in raw]
    assert all(s.labels == {"engine": "0", "model_name": "tiny-llama"} for s in running)
    # Each series' samples together and strictly in time order (OpenMetrics requires both).
    lines = [line for line in text.splitlines() if not line.startswith("#")]
    series = [line.split(" ")[0] for line in lines]
    assert len(set(series)) == sum(1 for a, b in zip(["", *series], series, strict=False) if a != b)
    for key in set(series):
        stamps = [float(line.split(" ")[2]) for line in lines if line.split(" ")[0] == key]
        assert stamps == sorted(set(stamps))


def test_vm_import_is_the_same_series_as_prometheus_text_with_milliseconds() -> None:
    om = openmetrics_text(REAL_CPU_LOG)
    out = io.StringIO()
    run_openmetrics([str(REAL_CPU_LOG)], tz="UTC", out=out, millis=True)
    text = out.getvalue()
    assert "# EOF" not in text  # Prometheus text: the family of a counter is named by its samples
    assert f"# TYPE {name('generation_tokens')}_total counter" in text
    parsed = {(s.name, tuple(sorted(s.labels.items()))): s.value
              for f in prometheus_text_families(text) for s in f.samples}
    samples = [line.split(" ") for line in om.splitlines() if not line.startswith("#")]
    millis = [line.split(" ") for line in text.splitlines() if not line.startswith("#")]
    assert [(k, v, str(round(float(t) * 1000))) for k, v, t in samples] == [tuple(m) for m in millis]
    assert len(parsed) == len({k for k, _, _ in samples})  # one value a series: the last (a valid text)


def test_token_counters_are_the_summary_estimate(capsys: pytest.CaptureFixture[str]) -> None:
    text = openmetrics_text(REAL_CPU_LOG)
    total = [s for f in text_string_to_metric_families(text) if f.name == name("generation_tokens")
             for s in f.samples if s.name.endswith("_total")]
    assert [s.value for s in total] == sorted(s.value for s in total)
    assert main(["summary", str(REAL_CPU_LOG), "--tz", "UTC", "--json"]) == 0
    (group,) = json.loads(capsys.readouterr().out)["groups"]
    assert total[-1].value == pytest.approx(group["generation_tokens"])
    # The first line waits for the second to measure its window (as the live exporter does).
    assert total[0].value == 0
    assert total[1].value == pytest.approx(2 * (603.0 + 1727.3))


def test_counters_keep_counting_across_launches_and_engines_stay_apart() -> None:
    # Oldest first: 002 (May), 021 (June, engines 0 and 1), 039 (December).
    text = openmetrics_text(DATA / "002.log", DATA / "021.log", DATA / "039.log", year=2025)
    families = {f.name: f for f in text_string_to_metric_families(text)}
    tokens = [s for s in families[name("generation_tokens")].samples if s.name.endswith("_total")]
    engine0 = [s.value for s in tokens if s.labels["engine"] == "0"]
    assert engine0 == sorted(engine0) and len(engine0) == 5 + 1 + 5
    assert {s.labels["engine"] for s in tokens} == {"0", "1"}


def test_files_out_of_time_order_lose_samples_with_a_warning(capsys: pytest.CaptureFixture[str]) -> None:
    text = openmetrics_text(DATA / "021.log", DATA / "002.log", year=2025)  # June, then May
    list(text_string_to_metric_families(text))  # still valid
    assert "samples left out: not after the previous sample" in capsys.readouterr().err


def test_no_stats_lines_and_kind_flag(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "vllm_logwatch", "parse", "--openmetrics", str(DATA / "049.log")],
        capture_output=True, text=True, timeout=60,
    )
    assert proc.returncode == 1 and proc.stdout == "" and proc.stderr.count("\n") == 1
    assert main(["parse", "--openmetrics", "--kind", "info", str(REAL_CPU_LOG)]) == 2


# -- a real backfill ------------------------------------------------------------------------------


def _tools() -> tuple[str, str]:
    return (required_tool("promtool", "prometheus", "LOGWATCH_REQUIRE_PROMETHEUS"),
            required_tool("prometheus", "prometheus", "LOGWATCH_REQUIRE_PROMETHEUS"))


@contextmanager
def running_prometheus(tsdb: Path, tmp_path: Path) -> Iterator[str]:
    """A real Prometheus serving `tsdb` (kept for 100 years: backfilled samples are old); yields its
    base URL once /-/ready answers."""
    config = tmp_path / "prometheus.yml"
    config.write_text("global:\n  scrape_interval: 1h\nscrape_configs: []\n")
    with serve_prometheus(config, tmp_path, 60, tsdb=tsdb,
                          extra_args=["--storage.tsdb.retention.time=100y"]) as server:
        yield server.url


def query_range(url: str, query: str, start: int, end: int) -> dict[int, float]:
    params = urllib.parse.urlencode({"query": query, "start": start, "end": end, "step": 1})
    with urllib.request.urlopen(f"{url}/api/v1/query_range?{params}", timeout=30) as resp:
        body: dict[str, Any] = json.load(resp)
    assert body["status"] == "success", body
    (series,) = body["data"]["result"]
    assert series["metric"] == {"__name__": query.split("{")[0], "engine": "0", "model_name": "tiny-llama",
                                "instance": "gpu1:9400", "job": "vllm-logwatch"}
    return {int(float(t)): float(v) for t, v in series["values"]}


@pytest.mark.prometheus
def test_backfill_into_a_real_prometheus(tmp_path: Path) -> None:
    promtool, _ = _tools()
    om = tmp_path / "vllm.om"
    with om.open("w") as out:
        proc = subprocess.run(
            [sys.executable, "-m", "vllm_logwatch", "parse", str(REAL_CPU_LOG), "--openmetrics",
             "--tz", "UTC", "--label", "instance=gpu1:9400", "--label", "job=vllm-logwatch"],
            stdout=out, stderr=subprocess.PIPE, text=True, timeout=120,
        )
    assert proc.returncode == 0, proc.stderr
    tsdb = tmp_path / "tsdb"
    made = subprocess.run([promtool, "tsdb", "create-blocks-from", "openmetrics", str(om), str(tsdb)],
                          capture_output=True, text=True, timeout=300)
    assert made.returncode == 0, made.stdout + made.stderr
    raw = logged_values()
    start, end = raw[0][0], raw[-1][0]
    with running_prometheus(tsdb, tmp_path) as url:
        selector = '{instance="gpu1:9400"}'
        generation = query_range(url, name("generation_throughput_tokens_per_second") + selector, start, end)
        running = query_range(url, name("requests_running") + selector, start, end)
    for stamp, gen, reqs in raw:
        assert generation[stamp] == gen, stamp
        assert running[stamp] == reqs, stamp
