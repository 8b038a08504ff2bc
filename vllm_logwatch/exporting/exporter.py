"""The live exporter's state, and a prometheus_client collector that reads it at scrape time.

A worker thread feeds events (`apply`, `new_launch`, `set_follower_stats`, `set_child`); the HTTP server
thread scrapes (`collect`, `status`). One lock guards the state; a scrape copies it into metric families
under the lock and yields them after, so the feeder never waits on a slow client.

Names, types and labels come from `catalogue.METRICS` only. Label values are bounded (engines, paths,
levels) and never carry log text: logs hold users' prompts. No sample timestamps, no global registry.

>>> from prometheus_client import CollectorRegistry
>>> from vllm_logwatch.parsing.line import parse_line
>>> metrics, registry = ExporterMetrics(), CollectorRegistry()
>>> metrics.register(registry)
>>> metrics.apply(parse_line("INFO 11-29 19:26:05 [loggers.py:335] Engine 000: Avg prompt throughput: "
...                          "9.0 tokens/s, Avg generation throughput: 2.0 tokens/s, Running: 16 reqs, "
...                          "Waiting: 8 reqs, GPU KV cache usage: 4.5%"))
>>> registry.get_sample_value("vllm_logwatch_kv_cache_usage_ratio", {"engine": "0", "model_name": "unknown"})
0.045
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Literal, TypedDict

from prometheus_client.core import Metric
from prometheus_client.registry import Collector, CollectorRegistry

from ..errors import UsageError
from ..parsing.events import (
    EngineStats,
    Event,
    HttpAccess,
    IterationStats,
    LogMessage,
    MfuStats,
    PrefixCacheRates,
    ServerInfo,
    SpecDecodeStats,
    TransferStats,
    Unparsed,
)
from ..parsing.launchargs import gpu_count
from ..parsing.startup import PROBLEM_TAGS
from ..shown import json_safe
from .catalogue import METRICS, STARTUP_PHASES, check_const_labels
from .engine_state import EngineSnapshot, EngineState, engine_label
from .families import Families, new_family
from .latency_state import DETAIL_EVENTS, LatencyState
from .routes import HttpCounts
from .tokens import DEFAULT_INTERVAL, RunningTotal, readable_step
from .transfer_state import Sample

LEVELS = ("WARNING", "ERROR", "CRITICAL")
"""Levels counted in `log_messages` (always exported, from 0, so `increase()` sees the first one)."""
STALL_INTERVALS = 3.0  # silent intervals, with requests running, before an engine counts as stalled
_DEATHS = frozenset({"engine_dead", "engine_fatal"})  # after these the launch's engines serve no more
AT_SHUTDOWN = "engine_dead_at_shutdown"
"""The problem tag of an engine's death logged after its launch's shutdown line: vLLM stopped on purpose
(vLLM 0.32 logs an EngineDeadError as its engine core is stopped), not a failure to alert on."""


StatsMissing = Literal["stats_logging_disabled", "requests_without_stats"]
"""Why no engine has a stats line although vLLM runs (None in `ExporterStatus`: no reason known)."""


class Counters(TypedDict):
    """The exporter's own counters: what was read, and what could not be used."""

    log_lines: float
    log_bytes: float
    log_rotations: float
    log_truncations: float
    read_errors: float
    lines_cut: float
    state_errors: float
    parse_errors: dict[str, int]
    unknown_fields: int
    label_overflow: dict[str, int]
    log_messages: dict[str, int]
    problems: dict[str, int]
    http_requests: int


class ExporterStatus(TypedDict):
    """`ExporterMetrics.status()`, the core of `/api/v1/status` (the page reads the same keys): values in
    the log's own units, per-engine age and state, start-up facts and the exporter's own counters. Watch
    adds `pipeline` and `follower`, run `mode` and the supervisor's side of `child`."""

    engines: dict[str, EngineSnapshot]
    model_name: str
    server: dict[str, Any]
    stats_missing: StatsMissing | None
    launches: int
    launch_source: str | None
    stats_interval_seconds: float | None
    skipped_bytes: int | None
    """Bytes of the file before where reading started, not read (watch started at its end)."""
    counters: Counters
    child: dict[str, float | None] | None
    """Run mode: the supervised vLLM process as the exporter's child metrics see it (by metric name)."""


