"""Build grafana/dashboards/vllm-logwatch.json with Grafana's own models (grafana-foundation-sdk).

    python grafana/build_dashboard.py           # write the JSON
    python grafana/build_dashboard.py --check   # exit 1 if the committed JSON is not what this builds

Edit this file, not the JSON; tests/integration/test_grafana.py fails when the two disagree. Metric
names come from `vllm_logwatch.exporting.catalogue` (the table of what the exporter serves), so a
renamed metric breaks the
build here rather than a panel in production.

Layout: a row of tiles first, as vLLM's current overview dashboard opens (throughput, running and
waiting, KV cache, busy share, $/1M tokens at the `gpu_hour_cost` variable's price); then the block
of vLLM's older example dashboard (examples/observability/prometheus_grafana) where the two overlap:
"Token Throughput" at the right, "Scheduler State" below it, then "Cache Utilization"; vLLM's latency
panels (left column there) have no log counterpart, so the left column holds the per-engine
throughputs and the cache hit ratios. Rows below: concurrency, start-up and cost, speculative
decoding, latency (vLLM's detail lines), requests and log messages, exporter health, run mode, KV
transfers (disaggregated prefill / KV offloading connectors), and the fleet (per model across
instances, from grafana/recording-rules.yml).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from grafana_foundation_sdk.builders import common as cb
from grafana_foundation_sdk.builders import dashboard as db
from grafana_foundation_sdk.builders import prometheus, stat, table, timeseries, xychart
from grafana_foundation_sdk.cog.builder import Builder
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import common
from grafana_foundation_sdk.models import dashboard as dm
from grafana_foundation_sdk.models import prometheus as pm
from grafana_foundation_sdk.models import xychart as xym

from vllm_logwatch.exporting.catalogue import METRICS, PREFIX

OUT = Path(__file__).resolve().parent / "dashboards" / "vllm-logwatch.json"
UID = "vllm-logwatch"
DS = dm.DataSourceRef(type_val="prometheus", uid="${datasource}")

# Label selectors. Every series carries the scrape's job and instance; per-engine series add
# model_name and engine. Multi-value variables expand to regexes, hence =~. A watch of many sources
# labels each source's series: namespace, pod, container (a kubelet tree), container (Docker's),
# script (a folder of launch files). Their variables' "All" is .*, which a series without the label
# matches too, so a host with one plain log shows everything, and one pod picks its series alone.
SOURCE_LABELS = ("namespace", "pod", "container", "script")
SOURCE = ", ".join(f'{label}=~"${label}"' for label in SOURCE_LABELS)
TARGET = 'job=~"$job", instance=~"$instance"'
HOST = TARGET + ", " + SOURCE
MODEL = HOST + ', model_name=~"$model_name"'
ENGINE = MODEL + ', engine=~"$engine"'

# Units (Grafana unit ids; `count:` scales with K/M and appends the text).
TOKS = "count:tok/s"
TOKENS = "short"
RATIO = "percentunit"
COUNT = "short"

_SPECS = {m.name[len(PREFIX):]: m for m in METRICS}
PER_ENGINE = "{{instance}} engine {{engine}}"
"""The legend of a per-engine series."""


def m(short: str) -> str:
    """The exposed name of a metric of exporting/catalogue.py: counters get `_total`, info metrics `_info`."""
    spec = _SPECS[short]
    return spec.name + {"counter": "_total", "info": "_info"}.get(spec.type, "")


def by_engine(short: str) -> str:
    return f"{m(short)}{{{ENGINE}}}"


def q(expr: str, legend: str = "__auto", *, instant: bool = False, table_format: bool = False
      ) -> prometheus.Dataquery:
    # The source is named after the host wherever the host is (a label a series lacks shows as
    # nothing): "node-1 vllm-0 vllm" for a pod's container, "gpu1:9477 serve_qwen" for a script.
    legend = legend.replace("{{instance}}", "{{instance}}" + "".join(
        " {{" + label + "}}" for label in SOURCE_LABELS if label != "namespace"))
    query = prometheus.Dataquery().expr(expr).legend_format(legend).datasource(DS)
    query = query.instant() if instant else query.range()
    if table_format:
        query = query.format(pm.PromQueryFormat.TABLE)
    return query


class Layout:
    """Panel ids in order; the SDK's dashboard builder places panels left to right, row by row."""

    def __init__(self) -> None:
        self.dashboard = (
            db.Dashboard("vLLM (vllm-logwatch)")
            .uid(UID)
            .description("vLLM servers seen through their logs: throughput, queue, KV cache, caches, "
                         "spec decoding, requests, KV transfers, MFU, and the exporter's own health. Metrics "
                         "from vllm-logwatch (logwatch watch / logwatch run).")
            .tags(["vllm", "vllm-logwatch", "llm"])
            .editable()
            .tooltip(dm.DashboardCursorSync.CROSSHAIR)
            .refresh("30s")
            .time("now-1h", "now")
            .timezone("browser")
            .annotation(db.AnnotationQuery().name("vLLM launches").datasource(DS).enable(True).hide(False)
                        .icon_color("orange")
                        # A source that appears (a new pod, container or script) comes with its
                        # first launch already counted: the second half marks it.
                        .expr(f"changes({m('launches')}{{{HOST}}}[1m]) > 0 or "
                              f"({m('launches')}{{{HOST}}} unless {m('launches')}{{{HOST}}} offset 1m)"))
            .link(db.DashboardLink("vLLM dashboards").type(dm.DashboardLinkType.DASHBOARDS)
                  .tags(["vllm"]).as_dropdown(True).include_vars(True).keep_time(True))
        )
        self._next_id = 1

    def _id(self) -> int:
        self._next_id += 1
        return self._next_id - 1

    def row(self, title: str) -> None:
        self.dashboard.with_row(db.Row(title).id(self._id()))

    def add(self, panel: Any, w: int, h: int) -> None:
        self.dashboard.with_panel(panel.id(self._id()).datasource(DS).span(w).height(h))


