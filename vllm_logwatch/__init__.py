"""vllm-logwatch: turn vLLM server logs into data (Prometheus metrics, CSV, summaries)."""

from __future__ import annotations

from .events import EngineStats, Event, HttpAccess, LogMessage, ServerInfo, SpecDecodeStats, Unparsed
from .parse import parse_line
from .scan import Assembler, iter_events

__version__ = "0.1.0"

__all__ = [
    "Assembler",
    "EngineStats",
    "Event",
    "HttpAccess",
    "LogMessage",
    "ServerInfo",
    "SpecDecodeStats",
    "Unparsed",
    "__version__",
    "iter_events",
    "parse_line",
]
