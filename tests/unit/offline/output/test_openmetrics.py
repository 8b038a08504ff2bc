"""The backfill (`parse --openmetrics`) writes the MFU gauges as the live exporter serves them."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from support import TESTS

from vllm_logwatch.cli import main

LOG = next((TESTS / "data" / "compare" / "mns16-prefix").glob("serve_*.log"))


def test_mfu_gauges_are_backfilled(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["parse", str(LOG), "--openmetrics", "--tz", "UTC"]) == 0
    out = capsys.readouterr().out
    written = [float(v) for v in re.findall(r"^vllm_logwatch_mfu_memory_bytes_per_second\{[^}]*\} (\S+) ",
                                            out, re.M)]
    mfu = re.findall(r"MFU: [\d.]+ TF/s/device ([\d.]+) GB/s/device", LOG.read_text())
    logged = [float(v) * 1e9 for v in mfu]
    assert written and set(written) == set(logged)  # each MFU line's value, at its stats line's time


def _three_launches() -> str:
    def banner(t: str, m: str) -> list[str]:
        h = f"(APIServer pid=1) INFO 12-02 {t} "
        return [h + "[api_utils.py:347]  ▄▄ ▄█ █     █     █ ▀▄▀ █  version 0.32.0",
                h + f"[api_utils.py:286] non-default args: {{'model_tag': '/m/{m}', 'model': '/m/{m}', "
                    f"'served_model_name': ['{m}'], 'max_num_seqs': 16}}"]

    def stats(t: str, g: float) -> str:
        return (f"(APIServer pid=1) INFO 12-02 {t} [loggers.py:335] Engine 000: Avg prompt throughput: 0.0 "
                f"tokens/s, Avg generation throughput: {g:.1f} tokens/s, Running: 2 reqs, Waiting: 0 reqs, "
                "GPU KV cache usage: 1.0%, Prefix cache hit rate: 0.0%")
    lines: list[str] = []
    for hh, m, g in (("10:0", "model-a", 100.0), ("10:1", "model-b", 10000.0), ("10:2", "model-a", 100.0)):
        lines += banner(hh + "0:00", m) + [stats(f"{hh}0:{10 + i * 10:02d}" if i < 5 else f"{hh}1:00", g)
                                           for i in range(6)]
    return "\n".join(lines) + "\n"


def test_each_model_series_counts_its_own_lines(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Launches of model-a, model-b, model-a in one file: model-b's series started at model-a's 6000 and
    model-a's jumped to 611000 (model-b's tokens); each series counts its own lines and resumes from its
    own value."""
    log = tmp_path / "models_20261202_100000.log"
    log.write_text(_three_launches())
    assert main(["parse", str(log), "--openmetrics", "--tz", "UTC"]) == 0
    out = capsys.readouterr().out

    def series(short: str, model: str) -> list[float]:
        return [float(v) for v in re.findall(
            rf'^vllm_logwatch_{short}_total{{engine="0",model_name="{model}"}} (\S+) ', out, re.M)]
    assert series("stats_lines", "model-a") == [*range(1, 13)]
    assert series("stats_lines", "model-b") == [*range(1, 7)]
    a, b = series("generation_tokens", "model-a"), series("generation_tokens", "model-b")
    assert a == sorted(a) and a[-1] == 12000 and a[5] == a[6] == 6000  # resumes at its own 6000
    assert b == sorted(b) and b[0] <= 100000 and b[-1] == 600000


@pytest.mark.parametrize("fast", [True, False])
def test_a_stats_line_written_twice_counts_once(
        fast: bool, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Each line written twice (two logging handlers) gave 60,000 generation tokens for 30,000."""
    from vllm_logwatch.commands.parse import run_openmetrics
    from vllm_logwatch.offline.reading.ranges import DEFAULT_TUNING
    line = ("(APIServer pid=1) INFO 12-02 10:{m:02d}:{s:02d} [loggers.py:335] Engine 000: Avg prompt "
            "throughput: 0.0 tokens/s, Avg generation throughput: 100.0 tokens/s, Running: 1 reqs, "
            "Waiting: 0 reqs, GPU KV cache usage: 1.0%, Prefix cache hit rate: 0.0%\n")
    log = tmp_path / "twice_20261202_100000.log"
    log.write_text("".join(line.format(m=i // 6, s=i % 6 * 10) * 2 for i in range(30)))
    run_openmetrics([str(log)], tz="UTC", tuning=DEFAULT_TUNING if fast else None)
    out, err = capsys.readouterr()
    last = {m[0]: float(m[1]) for m in re.findall(r"^vllm_logwatch_(\w+)_total\{[^}]*\} (\S+) ", out, re.M)}
    assert (last["generation_tokens"], last["stats_lines"]) == (30000, 30)
    assert "30 stats lines written twice" in err