def legend(*calcs: str) -> cb.VizLegendOptions:
    mode = common.LegendDisplayMode.TABLE if calcs else common.LegendDisplayMode.LIST
    return (cb.VizLegendOptions().display_mode(mode).placement(common.LegendPlacement.BOTTOM)
            .show_legend(True).calcs(list(calcs)))


def ts(title: str, description: str, unit: str, targets: Sequence[prometheus.Dataquery], *,
       bars: bool = False, interval: str | None = None, max_val: float | None = None,
       stack: bool = False, calcs: Sequence[str] = ("mean", "max", "lastNotNull")) -> timeseries.Panel:
    panel = (
        timeseries.Panel().title(title).description(description).unit(unit).min(0)
        .legend(legend(*calcs))
        .tooltip(cb.VizTooltipOptions().mode(common.TooltipDisplayMode.MULTI)
                 .sort(common.SortOrder.DESCENDING))
        .line_width(1).fill_opacity(10).show_points(common.VisibilityMode.NEVER)
        .span_nulls(False)
    )
    if bars:
        panel = panel.draw_style(common.GraphDrawStyle.BARS).fill_opacity(60)
    if stack:
        panel = panel.stacking(cb.StackingConfig().mode(common.StackingMode.NORMAL))
    if interval is not None:
        panel = panel.interval(interval)
    if max_val is not None:
        panel = panel.max(max_val)
    for ref, target in zip("ABCDEFGH", targets, strict=False):
        panel = panel.with_target(target.ref_id(ref))
    return panel


def _thresholds(*steps: tuple[float | None, str]) -> Builder[dm.ThresholdsConfig]:
    return (db.ThresholdsConfig().mode(dm.ThresholdsMode.ABSOLUTE)
            .steps([dm.Threshold(value=value, color=color) for value, color in steps]))


