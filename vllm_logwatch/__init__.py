"""vllm-logwatch: turn vLLM server logs into data (Prometheus metrics, CSV, summaries).

The public names are loaded on first use, so `logwatch parse` and the run-mode child shim start
without loading pydantic models they do not need.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS = {
    "Assembler": "scan",
    "EngineStats": "events",
    "Event": "events",
    "HttpAccess": "events",
    "LogMessage": "events",
    "ServerInfo": "events",
    "SpecDecodeStats": "events",
    "TransferStats": "events",
    "Unparsed": "events",
    "iter_events": "scan",
    "parse_line": "parse",
}

__all__ = [
    "Assembler",
    "EngineStats",
    "Event",
    "HttpAccess",
    "LogMessage",
    "ServerInfo",
    "SpecDecodeStats",
    "TransferStats",
    "Unparsed",
    "__version__",
    "iter_events",
    "parse_line",
]

if TYPE_CHECKING:
    from .events import (
        EngineStats,
        Event,
        HttpAccess,
        LogMessage,
        ServerInfo,
        SpecDecodeStats,
        TransferStats,
        Unparsed,
    )
    from .parse import parse_line
    from .scan import Assembler, iter_events


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'vllm_logwatch' has no attribute {name!r}")
    return getattr(importlib.import_module(f".{module}", __name__), name)
