"""`logwatch parse --openmetrics`: old logs as OpenMetrics text with timestamps, for backfill.

`promtool tsdb create-blocks-from openmetrics FILE DIR` turns the output into TSDB blocks that a
Prometheus serves, so months of old logs land next to the live exporter's series, with the same
names, labels and values. To be the same, the values are not recomputed here: the events go through
the live exporter's own state (`ExporterMetrics`), which is "scraped" after each stats timestamp, and
the per-engine samples it serves are written with that timestamp. So the token counters are the
exporter's estimate (throughput x stats interval), counting on across launches as it does.

OpenMetrics wants each series' samples together and in time order, so samples are spooled per
series (in memory, then temporary files) and written family by family; memory stays flat.
"""

from __future__ import annotations

import math
import tempfile
from typing import IO

from prometheus_client.metrics_core import Metric

from ..errors import UsageError
from ..exporting.catalogue import METRICS, name
from ..exporting.exporter import ExporterMetrics
from ..parsing.events import EngineStats, Event, MfuStats, ServerInfo, SpecDecodeStats, TransferStats

__all__ = ["BACKFILL_FAMILIES", "OpenMetricsWriter", "parse_labels"]

BACKFILL_FAMILIES: tuple[str, ...] = tuple(
    m.name for m in METRICS if "engine" in m.labels and m.name != name("engine_stalled")
)
"""Per-engine families written (the stall signal is about a live clock, so it is left out)."""
_SPOOL_BYTES = 1 << 20


