"""Build grafana/dashboards/vllm-logwatch.json with Grafana's own models (grafana-foundation-sdk).

    python grafana/build_dashboard.py           # write the JSON
    python grafana/build_dashboard.py --check   # exit 1 if the committed JSON is not what this builds
    python grafana/build_dashboard.py --doc     # write the table of rows and panels in docs/dashboard.md

Edit this file (the collapsed rows: grafana/opt_in_rows.py), not the JSON;
tests/integration/test_grafana.py fails when the two disagree, when docs/dashboard.md does not list what
the JSON holds, and when a metric family of the catalogue is neither on a panel nor in `LEFT_OUT`.
Metric names come from `vllm_logwatch.exporting.catalogue` (the table of what the exporter serves), so a
renamed metric breaks the build here rather than a panel in production.

Layout, after vLLM's own dashboards (Overview, Instances, KV cache, Speculative decoding): two rows of
tiles (traffic, errors, throughput, queue, KV cache; then "down or stats missing", the stats line age,
preemptions, prefix hits, busy share, cost, engines, failure lines), a per-model and a per-instance
table, then throughput and the scheduler, the KV cache, requests and log messages, the exporter's
health. The rows most servers have no data for (start-up and cost, latency from the detail lines,
speculative decoding, KV transfers and offload, fault tolerance, sleep mode / DP / EPLB, MFU, run
mode, the fleet) come collapsed. Titles: sentence case, no unit (the unit is on the axis or value).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from grafana_foundation_sdk.builders import common as cb
from grafana_foundation_sdk.builders import dashboard as db
from grafana_foundation_sdk.builders import table, xychart
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import common
from grafana_foundation_sdk.models import dashboard as dm
from grafana_foundation_sdk.models import xychart as xym

sys.path.insert(0, str(Path(__file__).resolve().parent))
from dashboard_kit import (
    ABORTED,
    API,
    API_5XX,
    COUNT,
    DS,
    ENGINE,
    HOST,
    MODEL,
    PER_ENGINE,
    RATIO,
    REFS,
    TARGET,
    TOKENS,
    TOKS,
    Layout,
    by,
    by_engine,
    increase,
    legend,
    m,
    max_by,
    per_million,
    q,
    rate,
    st,
    sum_by,
    ts,
)
from opt_in_rows import (
    fault_tolerance,
    fleet,
    kv_transfers,
    latency,
    mfu,
    run_mode,
    runtime,
    spec_decode,
    startup_and_cost,
)

OUT = Path(__file__).resolve().parent / "dashboards" / "vllm-logwatch.json"


def tiles(lay: Layout) -> None:
    """Two rows of tiles, as vLLM's overview dashboard opens: traffic and errors, throughput, queue and
    KV cache; then what is broken or silent, pressure, and what only the logs tell (busy share, cost)."""
    http = f"sum({rate('http_requests', API)})"
    requests_ = f"sum({rate('requests', MODEL)})"
    stalled = f"sum({by_engine('engine_stalled')})"
    row = [
        st("Requests", "API requests per second from uvicorn's access lines (absent with "
           "--disable-uvicorn-access-log), probes and metric scrapes left out.", "reqps",
           [q(http, "requests", instant=True)]),
        st("Server errors", "Share of API requests answered 5xx (uvicorn's access lines); empty without "
           "traffic.", RATIO,
           [q(f"(sum({rate('http_requests', API_5XX)}) or vector(0)) / ({http} > 0)",
              "5xx", instant=True)], thresholds=((None, "green"), (0.001, "orange"), (0.01, "red"))),
        st("Aborted", "Requests aborted per second (finish reason abort: the client went away or timed "
           "out), from the request lines (--enable-log-requests --enable-log-outputs); empty without them.",
           "reqps",
           [q(f"sum({rate('requests', ABORTED)}) or 0 * {requests_}", "aborted",
              instant=True)], thresholds=((None, "green"), (0.001, "orange"))),
        st("Generation", "Generated tokens per second of the selected servers (the token counters' "
           "rate).", TOKS, [q(f"sum({rate('generation_tokens')})", "generation", instant=True)]),
        st("Running", "Requests running at the engines' last stats lines.", COUNT,
           [q(f"sum({by_engine('requests_running')})", "running", instant=True)]),
        st("Waiting", "Requests waiting at the engines' last stats lines: above 0 for long, the servers "
           "are full (see the VLLMNoHeadroom alert).", COUNT,
           [q(f"sum({by_engine('requests_waiting')})", "waiting", instant=True)],
           thresholds=((None, "green"), (1, "orange"))),
        st("KV cache", "KV cache usage of the fullest selected engine.", RATIO,
           [q(f"max({by_engine('kv_cache_usage_ratio')})", "KV cache", instant=True)],
           thresholds=((None, "green"), (0.9, "orange"), (0.95, "red"))),
        st("Down or stats missing", "Exporters Prometheus cannot scrape (up 0), engines stalled (requests "
           "running, no stats line for 3 intervals) and servers that print no stats line: 0 is all well. "
           "See Exporter health below for which.", COUNT,
           [q(f"(count(up{{{TARGET}}} == 0) or vector(0)) + ({stalled} or vector(0)) + "
              f"(sum({m('stats_missing')}{{{HOST}}}) or vector(0))", "down", instant=True)],
           thresholds=((None, "green"), (1, "red")), color_background=True),
        st("Stats line age", "Seconds since the oldest selected engine's last stats line (by the log's "
           "clock). An idle vLLM prints one all-zero line and then nothing, so age alone is no fault: "
           "stalled engines count in Down or stats missing.", "s",
           [q(f"max(time() - {by_engine('last_stats_timestamp_seconds')})", "age", instant=True)],
           thresholds=((None, "green"), (60, "yellow"), (600, "orange"))),
        st("Preemptions", "Requests preempted per second (their KV cache freed, recomputed later) from the "
           "stats lines' Preemptions field.", "suffix:/s",
           [q(f"sum({rate('preemptions')})", "preemptions", instant=True)],
           thresholds=((None, "green"), (0.001, "orange"), (1, "red"))),
        st("Prefix cache hits", "Prefix cache hit rate of the engines' last stats lines (vLLM's window of "
           "recent requests), averaged.", RATIO,
           [q(f"avg({by_engine('prefix_cache_hit_ratio')})", "prefix hits", instant=True)]),
        st("Prompt", "Prompt tokens per second (vLLM >= 0.16: prefill tokens computed, cache hits "
           "excluded).", TOKS, [q(f"sum({rate('prompt_tokens')})", "prompt", instant=True)]),
        st("Busy share", "Share of the time range in which the engines computed tokens (busy_seconds over "
           "time, averaged over the selected engines); the rest is idle GPU time.", RATIO,
           [q(f"avg({rate('busy_seconds', ENGINE, '$__range')})", "busy", instant=True)]),
        st("Cost per 1M generated tokens", "What a million generated tokens cost over the time range: GPUs "
           "(tensor x pipeline x data parallel size of each launch) x the GPU-hour price (the cost "
           "variable above), over the tokens generated. Idle time is paid too.", "currencyUSD",
           [q(per_million("generation_tokens", "$__range"), "per 1M generated", instant=True)]),
        st("Engines", "Engines reporting stats lines: one per server, or one per data-parallel rank.", COUNT,
           [q(f"count({by_engine('requests_running')})", "engines", instant=True)]),
        st("Failure lines", "Lines naming a known failure (engine_dead, out_of_memory, ...) over the time "
           "range: see Known failure lines below.", COUNT,
           [q(f"sum({increase('problems', HOST, '$__range')}) or vector(0)", "failures", instant=True)],
           thresholds=((None, "green"), (1, "red"))),
    ]
    for panel in row:
        lay.add(panel, 3, 4)


_TABLE_UNITS = {"Engines": COUNT, "Instances": COUNT, "Generation": TOKS, "Prompt": TOKS, "Running": COUNT,
                "Waiting": COUNT, "KV cache": RATIO, "Preemptions": "suffix:/s", "Stats line age": "s"}


def summary_table(title: str, description: str, keys: str, columns: Sequence[tuple[str, str]]) -> table.Panel:
    """A table of one row per `keys` (instant queries over the time range, merged by their labels)."""
    rename = {"Value" if len(columns) == 1 else f"Value #{ref}": name
              for ref, (name, _) in zip(REFS[:len(columns)], columns, strict=True)}
    panel = (
        table.Panel().title(title).description(description).unit("none")
        .align(common.FieldTextAlignment.AUTO).inspect(False).show_header(True)
        .cell_height(common.TableCellHeight.SM)
        .with_transformation(dm.DataTransformerConfig(id_val="merge", options={}))
        .with_transformation(dm.DataTransformerConfig(id_val="organize", options={
            "excludeByName": {"Time": True}, "renameByName": {"model_name": "Model", "instance": "Instance",
                                                             **rename}}))
    )
    for ref, (name, expr) in zip(REFS[:len(columns)], columns, strict=True):
        panel = panel.with_target(q(expr, instant=True, table_format=True).ref_id(ref))
        panel = panel.override_by_name(name, [dm.DynamicConfigValue(id_val="unit", value=_TABLE_UNITS[name])])
    return panel


def tables(lay: Layout) -> None:
    """vLLM's per-model summary (Overview) and instance table (Instances), from what the logs give."""
    lay.row("Models and instances")

    def columns(keys: str) -> list[tuple[str, str]]:
        return [
            ("Engines", f"count by ({keys}) ({by_engine('requests_running')})"),
            ("Generation", f"sum by ({keys}) ({rate('generation_tokens', ENGINE, '$__range')})"),
            ("Prompt", f"sum by ({keys}) ({rate('prompt_tokens', ENGINE, '$__range')})"),
            ("Running", f"sum by ({keys}) ({by_engine('requests_running')})"),
            ("Waiting", f"sum by ({keys}) ({by_engine('requests_waiting')})"),
            ("KV cache", f"max by ({keys}) ({by_engine('kv_cache_usage_ratio')})"),
            ("Stats line age", f"max by ({keys}) (time() - {by_engine('last_stats_timestamp_seconds')})"),
        ]
    lay.add(summary_table(
        "Models", "Each model over the time range: instances and engines, generation and prompt tokens "
        "per second, requests running and waiting now, the fullest KV cache, the oldest stats line.",
        "model_name",
        [("Instances", f"count by (model_name) (group by (model_name, {by('instance')}) "
                       f"({by_engine('requests_running')}))"),
         *columns("model_name")]), 24, 5)
    keys = by("instance, model_name")
    lay.add(summary_table(
        "Instances", "Each instance (and source: pod, container, launch script) and model: the same "
        "columns, and the preemptions per second over the time range.", keys,
        [*columns(keys), ("Preemptions", f"sum by ({keys}) ({rate('preemptions', ENGINE, '$__range')})")]),
        24, 7)


