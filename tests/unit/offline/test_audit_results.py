"""`logwatch audit`'s result readers: each known format read, the rest a one-line InputError naming what
was looked for."""

from __future__ import annotations

import json
import tracemalloc
from datetime import UTC
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from vllm_logwatch.errors import InputError
from vllm_logwatch.offline.audit.results import read_results

UTC = UTC
VLLM = {"date": "20261202-020732", "model_id": "tiny-llama", "duration": 9.5, "completed": 48, "failed": 0,
        "max_concurrency": 8, "request_rate": "inf", "output_throughput": 648.5}


def test_vllm_bench_serve_json_is_a_run_ending_at_its_date(tmp_path: Path) -> None:
    f = tmp_path / "r.json"
    f.write_text(json.dumps(VLLM))
    [run] = read_results([str(f)], UTC)
    assert run.end.isoformat() == "2026-12-02T02:07:32+00:00"
    assert run.start.isoformat() == "2026-12-02T02:07:22.500000+00:00"
    assert (run.concurrency, run.rate, run.completed, run.failed, run.model) == (8, None, 48, 0, "tiny-llama")
    assert run.label == "c=8"


def test_append_result_file_and_sweep_folder_give_one_run_each(tmp_path: Path) -> None:
    f = tmp_path / "appended.json"
    f.write_text(json.dumps(VLLM) + "\n" + json.dumps({**VLLM, "max_concurrency": 2, "request_rate": 4.0}))
    runs = read_results([str(f)], UTC)
    assert [r.label for r in runs] == ["c=8", "c=2 at 4 req/s"]
    assert runs[1].source.endswith("appended.json #2")
    sweep = tmp_path / "sweep" / "max_concurrency=2"
    sweep.mkdir(parents=True)
    (sweep / "run=0.json").write_text(json.dumps({**VLLM, "max_concurrency": 2}))
    (sweep / "warmup.json").write_text(json.dumps(VLLM))
    (sweep / "summary.json").write_text(json.dumps([VLLM]))
    assert [r.concurrency for r in read_results([str(tmp_path / "sweep")], UTC)] == [2]


@pytest.mark.parametrize(("text", "message"), [
    (json.dumps(VLLM)[:80], "the JSON is cut short or broken at line 1 column 72 (unterminated string "
                            "starting at): a truncated result file?"),
    ('{"hello": 1, "world": [1]}', "not a benchmark result of a known format (it has hello, world; looked "
                                   "for vllm bench serve JSON"),
    ("date,duration\n1,2\n", "not JSON, so no benchmark result (looked for vllm bench serve JSON"),
    # a server log given by mistake whose first line starts with a bracket, as JSON does
    ("[launcher] starting vllm serve\n(APIServer pid=1) INFO 11-29 19:23:28 [api_server.py:1] x\n",
     "not JSON, so no benchmark result (looked for vllm bench serve JSON"),
    ("[2026-12-01 10:00:00] INFO serving\n", "not JSON, so no benchmark result"),
    ('{"date": "2026', "the JSON is cut short or broken at line 1 column 10 (unterminated string starting "
                      "at): a truncated result file?"),
    ("", "empty, so no benchmark result"),
    (json.dumps({**VLLM, "completed": "many"}), "a vllm bench serve result, but completed: input should be a "
                                                "valid integer"),
    (json.dumps({**VLLM, "date": "yesterday"}), "a vllm bench serve result, but date: value error, date "
                                                "'yesterday' is not yyyymmdd-hhmmss"),
])
def test_a_bad_result_file_is_one_line_naming_what_was_looked_for(tmp_path: Path, text: str,
                                                                  message: str) -> None:
    f = tmp_path / "bad.json"
    f.write_text(text)
    with pytest.raises(InputError) as err:
        read_results([str(f)], UTC)
    assert message in str(err.value)
    assert "\n" not in str(err.value)


def test_a_folder_without_sweep_runs_says_so(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"no vllm bench sweep run=N\.json in it"):
        read_results([str(tmp_path)], UTC)


GUIDE = {"benchmarks": [{"start_time": 1796177559.2, "end_time": 1796177568.9,
                         "config": {"strategy": {"type_": "concurrent", "streams": 3}},
                         "metrics": {"request_totals": {"successful": 24, "errored": 0, "incomplete": 0}}}]}


def guide(**bench: object) -> str:
    return json.dumps({"benchmarks": [{**GUIDE["benchmarks"][0], **bench}]})  # type: ignore[dict-item]


def one_line_refusal(tmp_path: Path, text: str) -> str:
    f = tmp_path / "bad.json"
    f.write_text(text)
    with pytest.raises(InputError) as err:
        read_results([str(f)], UTC)
    assert "\n" not in str(err.value)
    return str(err.value)


