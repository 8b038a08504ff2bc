"""Reading a block of complete lines at once: the access lines counted by one pattern, the few other
lines worth a parse found by needle search, and the line of vLLM's shutdown. Pure: no I/O.

A busy server's log is mostly uvicorn access lines: counted by one pattern over the block, they cost
no parse each; the result is that of `parse_line` on every line (docs/design.md, test_blocks.py).
"""

from __future__ import annotations

import re
from collections import Counter

from .framing import hit_lines, simd_count, trim_partial_utf8
from .line import ACCESS_LINE
from .needles import ACCESS_NEEDLE, LIVE_NEEDLES

AccessCounts = dict[tuple[str, str, int], int]
"""Access lines by (method, path without its query, status): what `HttpAccess` says of each."""


def scan_block(
    data: bytes, first: int, *, cap: int | None = None
) -> tuple[AccessCounts, list[tuple[int, str]]]:
    """(the access lines of `data` counted, `(line number, text)` of every other line worth a parse).

    `data` holds complete lines (a last line without its newline is read as one); `first` is the number
    of its first line. Texts lose one trailing `\\r`; bad UTF-8 is replaced. With `cap`, a line longer
    than `cap` bytes is handed over cut to its first `cap` bytes.
    """

    found = ACCESS_LINE.findall(data)
    access: AccessCounts = {}
    for request, n in Counter(found).items():
        method, path, _, status = request.split(b" ")  # no other space: ACCESS_LINE says so
        key = (method.decode(), path.decode().split("?", 1)[0], int(status))
        access[key] = access.get(key, 0) + n
    end = len(data)
    needles = LIVE_NEEDLES
    if simd_count(data, ACCESS_NEEDLE, 0, end) != len(found):
        needles = (*needles, ACCESS_NEEDLE)  # access lines the pattern does not read: parse them
    starts, _ = hit_lines(data, 0, end, needles)
    hits: list[tuple[int, str]] = []
    number, counted = first, 0
    for start in starts:
        if found and ACCESS_LINE.match(data, start) is not None:
            continue  # counted above (an `ERROR:` access line, a path that holds a needle)
        number += simd_count(data, b"\n", counted, start)
        counted = start
        stop = data.find(b"\n", start)
        raw = data[start:stop if stop >= 0 else end]
        if cap is not None and len(raw) > cap:
            raw = trim_partial_utf8(raw[:cap])
        elif raw.endswith(b"\r"):
            raw = raw[:-1]
        hits.append((number, raw.decode("utf-8", "replace")))
    return access, hits


_SHUTDOWN = re.compile(
    rb"(?m)^(?:\([^)\n]{1,64}\) )?INFO [0-9-]{5} [0-9:.]{8,12} \[[\w.]{1,64}:\d{1,6}\] "
    rb"(?:\[shutdown\] API server: shutdown triggered|Shutting down FastAPI HTTP server)"
    rb"|^INFO:\s+Application shutdown complete"
)


def shutdown_at(data: bytes) -> int | None:
    """The offset of the first line of vLLM's shutdown in `data` (complete lines), or None: the launch
    ended (the status page says `ended`). vLLM 0.1x-0.2x logs `Shutting down FastAPI HTTP server.`, 0.3x
    `[shutdown] API server: shutdown triggered`, uvicorn `INFO:     Application shutdown complete.`;
    anchored to the line's own header, so a request line quoting these words (a prompt) ends nothing.

    >>> shutdown_at(b"x\\nINFO 06-11 11:46:39 [launcher.py:80] Shutting down FastAPI HTTP server.\\n")
    2
    >>> shutdown_at(b"INFO 06-11 11:46:39 [logger.py:39] Received request: "
    ...             b"'Shutting down FastAPI HTTP server'")
    """
    found = _SHUTDOWN.search(data)
    return None if found is None else found.start()
