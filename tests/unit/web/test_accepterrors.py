"""A connection the server cannot accept (out of descriptors) is counted and said once, never printed
with its traceback each time asyncio tries again (`web/accepterrors.py`)."""

from __future__ import annotations

import asyncio
import errno
import logging

import pytest

from vllm_logwatch.web.accepterrors import count_accept_errors


def test_accept_errors_are_counted_and_said_once(caplog: pytest.LogCaptureFixture) -> None:
    errors = count_accept_errors()
    before = errors.count
    loop = asyncio.new_event_loop()
    try:
        with caplog.at_level(logging.INFO):
            for _ in range(50):  # what asyncio's selector loop does at each failed accept()
                loop.call_exception_handler({"message": "socket.accept() out of system resource",
                                             "exception": OSError(errno.EMFILE, "Too many open files")})
            loop.call_exception_handler({"message": "something else"})
    finally:
        loop.close()
    assert errors.count == before + 50
    accept = [r for r in caplog.records if "accept" in r.getMessage()]
    assert len(accept) <= 1 and all(r.exc_info is None for r in accept)
    assert any(r.getMessage() == "something else" for r in caplog.records)  # others pass