@pytest.mark.parametrize(("text", "message"), [
    (json.dumps({**VLLM, "duration": float("nan")}), "duration: value error, nan is not a number of seconds"),
    (json.dumps({**VLLM, "duration": float("inf")}), "duration: value error, inf is not a number of seconds"),
    (json.dumps({**VLLM, "duration": 1e300}), "duration: value error, 1e+300 s before date 2026-12-02 "
                                              "02:07:32 is not a time"),
    (json.dumps({**VLLM, "duration": -5}), "duration: value error, -5 is not a number of seconds"),
    (json.dumps({**VLLM, "date": "00010101-000005"}), "duration: value error, 9.5 s before date 0001-01-01 "
                                                      "00:00:05 is not a time"),
    (guide(start_time=float("nan")), "benchmarks.0.start_time: value error, nan is not a time"),
    (guide(end_time=float("inf")), "benchmarks.0.end_time: value error, inf is not a time"),
    (guide(end_time=1e20), "benchmarks.0.end_time: value error, 1e+20 is not a time"),
    (guide(end_time=1796177500.0), "benchmarks.0.end_time: value error, it is before start_time"),
], ids=["nan", "inf", "1e300", "negative", "year 1", "guidellm nan", "guidellm inf", "guidellm 1e20",
        "guidellm reversed"])
def test_a_time_out_of_range_is_one_line(tmp_path: Path, text: str, message: str) -> None:
    assert message in one_line_refusal(tmp_path, text)


@pytest.mark.parametrize(("text", "message"), [
    (json.dumps({**VLLM, "max_concurrency": 0}), "max_concurrency: input should be greater than 0"),
    (json.dumps({**VLLM, "max_concurrency": -5}), "max_concurrency: input should be greater than 0"),
    (json.dumps({**VLLM, "failed": -3}), "failed: input should be greater than or equal to 0"),
    (json.dumps({**VLLM, "completed": -1}), "completed: input should be greater than or equal to 0"),
    (json.dumps({**VLLM, "request_rate": -2.0}), "request_rate: input should be greater than 0"),
    (json.dumps({**VLLM, "request_rate": float("nan")}), "request_rate: input should be greater than 0"),
    (guide(config={"strategy": {"type_": "concurrent", "streams": 0}}),
     "benchmarks.0.config.strategy.streams: input should be greater than 0"),
    (guide(metrics={"request_totals": {"successful": 24, "errored": -3, "incomplete": 0}}),
     "benchmarks.0.metrics.request_totals.errored: input should be greater than or equal to 0"),
], ids=["concurrency 0", "concurrency -5", "failed -3", "completed -1", "rate -2", "rate nan",
        "guidellm streams 0", "guidellm errored -3"])
def test_an_absurd_concurrency_or_count_is_refused(tmp_path: Path, text: str, message: str) -> None:
    assert message in one_line_refusal(tmp_path, text)


@pytest.mark.integration  # over 0.2 s: make test, not smoke
def test_a_detailed_result_is_read_without_holding_its_arrays(tmp_path: Path) -> None:
    """`--save-detailed` adds per-request arrays (100k requests: ~120 MB) the audit does not read."""
    f = tmp_path / "detailed.json"
    f.write_text(json.dumps({**VLLM, "ttfts": [0.25] * 8000, "itls": [[0.015625] * 100] * 8000,
                             "generated_texts": ["word " * 8] * 8000}))
    tracemalloc.start()
    try:
        [run] = read_results([str(f)], UTC)
        _now, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert (run.completed, run.concurrency) == (48, 8)
    assert peak < f.stat().st_size / 4  # ijson's events of one 64 KiB read at most: less than 1 MB


def test_what_strict_json_refuses_is_still_read(tmp_path: Path) -> None:
    """Python's json writes NaN for a NaN (a metric of a run where every request failed), and a name can
    hold bytes that are not UTF-8."""
    f = tmp_path / "r.json"
    f.write_bytes(json.dumps({**VLLM, "std_ttft_ms": float("nan"), "mean_itl_ms": float("inf")}).encode()
                  + b"\n" + json.dumps({**VLLM, "model_id": "tiny-XX"}).encode().replace(b"XX", b"\xff"))
    assert [r.model for r in read_results([str(f)], UTC)] == ["tiny-llama", "tiny-\ufffd"]


def test_a_run_across_a_fall_back_starts_its_duration_earlier_in_utc(tmp_path: Path) -> None:
    """A run of 2 h ending at 03:30 CET on Berlin's fall-back day started at 02:30 CEST (00:30 UTC),
    not at 01:30, two hours earlier on the wall clock."""
    f = tmp_path / "r.json"
    f.write_text(json.dumps({**VLLM, "date": "20261025-033000", "duration": 7200}))
    [run] = read_results([str(f)], ZoneInfo("Europe/Berlin"))
    assert run.start.isoformat() == "2026-10-25T02:30:00+02:00"
    assert run.end.isoformat() == "2026-10-25T03:30:00+01:00"


