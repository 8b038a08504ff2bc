"""A watch's sources as the metrics see them (`live/sources.py`): a reader and labelled series per
source, the folded ones summed, a dropped folded source's counts kept, the families merged."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC

from prometheus_client.core import CounterMetricFamily

from vllm_logwatch.exporting.exporter import ExporterMetrics
from vllm_logwatch.following.openfile import FollowerStats, LineBlock
from vllm_logwatch.following.statefile import Checkpoint, SourcesState
from vllm_logwatch.live.ingest import LaunchReader
from vllm_logwatch.live.sources import SourceReaders, merge_families

A, B, C = (("pod", "a"),), (("pod", "b"),), (("pod", "c"),)
FOLDED = (("pod", "_folded"),)
STATS = (b"(APIServer pid=1) INFO 07-05 11:29:01 [loggers.py:259] Engine 000: Avg prompt throughput: 5.0 "
         b"tokens/s, Avg generation throughput: 10.0 tokens/s, Running: 1 reqs, Waiting: 0 reqs, "
         b"GPU KV cache usage: 1.0%, Prefix cache hit rate: 0.0%\n")


def readers() -> tuple[SourceReaders, dict[tuple[tuple[str, str], ...], ExporterMetrics]]:
    made: dict[tuple[tuple[str, str], ...], ExporterMetrics] = {}

    def metrics_for(labels: Mapping[str, str]) -> ExporterMetrics:
        metrics = made[tuple(labels.items())] = ExporterMetrics(const_labels=labels, stats_interval=10)
        return metrics

    def fold(key: tuple[tuple[str, str], ...]) -> tuple[tuple[str, str], ...]:
        return key if key == A else FOLDED

    def reader(assembler, metrics):  # type: ignore[no-untyped-def]
        return LaunchReader(metrics, assembler)

    return SourceReaders(ExporterMetrics(), UTC, reader, metrics_for=metrics_for,
                         labels_of=fold), made


def checkpoint(**lines: int) -> Checkpoint:
    parts = tuple(((("pod", name),), Checkpoint(None, count, count * 10))
                  for name, count in sorted(lines.items()))
    return Checkpoint(SourcesState(parts), sum(lines.values()), 10 * sum(lines.values()))


def value(metrics: ExporterMetrics, name: str) -> float:
    for family in metrics.collect():
        for sample in family.samples:
            if sample.name == name:
                return float(sample.value)
    raise AssertionError(name)


def test_each_source_reads_into_its_series_and_the_folded_share_one() -> None:
    sources, made = readers()
    for key, path in ((A, "a.log"), (B, "b.log"), (C, "c.log")):
        sources.read(LineBlock(path, 0, 1, STATS, 1, key=key))
    assert sorted(made) == sorted([A, FOLDED])
    assert value(made[A], "vllm_logwatch_stats_lines_total") == 1
    assert value(made[FOLDED], "vllm_logwatch_stats_lines_total") == 2  # b and c, summed
    sources.read(LineBlock("a2.log", 0, 1, STATS, 1, key=A))  # a's next file: its next launch
    assert value(made[A], "vllm_logwatch_launches_total") == 2 and sources.files_seen == 4


def test_the_folded_series_keep_what_a_dropped_source_counted() -> None:
    sources, made = readers()
    stats = {A: FollowerStats(), B: FollowerStats(rotations=1), C: FollowerStats()}
    for key in (A, B, C):
        sources.read(LineBlock("x.log", 0, 1, STATS, 1, key=key))
    sources.sync(checkpoint(a=3, b=4, c=5), FollowerStats(state_errors=2), stats)
    assert value(made[FOLDED], "vllm_logwatch_log_lines_total") == 9
    assert value(made[FOLDED], "vllm_logwatch_log_rotations_total") == 1
    assert value(sources.base, "vllm_logwatch_state_errors_total") == 2
    sources.drop(B)
    del stats[B]
    sources.sync(checkpoint(a=3, c=6), FollowerStats(state_errors=2), stats)
    assert value(made[FOLDED], "vllm_logwatch_log_lines_total") == 10  # 4 of b kept, c's 6
    sources.drop(A)  # a source with series of its own: they go
    assert made[A] not in sources.all_metrics()


def test_an_unmoved_source_is_not_synced_again_after_a_batch() -> None:
    sources, made = readers()
    sources.read(LineBlock("a.log", 0, 1, STATS, 1, key=A))
    first = checkpoint(a=3)
    sources.sync(first, FollowerStats(), {A: FollowerStats()})
    again = Checkpoint(first.state, 3, 30)
    sources.sync(again, FollowerStats(), {A: FollowerStats(read_errors=1)}, full=False)
    assert value(made[A], "vllm_logwatch_read_errors_total") == 0  # the same position: skipped
    sources.sync(again, FollowerStats(), {A: FollowerStats(read_errors=1)})
    assert value(made[A], "vllm_logwatch_read_errors_total") == 1  # a scrape syncs every source


def test_families_of_one_name_are_merged() -> None:
    one = CounterMetricFamily("x", "help", labels=["pod"])
    two = CounterMetricFamily("x", "help", labels=["pod"])
    one.add_metric(["a"], 1)
    two.add_metric(["b"], 2)
    merged = merge_families([[one], [two]])
    assert len(merged) == 1 and [s.labels["pod"] for s in merged[0].samples] == ["a", "b"]