def st(title: str, description: str, unit: str, targets: Sequence[prometheus.Dataquery], *,
       mappings: dict[str, tuple[str, str]] | None = None,
       thresholds: Sequence[tuple[float | None, str]] = ((None, "green"),),
       color_background: bool = False) -> stat.Panel:
    panel = (
        stat.Panel().title(title).description(description).unit(unit)
        .reduce_options(cb.ReduceDataOptions().calcs(["lastNotNull"]).values(False))
        .graph_mode(common.BigValueGraphMode.NONE)
        .color_mode(common.BigValueColorMode.BACKGROUND if color_background
                    else common.BigValueColorMode.VALUE)
        .text_mode(common.BigValueTextMode.VALUE_AND_NAME)
        .thresholds(_thresholds(*thresholds))
    )
    if mappings:
        panel = panel.mappings([dm.ValueMap(options={
            value: dm.ValueMappingResult(text=text, color=color, index=i)
            for i, (value, (text, color)) in enumerate(mappings.items())})])
    for ref, target in zip("ABCDEFGH", targets, strict=False):
        panel = panel.with_target(target.ref_id(ref))
    return panel


def by(labels: str) -> str:
    """Grouping labels: one group per source where the group is per host, so two vLLM pods on one
    node stay two lines."""
    return labels.replace("instance", "instance, " + ", ".join(SOURCE_LABELS))


def sum_by(labels: str, expr: str) -> str:
    return f"sum by ({by(labels)}) ({expr})"


def max_by(labels: str, expr: str) -> str:
    return f"max by ({by(labels)}) ({expr})"


def rate(metric: str, selector: str = ENGINE, window: str = "$__rate_interval") -> str:
    return f"rate({m(metric)}{{{selector}}}[{window}])"


def increase(metric: str, selector: str = HOST, window: str = "$__interval") -> str:
    return f"increase({m(metric)}{{{selector}}}[{window}])"


COST = "$gpu_hour_cost"
"""The price of one GPU-hour (the dashboard's textbox variable), for the $/1M tokens panels."""


def per_million(tokens: str, window: str) -> str:
    """$ per 1M tokens: the selected servers' GPUs x price per second, over their tokens per second."""
    gpus = f"sum({m('gpus')}{{{MODEL}}})"
    return (f"{COST} * {gpus} / 3600 / (sum({rate(tokens, ENGINE, window)}) / 1e6)")


def tiles(lay: Layout) -> None:
    """The overview's tiles (vLLM's current overview dashboard opens with such a row)."""
    lay.add(st("Generation tok/s", "Generated tokens per second of the selected servers (the token "
               "counters' rate over the last minutes).", TOKS,
               [q(f"sum({rate('generation_tokens')})", "generation", instant=True)]), 4, 4)
    lay.add(st("Running", "Requests running at the engines' last stats lines.", COUNT,
               [q(f"sum({by_engine('requests_running')})", "running", instant=True)]), 4, 4)
    lay.add(st("Waiting", "Requests waiting at the engines' last stats lines: above 0 for long, "
               "the servers are full (see the VLLMNoHeadroom alert).", COUNT,
               [q(f"sum({by_engine('requests_waiting')})", "waiting", instant=True)],
               thresholds=((None, "green"), (1, "orange"))), 4, 4)
    lay.add(st("KV cache (highest)", "KV cache usage of the fullest selected engine.", RATIO,
               [q(f"max({by_engine('kv_cache_usage_ratio')})", "KV cache", instant=True)],
               thresholds=((None, "green"), (0.9, "orange"), (0.95, "red"))), 4, 4)
    lay.add(st("Busy share", "Share of the dashboard's time range in which the engines computed "
               "tokens (busy_seconds over time, averaged over the selected engines); the rest is idle "
               "GPU time.", RATIO,
               [q(f"avg({rate('busy_seconds', ENGINE, '$__range')})", "busy", instant=True)]), 4, 4)
    lay.add(st("$ per 1M generated tokens", "What a million generated tokens cost over the time "
               "range: GPUs (tensor x pipeline x data parallel size of each launch) x the GPU-hour price "
               "(the cost variable above), over the tokens generated. Idle time is paid too.", "currencyUSD",
               [q(per_million("generation_tokens", "$__range"), "per 1M generated", instant=True)]), 4, 4)