class ExporterMetrics(Collector):
    """All exporter state, and the collector that serves it. Thread-safe: feed from one thread,
    scrape from another."""

    def __init__(
        self, *, stats_interval: float | None = None, const_labels: Mapping[str, str] | None = None,
        clock: Callable[[], float] = time.time,
        on_stats: Callable[[str, EngineStats, float], None] | None = None,
    ) -> None:
        """`stats_interval`: vLLM's `VLLM_LOG_STATS_INTERVAL` when known (else the spacing of the stamps);
        `const_labels`: `--label k=v` pairs added to every series; `clock`: wall time (tests inject);
        `on_stats(engine_label, stats, arrival)`: told of each stats line, with the bounded engine label
        of its series (the status page's `history.History.record`); called under the lock, keep it short."""
        if stats_interval is not None and not (math.isfinite(stats_interval) and stats_interval > 0):
            raise UsageError(f"stats interval must be a positive number, not {stats_interval}")
        check_const_labels(const_labels or {})
        self._const_names = tuple(const_labels or {})
        self._const_values = tuple((const_labels or {}).values())
        self._interval = stats_interval
        self._clock = clock
        self._on_stats = on_stats
        self._lock = threading.Lock()
        self._ledgers = Ledgers(lambda: EngineState(stats_interval))  # by model
        self._engines = self._ledgers.current.engines
        self._latency = self._ledgers.current.latency  # iteration and request lines
        self._http = HttpCounts()
        self._levels: dict[str, int] = dict.fromkeys(LEVELS, 0)
        self._problems: dict[str, int] = dict.fromkeys((*PROBLEM_TAGS, AT_SHUTDOWN), 0)  # from 0: increase()
        self._parse_errors: dict[str, int] = {"stats": 0, "spec": 0, "prefix": 0, "transfer": 0}
        self._unknown_fields = 0
        self._launches = 0
        self._launch_source: str | None = None
        # The tailer's and the child's totals: counters that never go down, whatever their source does.
        self._follower = {key: RunningTotal() for key in FOLLOWER_COUNTERS}
        self._child: dict[str, float | None] | None = None  # the child's gauges, from run mode's first report
        self._child_totals = {key: RunningTotal() for key in CHILD_COUNTERS}
        self._runtime = RuntimeState()
        self._replay = False
        self._skipped_bytes: int | None = None
        self._banner_seen, self._facts_of = False, ""  # `_facts_of`: the file set_startup_facts read
        self._reset_launch()

    # -- feeding (worker thread) ----------------------------------------------------------------

    def apply(self, event: Event) -> None:
        """Take one event (from `parse_line` through the `Assembler`: file, line and time set)."""
        with self._lock:
            self._apply(event)

    def apply_many(
        self, events: Iterable[Event], access: Mapping[tuple[str, str, int], int] | None = None,
        measured: Mapping[int, float] | None = None, *, ended_from: int | None = None,
    ) -> list[tuple[Event, Exception]]:
        """Take a block's events, in order, then its access lines counted by (method, path, status), all
        under one lock. An event whose apply raises (a bug) is returned with its exception; the others
        are applied all the same. `measured`: index of an event -> its print time on the monotonic
        clock, for lines read live (a stats line's age, a detail line's latency); `ended_from`: the index
        of the first event after the launch's shutdown line (`mark_shutdown` there; `len(events)`: after
        them all)."""
        failed: list[tuple[Event, Exception]] = []
        times = measured or {}
        index = -1
        with self._lock:
            for index, event in enumerate(events):
                if index == ended_from:
                    self._ended = True
                try:
                    self._apply(event, times.get(index))
                except Exception as exc:
                    failed.append((event, exc))
            if ended_from is not None and ended_from > index:  # after the block's last event
                self._ended = True
            for (method, path, status), count in (access or {}).items():
                self._count_access(method, path, status, count)
        return failed

    def engine_states(self) -> tuple[str, Mapping[str, EngineState]]:
        """The model label and each engine label's state, for a reader in the feeding thread (the
        backfill reads them between two lines, `offline/output/openmetrics.py`)."""
        return self._ledgers.model, self._engines

    def new_launch(self, source: str | None = None) -> None:
        """A new vLLM launch (e.g. a new launch file): per-engine gauges, intervals and start-up facts
        start over; counters keep counting. The launch's own version banner will not count twice."""
        with self._lock:
            self._start_launch(source)
            self._opened_by_caller = True

    def set_follower_stats(
        self, *, lines: int, bytes: int, rotations: int, truncations: int, read_errors: int, lines_cut: int,
        state_errors: int = 0,
    ) -> None:
        """The tailer's own totals (absolute values; a restarted tailer's smaller values add on)."""
        values = (lines, bytes, rotations, truncations, read_errors, lines_cut, state_errors)
        with self._lock:
            for key, value in zip(FOLLOWER_COUNTERS, values, strict=True):
                self._follower[key].observe_total(value)

    def set_child(
        self, *, up: bool, pid: int | None, start_time: float | None, restarts: int,
        last_exit_code: int | None, bytes_written: int, write_errors: int, bytes_dropped: int,
        parse_bytes_dropped: int = 0, stdout_bytes_dropped: int = 0,
    ) -> None:
        """The supervised vLLM process (run mode); its metrics appear from the first call on."""
        totals = (restarts, bytes_written, write_errors, bytes_dropped, parse_bytes_dropped,
                  stdout_bytes_dropped)
        with self._lock:
            self._child = {"child_up": 1.0 if up else 0.0, "child_pid": pid,
                           "child_start_time_seconds": start_time, "child_last_exit_code": last_exit_code}
            for key, value in zip(CHILD_COUNTERS, totals, strict=True):
                self._child_totals[key].observe_total(value)

    def set_replay(self, replay: bool) -> None:
        """While `replay` (a backlog being read), a stats line not read as it was written is timed by
        its own stamp: ages come from the log. Off, by the clock (a live stamp may be in another zone)."""
        with self._lock:
            self._replay = replay

    def mark_shutdown(self) -> None:
        """The current launch shut down (its shutdown lines were read): its engines are `ended`, and an
        engine's death logged from now on is its planned stop (`engine_dead_at_shutdown`)."""
        with self._lock:
            self._ended = True

    def set_startup_facts(self, facts: Mapping[str, Any], skipped_bytes: int | None = None,
                          source: str = "") -> None:
        """Start-up facts read from before where reading started (`watch` at a file's end): shown, never
        counted; ignored once a banner was read; kept when `source`'s first line opens its launch (once)."""
        with self._lock:
            self._skipped_bytes, self._facts_of = skipped_bytes, source
            if self._banner_seen:
                return
            for key, value in facts.items():
                self._facts.setdefault(key, value)
            self._banner_seen = True
            self._name_model()

    def _start_launch(self, source: str | None) -> None:
        kept: dict[str, Any] | None = self._facts if source and source == self._facts_of else None
        self._facts_of = ""  # once: a restart banner in that file is a launch of its own
        self._launches += 1
        self._launch_source = source
        for reset in (*(e.reset for e in self._engines.values()), self._runtime.reset, self._latency.reset):
            reset()
        self._reset_launch(kept)  # the facts read from before where reading started, if of this file
        self._name_model()

    def _reset_launch(self, facts: dict[str, Any] | None = None) -> None:
        self._facts: dict[str, Any] = facts or {}
        self._last_v0: EngineState | None = None
        self._stats_seen = False
        self._first_request: float | None = None
        self._opened_by_caller = False
        self._banner_seen = bool(facts)
        self._ended = False  # the launch shut down (`mark_shutdown`)
        self._dead = False  # an engine-dead line came in this launch

    def _engine(self, label: str) -> EngineState:
        """The state of an engine label; beyond `MAX_ENGINES` labels, the shared `other` state."""
        return self._engines[self._ledgers.current.bounded(label)]

    def _model_name(self) -> str | None:
        return self._facts.get("served_model_name") or self._facts.get("model")

    def _name_model(self) -> None:
        """The start-up facts' model (if they name one) is the one served: its own counters count on."""
        name = self._model_name()
        if name and self._ledgers.switch(name):
            self._engines, self._latency = self._ledgers.current.engines, self._ledgers.current.latency
            self._last_v0 = None

    def _apply(self, event: Event, measured: float | None = None) -> None:
        if event.level in self._levels:
            self._levels[event.level] += 1
        if isinstance(event, EngineStats):
            self._stats(event, measured)
        elif isinstance(event, SpecDecodeStats):
            self._engine(engine_label(event.engine)).apply_spec(event)
            self._engine_line()
        elif isinstance(event, TransferStats):
            self._engine(engine_label(event.engine)).transfer.apply(event)
            self._engine_line()
        elif isinstance(event, MfuStats):
            self._engine(engine_label(event.engine)).mfu = event
        elif isinstance(event, DETAIL_EVENTS):
            if isinstance(event, IterationStats) and not readable_step(event):
                self._parse_errors["iteration"] = self._parse_errors.get("iteration", 0) + 1
                return
            self._latency.apply(event, measured)
            if isinstance(event, IterationStats):  # it counts its engine's tokens
                budget = self._facts.get("max_num_batched_tokens")
                self._engine(engine_label(event.engine)).apply_step(event, budget)
        elif isinstance(event, PrefixCacheRates):
            if self._last_v0 is not None:
                self._last_v0.apply_prefix_rates(event.gpu_pct, event.cpu_pct)
        elif isinstance(event, ServerInfo):
            self._apply_info(event)
        elif isinstance(event, HttpAccess):
            self._count_access(event.method, event.path, event.status, 1)
        elif isinstance(event, LogMessage):
            if event.problem is not None:
                problem = event.problem
                if problem in _DEATHS:  # the engine core stopped with vLLM (the demo's log) is no death
                    problem = AT_SHUTDOWN if self._ended else problem
                    self._dead = self._dead or not self._ended
                self._problems[problem] = self._problems.get(problem, 0) + 1
        elif isinstance(event, Unparsed):
            self._parse_errors[event.what] = self._parse_errors.get(event.what, 0) + 1

    def _stats(self, event: EngineStats, measured: float | None = None) -> None:
        label = self._ledgers.current.bounded(engine_label(event.engine, event.engines_aggregated))
        arrival = self._clock()
        if self._replay and measured is None and event.time is not None:
            arrival = min(arrival, event.time.timestamp())  # a backlog line: its own stamp
        state = self._engines[label]
        if label == "aggregated":  # data parallel: the engines' step lines count their tokens, not this
            state.writers.set_counting(not any(e.steps.started for e in self._engines.values()))
        if not state.apply_stats(event, arrival):
            self._parse_errors["stats"] += 1
        if self._on_stats is not None:
            self._on_stats(label, event, arrival)
        self._unknown_fields += event.unknown_fields
        if event.is_v0:
            self._last_v0 = state
        self._engine_line()

    def _engine_line(self) -> None:
        self._stats_seen = True
        self._opened_by_caller = False

    def _apply_info(self, info: ServerInfo) -> None:
        if info.new_launch:
            # The banner of a launch the caller just opened (a new launch file) is that same launch.
            if not (self._opened_by_caller and not self._banner_seen):
                self._start_launch(info.file)
            self._banner_seen = True
            self._ended = False  # a launch after a shutdown read in the same block
        self._runtime.apply(info, self._engines.values(), self._problems, self._clock())
        self._facts.update(info.facts("server"))
        self._name_model()

    def _count_access(self, method: str, raw_path: str, status: int, count: int) -> None:
        self._http.add(method, raw_path, status, count)
        # A served request makes a stats line within about one interval (a probe does not).
        if self._first_request is None and method == "POST" and 200 <= status < 300:
            self._first_request = self._clock()

    # -- reading (server thread) ----------------------------------------------------------------

    def _stats_missing(self, now: float) -> StatsMissing | None:
        if self._stats_seen:
            return None
        if self._facts.get("stats_logging_disabled"):
            return "stats_logging_disabled"
        wait = 3.0 * (self._interval or DEFAULT_INTERVAL)
        if self._first_request is not None and now - self._first_request > wait:
            return "requests_without_stats"
        return None

    def register(self, registry: CollectorRegistry) -> None:
        """Serve this state from `registry` (never the global one unless you pass it)."""
        registry.register(self)

    def describe(self) -> Iterable[Metric]:
        """Every family we may serve, without samples: lets the registry refuse a duplicate."""
        return [new_family(spec, ()) for spec in METRICS]

    def collect(self) -> Iterable[Metric]:
        """The metric families now (custom-collector interface)."""
        with self._lock:
            return self._families(self._clock())

    def _families(self, now: float) -> list[Metric]:
        out = Families(self._const_names, self._const_values)
        model = self._ledgers.model
        for label, state in self._engines.items():
            for short, labels, value in state.samples():
                out.add(short, (label, model, *labels), value)
            if state.last is not None:
                stalled = state.stalled(now, STALL_INTERVALS) and not self._ended
                out.add("engine_stalled", (label, model), float(stalled))
        missing = self._stats_missing(now)
        for reason in ("stats_logging_disabled", "requests_without_stats"):
            out.add("stats_missing", (reason,), float(missing == reason))
        add_fact_series(out, self._facts, self._model_name() or "")
        for short, labels, value in self._runtime.samples():
            out.add(short, labels, value)
        self._latency.add_to(out, model)
        self._ledgers.add_aside(out)
        out.add("launches", (), self._launches)
        for (method, path, status), count in self._http.counts.items():
            out.add("http_requests", (method, path, status), count)
        errors, overflow = self._counts()
        for what, counts in (("log_messages", self._levels), ("problems", self._problems),
                             ("parse_errors", errors), ("label_overflow", overflow)):
            for label_value, count in counts.items():
                out.add(what, (label_value,), count)
        own: dict[str, float | None] = {**self._read(), "unknown_fields": self._unknown_fields,
                                        **self._child_values()}
        for key, amount in own.items():
            if amount is not None:
                out.add(key, (), amount)
        return out.families()

    def _counts(self) -> tuple[dict[str, int], dict[str, int]]:
        """Parse errors and label overflows with the engines' own: the unreadable keys of transfer lines
        read otherwise (`transfer_key`), the tiers folded into `other` (`tier`) and the draft positions
        past the bound (`position`)."""
        states = list(self._ledgers.states())
        keys = sum(state.transfer.unreadable_keys for state in states)
        tiers = sum(state.transfer.offload.folded for state in states)
        positions = sum(state.positions_folded for state in states)
        return (
            {**self._parse_errors, **({"transfer_key": keys} if keys else {})},
            {**self._ledgers.folded(), "path": 0, **({"tier": tiers} if tiers else {}),
             **({"position": positions} if positions else {})},
        )

    def status(self) -> ExporterStatus:
        """A JSON-able snapshot for `/api/v1/status`: values in the log's own units (percent stays
        percent), per-engine age and state, start-up facts, and the exporter's own counters."""
        with self._lock:
            now = self._clock()
            engines = {label: snap for label, state in self._engines.items()
                       if (snap := state.snapshot(now, STALL_INTERVALS)) is not None}
            for snap in engines.values():  # a shut-down launch ended (its engine-dead lines with it)
                if self._ended or self._dead:
                    snap["state"] = "ended" if self._ended else "dead"
            read = self._read()
            errors, overflow = self._counts()
            counters = Counters(
                log_lines=read["log_lines"], log_bytes=read["log_bytes"], log_rotations=read["log_rotations"],
                log_truncations=read["log_truncations"], read_errors=read["read_errors"],
                lines_cut=read["lines_cut"], state_errors=read["state_errors"],
                parse_errors=errors, unknown_fields=self._unknown_fields, label_overflow=overflow,
                log_messages=dict(self._levels),
                problems=dict(self._problems), http_requests=sum(self._http.counts.values()),
            )
            return ExporterStatus(
                engines=engines, model_name=self._ledgers.model, server=json_safe(self._facts),
                stats_missing=self._stats_missing(now), launches=self._launches,
                launch_source=self._launch_source, stats_interval_seconds=self._interval,
                skipped_bytes=self._skipped_bytes, counters=counters,
                child=None if self._child is None else self._child_values())

    def _read(self) -> dict[str, float]:
        """The follower's totals by name."""
        return {key: total.value for key, total in self._follower.items()}

    def _child_values(self) -> dict[str, float | None]:
        """The child's metrics by name (none before run mode's first report)."""
        if self._child is None:
            return {}
        return {**self._child, **{key: total.value for key, total in self._child_totals.items()}}