def overview(lay: Layout) -> None:
    """Throughput and the scheduler (vLLM's example dashboard's "Token throughput" and "Scheduler state")."""
    lay.row("Throughput and scheduler")
    lay.add(ts(
        "Generation throughput by engine",
        "Avg generation throughput of each engine's last stats line (tokens/s over vLLM's stats "
        "interval), and their sum per server.", TOKS,
        [q(by_engine("generation_throughput_tokens_per_second"), PER_ENGINE),
         q(sum_by("instance, model_name", by_engine("generation_throughput_tokens_per_second")),
           "{{instance}} all engines")]), 12, 8)
    lay.add(ts(
        "Token throughput",
        "Prompt and generated tokens per second from the token counters (throughput x stats "
        "interval), as vLLM's own dashboard shows rate(vllm:prompt_tokens_total) and "
        "rate(vllm:generation_tokens_total). From vLLM 0.16 the log's prompt throughput counts only "
        "prefill tokens computed (prefix-cache hits excluded).", TOKS,
        [q(sum_by("instance, model_name", rate("prompt_tokens")), "Prompt tokens/s {{instance}}"),
         q(sum_by("instance, model_name", rate("generation_tokens")), "Generation tokens/s {{instance}}")]),
        12, 8)
    lay.add(ts(
        "Prompt throughput by engine",
        "Avg prompt throughput of each engine's last stats line (vLLM >= 0.16: prefill tokens "
        "computed, cache hits excluded).", TOKS,
        [q(by_engine("prompt_throughput_tokens_per_second"), PER_ENGINE),
         q(sum_by("instance, model_name", by_engine("prompt_throughput_tokens_per_second")),
           "{{instance}} all engines")]), 12, 8)
    lay.add(ts(
        "Scheduler state",
        "Requests running and waiting at each engine's last stats line (V0: Pending counts as "
        "waiting), and the waiting ones deferred for transient reasons (vLLM >= 0.20).", COUNT,
        [q(by_engine("requests_running"), "Running {{instance}} engine {{engine}}"),
         q(by_engine("requests_waiting"), "Waiting {{instance}} engine {{engine}}"),
         q(by_engine("requests_deferred"), "Deferred {{instance}} engine {{engine}}")]), 12, 8)


