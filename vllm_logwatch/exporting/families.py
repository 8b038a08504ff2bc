"""Metric families for one scrape, built from the table in `catalogue.py` (types, help, label names).

A family appears only once it has a sample, and families come out in the table's order, so the
exposition is stable from scrape to scrape.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Protocol

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    InfoMetricFamily,
    Metric,
)

from .catalogue import METRICS, MetricSpec, spec


def new_family(spec: MetricSpec, const_names: tuple[str, ...]) -> Metric:
    """An empty family of `spec`, with the constant label names (`--label`) after its own."""
    if spec.type == "info":
        return InfoMetricFamily(spec.name, spec.help, labels=const_names)
    names = [*spec.labels, *const_names]
    if spec.type == "counter":
        return CounterMetricFamily(spec.name, spec.help, labels=names)
    if spec.type == "histogram":
        return HistogramMetricFamily(spec.name, spec.help, labels=names)
    return GaugeMetricFamily(spec.name, spec.help, labels=names)


class Families:
    """Families built for one scrape; a family appears only once it has a sample."""

    def __init__(self, const_names: tuple[str, ...], const_values: tuple[str, ...]) -> None:
        self._const_names = const_names
        self._const_values = const_values
        self._by_name: dict[str, Metric] = {}

    def _get(self, short: str) -> Metric:
        row = spec(short)
        family = self._by_name.get(row.name)
        if family is None:
            family = self._by_name[row.name] = new_family(row, self._const_names)
        return family

    def add(self, short: str, labels: Sequence[str], value: float) -> None:
        family = self._get(short)
        assert isinstance(family, (GaugeMetricFamily, CounterMetricFamily))
        family.add_metric([*labels, *self._const_values], value)

    def histogram(
        self, short: str, labels: Sequence[str], buckets: list[tuple[str, float]], total: float
    ) -> None:
        """One histogram series: `buckets` as (`le`, cumulative count), `+Inf` last; `total`: the sum."""
        family = self._get(short)
        assert isinstance(family, HistogramMetricFamily)
        family.add_metric([*labels, *self._const_values], buckets, total)

    def info(self, short: str, value: dict[str, str]) -> None:
        family = self._get(short)
        assert isinstance(family, InfoMetricFamily)
        family.add_metric(self._const_values, value)

    def families(self) -> list[Metric]:
        return [self._by_name[m.name] for m in METRICS if m.name in self._by_name]


class _Collector(Protocol):
    def collect(self) -> Iterable[Metric]: ...


class WithLabels:
    """A collector's families with the exporter's constant labels (`--label`) on every sample: the
    collectors outside `ExporterMetrics` (the record stream's counters, the HTTP server's)."""

    def __init__(self, collector: _Collector, labels: Mapping[str, str]) -> None:
        self.collector, self.labels = collector, dict(labels)

    def collect(self) -> Iterator[Metric]:
        for family in self.collector.collect():
            if self.labels:
                family.samples = [s._replace(labels={**s.labels, **self.labels}) for s in family.samples]
            yield family