FOLLOWER_COUNTERS = ("log_lines", "log_bytes", "log_rotations", "log_truncations", "read_errors", "lines_cut",
                     "state_errors")
CHILD_COUNTERS = (
    "child_restarts", "log_file_bytes_written", "log_file_write_errors", "log_file_bytes_dropped",
    "parse_bytes_dropped", "stdout_bytes_dropped")


MAX_ENGINES = 64
"""Engine labels of one model; more are folded into `other` (counted)."""
MAX_MODELS = 16
"""Models whose counters are kept; past it the one named longest ago is forgotten (its series end, and
start again from 0 if it comes back: a counter reset, which `rate()` and `increase()` take)."""


class Ledger:
    """One model's engines (by engine label: at most `MAX_ENGINES`, then `other`) and its request and
    step counts. `new_state()`: a new engine's state."""

    def __init__(self, new_state: Callable[[], EngineState]) -> None:
        self.engines: dict[str, EngineState] = {}
        self.latency = LatencyState(self.bounded)
        self.folded = 0  # engine labels folded into `other`
        self._new_state = new_state

    def bounded(self, label: str) -> str:
        """`label`, or `other` beyond `MAX_ENGINES` labels (counted); its state exists on return."""
        engines = self.engines
        if label not in engines:
            if len(engines) - ("other" in engines) >= MAX_ENGINES:
                self.folded += 1
                label = "other"
            if label not in engines:
                engines[label] = self._new_state()
        return label


