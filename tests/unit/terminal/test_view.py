"""`logwatch top`'s rows from scrapes (`terminal/view.py`): windowed latency
percentiles over buckets merged across engines, a vLLM server's rates, a preemption that just
happened, a target that went down, the fleet line."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from vllm_logwatch.terminal.render import Shown, fleet_text
from vllm_logwatch.terminal.view import ServerKey, ServerSnap, Tracker, read_families


def _snaps(text: str) -> dict[ServerKey, ServerSnap]:
    return read_families(text_string_to_metric_families(text))


def _tbt(engine0: tuple[int, int, int], engine1: tuple[int, int, int]) -> str:
    lines = []
    for engine, counts in (("0", engine0), ("1", engine1)):
        for le, count in zip(("0.01", "0.1", "+Inf"), counts, strict=True):
            lines.append(f'vllm:inter_token_latency_seconds_bucket{{engine="{engine}",le="{le}"}} {count}')
        lines.append(f'vllm:num_requests_running{{engine="{engine}",model_name="m"}} 1')
    return "\n".join(lines) + "\n"


def test_latency_percentiles_merge_engines_and_cover_the_window_between_two_scrapes() -> None:
    tracker = Tracker()
    [first] = tracker.update("t", _snaps(_tbt((10, 10, 10), (0, 0, 0))), now=100.0)
    assert first.latency[0].window == "all" and first.latency[0].p50 == 0.005  # all at most 10 ms
    # Since then: engine 0 nothing more, engine 1 ten between 10 and 100 ms: the window sees only those
    [second] = tracker.update("t", _snaps(_tbt((10, 10, 10), (0, 10, 10))), now=160.0)
    tbt = second.latency[0]
    assert (tbt.window, tbt.count, tbt.p50) == ("1m", 10.0, 0.055)
    assert [e.get("tbt") for e in second.engines] == [None, None]  # two engines: the server's, in the pane


def test_a_vllm_servers_throughput_is_its_token_counters_rise_between_scrapes() -> None:
    tracker = Tracker()
    text = ('vllm:generation_tokens_total{{engine="0",model_name="m"}} {}\n'
            'vllm:num_preemptions_total{{engine="0",model_name="m"}} {}\n')
    [before] = tracker.update("t", _snaps(text.format(1000, 0)), now=10.0)
    assert before.engines[0].get("gen_tps") is None and not before.engines[0].preempting
    [after] = tracker.update("t", _snaps(text.format(1500, 2)), now=12.0)
    assert after.engines[0].get("gen_tps") == 250.0 and after.engines[0].preempting
    assert after.state == "serving"


def test_a_target_that_stops_answering_keeps_its_rows_marked_down() -> None:
    tracker = Tracker()
    views = tracker.update("gpu1:9477", _snaps(_tbt((1, 1, 1), (1, 1, 1))), now=1.0)
    down = tracker.down("gpu1:9477", "connection refused", views)
    assert [(v.state, v.reason, len(v.engines)) for v in down] == [("down", "connection refused", 2)]
    fleet = fleet_text(down + tracker.update("gpu2:9477", _snaps(_tbt((1, 1, 1), (1, 1, 1))), now=1.0),
                       Shown(), 200, status=False)
    assert fleet.plain.startswith("fleet 2 servers (1 down)  gen 0.0/s  prompt 0.0/s  run 2  wait 0")
    assert tracker.down("gpu3:9477", "timed out", [])[0].name == "gpu3:9477"