def concurrency(lay: Layout) -> None:
    xy = (
        xychart.Panel().title("Throughput vs running requests")
        .description("Each point is one moment: requests running (x) and generation tokens/s (y), "
                     "summed over the selected engines. The cloud answers \"how many tok/s do I get "
                     "at N concurrent streams\". Select one instance for a clean picture.")
        .unit(TOKS)
        .mapping(xym.SeriesMapping.AUTO)
        .show(xym.XYShowMode.POINTS)
        .point_size(xychart.XychartFieldConfigPointSize().fixed(5))
        .axis_label("generation tok/s")
        .legend(legend())
        .tooltip(cb.VizTooltipOptions().mode(common.TooltipDisplayMode.SINGLE)
                 .sort(common.SortOrder.NONE))
        .with_target(q(f"sum({by_engine('requests_running')})", "running requests").ref_id("A"))
        .with_target(q(f"sum({by_engine('generation_throughput_tokens_per_second')})",
                       "generation tok/s").ref_id("B"))
        .with_transformation(dm.DataTransformerConfig(
            id_val="joinByField", options={"byField": "Time", "mode": "inner"}))
        .override_by_name("running requests", [dm.DynamicConfigValue(id_val="unit", value="short"),
                                               dm.DynamicConfigValue(id_val="custom.axisLabel",
                                                                     value="running requests")])
    )
    lay.add(xy, 12, 10)
    lay.add(ts(
        "Tokens per interval",
        "Prompt and generated tokens in each interval of the graph (increase of the token "
        "counters), summed over the selected engines.", TOKENS,
        [q(sum_by("instance, model_name", increase("prompt_tokens", ENGINE)), "Prompt {{instance}}"),
         q(sum_by("instance, model_name", increase("generation_tokens", ENGINE)),
           "Generated {{instance}}")], bars=True, interval="1m", calcs=("sum", "mean", "max")), 12, 10)
    lay.add(ts(
        "Generation throughput per running request",
        "Generation throughput divided by running requests: the speed one stream sees. It falls as "
        "concurrency rises; where it falls fast, the batch is memory- or compute-bound.", TOKS,
        [q(f"{sum_by('instance, model_name', by_engine('generation_throughput_tokens_per_second'))}"
           f" / clamp_min({sum_by('instance, model_name', by_engine('requests_running'))}, 1)",
           "{{instance}} per stream")]), 12, 8)