def overview(lay: Layout) -> None:
    """The block below the tiles, in the positions of vLLM's example dashboard where they overlap."""
    lay.add(ts(
        "Generation throughput by engine",
        "Avg generation throughput of each engine's last stats line (tokens/s over vLLM's stats "
        "interval), and their sum per server.", TOKS,
        [q(by_engine("generation_throughput_tokens_per_second"), PER_ENGINE),
         q(sum_by("instance, model_name", by_engine("generation_throughput_tokens_per_second")),
           "{{instance}} all engines")]), 12, 8)
    lay.add(ts(
        "Token Throughput",
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
        "Scheduler State",
        "Requests running and waiting at each engine's last stats line (V0: Pending counts as "
        "waiting).", COUNT,
        [q(by_engine("requests_running"), "Running {{instance}} engine {{engine}}"),
         q(by_engine("requests_waiting"), "Waiting {{instance}} engine {{engine}}")]), 12, 8)
    lay.add(ts(
        "Cache hit ratios",
        "Prefix cache and multi-modal cache hit rates as vLLM prints them: a window over the last "
        "~1000 requests (V1), not the interval, so they move slowly and survive idle time.", RATIO,
        [q(by_engine("prefix_cache_hit_ratio"), "Prefix {{instance}} engine {{engine}}"),
         q(by_engine("mm_cache_hit_ratio"), "MM {{instance}} engine {{engine}}")], max_val=1), 12, 8)
    lay.add(ts(
        "Cache Utilization",
        "KV cache usage of the serving device (GPU, or CPU on the CPU backend) at each engine's last "
        "stats line, as vLLM's vllm:kv_cache_usage_perc.", RATIO,
        [q(by_engine("kv_cache_usage_ratio"), "KV cache {{instance}} engine {{engine}}")],
        max_val=1), 12, 8)


def concurrency(lay: Layout) -> None:
    lay.row("Throughput at concurrency")
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
        "Generation tok/s per running request",
        "Generation throughput divided by running requests: the speed one stream sees. It falls as "
        "concurrency rises; where it falls fast, the batch is memory- or compute-bound.", TOKS,
        [q(f"{sum_by('instance, model_name', by_engine('generation_throughput_tokens_per_second'))}"
           f" / clamp_min({sum_by('instance, model_name', by_engine('requests_running'))}, 1)",
           "{{instance}} per stream")]), 12, 8)
    lay.add(st(
        "KV cache capacity",
        "KV cache size in tokens, from vLLM's start-up line (\"KV cache size: N tokens\").", TOKENS,
        [q(max_by("instance, model_name", f"{m('kv_cache_capacity_tokens')}{{{MODEL}}}"),
           "{{instance}}", instant=True)]), 6, 8)
    lay.add(st(
        "Maximum concurrency",
        "How many requests of the given length fit in the KV cache at once (vLLM's start-up line "
        "\"Maximum concurrency for N tokens per request\").", "suffix:x",
        [q(max_by("instance, model_name, tokens_per_request", f"{m('max_concurrency')}{{{MODEL}}}"),
           "{{instance}} at {{tokens_per_request}} tokens/request", instant=True)]), 6, 8)


def startup_and_cost(lay: Layout) -> None:
    lay.row("Start-up and cost")
    lay.add(st(
        "Start-up durations",
        "The current launch's start-up phases from vLLM's start-up lines: model load, weights load, "
        "torch.compile, CUDA graph capture, engine init (profile, KV cache, warm-up).", "s",
        [q(max_by("instance, model_name, phase", f"{m('startup_seconds')}{{{MODEL}}}"),
           "{{phase}} {{instance}}", instant=True)]), 12, 6)
    lay.add(st(
        "KV cache memory", "KV cache memory of a worker (\"Available KV cache memory\" at start-up).",
        "bytes",
        [q(max_by("instance, model_name", f"{m('kv_cache_capacity_bytes')}{{{MODEL}}}"), "{{instance}}",
           instant=True)]), 6, 6)
    lay.add(st(
        "GPUs", "GPUs of each launch: tensor x pipeline x data parallel size from its arguments.", COUNT,
        [q(max_by("instance, model_name", f"{m('gpus')}{{{MODEL}}}"), "{{instance}}", instant=True)]),
        6, 6)
    lay.add(ts(
        "$ per 1M tokens",
        "GPUs x the GPU-hour price (the cost variable), over the tokens per second: what a million "
        "generated and prompt tokens cost at each moment's throughput (idle time makes it climb).",
        "currencyUSD",
        [q(per_million("generation_tokens", "$__rate_interval"), "generated"),
         q(per_million("prompt_tokens", "$__rate_interval"), "prompt")]), 12, 8)
    lay.add(ts(
        "Busy share by engine",
        "Share of time each engine computed tokens (busy_seconds per second): 1 is always busy, the "
        "rest is idle GPU time.", RATIO,
        [q(rate("busy_seconds"), PER_ENGINE)], max_val=1), 12, 8)


