"""logwatch's data in the stores a fleet runs, with the real stores (docs/deploy-fleet.md):

- a week-long real-shaped log (the real CPU log's stats lines, two minutes apart: a month would only
  make the test slower) through `parse --vm-import` into VictoriaMetrics' import API, and through
  `parse --openmetrics` -> `promtool tsdb create-blocks-from openmetrics` into a Prometheus; both
  queried back: the series, the samples per engine and ten sampled values at their times equal
  `parse --jsonl`'s records;
- a Prometheus in agent mode (`grafana/prometheus-agent.yml`) scraping a running `logwatch watch` and
  remote-writing into that same Prometheus (its receiver on): the forwarded series keep their
  instance and model labels; the watch's record stream (`--records`) is `parse --jsonl`'s output.

One VictoriaMetrics and two Prometheus processes for the module. Needs the Debian packages
`victoria-metrics` and `prometheus`: skipped without them, unless LOGWATCH_REQUIRE_VICTORIA_METRICS /
LOGWATCH_REQUIRE_PROMETHEUS is set (CI): then they fail.
"""

from __future__ import annotations

import io
import json
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from support import TESTS, free_port, poll_until, required_tool, run_watch, serve_prometheus, stop_process

from vllm_logwatch.commands.parse import run_openmetrics, run_parse
from vllm_logwatch.exporting.catalogue import name

pytestmark = [pytest.mark.prometheus, pytest.mark.timeout(120)]

REAL_CPU_LOG = next((TESTS / "data" / "real-vllm-cpu").glob("serve_*.log"))
START = datetime(2026, 10, 1, tzinfo=UTC)
STEP = 120
"""Seconds between the week's stats lines (VLLM_LOG_STATS_INTERVAL=120)."""
LABELS = {"instance": "gpu1:9477", "job": "vllm-logwatch"}
GAUGES = {  # metric -> (the JSON-lines field, its scale)
    "requests_running": ("running", 1.0),
    "requests_waiting": ("waiting", 1.0),
    "generation_throughput_tokens_per_second": ("generation_throughput", 1.0),
    "prompt_throughput_tokens_per_second": ("prompt_throughput", 1.0),
    "kv_cache_usage_ratio": ("cpu_kv_cache_usage_pct", 0.01),
    "prefix_cache_hit_ratio": ("prefix_cache_hit_rate_pct", 0.01),
}


