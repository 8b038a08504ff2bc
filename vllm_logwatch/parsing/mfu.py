"""The MFU line of `--enable-mfu-metrics` (vLLM 0.14+, `vllm/v1/metrics/perf.py`), printed after its
engine's stats line each interval:

    Engine 000: MFU: 123.4 TF/s/GPU 456.7 GB/s/GPU          (0.14.0-0.29.0; the Rust front end, no engine)
    Engine 000: MFU: 123.4 TF/s/device 456.7 GB/s/device    (0.30.0+)
"""

from __future__ import annotations

import re
from typing import Any

from .events import MfuStats, Unparsed

__all__ = ["MFU_START", "parse_mfu"]

MFU_START = re.compile(r"(?:Engine (\d{3,12}): )?MFU: ")
_NUMBER = r"(\d+(?:\.\d+)?|nan|inf)"
_BODY = re.compile(rf"{_NUMBER} TF/s/(?:GPU|device) {_NUMBER} GB/s/(?:GPU|device)\s*$")


def parse_mfu(msg: str, start: re.Match[str], common: dict[str, Any]) -> MfuStats | Unparsed:
    """The MFU event of a message that `MFU_START` matched at its start.

    >>> m = "Engine 001: MFU: 12.5 TF/s/device 300.1 GB/s/device"
    >>> e = parse_mfu(m, MFU_START.match(m), {})
    >>> e.engine, e.tflops_per_device, e.gbps_per_device
    (1, 12.5, 300.1)
    """
    body = _BODY.match(msg, start.end())
    if body is None:
        return Unparsed(what="mfu", **common)
    engine = start.group(1)
    return MfuStats(engine=int(engine) if engine else None, tflops_per_device=float(body.group(1)),
                    gbps_per_device=float(body.group(2)), **common)
