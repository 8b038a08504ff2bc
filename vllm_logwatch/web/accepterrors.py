"""Connections the server could not accept, counted instead of printed.

Out of descriptors (EMFILE, ENFILE) or memory, asyncio's `accept()` fails and it logs the error with its
traceback, every time it tries again: stderr filled at thousands of lines a second. The first is said in
one line, all are counted (`http.accept_errors` in `/api/v1/status`), none is printed with a traceback.
"""

from __future__ import annotations

import logging

__all__ = ["ACCEPT_ERRORS", "AcceptErrors", "count_accept_errors"]

log = logging.getLogger(__name__)
_MESSAGE = "socket.accept() out of system resource"


class AcceptErrors(logging.Filter):
    """A filter on the `asyncio` logger: its accept errors are counted and kept off the log."""

    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def filter(self, record: logging.LogRecord) -> bool:
        if not str(record.msg).startswith(_MESSAGE):
            return True
        self.count += 1
        if self.count == 1:
            log.warning("cannot accept a connection: out of descriptors or memory (said once; counted in "
                        "http.accept_errors of /api/v1/status)")
        return False


ACCEPT_ERRORS = AcceptErrors()


def count_accept_errors() -> AcceptErrors:
    """Install the filter (once) and return it."""
    logging.getLogger("asyncio").addFilter(ACCEPT_ERRORS)
    return ACCEPT_ERRORS
