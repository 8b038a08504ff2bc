"""Where a block of log lines holds vLLM's shutdown: the launch ended (the status page says `ended`).

vLLM 0.1x-0.2x logs `Shutting down FastAPI HTTP server.`, 0.3x `[shutdown] API server: shutdown
triggered`, and uvicorn (every version) `INFO:     Application shutdown complete.`. Anchored to the
line's own header, so a request line quoting these words (a prompt) never ends a launch.

>>> shutdown_at(b"x\\nINFO 06-11 11:46:39 [launcher.py:80] Shutting down FastAPI HTTP server.\\n")
2
>>> shutdown_at(b"INFO 06-11 11:46:39 [logger.py:39] Received request: 'Shutting down FastAPI HTTP server'")
"""

from __future__ import annotations

import re

_SHUTDOWN = re.compile(
    rb"(?m)^(?:\([^)\n]{1,64}\) )?INFO [0-9-]{5} [0-9:.]{8,12} \[[\w.]{1,64}:\d{1,6}\] "
    rb"(?:\[shutdown\] API server: shutdown triggered|Shutting down FastAPI HTTP server)"
    rb"|^INFO:\s+Application shutdown complete"
)


def shutdown_at(data: bytes) -> int | None:
    """The offset of the first shutdown line in `data` (complete lines), or None."""
    found = _SHUTDOWN.search(data)
    return None if found is None else found.start()