AIPERF = (Path(__file__).resolve().parents[2] / "data" / "tbt" / "steps" / "aiperf"
          / "profile_export_aiperf.json")


def test_aiperf_export_is_a_run_in_the_zone_given_with_its_requests_ids() -> None:
    """AIPerf 0.13 (a real run): concurrency from `input_config.phases[]`, the naive start and end read in
    the zone given (the client's), the mean ITL, and the X-Request-IDs of profile_export.jsonl beside it."""
    [run] = read_results([str(AIPERF)], UTC)
    assert (run.client, run.model, run.concurrency, run.rate, run.completed, run.failed) == (
        "aiperf", "small-llama", 3, None, 48, 0)
    assert run.start.isoformat() == "2026-12-06T05:12:41.385253+00:00"
    assert run.itl_ms == pytest.approx(8.8047, abs=1e-3)
    assert run.output_tok_s == pytest.approx(265.26, abs=0.01)
    assert run.request_ids is not None and len(run.request_ids) == 48
    [berlin] = read_results([str(AIPERF)], ZoneInfo("Europe/Berlin"))
    assert berlin.start.isoformat() == "2026-12-06T05:12:41.385253+01:00"


def test_aiperf_0_5_export_takes_its_load_from_loadgen(tmp_path: Path) -> None:
    f = tmp_path / "profile_export_aiperf.json"
    f.write_text(json.dumps({
        "input_config": {"endpoint": {"model_names": ["m"]}, "loadgen": {"concurrency": 16}},
        "start_time": "2026-01-02T03:04:05.000000", "end_time": "2026-01-02T03:05:05.000000",
        "request_throughput": {"avg": 2.0}, "request_count": {"avg": 120},
        "inter_token_latency": {"avg": 12.5}, "output_token_throughput": {"avg": 900.0}}))
    [run] = read_results([str(f)], UTC)
    assert (run.model, run.concurrency, run.completed, run.itl_ms) == ("m", 16, 120, 12.5)
    assert run.request_ids is None
    assert (run.end - run.start).total_seconds() == 60


STEPS = Path(__file__).resolve().parents[2] / "data" / "tbt" / "steps"


def test_a_benchmark_report_made_by_llm_d_s_converter_reads_as_its_source() -> None:
    """`benchmark-report bench_c4.json -w vllm-benchmark -b 0.2` (llmd-benchmark-report 0.2.1) gives
    a report with an end time only: its window is the request count over the request rate before it,
    the same run as the bench's own file."""
    [report] = read_results([str(STEPS / "llmd" / "bench_c4.report.yaml")], UTC)
    [bench] = read_results([str(STEPS / "bench_c4.json")], UTC)
    assert report.client == "benchmark report (vllm-benchmark)"
    assert (report.concurrency, report.completed, report.failed) == (bench.concurrency, bench.completed, 0)
    assert report.end == bench.end and abs((report.start - bench.start).total_seconds()) < 1
    assert report.itl_ms == pytest.approx(bench.itl_ms)
    assert report.output_tok_s == pytest.approx(bench.output_tok_s)


def test_inference_perf_stage_takes_its_window_from_the_partial_report_beside_it(tmp_path: Path) -> None:
    [stage] = read_results([str(STEPS / "inference-perf" / "stage_0_lifecycle_metrics.json")], UTC)
    assert (stage.client, stage.concurrency, stage.completed, stage.failed) == ("inference-perf", 3, 60, 0)
    assert stage.start.isoformat() == "2026-12-06T05:13:22.462478+00:00"
    assert stage.itl_ms == pytest.approx(6.9008, abs=1e-3)  # its seconds in ms
    [partial] = read_results([str(STEPS / "inference-perf" / "inference-perf.partial.stage_0.yaml")], UTC)
    assert (partial.start, partial.end) == (stage.start, stage.end)
    assert partial.itl_ms == pytest.approx(stage.itl_ms)
    alone = tmp_path / "stage_0_lifecycle_metrics.json"
    alone.write_bytes((STEPS / "inference-perf" / "stage_0_lifecycle_metrics.json").read_bytes())
    with pytest.raises(InputError, match=r"no inference-perf\.partial\.stage_N\.yaml beside it"):
        read_results([str(alone)], UTC)


def test_a_report_without_a_window_is_one_line() -> None:
    """llm-d's converter writes no run.time for an AIPerf 0.13 export."""
    with pytest.raises(InputError, match="gives no time window"):
        read_results([str(STEPS / "llmd" / "aiperf.report.yaml")], UTC)


@pytest.mark.parametrize("text", ["version: 0.2.1\nresults: [\n", "- just\n- a list\n"])
def test_a_bad_yaml_file_is_one_line(tmp_path: Path, text: str) -> None:
    f = tmp_path / "report.yaml"
    f.write_text(text)
    with pytest.raises(InputError, match="Benchmark Report") as info:
        read_results([str(f)], UTC)
    assert "\n" not in str(info.value)
