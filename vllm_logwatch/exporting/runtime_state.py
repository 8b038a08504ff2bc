"""Server-wide state from the lines vLLM prints while it runs, besides the stats lines: sleep mode, the
DP supervisor's findings, expert-parallel load balancing (EPLB), fault tolerance (each engine's status,
faults, rejected requests), KV offload job failures and the KV connectors' circuit breakers.
`parsing/startup.py` reads them
into `ServerInfo` fields; the exporter hands each such event here.

Counters survive a new launch (Prometheus counters must not go down); the gauges start over with it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from ..parsing.events import ServerInfo
from .engine_state import EngineState

"""The `ServerInfo` fields read here rather than kept as start-up facts."""
FT_STATUSES = ("healthy", "diagnosing", "unhealthy", "dead")
"""vLLM's engine statuses under fault tolerance (`EngineStatusType`), each a series of the state gauge."""
_MAX_BREAKERS = 8
"""Circuit breakers named in `kv_connector_breaker_openings` (vLLM has one; more fold into `other`)."""
_TRANSITIONS = (("sleep", "sleep_seconds"), ("wake_up", "wake_seconds"), ("discard", "discard_seconds"))

Sample = tuple[str, tuple[str, ...], float]


class RuntimeState:
    """Sleep state, DP supervisor findings and EPLB values of one server."""

    def __init__(self) -> None:
        self.transitions: dict[str, int] = {}
        self.rearrangements = 0
        self.counts: dict[tuple[str, tuple[str, ...]], float] = {
            ("rejected_requests", (status,)): 0.0 for status in (*FT_STATUSES[1:], "other")}
        """Counters by (metric, labels): faults, rejected requests (from 0, so `increase()` sees the first),
        offload failures, breaker openings."""
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
        for transition, count in self.transitions.items():
            yield "sleep_transitions", (transition,), float(count)
        for (short, labels), value in self.gauges.items():
            yield short, labels, value
        if self.rearrangements:
            yield "eplb_rearrangements", (), float(self.rearrangements)
        for engine, current in self.ft_status.items():
            for status in (*FT_STATUSES, "other"):
                yield "engine_fault_tolerance_status", (engine, status), float(status == current)
        for (short, labels), value in self.counts.items():
            yield short, labels, value


def engine_counts(
    engines: Iterable[EngineState], parse_errors: dict[str, int], overflow: dict[str, int]
) -> tuple[dict[str, int], dict[str, int]]:
    """Parse errors and label overflows with the engines' own: the unreadable keys of transfer lines
    read otherwise (`transfer_key`), the tiers folded into `other` (`tier`) and the draft positions past the
    bound (`position`)."""
    states = list(engines)
    keys = sum(state.transfer.unreadable_keys for state in states)
    tiers = sum(state.transfer.offload.folded for state in states)
    positions = sum(state.positions_folded for state in states)
    return (
        {**parse_errors, **({"transfer_key": keys} if keys else {})},
        {**overflow, **({"tier": tiers} if tiers else {}), **({"position": positions} if positions else {})},
    )
