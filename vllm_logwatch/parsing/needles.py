"""The byte strings that mark each kind of vLLM line: one table for every prefilter.

The live path (`line.NEEDLES`, `worth_parsing`, `blocks.scan_block`) and the offline scanners
(`offline/bulkscan.py`, `offline/rangescan.py`, `offline/launches.py`) find candidate lines by these
before any pattern runs, so a kind's needle sits here once, next to the others; `tests/unit/parsing/
test_needles.py` checks every sample line of each kind holds its kind's needle. Pure constants, no
import: the offline scanner loads no pydantic model.
"""

from __future__ import annotations

__all__ = [
    "FOLLOWER_NEEDLES", "LAUNCH_NEEDLES", "MFU_NEEDLES", "NO_STATS_NEEDLES", "PREFIX_NEEDLES", "SPEC_NEEDLES",
    "STATS_FOLLOWER_NEEDLES", "STATS_NEEDLES", "TRANSFER_NEEDLES", "VARIANT_NEEDLES", "with_variants",
]

STATS_NEEDLES: tuple[bytes, ...] = (b"Avg prompt throughput: ",)
"""Every Python stats line contains this (a long needle: fewer false starts for the search)."""
VARIANT_NEEDLES: tuple[bytes, ...] = (b"Avg prompt tput: ", b"] Running: ")
"""The Rust front end's stats line and 0.7.0's stub: searched only in files whose first block has one."""


def with_variants(needles: tuple[bytes, ...], head: bytes | bytearray) -> tuple[bytes, ...]:
    """`needles` and the variant needles that `head` (a file's first block) holds."""
    return needles + tuple(n for n in VARIANT_NEEDLES if n not in needles and n in head)
PREFIX_NEEDLES: tuple[bytes, ...] = (b"Prefix cache hit rate: GPU",)
"""V0's separate prefix-cache line, merged into the stats record before it."""
SPEC_NEEDLES: tuple[bytes, ...] = (b" metrics: ",)
"""`SpecDecoding metrics: `, `Speculative metrics: `, `DiffusionDecoding metrics: ` (and the transfer
lines, which share it)."""
TRANSFER_NEEDLES: tuple[bytes, ...] = (b" Transfer metrics: ",)
"""`KV Transfer metrics: `, `EC Transfer metrics: `."""
FOLLOWER_NEEDLES: tuple[bytes, ...] = PREFIX_NEEDLES + SPEC_NEEDLES
"""Lines that sit right after a stats line: V0's prefix-cache line, speculative-decoding lines."""
STATS_FOLLOWER_NEEDLES: tuple[bytes, ...] = PREFIX_NEEDLES
"""The only follower a stats record needs (V0's prefix-cache line is merged into it): reading stats
alone skips the spec-decode and KV-transfer lines, which would cost a full parse each."""
MFU_NEEDLES: tuple[bytes, ...] = (b"MFU: ",)
"""`Engine 000: MFU: ... TF/s/device ... GB/s/device` (`--enable-mfu-metrics`)."""
LAUNCH_NEEDLES: tuple[bytes, ...] = (
    b" version ", b"args: ", b"with config: ", b"KV cache size: ", b"Maximum concurrency for ", b" backend",
    *MFU_NEEDLES,
)
"""The lines a launch's summary reads besides the stats lines: the version banner (a new launch), the
model, the arguments and engine config, the KV cache size and concurrency, the attention backend, and
the MFU lines."""
NO_STATS_NEEDLES: tuple[bytes, ...] = (b"disabling stats logging", b"disable_log_stats", b'HTTP/1.1" ')
"""For a log without stats lines, why: vLLM said it disabled stats logging, or served requests anyway."""
