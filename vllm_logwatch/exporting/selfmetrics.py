"""What the exporter measures of its sources rather than of vLLM: the tailer's read totals, and the
supervised vLLM process of run mode (`ExporterMetrics.set_follower_stats`, `set_child`)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import cast

from .snapshot import ChildMetrics
from .totals import RunningTotal

__all__ = ["CHILD_COUNTERS", "FOLLOWER_COUNTERS", "SelfMetrics"]

FOLLOWER_COUNTERS = ("log_lines", "log_bytes", "log_rotations", "log_truncations", "read_errors", "lines_cut",
                     "state_errors")
CHILD_COUNTERS = (
    "child_restarts", "log_file_bytes_written", "log_file_write_errors", "log_file_bytes_dropped",
    "parse_bytes_dropped", "stdout_bytes_dropped")


class SelfMetrics:
    """The tailer's totals and the child's state; counters that never go down, whatever their source
    does (a restarted tailer's smaller totals add on). Not locked: the exporter holds its lock."""

    def __init__(self) -> None:
        self.follower = {key: RunningTotal() for key in FOLLOWER_COUNTERS}
        self._child: dict[str, float | None] | None = None
        self._child_totals = {key: RunningTotal() for key in CHILD_COUNTERS}

    def observe_follower(self, values: tuple[int, ...]) -> None:
        """The tailer's totals, in `FOLLOWER_COUNTERS` order."""
        for key, value in zip(FOLLOWER_COUNTERS, values, strict=True):
            self.follower[key].observe_total(value)

    def observe_child(self, gauges: dict[str, float | None], totals: tuple[int, ...]) -> None:
        """The child's gauges (by metric name) and its totals, in `CHILD_COUNTERS` order."""
        self._child = gauges
        for key, value in zip(CHILD_COUNTERS, totals, strict=True):
            self._child_totals[key].observe_total(value)

    def read(self) -> dict[str, float]:
        """The follower's totals by name."""
        return {key: total.value for key, total in self.follower.items()}

    def child(self) -> ChildMetrics | None:
        """The child's metrics by name (None before run mode's first report)."""
        if self._child is None:
            return None
        totals = {key: total.value for key, total in self._child_totals.items()}
        return cast(ChildMetrics, {**self._child, **totals})

    def child_samples(self) -> Iterator[tuple[str, float]]:
        """(short metric name, value) of the child's series (none before run mode's first report)."""
        for key, value in (self._child or {}).items():
            if value is not None:
                yield key, value
        if self._child is not None:
            for key, total in self._child_totals.items():
                yield key, total.value
