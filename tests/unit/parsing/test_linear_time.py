"""Every line is read in time linear in its length, whatever it holds (`parsing/`): a hostile line
(a dumped prompt of digits, spaces, commas, dots and parentheses around the marks of every kind of
line) up to the 1 MiB line cap must not stall the reader.

For each needle (`parsing/needles.py`, `line.NEEDLES` with the start-up hooks, `line.ACCESS_NEEDLE`),
a few message heads longer than their needle, and each way a line is wrapped (bare, uvicorn's
`INFO:     `, a JSON record's `message`, vLLM's header, a CRI and a Docker json-file envelope),
`parse_line` (after the envelope's unwrapping) runs on the line at 64 KiB and at 1 MiB: sixteen times
the length may cost at most `_RATIO` times the CPU time (a quadratic pattern costs 256 times).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable

import pytest

from vllm_logwatch.parsing import needles
from vllm_logwatch.parsing.envelope import Unwrapper
from vllm_logwatch.parsing.framing import MAX_LINE_BYTES
from vllm_logwatch.parsing.line import parse_line
from vllm_logwatch.parsing.needles import ACCESS_NEEDLE, INFO_HOOKS
from vllm_logwatch.parsing.needles import LIVE_NEEDLES as NEEDLES

_SMALL = 64 * 1024
_RATIO = 40.0
"""At most this much more CPU time for 16 times the length (linear: about 16)."""
_FLOOR = 0.002
"""The 64 KiB time counted as at least this (seconds): a line read in less is timer noise."""
_MAX_SMALL = 1.0
"""A 64 KiB line read in more than this is quadratic already (a linear read takes milliseconds):
fail at once rather than wait minutes for the 1 MiB line."""

# Message heads that go further than their needle: the patterns behind them only run past it.
_HEADS = (
    "Engine 000: Avg prompt throughput: 1.0 tokens/s, ", "8 Engines Aggregated: Avg prompt throughput: ",
    "Running: 1 reqs, Waiting: ", "Prefix cache hit rate: GPU: 1%, CPU: 1%",
    "Engine 000: SpecDecoding metrics: ", "Engine 000: KV Transfer metrics: ", "Engine 000: MFU: ",
    "non-default args: {", "args: Namespace(", "Initializing a V1 LLM engine (v0.1) with config: ",
    "GPU KV cache size: ", "Using ", "Uvicorn running on http://", '1.2.3.4:5 - "GET /',
    "(EngineCore pid=1) INFO 11-29 19:26:05 [core.py:1] ",
    "Prefix cache hit rate: GPU: ", "Prefix cache hit rate: GPU: 1%, CPU: ",  # the numbers' own patterns
    "Engine 000: Iteration(1): ", "Engine 000: Iteration(1): 0 context requests, 0 context tokens, "
    "0 generation requests, 0 generation tokens, iteration elapsed time: ",
)
_NEEDLES = sorted({
    *(n.decode() for n in NEEDLES), ACCESS_NEEDLE.decode(), *INFO_HOOKS, *_HEADS,
    *(n.decode() for name in dir(needles) if name.endswith("_NEEDLES") for n in getattr(needles, name)),
})

_CRI_STAMP = "2025-11-29T19:26:05.123456789Z"


def _body(needle: str, size: int) -> str:
    """`needle`, then long runs of each hostile character, each run followed by the needle again."""
    runs = ("1", " ", ",", ".", "(", ")", ", 1")
    run = (size - len(needle) * (len(runs) + 1)) // len(runs)
    return needle + "".join(char * (run // len(char)) + needle for char in runs)


def _plain(prefix: str, suffix: str = "") -> Callable[[str], list[str]]:
    return lambda body: [prefix + body + suffix]


def _cri(body: str) -> list[str]:
    return _unwrap("cri", f"{_CRI_STAMP} stdout F {body}\n")


def _docker(body: str) -> list[str]:
    record = json.dumps({"log": body + "\n", "stream": "stdout", "time": _CRI_STAMP})
    return _unwrap("docker-json", record + "\n")


def _unwrap(fmt: str, record: str) -> list[str]:
    out = Unwrapper(fmt).unwrap(record.encode())  # type: ignore[arg-type]
    return out.data.decode().splitlines()


_WRAPS: dict[str, Callable[[str], list[str]]] = {
    "bare": _plain(""),
    "uvicorn": _plain("INFO:     "),
    "json": _plain('{"levelname": "INFO", "message": "', '"}'),
    "header": _plain("(APIServer pid=1) INFO 11-29 19:26:05 [loggers.py:335] "),
    "cri": _cri,
    "docker": _docker,
}


def _cpu(make: Callable[[str], list[str]], body: str) -> float:
    """The CPU time to unwrap and parse one line (the envelope's work counts too)."""
    start = time.process_time()
    for line in make(body):
        parse_line(line)
    return time.process_time() - start


@pytest.mark.parametrize("wrap", sorted(_WRAPS))
@pytest.mark.parametrize("needle", _NEEDLES)
def test_a_hostile_line_is_read_in_linear_time(needle: str, wrap: str) -> None:
    make = _WRAPS[wrap]
    small, big = _body(needle, _SMALL), _body(needle, MAX_LINE_BYTES - 256)
    t_small = _cpu(make, small)
    assert t_small < _MAX_SMALL, f"{t_small:.2f} s of CPU for a 64 KiB line"
    t_small = max(_FLOOR, min(t_small, *(_cpu(make, small) for _ in range(2))))
    t_big = _cpu(make, big)
    for _ in range(2):  # a loaded machine: the best of three before calling it slow
        if t_big < _RATIO * t_small:
            break
        t_big = min(t_big, _cpu(make, big))
    assert t_big < _RATIO * t_small, f"64 KiB: {t_small * 1000:.1f} ms, 1 MiB: {t_big * 1000:.1f} ms of CPU"
