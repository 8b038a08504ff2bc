"""The backfill (`parse --openmetrics`) writes the MFU gauges as the live exporter serves them."""

from __future__ import annotations

import re

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