def kv_cache(lay: Layout) -> None:
    """vLLM's KV cache dashboard: usage, hits, preemptions, and the sizes the start-up lines give."""
    lay.row("KV cache")
    lay.add(ts(
        "Cache hit ratios",
        "Prefix cache (local and external: a KV connector's), and multi-modal cache hit rates as vLLM "
        "prints them: a window over the last "
        "~1000 requests (V1), not the interval, so they move slowly and survive idle time.", RATIO,
        [q(by_engine("prefix_cache_hit_ratio"), "Prefix {{instance}} engine {{engine}}"),
         q(by_engine("external_prefix_cache_hit_ratio"), "External prefix {{instance}} engine {{engine}}"),
         q(by_engine("mm_cache_hit_ratio"), "MM {{instance}} engine {{engine}}")], max_val=1), 12, 8)
    lay.add(ts(
        "Cache utilization",
        "KV cache usage of the serving device (GPU, or CPU on the CPU backend) at each engine's last "
        "stats line, as vLLM's vllm:kv_cache_usage_perc.", RATIO,
        [q(by_engine("kv_cache_usage_ratio"), "KV cache {{instance}} engine {{engine}}")],
        max_val=1), 12, 8)
    lay.add(ts(
        "Preemptions",
        "Requests preempted per second by each engine (the stats lines' Preemptions field): the KV cache "
        "ran full and running requests gave their blocks back, to be recomputed.", "suffix:/s",
        [q(rate("preemptions"), PER_ENGINE)]), 12, 8)
    lay.add(st(
        "KV cache capacity",
        "KV cache size in tokens, from vLLM's start-up line (\"KV cache size: N tokens\").", TOKENS,
        [q(max_by("instance, model_name", f"{m('kv_cache_capacity_tokens')}{{{MODEL}}}"),
           "{{instance}}", instant=True)]), 3, 8)
    lay.add(st(
        "Maximum concurrency",
        "How many requests of the given length fit in the KV cache at once (vLLM's start-up line "
        "\"Maximum concurrency for N tokens per request\").", "suffix:x",
        [q(max_by("instance, model_name, tokens_per_request", f"{m('max_concurrency')}{{{MODEL}}}"),
           "{{instance}} at {{tokens_per_request}} tokens/request", instant=True)]), 3, 8)
    lay.add(st(
        "KV cache blocks", "KV cache blocks on the device (start-up: num_gpu_blocks, # GPU blocks).", COUNT,
        [q(max_by("instance, model_name", f"{m('kv_cache_blocks')}{{{MODEL}}}"), "{{instance}}",
           instant=True)]), 3, 8)
    lay.add(st(
        "KV cache memory", "KV cache memory of a worker (\"Available KV cache memory\" at start-up, or the "
        "extended size after warm-up).", "bytes",
        [q(max_by("instance, model_name", f"{m('kv_cache_capacity_bytes')}{{{MODEL}}}"), "{{instance}}",
           instant=True)]), 3, 8)


