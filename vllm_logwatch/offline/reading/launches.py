"""Offline input for summary, plot and backfill: the stats records of log files, by launch.

A launch is one start of vLLM: each file is one, and a start-up banner (`ServerInfo.new_launch`)
after stats lines in the same file starts another (a restart appending to the same log). Per-engine
state (token estimates, counters) starts over with each launch, as in the live exporter.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from ...errors import NoStatsError
from ...parsing.events import (
    EngineStats,
    IterationStats,
    MfuStats,
    ServerInfo,
    SpecDecodeStats,
    TransferStats,
    Unparsed,
)
from .events import no_stats_hint, repeats_note
from .inputs import resolve_inputs
from .ranges import Tuning
from .records import source_records

__all__ = ["Launch", "iter_summary_records"]


@dataclass
class Launch:
    """One start of vLLM inside the inputs."""

    index: int
    """0-based, in input order."""
    file: str
    line: int
    """Line where the launch starts (1 for a file's start, the banner's line for a restart)."""
    restart: int = 0
    """0 for the launch that opens the file; 1, 2, ... for restarts inside it."""
    model_name: str | None = None
    """Served model name (else the model) from the start-up lines, once seen."""
    vllm_version: str | None = None
    has_stats: bool = False
    facts: dict[str, Any] = field(default_factory=dict)
    """Every start-up fact its lines gave (`ServerInfo`'s fields; a later line wins: the engine's
    resolved config after the arguments)."""
    args: dict[str, Any] | None = None
    """Its `non-default args:` / `args: Namespace(...)` as a dict (None: no such line in the log)."""

    @property
    def label(self) -> str:
        """Short name for tables and legends: the file's base name, `#2` ... for a restart inside it."""
        base = os.path.basename(self.file)
        return f"{base} #{self.restart + 1}" if self.restart else base


_Summarised = EngineStats | SpecDecodeStats | TransferStats | MfuStats | IterationStats


def iter_summary_records(
    inputs: list[str], *, year: int | None = None, tz: str | None = None, fast: Tuning | None = None,
    mfu: bool = False, numbers: bool = True, steps: bool = False,
) -> Iterator[tuple[Launch, _Summarised]]:
    """Every stats, speculative-decoding and KV / EC transfer record of `inputs`, with its launch; with
    `mfu`, the MFU lines (`MfuStats`) too; with `steps`, the iteration lines (`IterationStats`: the
    summary's step tables, `offline/summary/steps.py`).

    Raises `InputError` for unreadable inputs and `NoStatsError` (with the usual hint) when the
    inputs hold no stats line at all. `fast`: read by the range workers with these sizes
    (`offline/reading/records.py`; None: the general parser). Without `numbers` the range workers
    count no lines: a restart's `Launch.line` is not its line (`plot` shows none).

    Example: `for launch, e in iter_summary_records(["logs/serve_*.log"], tz="UTC"): ...`
    """
    sources, zone = resolve_inputs(inputs, tz)
    index = 0
    any_stats = False
    stats_disabled = False
    repeats = 0
    for source in sources:
        launch = Launch(index, source.name, 1)
        events = source_records(source, zone, year, fast, numbers=numbers, steps=steps)
        for event in events:
            if isinstance(event, EngineStats):  # the most of them
                launch.has_stats = any_stats = True
                yield launch, event
            elif isinstance(event, ServerInfo):
                stats_disabled = stats_disabled or bool(event.stats_logging_disabled)
                if event.new_launch and launch.has_stats:
                    index += 1
                    launch = Launch(index, source.name, event.line or 1, launch.restart + 1)
                if event.served_model_name or (event.model and launch.model_name is None):
                    launch.model_name = event.served_model_name or event.model
                if event.vllm_version:
                    launch.vllm_version = event.vllm_version
                launch.facts.update(event.facts("launch"))
                if event.args is not None:
                    launch.args = event.args
            elif isinstance(event, (SpecDecodeStats, TransferStats)) or (
                    mfu and isinstance(event, MfuStats)) or (steps and isinstance(event, IterationStats)):
                yield launch, event
            elif isinstance(event, Unparsed) and event.what == "duplicate":
                repeats += 1
        if launch.has_stats:
            index += 1
    if repeats:
        print(f"logwatch: {repeats_note(repeats)}", file=sys.stderr)
    if not any_stats:
        raise NoStatsError(no_stats_hint(sources, stats_disabled))