class Ledgers:
    """The current model's ledger and those set aside (`Ledger`'s arguments for a new one), so a series
    labelled with a model counts that model's lines only. Launches of different models follow each
    other (a file with several banners, a launch folder, restarts under `run`): a model's ledger is set
    aside when another is named and taken up again, with its totals, when it is named again. A set-aside
    ledger's counters are still served (counters do not go down); its gauges ended with its launch."""

    def __init__(self, new_state: Callable[[], EngineState]) -> None:
        self._new_state = new_state
        self.model = "unknown"
        self.current = Ledger(new_state)
        self._aside: dict[str, Ledger] = {}

    def switch(self, model: str) -> bool:
        """`model` is now the one served: its ledger (set aside before, else a new one) becomes the
        current one. False: it already was."""
        if model == self.model:
            return False
        self._aside[self.model] = self.current
        aside = self._aside.pop(model, None)
        self.current = aside if aside is not None else Ledger(self._new_state)
        self.model = model
        while len(self._aside) >= MAX_MODELS:
            del self._aside[next(iter(self._aside))]
        return True

    def all(self) -> Iterator[Ledger]:
        yield self.current
        yield from self._aside.values()

    def states(self) -> Iterator[EngineState]:
        """Every engine state, of every model."""
        for ledger in self.all():
            yield from ledger.engines.values()

    def folded(self) -> dict[str, int]:
        """The label overflows of the ledgers: engines (always) and adapters (when any) folded into
        `other`."""
        lora = sum(ledger.latency.overflow for ledger in self.all())
        return {"engine": sum(ledger.folded for ledger in self.all()), **({"lora": lora} if lora else {})}

    def add_aside(self, out: Families) -> None:
        """The counters of the models set aside into a scrape's families."""
        for model, ledger in self._aside.items():
            for label, state in ledger.engines.items():
                for short, value in state.counters().items():
                    out.add(short, (label, model), value)
            ledger.latency.add_to(out, model)