def spec_decode(lay: Layout) -> None:
    lay.row("Speculative decoding")
    lay.add(ts(
        "Draft acceptance ratio",
        "Accepted / drafted speculative tokens: from the summed counts over the interval, and as "
        "each engine's last SpecDecoding line prints it.", RATIO,
        [q(f"{sum_by('instance, model_name', rate('spec_decode_accepted_tokens'))} / "
           f"{sum_by('instance, model_name', rate('spec_decode_drafted_tokens'))}",
           "{{instance}} (counters)"),
         q(by_engine("spec_decode_acceptance_ratio"), PER_ENGINE + " (last line)")],
        max_val=1), 8, 8)
    lay.add(ts(
        "Mean acceptance length",
        "Tokens produced per verification step (1 + accepted per draft) of each engine's last "
        "SpecDecoding line.", "short",
        [q(by_engine("spec_decode_mean_acceptance_length"), PER_ENGINE)]), 8, 8)
    lay.add(ts(
        "Accepted and drafted tokens/s",
        "Speculative tokens drafted and accepted per second (from the lines' Accepted/Drafted counts).",
        TOKS,
        [q(sum_by("instance, model_name", rate("spec_decode_drafted_tokens")), "Drafted {{instance}}"),
         q(sum_by("instance, model_name", rate("spec_decode_accepted_tokens")),
           "Accepted {{instance}}")]), 8, 8)


def quantiles(short: str, selector: str, group: str, legend_of: str, qs: Sequence[float]
              ) -> list[prometheus.Dataquery]:
    """histogram_quantile of a histogram of exporting/catalogue.py, one query per quantile."""
    bucket = f"rate({_SPECS[short].name}_bucket{{{selector}}}[$__rate_interval])"
    return [q(f"histogram_quantile({p}, {sum_by(group + ', le', bucket)})",
              f"p{round(p * 100)} {legend_of}") for p in qs]


def latency(lay: Layout) -> None:
    """vLLM's detail lines (--enable-logging-iteration-details, --enable-log-requests,
    --enable-log-outputs): exporting/latency_state.py."""
    lay.row("Latency (vllm serve --enable-logging-iteration-details --enable-log-requests)")
    tbt = _SPECS["time_between_tokens_seconds"].name
    lay.add(ts(
        "Time between tokens by concurrency",
        "Mean time between an engine's generating steps by batch (the step's generation requests, "
        "bucketed): what one stream waits for its next token at that concurrency, the step and what "
        "vLLM does between steps, as vLLM's inter-token latency. A mean over the interval: vLLM prints "
        "the step lines in bursts, so single gaps mean nothing. p90 of the decode steps' own time (the "
        "VLLMDecodeStepSlow alert's figure) beside it.", "s",
        [q(f"{sum_by('instance, model_name, batch', f'rate({tbt}_sum{{{ENGINE}}}[$__rate_interval])')} / "
           f"{sum_by('instance, model_name, batch', f'rate({tbt}_count{{{ENGINE}}}[$__rate_interval])')}",
           "mean at {{batch}} streams {{instance}}"),
         *quantiles("step_duration_seconds", ENGINE + ', phase="decode"', "instance, model_name, batch",
                    "decode step at {{batch}} streams {{instance}}", (0.9,))]), 12, 8)
    lay.add(ts(
        "End-to-end request time",
        "Percentiles of the time from a request's Received line to its last response line "
        "(--enable-log-requests --enable-log-outputs), timed by when the lines were read live or by "
        "a container's stamps (vLLM's own stamps have whole seconds: such requests are counted in "
        "requests_untimed, not here).", "s",
        quantiles("request_duration_seconds", MODEL, "instance, model_name", "{{instance}}",
                  (0.5, 0.9, 0.99))), 12, 8)
    lay.add(ts(
        "Time to first token",
        "Percentiles of the time from a request's Received line to its first streamed output line "
        "(logged only with --enable-log-outputs, for streams): later than vLLM's own time to first "
        "token, which the engine takes.", "s",
        quantiles("time_to_first_token_seconds", MODEL, "instance, model_name", "{{instance}}",
                  (0.5, 0.9))), 8, 8)
    lay.add(ts(
        "Requests by finish reason",
        "Requests ended per second by finish reason (stop, length, abort, ...; unknown: a stream "
        "whose end vLLM logged without one).", "reqps",
        [q(sum_by("instance, finish_reason", rate("requests", MODEL)), "{{finish_reason}} {{instance}}")],
        stack=True), 8, 8)
    lay.add(ts(
        "Requests by LoRA adapter",
        "Requests ended per second by LoRA adapter (names from the log's `Loaded new LoRA adapter` "
        "lines, at most 16, then other; the base model without one).", "reqps",
        [q(f'label_replace({sum_by("instance, lora", rate("requests", MODEL))}, "lora", "base model", '
           f'"lora", "")', "{{lora}} {{instance}}")],
        stack=True), 8, 8)


