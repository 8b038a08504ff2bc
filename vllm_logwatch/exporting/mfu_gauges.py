"""The MFU gauges of an engine (`--enable-mfu-metrics`): its last MFU line in base units."""

from __future__ import annotations

import math

from ..parsing.events import MfuStats

__all__ = ["mfu_gauges"]


def mfu_gauges(line: MfuStats | None) -> dict[str, float]:
    """Short metric name -> value: FLOP/s and bytes/s per device of the engine's last MFU line.

    >>> mfu_gauges(MfuStats(engine=0, tflops_per_device=12.5, gbps_per_device=300.0))
    {'mfu_flops_per_second': 12500000000000.0, 'mfu_memory_bytes_per_second': 300000000000.0}
    """
    if line is None:
        return {}
    out = {"mfu_flops_per_second": line.tflops_per_device * 1e12,
           "mfu_memory_bytes_per_second": line.gbps_per_device * 1e9}
    return {k: v for k, v in out.items() if math.isfinite(v)}