def week_log(path: Path) -> None:
    """The real log's start-up lines, then its stats lines again and again, `STEP` apart, for 7 days."""
    lines = REAL_CPU_LOG.read_text(encoding="utf-8").splitlines(keepends=True)
    first = next(i for i, line in enumerate(lines) if "Avg generation throughput" in line)
    stats = [line for line in lines[first:] if "Avg generation throughput" in line]

    def stamped(line: str, at: datetime) -> str:
        head, sep, rest = line.partition(" INFO ")  # "(APIServer pid=N) INFO MM-DD HH:MM:SS ..."
        return head + sep + at.strftime("%m-%d %H:%M:%S") + rest[14:] if sep else line

    out = [stamped(line, START) for line in lines[:first]]
    out += [stamped(stats[i % len(stats)], START + timedelta(seconds=STEP * (i + 1)))
            for i in range(7 * 86400 // STEP)]
    path.write_text("".join(out), encoding="utf-8")


@dataclass
class Week:
    log: Path
    records: list[dict[str, Any]]
    """`parse --jsonl`'s records."""
    series: int
    """Distinct series in the backfill text (the same in both formats)."""


@pytest.fixture(scope="module")
def week(tmp_path_factory: pytest.TempPathFactory) -> Week:
    folder = tmp_path_factory.mktemp("week")
    log = folder / "serve_20261001_000000.log"
    week_log(log)
    out = io.StringIO()
    run_parse([str(log)], fmt="jsonl", tz="UTC", out=out)
    records = [json.loads(line) for line in out.getvalue().splitlines()]
    assert len(records) == 7 * 86400 // STEP
    return Week(log, records, 0)


def backfill(week: Week, path: Path, *, millis: bool) -> Path:
    with path.open("w", encoding="utf-8") as out:
        run_openmetrics([str(week.log)], tz="UTC", out=out, millis=millis,
                        labels=[f"{k}={v}" for k, v in LABELS.items()])
    keys = {line.split(" ")[0] for line in path.read_text(encoding="utf-8").splitlines()
            if line and not line.startswith("#")}
    assert week.series in (0, len(keys))
    week.series = len(keys)
    return path


class Store:
    """A store's Prometheus query API (Prometheus and VictoriaMetrics answer the same way)."""

    def __init__(self, url: str) -> None:
        self.client = httpx.Client(base_url=url, timeout=10.0)

    def query(self, expr: str, at: float | None = None) -> list[dict[str, Any]]:
        params = {"query": expr} if at is None else {"query": expr, "time": str(at)}
        body = self.client.get("/api/v1/query", params=params).json()
        assert body["status"] == "success", body
        result: list[dict[str, Any]] = body["data"]["result"]
        return result

    def series(self) -> list[dict[str, str]]:
        params = {"match[]": '{__name__=~"vllm_logwatch_.*"}', "start": str(START.timestamp() - 86400),
                  "end": str(START.timestamp() + 9 * 86400)}
        body = self.client.get("/api/v1/series", params=params).json()
        assert body["status"] == "success", body
        found: list[dict[str, str]] = body["data"]
        return found


def queried_back_equals_jsonl(store: Store, week: Week) -> None:
    """The store holds the backfill's series, one sample per record a series, and the records' values."""
    series = store.series()
    assert len(series) == week.series
    assert all({k: s[k] for k in LABELS} == LABELS and s["model_name"] == "tiny-llama" for s in series)
    end = datetime.fromisoformat(week.records[-1]["time"]).timestamp()
    for short in GAUGES:
        (counted,) = store.query(f"count_over_time({name(short)}[8d])", end)
        assert counted["metric"]["engine"] == "0" and float(counted["value"][1]) == len(week.records)
    for record in week.records[:: len(week.records) // 10][:10]:
        at = datetime.fromisoformat(record["time"]).timestamp()
        for short, (field, scale) in GAUGES.items():
            (found,) = store.query(name(short), at)
            assert float(found["value"][0]) == at
            assert float(found["value"][1]) == pytest.approx(record[field] * scale, rel=1e-12), (short, at)


@pytest.fixture(scope="module")
def store_prometheus(week: Week, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    """A Prometheus serving the week's promtool blocks, with the remote-write receiver on."""
    promtool = required_tool("promtool", "prometheus", "LOGWATCH_REQUIRE_PROMETHEUS")
    folder = tmp_path_factory.mktemp("store")
    om = backfill(week, folder / "vllm-backfill.om", millis=False)
    made = subprocess.run([promtool, "tsdb", "create-blocks-from", "openmetrics", "--max-block-duration=24h",
                           str(om), str(folder / "data")], capture_output=True, text=True, timeout=120)
    assert made.returncode == 0, made.stdout + made.stderr
    config = folder / "prometheus.yml"
    config.write_text("scrape_configs: []\n", encoding="utf-8")
    with serve_prometheus(config, folder, extra_args=["--storage.tsdb.retention.time=100y",
                                                      "--web.enable-remote-write-receiver"]) as server:
        store = Store(server.url)
        yield store
        store.client.close()


@pytest.fixture(scope="module")
def victoria(week: Week, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    """A VictoriaMetrics that imported the week through /api/v1/import/prometheus."""
    binary = required_tool("victoria-metrics", "victoria-metrics", "LOGWATCH_REQUIRE_VICTORIA_METRICS")
    folder = tmp_path_factory.mktemp("victoria")
    port = free_port()
    with (folder / "victoria-metrics.log").open("wb") as log:
        proc = subprocess.Popen([binary, f"-storageDataPath={folder / 'data'}", "-retentionPeriod=100y",
                                 f"-httpListenAddr=127.0.0.1:{port}", "-loggerLevel=ERROR"],
                                stdin=subprocess.DEVNULL, stdout=log, stderr=log)
    store = Store(f"http://127.0.0.1:{port}")
    try:
        def ready() -> bool:
            assert proc.poll() is None, (folder / "victoria-metrics.log").read_text()
            try:
                return store.client.get("/health").status_code == 200
            except httpx.TransportError:
                return False

        poll_until(ready, 30, "VictoriaMetrics /health", interval=0.05)
        text = backfill(week, folder / "vllm-backfill.prom", millis=True)
        with text.open("rb") as body:  # the docs' curl --data-binary @FILE .../api/v1/import/prometheus
            answer = store.client.post("/api/v1/import/prometheus", content=body.read())
        assert answer.status_code == 204, answer.text
        store.client.get("/internal/force_flush")  # searchable now, not within a few seconds
        yield store
    finally:
        store.client.close()
        stop_process(proc)


def test_victoria_metrics_import_is_queried_back_as_parse_jsonl(victoria: Store, week: Week) -> None:
    poll_until(lambda: len(victoria.series()) == week.series, 10, "VictoriaMetrics to list the series")
    queried_back_equals_jsonl(victoria, week)


def test_promtool_blocks_are_queried_back_as_parse_jsonl(store_prometheus: Store, week: Week) -> None:
    queried_back_equals_jsonl(store_prometheus, week)


def test_an_agent_forwards_a_running_watch_into_the_store(store_prometheus: Store, tmp_path: Path) -> None:
    shipped = (TESTS.parent / "grafana" / "prometheus-agent.yml").read_text(encoding="utf-8")
    write_url = str(store_prometheus.client.base_url).rstrip("/") + "/api/v1/write"
    example = "http://metrics.example.internal:9090/api/v1/write"
    assert example in shipped and "scrape_interval: 10s" in shipped
    config = tmp_path / "prometheus-agent.yml"
    config.write_text(shipped.replace(example, write_url)
                      .replace("scrape_interval: 10s", "scrape_interval: 500ms")
                      + "    queue_config:\n      batch_send_deadline: 1s\n", encoding="utf-8")
    port = free_port()
    (tmp_path / "file_sd").mkdir()
    (tmp_path / "file_sd" / "hosts.yml").write_text(f"- targets: ['127.0.0.1:{port}']\n", encoding="utf-8")
    expr = name("generation_tokens") + '_total{job="vllm-logwatch"}'
    # The agent first (its service discovery takes ~5 s to hand over targets), then the watch.
    records = tmp_path / "records.jsonl"  # and the record stream, for a log shipper
    with serve_prometheus(config, tmp_path, agent=True), \
            run_watch(REAL_CPU_LOG, "--from-start", "--tz", "UTC", "--records", str(records), port=port,
                      log_dir=tmp_path) as watch:
        (found,) = poll_until(lambda: store_prometheus.query(expr), 30, f"{expr} in the store")
        assert watch.sample(name("records_written") + "_total") == 78
    out = io.StringIO()
    run_parse([str(REAL_CPU_LOG)], fmt="jsonl", tz="UTC", out=out)
    assert records.read_text(encoding="utf-8") == out.getvalue()
    assert found["metric"]["instance"] == f"127.0.0.1:{port}"
    assert found["metric"]["model_name"] == "tiny-llama" and found["metric"]["site"] == "site-a"
    assert float(found["value"][1]) > 0