def requests(lay: Layout) -> None:
    lay.row("Requests and log messages")
    api = HOST + ', path!~"/metrics|/health|/ping|/version|/load"'
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
        "may then count lines again), over-long lines cut, label values folded into 'other'.", COUNT,
        [q(sum_by("instance", increase("launches")), "launches {{instance}}"),
         q(sum_by("instance", increase("log_rotations")), "rotations {{instance}}"),
         q(sum_by("instance", increase("log_truncations")), "truncations {{instance}}"),
         q(sum_by("instance", increase("read_errors")), "read errors {{instance}}"),
         q(sum_by("instance", increase("state_errors")), "state errors {{instance}}"),
         q(sum_by("instance", increase("lines_cut")), "lines cut {{instance}}"),
         q(sum_by("instance, label", increase("label_overflow")), "{{label}} overflow {{instance}}")],
        bars=True, interval="1m", calcs=("sum", "max")), 12, 8)


def run_mode(lay: Layout) -> None:
    lay.row("vLLM process (logwatch run)")
    lay.add(st(
        "vLLM process",
        "Whether the vLLM server that `logwatch run` supervises is running (run mode only).", "none",
        [q(max_by("instance", f"{m('child_up')}{{{HOST}}}"), "{{instance}}", instant=True)],
        mappings={"1": ("RUNNING", "green"), "0": ("DOWN", "red")}, color_background=True), 6, 6)
    lay.add(st(
        "vLLM process uptime",
        "Time since the supervised vLLM process started.", "s",
        [q("time() - " + max_by("instance", f"{m('child_start_time_seconds')}{{{HOST}}}"), "{{instance}}",
           instant=True)]), 6, 6)
    lay.add(st(
        "Last exit code",
        "Exit code of the last vLLM process (128+N for signal N: 137 SIGKILL, often the OOM "
        "killer; 143 SIGTERM).", "none",
        [q(max_by("instance", f"{m('child_last_exit_code')}{{{HOST}}}"), "{{instance}}",
           instant=True)],
        thresholds=((None, "green"), (1, "red"))), 6, 6)
    lay.add(st(
        "Restarts (range)",
        "vLLM restarts by `logwatch run` over the dashboard's time range.", COUNT,
        [q(sum_by("instance", f"increase({m('child_restarts')}{{{HOST}}}[$__range])"), "{{instance}}",
           instant=True)],
        thresholds=((None, "green"), (1, "orange"), (3, "red"))), 6, 6)
    lay.add(ts(
        "vLLM restarts and log write errors",
        "Restarts of the supervised vLLM process and failed writes to its log file (full disk) per "
        "interval.", COUNT,
        [q(sum_by("instance", increase("child_restarts")), "restarts {{instance}}"),
         q(sum_by("instance", increase("log_file_write_errors")), "write errors {{instance}}")],
        bars=True, interval="1m", calcs=("sum", "max")), 12, 8)
    lay.add(ts(
        "vLLM output to the log file",
        "Bytes per second of vLLM output written to the launch log, and dropped (never blocks vLLM).",
        "Bps",
        [q(sum_by("instance", rate("log_file_bytes_written", HOST)), "written {{instance}}"),
         q(sum_by("instance", rate("log_file_bytes_dropped", HOST)), "dropped {{instance}}")]), 12, 8)


