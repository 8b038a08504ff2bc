"""`logwatch parse --openmetrics` (and `--vm-import`): old logs as metrics text with timestamps, for backfill
(docs/offline.md says how to load it into Prometheus, Mimir, Thanos or VictoriaMetrics).

One writer for both: only the timestamps' unit (OpenMetrics' seconds; milliseconds in Prometheus text,
which VictoriaMetrics files as it is), the counters' `# TYPE` name and the `# EOF` differ. The values are
not recomputed here: the records go through the live exporter's own state (`ExporterMetrics`), read
after each stats timestamp, so names, labels and values are the exporter's (its token estimates too).
OpenMetrics wants each series' samples together and in time order: they are spooled per series (in
memory, then temporary files) and written family by family, so memory stays flat.
"""

from __future__ import annotations

import math
import tempfile
from typing import IO

from ...errors import UsageError
from ...exporting.catalogue import METRICS, PREFIX, MetricSpec, name
from ...exporting.exporter import ExporterMetrics
from ...parsing.events import (
    EngineStats,
    Event,
    MfuStats,
    ServerInfo,
    SpecDecodeStats,
    TransferStats,
    Unparsed,
)

__all__ = ["BACKFILL_FAMILIES", "OpenMetricsWriter", "parse_labels"]

BACKFILL_FAMILIES: tuple[str, ...] = tuple(
    m.name for m in METRICS if "engine" in m.labels and m.name != name("engine_stalled")
)
"""Per-engine families written (the stall signal is about a live clock, so it is left out)."""
_SPECS = {m.name[len(PREFIX):]: m for m in METRICS if m.name in BACKFILL_FAMILIES}
_SPOOL_BYTES = 1 << 20
_PENDING = 1 << 16
"""Samples held as text before they go to their series' spools."""


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