FT_STATUSES = ("healthy", "diagnosing", "unhealthy", "dead")
"""vLLM's engine statuses under fault tolerance (`EngineStatusType`), each a series of the state gauge."""
_MAX_BREAKERS = 8
"""Circuit breakers named in `kv_connector_breaker_openings` (vLLM has one; more fold into `other`)."""
_TRANSITIONS = (("sleep", "sleep_seconds"), ("wake_up", "wake_seconds"), ("discard", "discard_seconds"))


class RuntimeState:
    """Server-wide state from the lines vLLM prints while it runs, besides the stats lines (read into
    `ServerInfo` fields): sleep mode, the DP supervisor's findings, EPLB, fault tolerance, KV offload job
    failures, the KV connectors' circuit breakers. Counters survive a new launch; gauges start over."""

    def __init__(self) -> None:
        self.counts: dict[tuple[str, tuple[str, ...]], float] = {
            ("rejected_requests", (status,)): 0.0 for status in (*FT_STATUSES[1:], "other")}
        """Counters by (metric, labels): sleep transitions, rearrangements, faults, rejected requests (from
        0, so `increase()` sees the first), offload failures, breaker openings."""
        self.reset()

    def reset(self) -> None:
        """A new launch: the gauges start over."""
        self.asleep: bool | None = None
        self.gauges: dict[tuple[str, tuple[str, ...]], float] = {}
        self.ft_status: dict[str, str] = {}
        """Engine label -> its last fault-tolerance status (lower case)."""

    def apply(
        self, info: ServerInfo, engines: Iterable[EngineState], problems: dict[str, int], now: float
    ) -> None:
        """Take an event's runtime fields: a problem tag is counted in `problems`, a sleep or wake-up
        goes to every engine (at wall time `now`)."""
        if info.problem is not None:  # an INFO line's failure (the DP supervisor's findings)
            problems[info.problem] = problems.get(info.problem, 0) + 1
        if info.asleep is not None:
            for state in engines:
                state.set_asleep(info.asleep, now)
        for transition, attribute in _TRANSITIONS:
            seconds = getattr(info, attribute)
            if seconds is not None:
                self._count("sleep_transitions", (transition,))
                self.gauges[("sleep_transition_seconds", (transition,))] = seconds
        if info.asleep is not None:
            self.asleep = info.asleep
        for short, value in (
            ("dp_servers_unhealthy", info.dp_unhealthy_servers),
            ("dp_servers_exited", info.dp_exited_servers),
            ("eplb_balancedness", info.eplb_balancedness),
            ("eplb_rearrangement_seconds", info.eplb_rearrange_seconds),
        ):
            if value is not None:
                self.gauges[(short, ())] = float(value)
        if info.eplb_rearrange_seconds is not None:
            self._count("eplb_rearrangements", ())
        self._apply_faults(info)

    def _count(self, short: str, labels: tuple[str, ...], by: float = 1.0) -> None:
        self.counts[(short, labels)] = self.counts.get((short, labels), 0.0) + by

    def _apply_faults(self, info: ServerInfo) -> None:
        if info.ft_status is not None and info.ft_engine is not None:
            status = info.ft_status.lower()
            self.ft_status[str(info.ft_engine)] = status if status in FT_STATUSES else "other"
        if info.ft_fault is not None:
            self._count("engine_faults", ())
        if info.rejected_status is not None:
            status = info.rejected_status.lower()
            self._count("rejected_requests", (status if status in FT_STATUSES else "other",))
        if info.offload_failed_job is not None:
            self._count("kv_offload_job_failures", (info.offload_failed_job,))
        if info.offload_chunks_dropped:
            self._count("kv_offload_chunks_dropped", (), float(info.offload_chunks_dropped))
        if info.breaker is not None:
            named = {labels[0] for short, labels in self.counts if short == "kv_connector_breaker_openings"}
            name = info.breaker if info.breaker in named or len(named) < _MAX_BREAKERS else "other"
            self._count("kv_connector_breaker_openings", (name,))

    def samples(self) -> Iterator[Sample]:
        if self.asleep is not None:
            yield "asleep", (), float(self.asleep)
        for (short, labels), value in self.gauges.items():
            yield short, labels, value
        for engine, current in self.ft_status.items():
            for status in (*FT_STATUSES, "other"):
                yield "engine_fault_tolerance_status", (engine, status), float(status == current)
        for (short, labels), value in self.counts.items():
            yield short, labels, value