def kv_transfers(lay: Layout) -> None:
    lay.row("KV transfers (disaggregated prefill / KV offloading)")
    lay.add(ts(
        "Transfers by result",
        "KV / EC connector transfers per second (NIXL, Mooncake, offloading; the `KV Transfer "
        "metrics:` lines) by result: succeeded, failed, failed_recv. Any failure is worth a look: "
        "see the VLLMKVTransferFailures alert.", "count:transfers/s",
        [q(sum_by("instance, model_name, cache, result", rate("transfers")),
           "{{result}} {{cache}} {{instance}}")]), 8, 8)
    lay.add(ts(
        "Expired requests",
        "Requests per second whose KV blocks expired before the other side fetched them (Num KV "
        "expired reqs): the decode instance did not pull in time (VLLM_NIXL_ABORT_REQUEST_TIMEOUT).",
        "reqps",
        [q(sum_by("instance, model_name, cache", rate("transfer_expired_requests")),
           "expired {{cache}} {{instance}}")]), 8, 8)
    lay.add(ts(
        "Bytes transferred",
        "Bytes per second moved by successful transfers (transfers x Avg MB per transfer; vLLM's MB "
        "is MiB).", "Bps",
        [q(sum_by("instance, model_name, cache", rate("transfer_bytes")), "{{cache}} {{instance}}")]),
        8, 8)
    lay.add(ts(
        "Transfer time",
        "Average and p90 time of one transfer in each engine's last interval with transfers (the "
        "line is printed only for intervals with transfers, so the value holds until the next one).",
        "s",
        [q(by_engine("transfer_time_seconds"), "{{stat}} {{cache}} " + PER_ENGINE)]), 8, 8)
    lay.add(ts(
        "Post time",
        "Average and p90 time to post a transfer (hand it to the transport) in each engine's last "
        "interval with transfers.", "s",
        [q(by_engine("transfer_post_time_seconds"), "{{stat}} {{cache}} " + PER_ENGINE)]), 8, 8)
    lay.add(ts(
        "Transfer throughput",
        "Throughput of the transfers in each engine's last interval with transfers, as the line "
        "prints it (bytes over transfer time, not over the interval: see Bytes transferred).", "Bps",
        [q(by_engine("transfer_throughput_bytes_per_second"), "{{cache}} " + PER_ENGINE)]), 8, 8)


def fault_tolerance(lay: Layout) -> None:
    lay.row("Fault tolerance and KV offload failures (vLLM 0.34)")
    lay.add(ts(
        "Engine status",
        "1 while the engine is in that fault-tolerance status (`[FT] Engine N status -> S`, "
        "--enable-fault-tolerance): healthy, diagnosing, unhealthy or dead. See VLLMEngineNotHealthy.",
        COUNT, [q(max_by("instance, engine, status", f"{m('engine_fault_tolerance_status')}{{{HOST}}}")
                  + " > 0", "{{status}} " + PER_ENGINE)]), 8, 8)
    lay.add(ts(
        "Rejected requests and faults",
        "Requests refused while the engine was not healthy (`Engine S - rejecting request R.`), by "
        "status, and engine faults (`[FT] Busy loop raised E`), per interval.", COUNT,
        [q(sum_by("instance, status", increase("rejected_requests")), "rejected ({{status}}) {{instance}}"),
         q(sum_by("instance", increase("engine_faults")), "faults {{instance}}")]), 8, 8)
    lay.add(ts(
        "Offload and connector failures",
        "KV offload jobs that failed (store: its chunks dropped from the CPU cache; load), chunks "
        "dropped, and openings of a KV connector's circuit breaker, per interval.", COUNT,
        [q(sum_by("instance, direction", increase("kv_offload_job_failures")),
           "{{direction}} jobs failed {{instance}}"),
         q(sum_by("instance", increase("kv_offload_chunks_dropped")), "chunks dropped {{instance}}"),
         q(sum_by("instance, breaker", increase("kv_connector_breaker_openings")),
           "{{breaker}} breaker opened {{instance}}")]), 8, 8)