def requests(lay: Layout) -> None:
    lay.row("Requests and log messages")
    api = API
    lay.add(ts(
        "HTTP requests by status",
        "Requests per second from uvicorn's access lines (absent with --disable-uvicorn-access-log), "
        "probes and metric scrapes left out.", "reqps",
        [q(sum_by("instance, status", rate("http_requests", api)), "{{status}} {{instance}}")],
        stack=True), 12, 8)
    lay.add(ts(
        "HTTP requests by path",
        "Requests per second by method and path (ids in paths folded to {id}, bounded label values).",
        "reqps",
        [q(sum_by("method, path", rate("http_requests", HOST)), "{{method}} {{path}}")]), 12, 8)
    lay.add(ts(
        "Failed and rejected requests",
        "Per second: API requests answered 5xx, requests aborted (request lines), refused by an engine "
        "that was not healthy (vLLM 0.34 fault tolerance), and with corrupted output (the stats lines' "
        "Corrupted field).", "reqps",
        [q(sum_by("instance", rate("http_requests", API_5XX)), "5xx {{instance}}"),
         q(sum_by("instance", rate("requests", ABORTED)), "aborted {{instance}}"),
         q(sum_by("instance", rate("rejected_requests", HOST)), "rejected {{instance}}"),
         q(sum_by("instance", rate("corrupted_requests")), "corrupted {{instance}}")]), 24, 8)
    lay.add(ts(
        "Warnings and errors",
        "WARNING, ERROR and CRITICAL records in the log per interval (a traceback counts once).",
        COUNT,
        [q(sum_by("instance, level", increase("log_messages")), "{{level}} {{instance}}")],
        bars=True, interval="1m", calcs=("sum", "max")), 12, 8)
    lay.add(ts(
        "Known failure lines",
        "Lines that name a known failure (engine_dead, out_of_memory, kv_cache_too_small, ...) per "
        "interval. The exporter keeps only the tag; the log holds the text.", COUNT,
        [q(sum_by("instance, problem", increase("problems")), "{{problem}} {{instance}}")],
        bars=True, interval="1m", calcs=("sum", "max")), 12, 8)