def _timestamp(seconds: float, millis: bool = False) -> str:
    """OpenMetrics' seconds (`1795980365`, `1795980365.25`), or Prometheus text's whole milliseconds."""
    if millis:
        return str(round(seconds * 1000))
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
    """Feed events in file order (`new_launch` at each new file); `write` the text once at the end, then
    `close`.

    >>> from vllm_logwatch.parsing.assemble import iter_events
    >>> from vllm_logwatch.parsing.stamps import YearClock
    >>> from zoneinfo import ZoneInfo
    >>> w = OpenMetricsWriter()
    >>> line = ("INFO 11-29 19:26:05 [loggers.py:335] Engine 000: Avg prompt throughput: 9.0 tokens/s, "
    ...         "Avg generation throughput: 2.0 tokens/s, Running: 16 reqs, Waiting: 8 reqs")
    >>> for event in iter_events([line], clock=YearClock(2026, ZoneInfo("UTC"))): w.feed(event)
    >>> import io; out = io.StringIO(); w.write(out); w.close()
    >>> [s for s in out.getvalue().splitlines() if s.startswith("vllm_logwatch_requests_running")]
    ['vllm_logwatch_requests_running{engine="0",model_name="unknown"} 16 1795980365']
    """

    def __init__(self, labels: dict[str, str] | None = None, *, millis: bool = False) -> None:
        """`labels`: added to every series (like the exporter's `--label`); UsageError if invalid.
        `millis`: Prometheus text with millisecond timestamps and no `# EOF` (`parse --vm-import`)."""
        self._millis = millis
        self._now = 0.0
        self._metrics = ExporterMetrics(clock=lambda: self._now, const_labels=labels)
        self._const = [(k, _escape_label(v)) for k, v in (labels or {}).items()]
        self._batch_time: float | None = None
        self._batch_dirty = False
        self._previous: dict[tuple[str, str], tuple[float, ...]] = {}  # (model, engine) -> marks
        self._series: dict[str, dict[str, IO[str]]] = {}  # family -> series key -> its spool
        self._pending: dict[str, tuple[IO[str], list[str]]] = {}  # series key -> its spool, its samples held
        self._held = 0
        self._keys: dict[tuple[str, str, str, tuple[str, ...]], tuple[str, str]] = {}
        self._last_ts: dict[str, float] = {}
        self.dropped = 0
        """Samples not after the previous one of their series (inputs out of time order): left out."""
        self.stats_lines = 0
        self.stats_disabled = False
        """Whether a start-up line said vLLM logs no stats (for the no-stats hint)."""
        self.repeats = 0
        """Stats lines written twice, counted once (`Assembler`'s `repeats`)."""

    def new_launch(self, source: str | None) -> None:
        """A new input file: a new launch, as the live exporter sees a new launch file."""
        self._flush()
        self._metrics.new_launch(source)

    def feed(self, event: Event) -> None:
        """One event in file order (stats, spec, transfer and start-up lines matter; others are ignored)."""
        if isinstance(event, ServerInfo):
            self._flush()  # the last values, before a launch starts over or another model is named
            self._metrics.apply(event)
            self.stats_disabled = self.stats_disabled or bool(event.stats_logging_disabled)
            return
        if not isinstance(event, (EngineStats, SpecDecodeStats, TransferStats, MfuStats)):
            self.repeats += isinstance(event, Unparsed) and event.what == "duplicate"
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
        """Spool the samples of the engines that just had a line, read from their state."""
        if not self._batch_dirty:
            return
        self._batch_dirty = False
        stamp = self._batch_time
        model, engines = self._metrics.engine_states()
        changed = []
        for engine, state in engines.items():
            # An engine had a line in this batch when its line counters moved (stats, spec counts).
            marks = ((float(state.stats_lines),) if state.stats_lines else ()) + (
                (state.spec_accepted.value, state.spec_drafted.value) if state.has_spec_counts else ())
            if marks and self._previous.get((model, engine)) != marks:
                self._previous[model, engine] = marks
                changed.append((engine, state))
        if stamp is None:
            return  # a line without a usable time: counted in the state, not written
        at = _timestamp(stamp, self._millis)
        for engine, state in changed:
            for short, labels, value in state.samples():
                ident = (short, engine, model, labels)
                found = self._keys.get(ident)
                if found is None:
                    spec = _SPECS.get(short)
                    if spec is None:
                        continue
                    found = self._keys[ident] = (spec.name, self._series_key(spec, (engine, model, *labels)))
                family, key = found
                last = self._last_ts.get(key)
                if last is not None and stamp <= last:
                    self.dropped += 1
                    continue
                self._last_ts[key] = stamp
                pending = self._pending.get(key)
                if pending is None:
                    spool = tempfile.SpooledTemporaryFile(  # noqa: SIM115 - close()
                        max_size=_SPOOL_BYTES, mode="w+", encoding="utf-8")
                    self._series.setdefault(family, {})[key] = spool
                    pending = self._pending[key] = (spool, [])
                pending[1].append(f"{key} {_number(value)} {at}\n")
                self._held += 1
        if self._held >= _PENDING:
            self._spill()

    def _series_key(self, spec: MetricSpec, values: tuple[str, ...]) -> str:
        sample = spec.name + "_total" if spec.type == "counter" else spec.name
        pairs = [*((k, _escape_label(v)) for k, v in zip(spec.labels, values, strict=True)), *self._const]
        return sample + "{" + ",".join(f'{k}="{v}"' for k, v in pairs) + "}"

    def _spill(self) -> None:
        """The held samples to their series' spools."""
        for spool, held in self._pending.values():
            if held:
                spool.write("".join(held))
                held.clear()
        self._held = 0

    def write(self, out: IO[str]) -> None:
        """Write every family (in the exporter's order), each series' samples together, then `# EOF`
        (OpenMetrics only; Prometheus text names a counter's family by its samples' `_total` name)."""
        self._flush()
        self._spill()
        for family in BACKFILL_FAMILIES:
            series = self._series.get(family)
            if not series:
                continue
            spec = _SPECS[family[len(PREFIX):]]
            named = family + "_total" if self._millis and spec.type == "counter" else family
            out.write(f"# TYPE {named} {spec.type}\n# HELP {named} {_escape_help(spec.help)}\n")
            for spool in series.values():
                spool.seek(0)
                while chunk := spool.read(1 << 16):
                    out.write(chunk)
        if not self._millis:
            out.write("# EOF\n")

    def close(self) -> None:
        """The spools closed (their temporary files removed), written or not."""
        for spool, _ in self._pending.values():
            spool.close()
        self._series.clear()
        self._pending.clear()
