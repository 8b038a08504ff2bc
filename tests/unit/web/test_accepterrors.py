"""A connection the server cannot accept (out of descriptors) is counted and said once, without a
traceback; accepting then pauses for a second, once, instead of a retry for each waiting client
(asyncio's own loop: most of a core, and thousands of tracebacks at shutdown), and nothing is left to
fail once the server stopped (`web/gate.py`)."""

from __future__ import annotations

import asyncio
import errno
import logging
import socket
import time
from typing import Any

import pytest

from vllm_logwatch.web.gate import ACCEPT_ERRORS, RETRY_DELAY, Connection, Gate


class Exhausted(socket.socket):
    """A listening socket whose accept() fails as when the process is out of descriptors."""

    calls = 0

    def accept(self) -> tuple[socket.socket, Any]:
        self.calls += 1
        raise OSError(errno.EMFILE, "Too many open files")


def no_connection(gate: Gate) -> Connection:
    raise AssertionError("no connection is ever accepted")


def test_out_of_descriptors_is_counted_said_once_and_retried_once_a_second(
        caplog: pytest.LogCaptureFixture) -> None:
    loop = asyncio.new_event_loop()
    problems: list[dict[str, Any]] = []
    loop.set_exception_handler(lambda _, context: problems.append(context))
    before = ACCEPT_ERRORS.count
    with Exhausted(socket.AF_INET, socket.SOCK_STREAM) as sock, socket.socket() as client, \
            caplog.at_level(logging.INFO):
        sock.bind(("127.0.0.1", 0))
        sock.listen(8)
        sock.setblocking(False)
        client.connect(sock.getsockname())  # the listening socket is readable from now on
        gate = Gate(loop, sock, no_connection, None, cap=8)
        gate.start()
        started = time.monotonic()
        loop.run_until_complete(asyncio.sleep(0.3))
        assert sock.calls == 1  # paused, not trying again at each turn of the loop
        while sock.calls < 2:
            assert time.monotonic() - started < RETRY_DELAY + 2, "accepting never resumed"
            loop.run_until_complete(asyncio.sleep(0.05))
            gate.tick()  # uvicorn's tick
        assert time.monotonic() - started >= RETRY_DELAY
        gate.stop()
        loop.run_until_complete(asyncio.sleep(0.1))
    loop.close()
    assert ACCEPT_ERRORS.count == before + 2
    said = [r for r in caplog.records if "accept" in r.getMessage()]
    assert len(said) == (1 if before == 0 else 0) and all(r.exc_info is None for r in said)
    assert problems == []
