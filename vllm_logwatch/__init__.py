"""vllm-logwatch: turn vLLM server logs into data (Prometheus metrics, CSV, summaries).

The public names are loaded on first use, so the run-mode child shim starts
without loading the modules it does not need.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS = {
    "Assembler": "parsing.assemble",
    "EngineStats": "parsing.events",
    "Event": "parsing.events",
    "HttpAccess": "parsing.events",
    "LogMessage": "parsing.events",
    "MfuStats": "parsing.events",
    "ServerInfo": "parsing.events",
    "SpecDecodeStats": "parsing.events",
    "TransferStats": "parsing.events",
    "Unparsed": "parsing.events",
    "iter_events": "parsing.assemble",
    "parse_line": "parsing.line",
}

__all__ = [
    "Assembler",
    "EngineStats",
    "Event",
    "HttpAccess",
    "LogMessage",
    "MfuStats",
    "ServerInfo",
    "SpecDecodeStats",
    "TransferStats",
    "Unparsed",
    "__version__",
    "iter_events",
    "parse_line",
]

if TYPE_CHECKING:
    from .parsing.assemble import Assembler, iter_events
    from .parsing.events import (
        EngineStats,
        Event,
        HttpAccess,
        LogMessage,
        MfuStats,
        ServerInfo,
        SpecDecodeStats,
        TransferStats,
        Unparsed,
    )
    from .parsing.line import parse_line


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'vllm_logwatch' has no attribute {name!r}")
    return getattr(importlib.import_module(f".{module}", __name__), name)
