"""The status page's static files (`static/`): a fixed list, read once, each with its media type and
an ETag; nothing else under `/static/` is served."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import cache
from importlib import resources

__all__ = ["StaticFile", "static_files"]

_STATIC_TYPES = {
    "page.css": "text/css; charset=utf-8",
    "page.js": "text/javascript; charset=utf-8",
    "uPlot.iife.min.js": "text/javascript; charset=utf-8",
    "uPlot.min.css": "text/css; charset=utf-8",
    "uPlot.LICENSE": "text/plain; charset=utf-8",
}


@dataclass(frozen=True)
class StaticFile:
    """One file of `vllm_logwatch/web/static/`, read once."""

    body: bytes
    media_type: str
    etag: str


@cache
def static_files() -> dict[str, StaticFile]:
    """The page's static files by name (a fixed list: nothing else under `/static/` is served)."""
    folder = resources.files("vllm_logwatch.web").joinpath("static")
    out = {}
    for name, media_type in _STATIC_TYPES.items():
        body = folder.joinpath(name).read_bytes()
        out[name] = StaticFile(body, media_type, '"' + hashlib.sha256(body).hexdigest()[:16] + '"')
    return out
