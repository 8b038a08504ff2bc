"""Server-wide state from the lines vLLM prints while it runs, besides the stats lines: sleep mode, the
DP supervisor's findings and expert-parallel load balancing (EPLB). `parsing/startup.py` reads them
into `ServerInfo` fields; the exporter hands each such event here.

Counters survive a new launch (Prometheus counters must not go down); the gauges start over with it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from ..parsing.events import ServerInfo
from .engine_state import EngineState

__all__ = ["RUNTIME_FIELDS", "RuntimeState", "engine_counts"]

RUNTIME_FIELDS = frozenset(
    {
        "asleep",
        "sleep_seconds",
        "wake_seconds",
        "discard_seconds",
        "dp_unhealthy_servers",
        "dp_exited_servers",
        "eplb_balancedness",
        "eplb_avg_tokens",
        "eplb_max_tokens",
        "eplb_rearrange_seconds",
        "problem",
    }
)
"""The `ServerInfo` fields read here rather than kept as start-up facts."""
_TRANSITIONS = (("sleep", "sleep_seconds"), ("wake_up", "wake_seconds"), ("discard", "discard_seconds"))

Sample = tuple[str, tuple[str, ...], float]


class RuntimeState:
    """Sleep state, DP supervisor findings and EPLB values of one server."""

    def __init__(self) -> None:
        self.transitions: dict[str, int] = {}
        self.rearrangements = 0
        self.reset()

    def reset(self) -> None:
        """A new launch: the gauges start over."""
        self.asleep: bool | None = None
        self.gauges: dict[tuple[str, tuple[str, ...]], float] = {}

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
                self.transitions[transition] = self.transitions.get(transition, 0) + 1
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
            self.rearrangements += 1

    def samples(self) -> Iterator[Sample]:
        if self.asleep is not None:
            yield "asleep", (), float(self.asleep)
        for transition, count in self.transitions.items():
            yield "sleep_transitions", (transition,), float(count)
        for (short, labels), value in self.gauges.items():
            yield short, labels, value
        if self.rearrangements:
            yield "eplb_rearrangements", (), float(self.rearrangements)


def engine_counts(
    engines: Iterable[EngineState], parse_errors: dict[str, int], overflow: dict[str, int]
) -> tuple[dict[str, int], dict[str, int]]:
    """Parse errors and label overflows with the engines' own: the unreadable keys of transfer lines
    read otherwise (`transfer_key`) and the tiers folded into `other` (`tier`)."""
    states = list(engines)
    keys = sum(state.transfer.unreadable_keys for state in states)
    tiers = sum(state.transfer.offload.folded for state in states)
    return (
        {**parse_errors, **({"transfer_key": keys} if keys else {})},
        {**overflow, **({"tier": tiers} if tiers else {})},
    )
