"""Connections the server could not accept, counted instead of printed.

Out of descriptors (EMFILE, ENFILE) or memory, `accept()` fails; the gate (`gate.py`) then pauses
accepting for a second. The first failure is said in one line, all are counted (`http.accept_errors`
in `/api/v1/status`), none is printed with a traceback.
"""

from __future__ import annotations

import logging
import os

__all__ = ["ACCEPT_ERRORS", "AcceptErrors"]

log = logging.getLogger(__name__)


class AcceptErrors:
    """The count of failed `accept()` calls of this process's server."""

    def __init__(self) -> None:
        self.count = 0

    def add(self, exc: OSError) -> None:
        self.count += 1
        if self.count == 1:
            reason = os.strerror(exc.errno).lower() if exc.errno else type(exc).__name__
            log.warning("cannot accept a connection: %s (said once; counted in http.accept_errors of "
                        "/api/v1/status)", reason)


ACCEPT_ERRORS = AcceptErrors()
