"""The server's door: logwatch accepts its connections itself, keeps at most its share of the
descriptors in them, and closes a connection whose request head does not come in time (what it
guarantees: docs/watch.md). uvicorn alone has no deadline for a request head and no cap at accept, and
asyncio's accept loop, out of descriptors, retries once per waiting client; so `Server` accepts on
each listening socket through a `Gate`, and uvicorn's h11 protocol (`Connection`) tells the gate when a
connection waits for a request head and when it closes. The checks run on uvicorn's tick (0.1 s).

Example::

    server = http_server(app, web)   # server.py: this Server with logwatch's uvicorn settings
    server.run(sockets=[bind_socket("127.0.0.1", 9477)])   # the sockets are required
"""

from __future__ import annotations

import asyncio
import logging
import os
import resource
import socket
import ssl
import time
from collections.abc import Callable
from typing import Any

import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

HEAD_TIMEOUT = 10.0
"""Seconds a connection has to send a complete request head, from its start or the previous answer."""
RESERVE = 32  # descriptors for the rest of the process: state file, notifications, pipes, Python's own
MIN_CONNECTIONS = 8
MAX_CONNECTIONS = 1024
RETRY_DELAY = 1.0  # after accept() failed: out of descriptors or memory
_BATCH = 100  # accepts at most per wake-up, as asyncio's loop does up to its backlog


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


def max_connections(limit: int) -> int:
    """Connections held at once under a limit of `limit` descriptors: the half the log files leave (they
    may have `limit // 2`), less `RESERVE`, between `MIN_CONNECTIONS` and `MAX_CONNECTIONS`.

    >>> max_connections(256), max_connections(1024), max_connections(1 << 20)
    (96, 480, 1024)
    """
    if limit == resource.RLIM_INFINITY or limit < 0:
        return MAX_CONNECTIONS
    return max(MIN_CONNECTIONS, min(MAX_CONNECTIONS, limit - limit // 2 - RESERVE))


class Connection(H11Protocol):
    """uvicorn's h11 protocol, telling its `Gate` when it waits for a request head and when it closed."""

    def __init__(self, gate: Gate, **options: Any) -> None:
        super().__init__(**options)
        self.gate = gate

    def waiting(self) -> bool:
        """Whether no answer is under way: before a request head is complete, or after the answer."""
        return self.cycle is None or self.cycle.response_complete

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self.gate.wait(self)

    def handle_events(self) -> None:
        super().handle_events()
        if not self.waiting():
            self.gate.answering(self)

    def on_response_complete(self) -> None:
        super().on_response_complete()  # may start a pipelined request
        if self.waiting() and not self.transport.is_closing():
            self.gate.wait(self)

    def connection_lost(self, exc: Exception | None) -> None:
        super().connection_lost(exc)
        self.gate.lost(self)


class Gate:
    """Accepts the connections of the listening socket `sock` for `make` (a protocol factory), at most
    `cap` at once; `tick()` closes the heads past their deadline and resumes a paused accept."""

    def __init__(self, loop: asyncio.AbstractEventLoop, sock: socket.socket,
                 make: Callable[[Gate], Connection], tls: ssl.SSLContext | None, cap: int) -> None:
        self.loop, self.sock, self.make, self.tls, self.cap = loop, sock, make, tls, cap
        self.open = 0  # accepted and not closed, TLS handshakes included
        self.waiting: dict[Connection, float] = {}  # waiting for a request head -> deadline; oldest first
        self.closing: set[Connection] = set()  # closed by the gate, their connection_lost still to come
        self.handshakes: set[asyncio.Task[Any]] = set()
        self.paused = True
        self.resume_at = 0.0
        self.stopped = False

    def start(self) -> None:
        self._resume()

    def stop(self) -> None:
        """Accept no more (the connections are uvicorn's to close)."""
        self.stopped = True
        self._pause()

    def tick(self) -> None:
        now = time.monotonic()
        while self.waiting:
            connection, deadline = next(iter(self.waiting.items()))
            if deadline > now:
                break
            self._close(connection)
        self._resume()

    def wait(self, connection: Connection) -> None:
        """`connection` waits for a request head from now (a deadline already running is kept)."""
        self.waiting.setdefault(connection, time.monotonic() + HEAD_TIMEOUT)
        self._resume()

    def answering(self, connection: Connection) -> None:
        self.waiting.pop(connection, None)

    def lost(self, connection: Connection) -> None:
        self.waiting.pop(connection, None)
        self.closing.discard(connection)
        self.open -= 1
        self._resume()

    def _held(self) -> int:
        return self.open - len(self.closing)

    def _close(self, connection: Connection) -> None:
        """Close at once, what is still unsent dropped: a client that does not read must not keep it."""
        self.waiting.pop(connection, None)
        self.closing.add(connection)
        connection.transport.abort()

    def _resume(self) -> None:
        """Accept again, unless stopped, within a retry delay, or at the cap with none to close."""
        room = self._held() < self.cap or self.waiting
        if self.paused and not self.stopped and time.monotonic() >= self.resume_at and room:
            self.loop.add_reader(self.sock.fileno(), self._accept)
            self.paused = False

    def _pause(self, delay: float = 0.0) -> None:
        if not self.paused:
            self.loop.remove_reader(self.sock.fileno())
            self.paused = True
        self.resume_at = time.monotonic() + delay

    def _accept(self) -> None:
        for _ in range(_BATCH):
            if self._held() >= self.cap:
                if not self.waiting:
                    self._pause()  # every one is being answered or connecting: until one waits or closes
                    return
                self._close(next(iter(self.waiting)))
            try:
                conn, _ = self.sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except ConnectionAbortedError:
                continue
            except OSError as exc:  # out of descriptors or memory, mostly: once, not per queued client
                ACCEPT_ERRORS.add(exc)
                self._pause(RETRY_DELAY)
                return
            conn.setblocking(False)
            self.open += 1
            handshake = HEAD_TIMEOUT if self.tls is not None else None
            task = self.loop.create_task(self.loop.connect_accepted_socket(
                lambda: self.make(self), conn, ssl=self.tls, ssl_handshake_timeout=handshake))
            self.handshakes.add(task)
            task.add_done_callback(self._connected)

    def _connected(self, task: asyncio.Task[Any]) -> None:
        self.handshakes.discard(task)
        if task.cancelled() or task.exception() is not None:  # a failed TLS handshake: asyncio closed it
            self.open -= 1
            self._resume()


class Server(uvicorn.Server):
    """uvicorn's server, accepting on the sockets given to `run` through a `Gate` each."""

    gates: list[Gate]

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        if not sockets:
            raise ValueError("give the listening sockets (server.bind_socket) to run()")
        await super().startup(sockets=[])  # uvicorn's start, without its own accepting
        loop = asyncio.get_running_loop()
        cap = max_connections(resource.getrlimit(resource.RLIMIT_NOFILE)[0])

        def make(gate: Gate) -> Connection:
            return Connection(gate, config=self.config, server_state=self.server_state,
                              app_state=self.lifespan.state)

        self.gates = [Gate(loop, sock, make, self.config.ssl, cap) for sock in sockets]
        for gate in self.gates:
            gate.start()

    async def on_tick(self, counter: int) -> bool:
        for gate in self.gates:
            gate.tick()
        return await super().on_tick(counter)

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        for gate in self.gates:
            gate.stop()
        await super().shutdown(sockets)