def health(lay: Layout) -> None:
    lay.row("Exporter health")
    lay.add(st(
        "Last stats line age",
        "Seconds since each engine's last stats line (by the log's own clock). An idle vLLM prints "
        "one all-zero line and then nothing, so a large age alone is not a fault: see Engine "
        "stalled.", "s",
        [q("time() - " + max_by("instance, engine", by_engine("last_stats_timestamp_seconds")),
           PER_ENGINE, instant=True)],
        thresholds=((None, "green"), (60, "yellow"), (600, "orange"))), 6, 6)
    lay.add(st(
        "Engine stalled",
        "STALLED: requests were running and no stats line came for 3 stats intervals.", "none",
        [q(max_by("instance, engine", by_engine("engine_stalled")),
           PER_ENGINE, instant=True)],
        mappings={"0": ("OK", "green"), "1": ("STALLED", "red")}, color_background=True), 6, 6)
    lay.add(st(
        "Stats lines missing",
        "MISSING: the server runs but prints no stats line (reason stats_logging_disabled: "
        "--disable-log-stats; requests_without_stats: several API servers, data parallel).", "none",
        [q(max_by("instance, reason", f"{m('stats_missing')}{{{HOST}}}"), "{{instance}} {{reason}}",
           instant=True)],
        mappings={"0": ("OK", "green"), "1": ("MISSING", "orange")}, color_background=True), 6, 6)
    lay.add(st(
        "Exporter up",
        "Whether Prometheus could scrape each logwatch (its `up` series).", "none",
        # A target's labels only: one logwatch follows many sources, and up is not per source.
        [q(f"up{{{TARGET}}}", "{{instance}}", instant=True)],
        mappings={"1": ("UP", "green"), "0": ("DOWN", "red")}, color_background=True), 6, 6)
    info = (
        table.Panel().title("vLLM servers")
        .description("vLLM version and model from each server's start-up lines.")
        .unit("none").align(common.FieldTextAlignment.AUTO).inspect(False)
        .show_header(True).cell_height(common.TableCellHeight.SM)
        .with_target(q(max_by("instance, model_name, model, version", f"{m('server')}{{{HOST}}}"),
                       instant=True, table_format=True).ref_id("A"))
        .with_transformation(dm.DataTransformerConfig(
            id_val="organize", options={"excludeByName": {"Time": True, "Value": True}}))
    )
    lay.add(info, 12, 6)
    lay.add(ts(
        "Stats interval",
        "Typical spacing of each engine's stats lines (VLLM_LOG_STATS_INTERVAL when set with "
        "--stats-interval, else measured).", "s",
        [q(by_engine("stats_interval_seconds"), PER_ENGINE)]), 12, 6)
    lay.add(ts(
        "Parse errors and unknown fields",
        "Lines that looked like stats/spec lines but could not be read (a vLLM format change), and "
        "stats fields the parser did not know (kept in the data, not lost).", COUNT,
        [q(sum_by("instance, what", increase("parse_errors")), "parse errors {{what}} {{instance}}"),
         q(sum_by("instance", increase("unknown_fields")), "unknown fields {{instance}}")],
        bars=True, interval="1m", calcs=("sum", "max")), 12, 8)
    lay.add(ts(
        "Log lines read",
        "Lines per second the exporter read from the vLLM logs.", "count:lines/s",
        [q(sum_by("instance", rate("log_lines", HOST)), "{{instance}}")]), 6, 8)
    lay.add(ts(
        "Log bytes read",
        "Bytes per second the exporter read from the vLLM logs.", "Bps",
        [q(sum_by("instance", rate("log_bytes", HOST)), "{{instance}}")]), 6, 8)
    lay.add(ts(
        "Log file events",
        "New vLLM launches, rotations and truncations followed, read errors, state-file errors (a restart "
        "may then count lines again), over-long lines cut, label values folded into 'other', records "
        "not written to --records, malformed requests to the exporter.", COUNT,
        [q(sum_by("instance", increase("launches")), "launches {{instance}}"),
         q(sum_by("instance", increase("log_rotations")), "rotations {{instance}}"),
         q(sum_by("instance", increase("log_truncations")), "truncations {{instance}}"),
         q(sum_by("instance", increase("read_errors")), "read errors {{instance}}"),
         q(sum_by("instance", increase("state_errors")), "state errors {{instance}}"),
         q(sum_by("instance", increase("lines_cut")), "lines cut {{instance}}"),
         q(sum_by("instance, label", increase("label_overflow")), "{{label}} overflow {{instance}}"),
         q(sum_by("instance", increase("records_dropped")), "records dropped {{instance}}"),
         q(sum_by("instance", increase("http_invalid_requests")), "bad HTTP requests {{instance}}")],
        bars=True, interval="1m", calcs=("sum", "max")), 12, 8)
    lay.add(ts(
        "Sources",
        "Sources of a many-source watch (--layout): followed, folded beyond --max-sources (raise it), gone "
        "(files gone, series kept for --source-grace).", COUNT,
        [q(sum_by("instance, state", f"{m('sources')}{{{HOST}}}"), "{{state}} {{instance}}")]), 12, 8)
    lay.add(ts(
        "Servers writing one log",
        "vLLM processes writing one engine's stats lines at once in a launch, served only when two or more "
        "do (`>>` from two launches, one stream of two pods): each process's tokens are counted on their "
        "own, the engine's gauges hold whichever wrote last.", COUNT,
        [q(by_engine("stats_processes"), PER_ENGINE)]), 12, 8)


