"""`audit --observability DIR`: each run's server side as an llm-d Benchmark Report partial, merged into
the report llm-d's converter made of the same run and validated by llm-d's own package."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import pytest
import yaml
from llmd_benchmark_report.core import load_benchmark_report, update_dict

from vllm_logwatch.cli import main

STEPS = Path(__file__).resolve().parents[2] / "data" / "tbt" / "steps"


@pytest.mark.integration
def test_the_partial_merges_into_the_converter_s_report_and_validates(tmp_path: Path) -> None:
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["audit", str(STEPS / "bench_c4.json"), "--log", str(STEPS / "serve.log.gz"),
                     "--tz", "UTC", "--observability", str(tmp_path / "obs")]) == 0
    partial = yaml.safe_load((tmp_path / "obs" / "run-1.observability.yaml").read_text())
    report = yaml.safe_load((STEPS / "llmd" / "bench_c4.report.yaml").read_text())
    update_dict(report, partial)
    (component,) = load_benchmark_report(report).results.observability.components
    assert component.component_label == "vllm"
    running = component.aggregate.running_requests
    assert (running.units, running.p50, running.max) == ("count", 4.0, 4.0)  # 4 asked, --max-num-seqs 4
    series = component.time_series.num_requests_running.series
    assert len(series) == 18 and series[0].ts.isoformat() == "2026-12-06T05:10:35+00:00"
    assert component.aggregate.kv_cache_usage.units == "percent"


def test_a_folder_that_cannot_be_written_is_one_line(tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    code = main(["audit", str(STEPS / "bench_c4.json"), "--log", str(STEPS / "serve.log.gz"), "--tz", "UTC",
                 "--observability", str(blocker / "obs")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "cannot write" in err
