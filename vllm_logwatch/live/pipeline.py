"""One worker thread: follow the log, read its blocks of lines, feed the metrics (docs/design.md, "The
path of a line").

    Follower --LineBlock--> LaunchReader (per file: block scan, parse_line, Assembler) --> ExporterMetrics

Why it is built like this:

* Each launch file gets its own `Assembler` and `YearClock` (the year comes from that file's name), and
  a new file in a folder is a new vLLM launch: `metrics.new_launch()` resets the per-engine gauges.
* A bug on one line (in the parser, the assembler or the metrics) must not stop an exporter that runs
  for months: it is counted as a parse error and logged once, and the thread goes on (`ingest.py`).
* Logs hold users' prompts: nothing here logs or returns line text, not even in an exception message
  (those are withheld; the traceback of our own code is logged instead).
* The follower's own counters (lines, bytes, rotations, read errors, ...) reach the metrics after
  every batch, at scrape time (`register`), and once a poll interval from a small second thread, so a
  read error or a file switch is logged and counted while no line flows.
* A file read from its end gets its launch's start-up facts (model, version, arguments, KV cache
  size: printed long before) from the bytes before that end (`launch_facts`): from the last launch
  banner on, start-up lines only, read in large chunks framed as the follower frames a file, at most
  `FACTS_BYTES` after the banner. Nothing is counted there (no stats line, message or launch), so the
  state file's exactly-once promise is untouched (docs/watch.md).
* The state file, exactly once (`StateKeeper`). A poll reads at most `POLL_BYTES`, so a scrape never
  waits long for a backlog being applied.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import re
import threading
import time
import traceback
from collections.abc import Iterable, Iterator, Mapping
from datetime import tzinfo
from typing import IO, Any

from prometheus_client.core import Metric
from prometheus_client.registry import Collector, CollectorRegistry

from ..exporting.exporter import ExporterMetrics
from ..following.openfile import FollowerStats, LineBlock, OpenFile
from ..following.source import LineSource
from ..following.statefile import Checkpoint, Position, SavedState
from ..parsing.assemble import Assembler
from ..parsing.events import ServerInfo
from ..parsing.framing import MAX_LINE_BYTES
from ..parsing.line import parse_line
from ..parsing.stamps import local_zone
from ..shown import json_safe, shown_path
from .ingest import LaunchReader, LineErrors
from .records import RecordStream
from .sources import MetricsFactory, SourceReaders, over_sources, withhold_extra

log = logging.getLogger(__name__)

_MAX_LOGGED = 32  # distinct follower errors logged; later ones are only counted
POLL_BYTES = 1 << 20  # one poll's lines are applied holding the gate: a scrape waits ~0.1 s at most
STALL_POLLS = 10  # /healthz is 503 once no poll completed for this many poll intervals ...
STALL_FLOOR = 5.0  # ... and at least this many seconds (a scrape may hold a poll's lines back ~1 s)
SAVE_RETRY = 1.0  # after a failed write of the state file
RECORDS_WAIT = 1.0  # the state file's writer thread waits this long at most for the records' writer
_FILE_EVENTS = {
    "file_switches": "following %s (a new launch file)",
    "rotations": "log rotated (renamed and recreated): reading %s from its start",
    "truncations": "log truncated: reading %s from its start",
}


class Pipeline(Collector):
    """Wires a `LineSource` (a `Follower`, a `ManyFollower`, stdin) to an `ExporterMetrics` in one worker
    thread, and reports its state. When a source ends (a stream's writer is gone), its last record is
    applied, that is said once, and the metrics stay served.

    `zone`: the zone vLLM logged in (None: this machine's). `metrics_for(labels)`: the metrics of each
    source of a many-source follower (`following/many.py`, `sources.py`); `metrics` then holds the
    watch's own errors; `labels`: the `--label` pairs, for the series of the pipeline's own (the
    sources' count). With `keeper.records` set before `start`, each block's events go to that record
    stream (`records.py`). `step()` does one poll in the caller's thread (`top`, and tests stepping the
    follower by hand). A prometheus_client collector of the metrics (`register`).
    """

    def __init__(
        self,
        follower: LineSource,
        metrics: ExporterMetrics,
        *,
        zone: tzinfo | None = None,
        metrics_for: MetricsFactory | None = None,
        labels: Mapping[str, str] | None = None,
    ) -> None:
        self.follower = follower
        self.stall_after = max(STALL_POLLS * follower.poll_interval, STALL_FLOOR)
        self.metrics = metrics
        self.zone = zone if zone is not None else local_zone()
        self.readers = SourceReaders(metrics, self.zone, self._new_reader, metrics_for=metrics_for,
                                     labels_of=follower.labels_of, counts=follower.source_counts,
                                     const_labels=labels)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._housekeeper: threading.Thread | None = None
        self._sync_lock = threading.Lock()
        self._lines_applied = 0
        self._batches = 0
        self.errors = LineErrors()
        self._last_batch: float | None = None
        self._last_poll = time.monotonic()  # when the worker last completed a poll (or started)
        self._started_at: float | None = None
        self._failure: str | None = None
        self._stopped = False
        self._ended = False
        self._logged_counts = dict.fromkeys(("files_opened", "file_switches", "rotations", "truncations"), 0)
        self._logged_errors: set[str] = set()
        # the state file in step with what scrapes show; a many-source file, rewritten whole, less often
        self.keeper = StateKeeper(follower)
        # A backlog is timed by its stamps until a poll finds nothing new (`set_replay`); a file read
        # from its end gets its launch's start-up facts from before that end (`launch_facts`).
        self._replaying, self._had_lines, self._started = True, False, time.monotonic()
        self.readers.set_replay(True)
        self._facts_read = False
        self._resumed = follower.state_file is not None and os.path.exists(follower.state_file)
        follower.poll_bytes = min(follower.poll_bytes, POLL_BYTES)

    # -- life cycle -----------------------------------------------------------------------------

    def start(self) -> None:
        """Start the worker thread (once)."""
        if self._thread is not None:
            raise RuntimeError("pipeline already started")
        self._started_at = time.time()
        self._last_poll = time.monotonic()
        self._thread = threading.Thread(target=self._run, name="logwatch-pipeline", daemon=True)
        self._thread.start()
        self._housekeeper = threading.Thread(target=self._housekeep, name="logwatch-sync", daemon=True)
        self._housekeeper.start()
        self.keeper.start()

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the threads, write the state file (the position after the last lines applied), close
        the follower. Idempotent."""
        if self._stopped:
            return
        self._stopped = True
        self._stop.set()
        self.follower.stop()
        if self._housekeeper is not None:
            self._housekeeper.join(timeout)
        if self._thread is not None:
            self._thread.join(timeout)
            if self._thread.is_alive():
                log.error("the follower thread did not stop within %.0f s; saving state anyway", timeout)
        self.keeper.stop(timeout)
        self.follower.close()
        self.sync()

    def healthy(self) -> bool:
        """False once the worker thread died of an unexpected error (never for a bad line or file), or
        while it is stuck: no poll completed for `stall_after` seconds (a poll never waits on a writer,
        so one that does not end is a bug or a hung file system)."""
        return self._failure is None and self.stalled_for() < self.stall_after

    def stalled_for(self) -> float:
        """Seconds since the worker last completed a poll (0 before it starts and after it stops)."""
        if self._thread is None or self._stopped:
            return 0.0
        return time.monotonic() - self._last_poll

    def step(self) -> int:
        """One poll and its lines, in this thread; the number of lines handled."""
        self._had_lines = False  # this poll's (run_blocks resets it in `_polled`)
        blocks = self.follower.poll_blocks()
        if blocks:
            self._handle(blocks)
        else:
            self._polled()
            self.sync()
        return sum(block.count for block in blocks)

    def register(self, registry: CollectorRegistry) -> None:
        """Serve the metrics from `registry`, with the follower's counters brought up to date at each
        scrape. Use it instead of `metrics.register(registry)`, not with it."""
        registry.register(self)

    def collect(self) -> Iterable[Metric]:
        """The metrics' families, the follower's counters brought up to date first."""
        with self.keeper.published():
            self.sync()
            return self.readers.collect()

    def describe(self) -> Iterable[Metric]:
        return self.metrics.describe()

    def _housekeep(self) -> None:
        """While no line flows the worker has nothing to report: a file opened, a read error or a
        rotation would reach the log and the metrics only at the next scrape. Sync once a poll interval."""
        while not self._stop.wait(self.follower.poll_interval):
            try:
                self.sync(full=False)  # a scrape syncs every source itself
            except Exception as exc:  # never let the reporter take the exporter down
                log.error("cannot update the follower's counters: %s", type(exc).__name__)

    def _run(self) -> None:
        try:
            self.follower.run_blocks(self._handle, self._stop, on_poll=self._polled)
        except BaseException as exc:  # a bug outside any single line: say so on /healthz and stderr
            self._failure = type(exc).__name__
            log.error("the follower stopped: %s (message withheld: it may hold log text)\n%s",
                      type(exc).__name__, "".join(traceback.format_tb(exc.__traceback__)).rstrip())

    # -- lines ------------------------------------------------------------------------------------

    def _handle(self, blocks: list[LineBlock]) -> None:
        with self.keeper.gate:
            for block in blocks:
                self.readers.read(block)
            self._lines_applied += sum(block.count for block in blocks)
            self._batches += 1
            self._last_batch = time.time()
            self._had_lines = True
            self.keeper.pend(self.follower.checkpoint())  # the same poll's: after exactly these lines
        self.sync(full=False)

    def _polled(self) -> None:
        """After any poll (its lines applied): a position that moved without a line (a file opened,
        rotated, truncated; a cut line's tail skipped) is pending too."""
        self._last_poll = time.monotonic()
        self.keeper.moved(self.follower.checkpoint())
        self._caught_up()
        if dropped := self.follower.take_dropped():
            with self.keeper.gate:
                for key in dropped:
                    self.readers.drop(key)
        if self.follower.ended and not self._ended:
            self._ended = True
            with self.keeper.gate:
                self.readers.flush_all()  # a record the assembler holds: nothing will complete it now
            log.info("%s ended: nothing more to read (%d lines read in %.1f s); still serving the metrics "
                     "read from it", self.follower.status()["target"], self._lines_applied,
                     time.monotonic() - self._started)

    def _caught_up(self) -> None:
        """After a poll: a poll with no line ends the replay of a backlog; the first poll that opened a
        file at an offset reads its launch's start-up facts from before it."""
        if self._replaying and (not self._had_lines or self.follower.ended):
            self._replaying = False
            self.readers.set_replay(False)
            # one line when a backlog was read (nothing on a quiet start; a stream's end says it)
            if self._lines_applied and not self.follower.ended:
                log.info("caught up: %d lines of backlog read in %.1f s; following new lines",
                         self._lines_applied, time.monotonic() - self._started)
        self._had_lines = False
        if self._facts_read or (starts := self.follower.starts()) is None:
            return
        self._facts_read = True
        for key, path, start in starts:
            if not start:
                continue
            facts = launch_facts(path, start)
            with self.keeper.gate:
                self.readers.metrics_of(key).set_startup_facts(facts, None if self._resumed else start,
                                                               source=path)

    def _new_reader(self, assembler: Assembler, metrics: ExporterMetrics) -> LaunchReader:
        """The reader of a new file (`SourceReaders` makes one a launch)."""
        records = self.keeper.records
        return LaunchReader(metrics, assembler, self.errors, timed=True,
                            records=records.put if records is not None else None)

    # -- the follower's counters ----------------------------------------------------------------

    def sync(self, *, full: bool = True) -> None:
        """Copy the follower's counters into the metrics; log a rotation, truncation or new error once.

        Called by the worker after each batch (`full=False`: of many sources, only those that moved)
        and by the scrape thread; the lock keeps the readings in order, so a counter never looks like it
        went down (which would read as a restart)."""
        with self._sync_lock:
            stats = self.follower.stats
            applied = self.keeper.pending  # lines and bytes as far as applied: never ahead of the state file
            per_source = self.follower.source_stats()
            if per_source is not None:
                self.readers.sync(applied, *per_source, full=full)
            else:
                self.metrics.set_follower_stats(
                    lines=applied.lines, bytes=applied.bytes, rotations=stats.rotations,
                    truncations=stats.truncations, read_errors=stats.read_errors,
                    lines_cut=stats.lines_cut + self.errors.cut,
                    state_errors=stats.state_errors,
                )
            for what, logged in self._logged_counts.items():
                count = getattr(stats, what)
                if count > logged:
                    self._logged_counts[what] = count
                    if per_source is not None:
                        continue  # a many-source watch: each source says what it reads (`sources.py`)
                    follower = self.follower.status()
                    if what == "files_opened":
                        if logged == 0:
                            log.info("reading %s from offset %s", follower["path"], follower["start_offset"])
                    else:
                        log.info(_FILE_EVENTS[what], follower["path"])
            errors = ((stats.last_error, "read_errors"), (stats.last_state_error, "state_errors"))
            for error, counter in errors:
                if error and error not in self._logged_errors and len(self._logged_errors) < _MAX_LOGGED:
                    self._logged_errors.add(error)
                    again = "" if error.startswith("state file unreadable") else "retrying; "
                    log.warning("%s (%scounted in vllm_logwatch_%s_total)", error, again, counter)

    # -- status ---------------------------------------------------------------------------------

    def status(self) -> dict[str, Any]:
        """A JSON-able snapshot for `/api/v1/status`: what is followed and where, the per-engine values
        (in the log's units), start-up facts and counters. No line text: unknown stats fields, whose
        names come from the log, are shown as a count only."""
        with self.keeper.published():
            return self._status()

    def _status(self) -> dict[str, Any]:
        self.sync()
        snapshot: dict[str, Any] = dict(withhold_extra(self.metrics.status()))
        sources = self.readers.status()
        if sources:  # many: every source's engines in one table, named by their source; counters added
            snapshot["engines"] = {f"{s['name']} #{label}": engine
                                   for s in sources for label, engine in s.get("engines", {}).items()}
            snapshot.update(over_sources(snapshot, sources))
        now = time.time()
        applied = self.keeper.pending.state
        thread = self._thread
        safe: dict[str, Any] = json_safe({
            "pipeline": {
                "running": thread is not None and thread.is_alive(),
                "healthy": self.healthy(),
                "last_poll_age_seconds": round(self.stalled_for(), 3),
                "failure": self._failure,
                "started_at": self._started_at,
                "lines_applied": self._lines_applied,
                "batches": self._batches,
                "last_batch_age_seconds": (
                    None if self._last_batch is None else round(now - self._last_batch, 3)),
                "internal_errors": self.errors.internal,
                "state_writes": self.keeper.writes,
                "state_file": self.keeper.saving(),
                "source": self.readers.current(),
                # after the lines applied, as `lines_applied` (the follower's offset runs ahead of both
                # while a poll's lines are applied)
                "offset": applied.offset if isinstance(applied, SavedState) else None,
                "sources_seen": self.readers.files_seen,
            },
            "follower": {"ended": self.follower.ended, **self.follower.status()},
            **snapshot,
            **({"sources": sources} if sources else {}),
        }, shown_path)  # file names shown valid UTF-8, control characters escaped
        return safe


class StateKeeper:
    """The state file in step with what scrapes show: a line a scrape shows is never counted again after
    a restart, even after `kill -9` (how, and what a failed write costs: docs/design.md, "The state file,
    exactly once", and docs/watch.md). The worker applies a poll's lines holding the `gate` and `pend`s
    the position after them; `published()` (a scrape, a status read) takes the gate and writes that
    position first if it is not on disk; a thread of its own (`start`) writes it without the gate. Writes
    are at least the follower's `save_interval()` apart; a failed one is retried after `SAVE_RETRY`.

    With a record stream to a file (`records.py`), each write also names where the records file was after
    the records of the lines written as read (`RecordStream.mark`, fsync'd first), so a restart writes
    each record once. The records are handed over with the lines (`pend` takes their count), and a write
    first waits for the records' writer to have taken them: the writer thread up to `RECORDS_WAIT`, a
    scrape (holding the gate) up to the follower's save interval; a sink slower than that is not waited
    for longer (the mark then says how many it lacked, and a restart counts those as dropped if they
    never came).
    """

    def __init__(self, follower: LineSource) -> None:
        """Writes are at least `follower.save_interval()` apart, asked before each (a many-source
        follower's grows with its state's size)."""
        self.follower = follower
        self.gate = threading.Lock()  # held to apply a poll's lines, and to collect a scrape
        self.pending: Checkpoint = follower.checkpoint()  # after the lines applied so far
        self.records: RecordStream | None = None  # set before `start`
        self._latest: tuple[Checkpoint, int] = (self.pending, 0)  # `pending` and the records handed
        # over with its lines, in one: the writer thread reads it without the gate
        self.writes = 0
        self._write_lock = threading.Lock()  # one write at a time, each of the newest pending position
        self._saved: Position | None = None  # the position last written
        self._last_write = float("-inf")  # monotonic time of the last write attempt
        self._failing = False  # the last write failed: retried after save_retry; scrapes do not wait
        self.failing_since: float | None = None  # Unix time of the first of the failed writes in a row
        self._due = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start the writer thread (only when there is a state file)."""
        if self.follower.state_file is not None:
            self._thread = threading.Thread(target=self._keep_saved, name="logwatch-state", daemon=True)
            self._thread.start()

    def pend(self, checkpoint: Checkpoint) -> None:
        """The position after the lines just applied (the gate is held by the caller, or not needed)."""
        self._latest = (checkpoint, self.records.handed() if self.records is not None else 0)
        self.pending = checkpoint
        self._due.set()

    def moved(self, checkpoint: Checkpoint) -> None:
        """A position that moved without a line (a file opened, rotated, truncated; a cut line's tail
        skipped) is pending too."""
        if checkpoint.state != self.pending.state:
            with self.gate:
                self.pend(checkpoint)

    @contextlib.contextmanager
    def published(self) -> Iterator[None]:
        """Hold the gate with every applied line's position on disk: what is read inside may be shown.

        Writes the pending position first if it is not on disk yet, after waiting for its turn (at most
        `save_interval`); does not wait, nor write, while writes fail and their retry is not due."""
        with self.gate:
            with self._write_lock:
                wait = self._wait_before_write()
                if wait != math.inf and not self._failing:
                    time.sleep(wait)  # holding the gate: nothing new is applied meanwhile
                    wait = 0.0
                if wait <= 0:
                    self._write_pending()
            yield

    def stop(self, timeout: float) -> None:
        """Stop the writer thread and write the last pending position."""
        self._stop.set()
        self._due.set()
        if self._thread is not None:
            self._thread.join(timeout)
        with self.gate, self._write_lock:
            self._write_pending()

    def _wait_before_write(self) -> float:
        """Seconds before the pending position may be written (0: now; inf: nothing to write)."""
        state = self.pending.state
        if self.follower.state_file is None or state is None or state == self._saved:
            return math.inf
        pause = SAVE_RETRY if self._failing else self.follower.save_interval()
        return max(0.0, self._last_write + pause - time.monotonic())

    def _write_pending(self) -> None:
        """Write the newest pending position if it is not on disk yet (`_write_lock` is held)."""
        checkpoint, handed = self._latest
        state = checkpoint.state
        if self.follower.state_file is None or state is None or state == self._saved:
            return
        extra = None
        if self.records is not None:
            self.records.wait_written(handed, self.follower.save_interval())
            mark = self.records.mark(handed)
            extra = {"records": mark} if mark is not None else None
        self._last_write = time.monotonic()
        self.writes += 1
        self._failing = not self.follower.write_checkpoint(state, extra)
        if not self._failing:
            self._saved = state
            self.failing_since = None
        elif self.failing_since is None:
            self.failing_since = time.time()

    def saving(self) -> dict[str, object]:
        """For the status: whether the state file is being saved (the exactly-once promise holds only
        then), and since when it is not."""
        return {"path": self.follower.state_file, "saved": self.failing_since is None,
                "failing_since": self.failing_since}

    def _keep_saved(self) -> None:
        """The writer: the pending position reaches the disk within `save_interval` of the previous
        write, with or without scrapes; the worker goes on applying meanwhile."""
        while not self._stop.is_set():
            self._due.wait()
            if self._stop.is_set():
                return
            if self.records is not None:  # not holding the lock: a scrape meanwhile does not wait
                self.records.wait_written(self._latest[1], RECORDS_WAIT)
            with self._write_lock:
                self._due.clear()  # before reading the pending position: a newer one sets it again
                wait = self._wait_before_write()
                if wait <= 0:
                    self._write_pending()
            if wait == math.inf:
                continue
            if wait > 0:
                self._due.set()
                if self._stop.wait(wait):
                    return


FACTS_BYTES = 4 << 20
"""Start-up lines are read from at most this many bytes after the launch's banner."""
_CHUNK = 8 << 20
_BANNER = re.compile(  # the banners of parsing/startup.py: the version line, or the logo's (UTF-8 blocks)
    rb"(?m)^[^\n]*(?:vLLM (?:API )?server version|\xe2\x96[\x80-\x9f][^\n]* version )[^\n]*$")


def launch_facts(path: str, end: int) -> dict[str, Any]:
    """The start-up facts of the last launch in `path`'s first `end` bytes ({} when none; an
    unreadable file gives none: the follower says why)."""
    try:
        with open(path, "rb") as file:
            start = _last_banner(file, end)
            file.seek(start)
            data = file.read(min(end - start, FACTS_BYTES))
    except OSError:
        return {}
    facts: dict[str, Any] = {}
    lines = data.split(b"\n")
    for index, raw in enumerate(lines[:-1]):  # complete lines only
        event = parse_line(raw.decode("utf-8", "replace"))
        if isinstance(event, ServerInfo):
            if event.new_launch and index:
                facts = {}  # a later banner within the window: the newer launch's facts
            facts.update(event.facts("server"))
    return facts


def _last_banner(file: IO[bytes], end: int) -> int:
    """The offset of the last launch banner's line before `end` (0: none, read from the start)."""
    frame, counts, last = OpenFile.framing(file.name), FollowerStats(), 0
    while frame.pos < end and (chunk := file.read(min(_CHUNK, end - frame.pos))):
        blocks: list[LineBlock] = []
        frame.consume(chunk, blocks, MAX_LINE_BYTES, counts)  # complete lines; the rest starts the next
        for block in blocks:
            for found in _BANNER.finditer(block.data):
                last = block.offset + found.start()
    return last