def variables(lay: Layout) -> None:
    def query_var(name: str, label: str, query: str, description: str, all_value: str | None = None
                  ) -> db.QueryVariable:
        var = (db.QueryVariable(name).label(label).description(description).query(query)
               .datasource(DS).multi(True).include_all(True)
               .refresh(dm.VariableRefresh.ON_TIME_RANGE_CHANGED)
               .sort(dm.VariableSort.ALPHABETICAL_ASC)
               .current(dm.VariableOption(selected=True, text="All", value="$__all")))
        return var if all_value is None else var.all_value(all_value)

    # "All" of job and instance is the list of logwatch targets (Grafana sends (a|b|...)), so `up`
    # and other jobs' series stay out; model and engine use .* (series without them match too).

    d = lay.dashboard
    d.with_variable(db.DatasourceVariable("datasource").label("Data source").type("prometheus")
                    .description("The Prometheus (or Thanos/Mimir) that scrapes vllm-logwatch."))
    d.with_variable(query_var("job", "Job", f"label_values({m('launches')}, job)",
                              "Prometheus jobs scraping vllm-logwatch."))
    d.with_variable(query_var("instance", "Instance",
                              f"label_values({m('launches')}{{job=~\"$job\"}}, instance)",
                              "One logwatch per host."))
    # A watch's sources (docs/metrics.md): all four listed from the launches counter, which every
    # source has; "All" is .* so that a host whose series lack the label shows everything.
    launches = m("launches")
    d.with_variable(query_var("namespace", "Namespace", f"label_values({launches}{{{TARGET}}}, namespace)",
                              "Kubernetes namespace of a vLLM pod (logwatch watch /var/log/pods).", ".*"))
    d.with_variable(query_var("pod", "Pod",
                              f"label_values({launches}{{{TARGET}, namespace=~\"$namespace\"}}, pod)",
                              "vLLM pod (logwatch watch /var/log/pods).", ".*"))
    d.with_variable(query_var("container", "Container",
                              f"label_values({launches}{{{TARGET}, namespace=~\"$namespace\", "
                              f"pod=~\"$pod\"}}, container)",
                              "Container: of a pod (/var/log/pods) or Docker's, by its name "
                              "(/var/lib/docker/containers).", ".*"))
    d.with_variable(query_var("script", "Launch script", f"label_values({launches}{{{TARGET}}}, script)",
                              "Launch script of a folder of launch files (serve_qwen_*.log: serve_qwen).",
                              ".*"))
    d.with_variable(query_var("model_name", "Model",
                              f"label_values({m('requests_running')}{{{HOST}}}, model_name)",
                              "Served model name (vLLM's model_name label).", ".*"))
    d.with_variable(query_var("engine", "Engine",
                              f"label_values({m('requests_running')}{{{MODEL}}}, engine)",
                              "Engine index (0, 1, ... with data parallel; 'aggregated' for "
                              "--aggregate-engine-logging).", ".*"))
    d.with_variable(db.TextBoxVariable("gpu_hour_cost").label("GPU-hour cost (USD)").default_value("2")
                    .description("Price of one GPU-hour, for the $ per 1M tokens panels."))