def add_fact_series(out: Families, facts: Mapping[str, Any], model: str) -> None:
    """`server` info, KV cache capacity and blocks, maximum concurrency, GPU count, start-up durations:
    each once its line was read (a new launch starts its facts over)."""
    if any(k in facts for k in ("vllm_version", "model", "served_model_name")):
        out.info(
            "server",
            {"version": facts.get("vllm_version", ""), "model_name": model, "model": facts.get("model", "")},
        )
    if "kv_cache_tokens" in facts:
        out.add("kv_cache_capacity_tokens", (model,), facts["kv_cache_tokens"])
    blocks = facts.get("kv_cache_extended_blocks", facts.get("gpu_blocks"))
    if blocks is not None:
        out.add("kv_cache_blocks", (model,), blocks)
    if "max_concurrency" in facts:
        per_request = facts.get("max_concurrency_tokens_per_request")
        out.add(
            "max_concurrency",
            (model, "" if per_request is None else str(per_request)),
            facts["max_concurrency"],
        )
    if "kv_cache_extended_gib" in facts:  # 0.34: measured after warm-up; the estimate before overstates it
        out.add("kv_cache_capacity_bytes", (model, "after_warmup"), facts["kv_cache_extended_gib"] * 2**30)
    elif "available_kv_cache_gib" in facts:
        out.add("kv_cache_capacity_bytes", (model, "estimate"), facts["available_kv_cache_gib"] * 2**30)
    gpus = gpu_count(dict(facts))
    if gpus is not None:
        out.add("gpus", (model,), gpus)
    for phase, key in STARTUP_PHASES.items():
        if key in facts:
            out.add("startup_seconds", (model, phase), facts[key])