def _escape_label(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def _number(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return repr(value)


def _timestamp(seconds: float) -> str:
    return str(int(seconds)) if seconds.is_integer() else f"{seconds:.3f}"


def parse_labels(pairs: list[str]) -> dict[str, str]:
    """`["instance=gpu1:9400"]` -> `{"instance": "gpu1:9400"}`; UsageError without a `=`.

    >>> parse_labels(["instance=gpu1:9400", "job=vllm"])
    {'instance': 'gpu1:9400', 'job': 'vllm'}
    """
    out: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise UsageError(f"--label {pair!r}: use KEY=VALUE")
        out[key] = value
    return out


class OpenMetricsWriter:
    """Feed events in file order (`new_launch` at each new file); `write` the text once at the end.

    >>> from vllm_logwatch.parsing.assemble import iter_events
    >>> from vllm_logwatch.parsing.stamps import YearClock
    >>> from zoneinfo import ZoneInfo
    >>> w = OpenMetricsWriter()
    >>> line = ("INFO 11-29 19:26:05 [loggers.py:335] Engine 000: Avg prompt throughput: 9.0 tokens/s, "
    ...         "Avg generation throughput: 2.0 tokens/s, Running: 16 reqs, Waiting: 8 reqs")
    >>> for event in iter_events([line], clock=YearClock(2026, ZoneInfo("UTC"))): w.feed(event)
    >>> import io; out = io.StringIO(); w.write(out)
    >>> [s for s in out.getvalue().splitlines() if s.startswith("vllm_logwatch_requests_running")]
    ['vllm_logwatch_requests_running{engine="0",model_name="unknown"} 16 1795980365']
    """

    def __init__(self, labels: dict[str, str] | None = None) -> None:
        """`labels`: added to every series (like the exporter's `--label`); UsageError if invalid."""
        self._now = 0.0
        self._metrics = ExporterMetrics(clock=lambda: self._now, const_labels=labels)
        self._batch_time: float | None = None
        self._batch_dirty = False
        self._previous: dict[str, tuple[float, ...]] = {}
        self._series: dict[str, dict[str, IO[str]]] = {}
        self._meta: dict[str, tuple[str, str]] = {}
        self._keys: dict[tuple[object, ...], str] = {}
        self._last_ts: dict[str, float] = {}
        self.samples = 0
        self.dropped = 0
        """Samples not after the previous one of their series (inputs out of time order): left out."""
        self.stats_lines = 0

    def new_launch(self, source: str | None) -> None:
        """A new input file: a new launch, as the live exporter sees a new launch file."""
        self._flush()
        self._metrics.new_launch(source)

    def feed(self, event: Event) -> None:
        """One event in file order (stats, spec, transfer and start-up lines matter; others are ignored)."""
        if isinstance(event, ServerInfo):
            if event.new_launch:
                self._flush()  # the launch's last values, before the exporter state starts over
            self._metrics.apply(event)
            return
        if not isinstance(event, (EngineStats, SpecDecodeStats, TransferStats, MfuStats)):
            return
        stamp = event.time.timestamp() if event.time is not None else None
        if stamp != self._batch_time:
            self._flush()
            self._batch_time = stamp
        if stamp is not None:
            self._now = stamp
        self._metrics.apply(event)
        self._batch_dirty = True
        if isinstance(event, EngineStats):
            self.stats_lines += 1

    def _flush(self) -> None:
        """Scrape the exporter state and spool the samples of the engines that just changed."""
        if not self._batch_dirty:
            return
        self._batch_dirty = False
        stamp = self._batch_time
        families = list(self._metrics.collect())
        changed = self._changed_engines(families)
        if stamp is None:
            return  # a line without a usable time: counted in the state, not written
        for family in families:
            if family.name not in BACKFILL_FAMILIES:
                continue
            for sample in family.samples:
                engine = sample.labels.get("engine")
                if engine not in changed:
                    continue
                self._spool(family.name, family.type, family.documentation, sample.name,
                            sample.labels, sample.value, stamp)

    def _changed_engines(self, families: list[Metric]) -> set[str]:
        """Engines whose line counters moved since the last scrape: they had a line in this batch."""
        marks: dict[str, list[float]] = {}
        watched = {name(short) for short in ("stats_lines", "spec_decode_accepted_tokens",
                                             "spec_decode_drafted_tokens")}
        for family in families:
            if family.name in watched:
                for sample in family.samples:
                    marks.setdefault(sample.labels.get("engine", ""), []).append(sample.value)
        changed = set()
        for engine, values in marks.items():
            current = tuple(values)
            if self._previous.get(engine) != current:
                changed.add(engine)
                self._previous[engine] = current
        return changed

    def _spool(
        self, family: str, kind: str, help_text: str, sample: str, labels: dict[str, str], value: float,
        stamp: float,
    ) -> None:
        ident = (sample, *labels.items())
        key = self._keys.get(ident)
        if key is None:
            label_text = ",".join(f'{k}="{_escape_label(v)}"' for k, v in labels.items())
            key = self._keys[ident] = f"{sample}{{{label_text}}}"
        last = self._last_ts.get(key)
        if last is not None and stamp <= last:
            self.dropped += 1
            return
        self._last_ts[key] = stamp
        self._meta.setdefault(family, (kind, help_text))
        spool = self._series.setdefault(family, {}).get(key)
        if spool is None:
            spool = tempfile.SpooledTemporaryFile(  # noqa: SIM115 - closed in close()
                max_size=_SPOOL_BYTES, mode="w+", encoding="utf-8")
            self._series[family][key] = spool
        spool.write(f"{key} {_number(value)} {_timestamp(stamp)}\n")
        self.samples += 1

    def write(self, out: IO[str]) -> None:
        """Write every family (in the exporter's order), each series' samples together, then `# EOF`."""
        self._flush()
        try:
            for family in BACKFILL_FAMILIES:
                series = self._series.get(family)
                if not series:
                    continue
                kind, help_text = self._meta[family]
                out.write(f"# TYPE {family} {kind}\n# HELP {family} {_escape_help(help_text)}\n")
                for spool in series.values():
                    spool.seek(0)
                    while chunk := spool.read(1 << 16):
                        out.write(chunk)
            out.write("# EOF\n")
        finally:
            self.close()

    def close(self) -> None:
        for series in self._series.values():
            for spool in series.values():
                spool.close()
        self._series.clear()
