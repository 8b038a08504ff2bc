"""The sources of one watch as the metrics see them: a reader per source, a set of series per label set.

A one-source watch (a file, a glob, a stream, today's folder) has one source, key (), read into the
pipeline's own `ExporterMetrics`. A many-source watch (`following/many.py`) has one per container or
launch script: each gets its own `LaunchReader` (its own Assembler and clock: the lines of two servers
never meet in one record) and its own `ExporterMetrics`, made by `metrics_for(labels)` with the
source's labels on every series; the sources folded beyond the cap share one. The families of all
are served as one (`collect`): the same names, the samples of each.

A source's file switch is its new launch (its gauges start over), as in a one-source watch. A source
dropped after its grace loses its series; the folded series keep what a dropped folded source counted.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import tzinfo
from typing import Any

from prometheus_client.core import Metric

from ..exporting import catalogue
from ..exporting.exporter import ExporterMetrics
from ..exporting.families import Families
from ..following.layouts import SourceKey, source_name
from ..following.openfile import FollowerStats, LineBlock
from ..following.statefile import Checkpoint, SourcesState
from ..parsing.assemble import Assembler
from ..parsing.line import KNOWN_EXTRA_KEYS
from ..parsing.stamps import YearClock
from .ingest import LaunchReader

log = logging.getLogger(__name__)

MetricsFactory = Callable[[Mapping[str, str]], ExporterMetrics]
"""The metrics of a source, given its labels (the watch's own `--label` pairs added by the factory)."""
_TOTALS = ("rotations", "truncations", "read_errors", "lines_cut")
_OWN = frozenset(catalogue.name(short) for short in ("read_errors", "state_errors"))
"""The only series of a many-source watch's own (unlabelled) metrics: its listing and state file errors."""


def described(labels: SourceKey) -> str:
    """`namespace=vllm pod=vllm-0 container=vllm`, for the log."""
    return " ".join(f"{name}={value}" for name, value in labels)


class SourceReaders:
    """Readers and metrics of a watch's sources. `labels_of(key)`: the labels a source's series get
    (the folded ones beyond the cap); `make_reader(source, metrics)`: the reader of a new file."""

    def __init__(self, base: ExporterMetrics, zone: tzinfo,
                 make_reader: Callable[[Assembler, ExporterMetrics], LaunchReader], *,
                 metrics_for: MetricsFactory | None = None,
                 labels_of: Callable[[SourceKey], SourceKey] | None = None,
                 counts: Callable[[], Mapping[str, int] | None] = lambda: None,
                 const_labels: Mapping[str, str] | None = None) -> None:
        self.base = base
        self.zone = zone
        self._make_reader = make_reader
        self._metrics_for = metrics_for
        self._labels_of = labels_of or (lambda key: key)
        self._counts = counts
        self._const = dict(const_labels or {})
        self._readers: dict[SourceKey, LaunchReader] = {}  # each source's, of its file read last
        self._metrics: dict[SourceKey, ExporterMetrics] = {}
        self._retired: dict[SourceKey, dict[str, int]] = {}  # what dropped folded sources counted
        self._last: dict[SourceKey, dict[str, int]] = {}  # each source's totals at the last sync
        self._seen: dict[SourceKey, Checkpoint] = {}  # each source's checkpoint at the last sync
        self._members: dict[SourceKey, set[SourceKey]] = {}  # the sources of each set of series
        self.files_seen = 0
        self._folded_said = False
        self._replay = False

    def metrics_of(self, key: SourceKey) -> ExporterMetrics:
        labels = self._labels_of(key)
        if not labels or self._metrics_for is None:
            return self.base
        metrics = self._metrics.get(labels)
        if metrics is None:
            metrics = self._metrics[labels] = self._metrics_for(dict(labels))
            metrics.set_replay(self._replay)
        return metrics

    def set_replay(self, replay: bool) -> None:
        """A backlog is being read (its lines aged by their stamps), in every source's metrics."""
        self._replay = replay
        for metrics in self.all_metrics():
            metrics.set_replay(replay)

    def read(self, block: LineBlock) -> None:
        reader = self._readers.get(block.key)
        if reader is None or reader.assembler.file != block.source:
            reader = self._switch(block.key, block.source)
        reader.read(block.data, block.number)

    def current(self) -> str | None:
        """The file read last of a one-source watch (its status shows it)."""
        reader = self._readers.get(())
        return reader.assembler.file if reader is not None else None

    def _switch(self, key: SourceKey, source: str) -> LaunchReader:
        """A new file of a source: a new vLLM launch, with its own clock (the year is in its name)."""
        old = self._readers.get(key)
        if old is not None:
            old.flush()
        elif key and self._labels_of(key) == key:
            log.info("new source %s: reading %s", described(key), source)
        elif key and not self._folded_said:  # beyond the cap: said once, not once a source
            self._folded_said = True
            log.info("sources beyond --max-sources are read into the series labelled %s (counted in "
                     "vllm_logwatch_sources{state=\"folded\"})", described(self._labels_of(key)))
        zone = self.zone

        def clock(first_stamp: str) -> YearClock:
            return YearClock.for_source(source, zone, first_stamp=first_stamp)

        metrics = self.metrics_of(key)
        reader = self._make_reader(Assembler(source, clock, hold=False, repeats=True), metrics)
        self._readers[key] = reader
        self.files_seen += 1
        metrics.new_launch(source)
        return reader

    def flush_all(self) -> None:
        """The end of every source (a stream's writer is gone): records the assemblers still hold."""
        for reader in self._readers.values():
            reader.flush()

    def drop(self, key: SourceKey) -> None:
        """A source gone past its grace: its series go (a folded one's counts stay in the folded series)."""
        reader = self._readers.pop(key, None)
        if reader is not None:
            reader.flush()
        labels = self._labels_of(key)
        last = self._last.pop(key, None)
        self._seen.pop(key, None)
        self._members.get(labels, set()).discard(key)
        if labels != key:
            if last is not None:
                retired = self._retired.setdefault(labels, dict.fromkeys(last, 0))
                for name, value in last.items():
                    retired[name] += value
        else:
            self._metrics.pop(labels, None)
        log.info("source %s gone for its grace: its series are dropped", described(labels))

    def sync(self, applied: Checkpoint, own: FollowerStats, per_source: Mapping[SourceKey, FollowerStats], *,
             full: bool = True) -> None:
        """Each source's counters into its series; `applied`: the many-source checkpoint of the lines
        applied (never ahead of the state file), `own`: the watch's own errors (unlabelled series).
        `full=False` (after each batch): only the sources whose position moved; a scrape syncs all."""
        parts = applied.state.parts if isinstance(applied.state, SourcesState) else ()
        changed: set[SourceKey] = set()
        for key, part in parts:
            if not full and self._seen.get(key) is part:
                continue
            self._seen[key] = part
            stats = per_source.get(key)
            if stats is None:
                continue
            self._last[key] = {"lines": part.lines, "bytes": part.bytes,
                               **{name: getattr(stats, name) for name in _TOTALS}}
            labels = self._labels_of(key)
            self._members.setdefault(labels, set()).add(key)
            changed.add(labels)
        for labels in changed:
            totals = dict(self._retired.get(labels, {}))
            for key in self._members.get(labels, ()):
                for name, value in self._last.get(key, {}).items():
                    totals[name] = totals.get(name, 0) + value
            self.metrics_of(labels).set_follower_stats(**totals)
        self.base.set_follower_stats(lines=0, bytes=0, rotations=0, truncations=0,
                                     read_errors=own.read_errors, lines_cut=0, state_errors=own.state_errors)

    def status(self) -> list[dict[str, Any]]:
        """Each labelled source's status (its labels and name, engines, facts, counters); [] with one
        source."""
        return [{"labels": dict(labels), "name": source_name(labels), **withhold_extra(m.status())}
                for labels, m in self._metrics.items()]

    def all_metrics(self) -> list[ExporterMetrics]:
        return [self.base, *self._metrics.values()]

    def collect(self) -> list[Metric]:
        """The families of every source's metrics, merged by name (and how many sources there are).
        With labelled sources, the watch's own metrics give their errors only: every other series is a
        source's."""
        collected = [m.collect() for m in self.all_metrics()]
        if self._metrics_for is not None:
            collected[0] = [family for family in collected[0] if family.name in _OWN]
        if (counts := self._counts()) is not None:
            own = Families(tuple(self._const), tuple(self._const.values()))
            for state, count in counts.items():
                own.add("sources", (state,), count)
            collected.append(own.families())
        return merge_families(collected)


def withhold_extra(status: Mapping[str, Any]) -> Mapping[str, Any]:
    """`status` with each engine's unknown stats fields, whose names come from the log, left out (only
    the ones the parser knows are shown)."""
    for engine in status.get("engines", {}).values():
        last = engine.get("last")
        if isinstance(last, dict) and isinstance(last.get("extra"), dict):
            last["extra"] = {k: v for k, v in last["extra"].items() if k in KNOWN_EXTRA_KEYS}
    return status


def over_sources(own: Mapping[str, Any], sources: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """What a many-source watch says of all its sources: the counters and launches of its own (its
    errors) and of every source, added; the models and vLLM versions they serve.

    >>> source = {"launches": 1, "counters": {"log_lines": 5, "problems": {"oom": 1}},
    ...           "server": {"served_model_name": "m", "vllm_version": "0.32.0"}}
    >>> own = {"launches": 0, "counters": {"log_lines": 0, "problems": {"oom": 0}}}
    >>> over = over_sources(own, [source] * 2)
    >>> over["launches"], over["counters"], over["across_sources"]["models"]
    (2, {'log_lines': 10, 'problems': {'oom': 2}}, ['m'])
    """
    def add(total: Any, more: Any) -> Any:
        if isinstance(total, Mapping) or isinstance(more, Mapping):
            total, more = (v if isinstance(v, Mapping) else {} for v in (total, more))
            return {key: add(total.get(key), more.get(key)) for key in {**total, **more}}
        if total is None or more is None:
            return more if total is None else total
        return total + more

    out: dict[str, Any] = {"launches": own.get("launches", 0), "counters": own.get("counters", {})}
    for source in sources:
        for key in ("launches", "counters"):
            out[key] = add(out[key], source.get(key))
    facts = [source.get("server") or {} for source in sources]
    models = {f.get("served_model_name") or f.get("model") for f in facts}
    versions = {f.get("vllm_version") for f in facts}
    out["across_sources"] = {"models": sorted(str(m) for m in models if m),
                             "vllm_versions": sorted(str(v) for v in versions if v)}
    return out


def merge_families(collected: Iterable[Iterable[Metric]]) -> list[Metric]:
    """One family per name, holding the samples of every collector's family of that name."""
    merged: dict[str, Metric] = {}
    for families in collected:
        for family in families:
            first = merged.get(family.name)
            if first is None:
                merged[family.name] = family
            else:
                first.samples.extend(family.samples)
    return list(merged.values())