def mfu(lay: Layout) -> None:
    lay.row("Model FLOPs and memory traffic (vllm serve --enable-mfu-metrics)")
    lay.add(ts(
        "Model FLOP/s per device",
        "vLLM's own estimate of the model's floating-point operations per second per device (GPU) in "
        "each engine's last MFU line (`--enable-mfu-metrics`, vLLM >= 0.14). Against the device's "
        "peak it is the model FLOPs utilisation: low at low concurrency, where decoding is memory-bound.",
        "flops", [q(by_engine("mfu_flops_per_second"), PER_ENGINE)]), 12, 8)
    lay.add(ts(
        "Memory traffic per device",
        "vLLM's estimate of the bytes read and written per second per device (weights, KV cache, "
        "activations) in each engine's last MFU line. Against the device's memory bandwidth it tells "
        "how memory-bound decoding is.", "Bps",
        [q(by_engine("mfu_memory_bytes_per_second"), PER_ENGINE)]), 12, 8)


FLEET = TARGET + ', model_name=~"$model_name"'
"""The recorded series of grafana/recording-rules.yml keep job, instance and model_name alone."""


def fleet(lay: Layout) -> None:
    """Per model across the selected instances, and the busiest instances, from the recording rules."""
    def rec(short: str, agg: str = "sum", by_: str = "model_name") -> str:
        return f"{agg} by ({by_}) (instance_model_name:vllm_logwatch_{short}{{{FLEET}}})"

    lay.row("Fleet: per model across instances (grafana/recording-rules.yml)")
    note = " From the recording rules (grafana/recording-rules.yml): load them next to the alerts."
    lay.add(ts("Generation tok/s by model", "Generated tokens a second per model, summed over the "
               "selected instances, their engines and sources; and the fleet's total." + note, TOKS,
               [q(rec("generation_tokens:rate1m"), "{{model_name}}"),
                q(f"sum(instance_model_name:vllm_logwatch_generation_tokens:rate1m{{{FLEET}}})", "fleet")]),
            8, 8)
    lay.add(ts("Running and waiting by model", "Requests running and waiting per model over the "
               "selected instances." + note, COUNT,
               [q(rec("requests_running:sum"), "{{model_name}} running"),
                q(rec("requests_waiting:sum"), "{{model_name}} waiting")]), 8, 8)
    lay.add(ts("KV pressure by model", "The fullest engine's KV cache per model over the selected "
               "instances (preemptions by model: model_name:vllm_logwatch_preemptions:rate5m, recorded "
               "where the stats lines print them)." + note, RATIO,
               [q(rec("kv_cache_usage_ratio:max", "max"), "{{model_name}}")], max_val=1), 8, 8)
    lay.add(ts("Top instances by waiting", "The five instances with the most requests waiting: where "
               "the fleet runs short." + note, COUNT,
               [q(f"topk(5, {rec('requests_waiting:sum', by_='instance')})", "{{instance}}")]), 12, 8)
    lay.add(ts("Top instances by KV usage", "The five instances with the fullest KV cache." + note, RATIO,
               [q(f"topk(5, {rec('kv_cache_usage_ratio:max', 'max', 'instance')})", "{{instance}}")],
               max_val=1), 12, 8)


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


def build() -> dict[str, Any]:
    """The dashboard as plain JSON data."""
    lay = Layout()
    variables(lay)
    tiles(lay)
    overview(lay)
    concurrency(lay)
    startup_and_cost(lay)
    spec_decode(lay)
    latency(lay)
    requests(lay)
    health(lay)
    run_mode(lay)
    kv_transfers(lay)
    fault_tolerance(lay)
    mfu(lay)
    fleet(lay)
    data: dict[str, Any] = json.loads(json.dumps(lay.dashboard.build(), cls=JSONEncoder))
    return data


def render() -> str:
    return json.dumps(build(), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--check", action="store_true", help="compare with the committed JSON, write nothing")
    ap.add_argument("-o", "--output", type=Path, default=OUT)
    args = ap.parse_args(argv)
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
