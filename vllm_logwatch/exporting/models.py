"""The exporter's state by served model: each `model_name` has its own engines' counters and request
counts (`Ledger`), so a series labelled with a model counts that model's lines only.

Launches of different models follow each other (a file with several banners, a launch folder,
restarts under `run`): the model's ledger is set aside when another model is named, and taken up again,
with the totals it had, when that model is named again. A set-aside ledger's counters are still served
(Prometheus counters do not go down within our process); its gauges ended with its launch.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from .engine_state import EngineState
from .families import Families
from .latency_state import LatencyState

MAX_MODELS = 16
"""Models whose counters are kept; past it the one named longest ago is forgotten (its series end, and
start again from 0 if it comes back: a counter reset, which `rate()` and `increase()` take)."""


class Ledger:
    """One model's engines (by engine label: at most `max_engines`, then `other`) and its request and
    step counts. `new_state()`: a new engine's state."""

    def __init__(self, new_state: Callable[[], EngineState], max_engines: int) -> None:
        self.engines: dict[str, EngineState] = {}
        self.latency = LatencyState(self.bounded)
        self.folded = 0  # engine labels folded into `other`
        self._new_state = new_state
        self._max_engines = max_engines

    def bounded(self, label: str) -> str:
        """`label`, or `other` beyond `max_engines` labels (counted); its state exists on return."""
        engines = self.engines
        if label not in engines:
            if len(engines) - ("other" in engines) >= self._max_engines:
                self.folded += 1
                label = "other"
            if label not in engines:
                engines[label] = self._new_state()
        return label


class Ledgers:
    """The current model's ledger and those set aside (`Ledger`'s arguments for a new one)."""

    def __init__(self, new_state: Callable[[], EngineState], max_engines: int,
                 max_models: int = MAX_MODELS) -> None:
        self._new_state, self._max_engines = new_state, max_engines
        self.max_models = max_models
        self.model = "unknown"
        self.current = Ledger(new_state, max_engines)
        self._aside: dict[str, Ledger] = {}

    def switch(self, model: str) -> bool:
        """`model` is now the one served: its ledger (set aside before, else a new one) becomes the
        current one. False: it already was."""
        if model == self.model:
            return False
        self._aside[self.model] = self.current
        aside = self._aside.pop(model, None)
        self.current = aside if aside is not None else Ledger(self._new_state, self._max_engines)
        self.model = model
        while len(self._aside) >= self.max_models:
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
