"""The current launch's start-up facts, read from before where `watch` started reading a file.

`watch` on a file or folder starts at the end (only new lines): the model, vLLM version, arguments and
KV cache size were printed long before. They are read here from the file's bytes before that point:
from the last launch banner (`vLLM API server version ...`, the start-up logo) on, start-up lines only.
Nothing is counted: no stats line, no message, no launch (`ExporterMetrics.set_startup_facts`), so the
state file's exactly-once promise is untouched (docs/watch.md).

The search for the banner reads the bytes once, in large chunks framed into lines as the follower
frames a file (`following/openfile.py`), by a regular expression over each block; the facts are read
from at most `FACTS_BYTES` after it (a launch prints them in its first minute).
"""

from __future__ import annotations

import re
from typing import IO, Any

from ..following.openfile import FollowerStats, LineBlock, OpenFile
from ..parsing.events import ServerInfo
from ..parsing.framing import MAX_LINE_BYTES
from ..parsing.line import parse_line

FACTS_BYTES = 4 << 20
"""Start-up lines are read from at most this many bytes after the launch's banner."""
_CHUNK = 8 << 20
_BANNER = re.compile(  # the banners of parsing/startup.py: the version line, or the logo's (UTF-8 blocks)
    rb"(?m)^[^\n]*(?:vLLM (?:API )?server version|\xe2\x96[\x80-\x9f][^\n]* version )[^\n]*$")


def launch_facts(path: str, end: int) -> dict[str, Any]:
    """The start-up facts of the last launch in `path`'s first `end` bytes ({} when none; an
    unreadable file gives none: the follower says why)."""
    try:
        with open(path, "rb") as file:
            start = _last_banner(file, end)
            file.seek(start)
            data = file.read(min(end - start, FACTS_BYTES))
    except OSError:
        return {}
    facts: dict[str, Any] = {}
    lines = data.split(b"\n")
    for index, raw in enumerate(lines[:-1]):  # complete lines only
        event = parse_line(raw.decode("utf-8", "replace"))
        if isinstance(event, ServerInfo):
            if event.new_launch and index:
                facts = {}  # a later banner within the window: the newer launch's facts
            facts.update(event.facts("server"))
    return facts


def _last_banner(file: IO[bytes], end: int) -> int:
    """The offset of the last launch banner's line before `end` (0: none, read from the start)."""
    frame, counts, last = OpenFile.framing(file.name), FollowerStats(), 0
    while frame.pos < end and (chunk := file.read(min(_CHUNK, end - frame.pos))):
        blocks: list[LineBlock] = []
        frame.consume(chunk, blocks, MAX_LINE_BYTES, counts)  # complete lines; the rest starts the next
        for block in blocks:
            for found in _BANNER.finditer(block.data):
                last = block.offset + found.start()
    return last
