"""The pieces grafana/build_dashboard.py builds the dashboard from: label selectors, units, the metric
names of the catalogue, queries, time series and stat panels, and the layout (rows, collapsed ones
holding their panels)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from grafana_foundation_sdk.builders import common as cb
from grafana_foundation_sdk.builders import dashboard as db
from grafana_foundation_sdk.builders import prometheus, stat, timeseries
from grafana_foundation_sdk.cog.builder import Builder
from grafana_foundation_sdk.models import common
from grafana_foundation_sdk.models import dashboard as dm
from grafana_foundation_sdk.models import prometheus as pm

from vllm_logwatch.exporting.catalogue import METRICS, PREFIX

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

SPECS = {m.name[len(PREFIX):]: m for m in METRICS}
REFS = "ABCDEFGHIJKLMNOP"
"""A panel's query ids (zip with strict=True: a panel of more queries fails the build)."""
PER_ENGINE = "{{instance}} engine {{engine}}"
"""The legend of a per-engine series."""


def m(short: str) -> str:
    """The exposed name of a metric of exporting/catalogue.py: counters get `_total`, info metrics `_info`."""
    spec = SPECS[short]
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
        self._collapsed: db.Row | None = None

    def _id(self) -> int:
        self._next_id += 1
        return self._next_id - 1

    def row(self, title: str, *, collapsed: bool = False) -> None:
        """A new row; a collapsed one (opt-in features, "No data" for most servers) holds its panels."""
        self.end()
        row = db.Row(title).id(self._id()).collapsed(collapsed)
        if collapsed:
            self._collapsed = row
        else:
            self.dashboard.with_row(row)

    def add(self, panel: Any, w: int, h: int) -> None:
        panel = panel.id(self._id()).datasource(DS).span(w).height(h)
        if self._collapsed is not None:
            self._collapsed.with_panel(panel)
        else:
            self.dashboard.with_panel(panel)

    def end(self) -> None:
        """Place the collapsed row being filled (the SDK positions its panels when it is added)."""
        if self._collapsed is not None:
            self.dashboard.with_row(self._collapsed)
            self._collapsed = None


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
    for ref, target in zip(REFS[:len(targets)], targets, strict=True):
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
    for ref, target in zip(REFS[:len(targets)], targets, strict=True):
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


API = HOST + ', path!~"/metrics|/health|/ping|/version|/load"'
"""uvicorn's access lines of the API: probes and metric scrapes left out."""
API_5XX = API + ', status=~"5.."'
ABORTED = MODEL + ', finish_reason="abort"'


def quantiles(short: str, selector: str, group: str, legend_of: str, qs: Sequence[float]
              ) -> list[prometheus.Dataquery]:
    """histogram_quantile of a histogram of exporting/catalogue.py, one query per quantile."""
    bucket = f"rate({SPECS[short].name}_bucket{{{selector}}}[$__rate_interval])"
    return [q(f"histogram_quantile({p}, {sum_by(group + ', le', bucket)})",
              f"p{round(p * 100)} {legend_of}") for p in qs]