LEFT_OUT = {
    "requests_swapped": "V0 engines only (vLLM < 0.10); the Scheduler state panel shows waiting",
    "cpu_swap_kv_cache_usage_ratio": "V0 engines only (vLLM < 0.10); Cache utilization shows the device's",
    "stats_lines": "its rate is one over the stats interval, which Stats interval draws",
    "decode_step_seconds": "one step's time; Time between tokens draws the decode steps' p90",
    "requests_untimed": "requests the latency panels could not time, for reading them (docs/metrics.md)",
    "records_written": "the --records stream's own count; Log file events draws the records it dropped",
    "child_pid": "a process id, not a quantity; the vLLM process row draws up, uptime and exit code",
}
"""Families of the catalogue drawn on no panel, each with why (tests/integration/test_grafana.py
fails for a family neither drawn nor listed here, and for one listed here that a panel draws)."""


def build() -> dict[str, Any]:
    """The dashboard as plain JSON data."""
    lay = Layout()
    variables(lay)
    tiles(lay)
    tables(lay)
    overview(lay)
    concurrency(lay)
    kv_cache(lay)
    requests(lay)
    health(lay)
    startup_and_cost(lay)
    latency(lay)
    spec_decode(lay)
    kv_transfers(lay)
    fault_tolerance(lay)
    runtime(lay)
    mfu(lay)
    run_mode(lay)
    fleet(lay)
    lay.end()
    data: dict[str, Any] = json.loads(json.dumps(lay.dashboard.build(), cls=JSONEncoder))
    return data


def render() -> str:
    return json.dumps(build(), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


DOC = OUT.parents[2] / "docs" / "dashboard.md"
DOC_START, DOC_END = "<!-- dashboard-table:start -->", "<!-- dashboard-table:end -->"


def doc_table(data: dict[str, Any]) -> str:
    """The Markdown table of the dashboard's rows and panels: row, panel, type, and per query the
    metrics it reads (prefix left off) and its legend."""
    out = ["| Row | Panel | Type | Series |", "| --- | --- | --- | --- |"]
    row = "(top)"
    for panel in data["panels"]:
        if panel["type"] == "row":
            row = panel["title"] + (" (collapsed)" if panel.get("collapsed") else "")
        for p in [panel] if panel["type"] != "row" else panel.get("panels", []):
            series = []
            for target in p.get("targets", []):
                expr = target["expr"]
                names = sorted(set(re.findall(r"vllm_logwatch_([\w:]+)(?=\{)", expr))
                               | set(re.findall(r"\b(up)\{", expr)))
                legend_ = target.get("legendFormat", "__auto")
                shown = "" if legend_ == "__auto" else f" ({legend_.replace('{{', '').replace('}}', '')})"
                series.append(", ".join(f"`{n}`" for n in names) + shown)
            cell = "; ".join(series).replace("|", "\\|")
            out.append(f"| {row} | {p['title'].replace('|', '/')} | {p['type']} | {cell} |")
    return "\n".join(out) + "\n"


def with_doc_table(doc: str, data: dict[str, Any]) -> str:
    """`doc` with the text between its table markers replaced by `doc_table(data)`."""
    head, _, rest = doc.partition(DOC_START)
    _, _, tail = rest.partition(DOC_END)
    return f"{head}{DOC_START}\n{doc_table(data)}{DOC_END}{tail}"


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--check", action="store_true", help="compare with the committed JSON, write nothing")
    ap.add_argument("--doc", action="store_true", help=f"write the table of rows and panels into {DOC.name}")
    ap.add_argument("-o", "--output", type=Path, default=OUT)
    args = ap.parse_args(argv)
    if args.doc:
        DOC.write_text(with_doc_table(DOC.read_text(encoding="utf-8"), build()), encoding="utf-8")
        print(f"wrote {DOC}")
        return 0
    text = render()
    if args.check:
        same = args.output.exists() and args.output.read_text(encoding="utf-8") == text
        if not same:
            print(f"{args.output} is not what {Path(__file__).name} builds: run it", file=sys.stderr)
        return 0 if same else 1
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(text, encoding="utf-8")
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
