"""`logwatch demo`: live metrics with no vLLM at hand (docs/watch.md says what a user sees).

A writer thread replays a real vLLM 0.32 log (bundled: `data/serve_20261129T192328Z.log`) into a
temporary folder, paced by the log's own stamps at `speed` times real time, and `logwatch watch`
follows that folder. Each pass is a new launch file whose stamps are shifted to start now (or just
after the previous pass), so time only moves forward and every pass is a new launch, as with a real
launch script. From the second pass on, the start-up lines are written at once with the first stats
line, so the page never goes through "No stats line yet" between passes.
"""

from __future__ import annotations

import io
import logging
import re
import shutil
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from importlib import resources
from pathlib import Path

from ..config import DemoSettings, WatchSettings

log = logging.getLogger(__name__)

DEMO_LOG = "serve_20261129T192328Z.log"
_YEAR = 2026  # from the bundled file's name
_VLLM_STAMP = re.compile(r"(?<![A-Za-z])(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) (\d\d-\d\d \d\d:\d\d:\d\d)")
_ISO_STAMP = re.compile(r"\b(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)Z")
_PASS_GAP = timedelta(seconds=2)  # between the last line of a pass and the first of the next
_STATS = "Avg generation throughput"
REPLAYED_FAILURE = (
    "Each pass ends as the recorded run ended: it was stopped, and vLLM 0.32 logged an EngineDeadError "
    "traceback while shutting down. So every pass shows the launch ended and adds one "
    "engine_dead_at_shutdown (a planned stop, not a crash) and "
    "its error lines to the counters, which are never reset: they count every pass so far. It is the "
    "replay, not a fault of this machine."
)
"""Why the demo's counters show a failure per pass (the page and the status say it)."""


@dataclass(frozen=True)
class ReplayLine:
    """One line of the log to replay, with the time it was written."""

    at: datetime  # the line's own stamp (naive), or the previous line's when it has none
    text: str  # with its newline


def load_demo_log() -> list[ReplayLine]:
    """The bundled log as lines with their times, in order."""
    bundled = resources.files("vllm_logwatch").joinpath("data").joinpath(DEMO_LOG).read_bytes()
    entries: list[ReplayLine] = []
    current: datetime | None = None
    pending: list[str] = []  # lines before the first stamp take the first stamp's time
    for raw in io.BytesIO(bundled):  # lines split at "\n" only: the log's bare "\r" stay as they are
        line = raw.decode("utf-8")
        m = _VLLM_STAMP.search(line)
        if m is not None:
            stamp = datetime.strptime(f"{_YEAR}-{m.group(1)}", "%Y-%m-%d %H:%M:%S")
            current = stamp if current is None else max(current, stamp)  # never step back
            entries.extend(ReplayLine(current, p) for p in pending)
            pending.clear()
        if current is None:
            pending.append(line)
        else:
            entries.append(ReplayLine(current, line))
    return entries


def _shift(text: str, delta: timedelta) -> str:
    """The line with its vLLM stamp (and a launcher's ISO stamp) moved by `delta`."""

    def vllm(m: re.Match[str]) -> str:
        old = datetime.strptime(f"{_YEAR}-{m.group(1)}", "%Y-%m-%d %H:%M:%S")
        new = (old + delta).strftime("%m-%d %H:%M:%S")
        return m.group(0)[: m.start(1) - m.start(0)] + new

    def iso(m: re.Match[str]) -> str:
        old = datetime.strptime(m.group(1), "%Y-%m-%dT%H:%M:%S")
        return (old + delta).strftime("%Y-%m-%dT%H:%M:%S") + "Z"

    return _ISO_STAMP.sub(iso, _VLLM_STAMP.sub(vllm, text, count=1), count=1)


class Replayer:
    """Writes the log into `folder`, one launch file per pass, until `stop` is set.

    `now` gives this machine's local time (tests inject a fixed one); waiting between lines uses
    `stop.wait`, so stopping is immediate.
    """

    def __init__(self, folder: Path, speed: float, *, now: Callable[[], datetime] = datetime.now,
                 passes: int | None = None) -> None:
        self.folder = Path(folder)
        self.speed = speed
        self.entries = load_demo_log()
        self.now = now
        self.passes = passes
        self.stop = threading.Event()
        self.files: list[Path] = []
        self.passes_started = 0
        self._first_stats = next((i for i, e in enumerate(self.entries) if _STATS in e.text), 0)
        self._next_start: datetime | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self.run, name="logwatch-demo", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self.stop.set()
        if self._thread is not None:
            self._thread.join(5.0)

    def run(self) -> None:
        done = 0
        while not self.stop.is_set() and (self.passes is None or done < self.passes):
            self.write_pass()
            done += 1

    def status(self) -> dict[str, object]:
        """What `/api/v1/status` says of the replay (`replay`)."""
        return {"log": DEMO_LOG, "speed": self.speed, "pass": self.passes_started,
                "failure": REPLAYED_FAILURE}

    def write_pass(self) -> Path:
        """One pass of the log as a new launch file; returns early when stopped. From the second pass
        on, the lines before the first stats line are written with it, at once."""
        first = self.entries[0].at
        self.passes_started += 1
        collapse = self.passes_started > 1
        stats_at = self.entries[self._first_stats].at
        start = self.now().replace(microsecond=0)
        if self._next_start is not None and start < self._next_start:
            start = self._next_start
        delta = start - first
        path = self.folder / f"demo_{start:%Y%m%d_%H%M%S}.log"
        self.files.append(path)
        with open(path, "a", encoding="utf-8") as out:
            previous = stats_at if collapse else first
            batch: list[str] = []
            for entry in self.entries:
                if entry.at > previous:
                    out.write("".join(batch))
                    out.flush()
                    batch.clear()
                    if self.stop.wait((entry.at - previous).total_seconds() / self.speed):
                        return path
                    previous = entry.at
                batch.append(_shift(entry.text, delta))
            out.write("".join(batch))
        self._next_start = self.entries[-1].at + delta + _PASS_GAP
        self.stop.wait(_PASS_GAP.total_seconds() / self.speed)
        return path


def run_demo(settings: DemoSettings, *, announce: Callable[[str], None] | None = None) -> int:
    """`logwatch demo`: replay the bundled log into a temporary folder and serve it like `watch`."""
    from .watch import run_watch

    folder = Path(tempfile.mkdtemp(prefix="logwatch-demo-"))
    replayer = Replayer(folder, settings.speed)
    try:
        watch = WatchSettings(
            target=str(folder), listen=settings.listen, port=settings.port, from_start=True,
            pattern="demo_*.log", poll_interval=settings.poll_interval, web_config=settings.web_config,
        )
        log.info("replaying %s at %gx into %s", DEMO_LOG, settings.speed, folder)

        def started(url: str) -> None:
            replayer.start()
            if announce is not None:
                announce(url)

        return run_watch(watch, announce=started, extra_status=lambda: {"replay": replayer.status()})
    finally:
        replayer.close()
        shutil.rmtree(folder, ignore_errors=True)
