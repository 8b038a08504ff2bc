"""URL targets of `logwatch top`: a logwatch exporter's or a vLLM server's `/metrics`, read on a kept
HTTP/1.1 connection (basic auth, a CA, a client certificate for an exporter whose `--web-config` asks
for one) and parsed by prometheus_client's text parser.

Every URL is read by one thread: an asyncio event loop, its transports (and TLS) the standard
library's, each connection's HTTP spoken by h11 (uvicorn's HTTP/1.1 library). `Fetcher.poll()` hands
over the readings that came in and asks the loop to start the next read of each target whose last one
ended; a read still going after `--timeout` seconds is given up (its target shown down, "no answer in
N s") and the next starts on a new connection, so a target that is down or slow never holds up the
others. Only a line not in the target's body before is given to the parser (each line is a sample), and the
servers are read again only when a line they are read from changed.
"""

from __future__ import annotations

import asyncio
import base64
import socket
import ssl
import threading
import time
from dataclasses import dataclass
from urllib.parse import urlsplit

import h11
from prometheus_client.core import Metric
from prometheus_client.parser import text_string_to_metric_families

from ..shown import printable
from .view import ServerKey, ServerSnap, read_families, read_line

MAX_BODY = 32 << 20
"""A /metrics body past this is refused (an exporter's is tens of KiB, a vLLM server's a few hundred)."""


def is_url(target: str) -> bool:
    return target.startswith(("http://", "https://"))


@dataclass
class Reading:
    """One read of a target: its servers, or why it has none (`error`), at `at` (epoch seconds)."""

    snaps: dict[ServerKey, ServerSnap] | None
    error: str | None
    at: float


def url_name(url: str) -> str:
    """A URL target's name on screen: its host and port, and its path unless `/metrics`.

    >>> url_name("http://gpu1:9477/metrics"), url_name("https://[::1]:8000/v1/metrics")
    ('gpu1:9477', '[::1]:8000/v1/metrics')
    """
    parts = urlsplit(url)
    return printable(parts.netloc.rpartition("@")[2] + ("" if parts.path == "/metrics" else parts.path))


class UrlTarget:
    """One `/metrics` URL: its request, and what its last body was read into."""

    def __init__(self, url: str, auth: tuple[str, str] | None = None,
                 context: ssl.SSLContext | None = None) -> None:
        """`auth`: basic auth's user and password; `context`: the TLS context of an https URL (one for
        every target: the `--tls-*` options), the default one if not given."""
        self.url = url
        self.name = url_name(url)
        parts = urlsplit(url)
        self.host, self.port = parts.hostname or "", parts.port or (443 if parts.scheme == "https" else 80)
        self.context = (context or ssl.create_default_context()) if parts.scheme == "https" else None
        self.request = h11.Request(method="GET", target=(parts.path or "/") + (
            f"?{parts.query}" if parts.query else ""), headers=[
            ("Host", parts.netloc.rpartition("@")[2]), ("Accept", "text/plain"),
            *([("Authorization", "Basic " + base64.b64encode(":".join(auth).encode()).decode())] if auth
              else [])])
        self._seen: set[str] = set()
        """The lines of the last body."""
        self._parsed: dict[str, list[Metric]] = {}
        """Its lines that `read_families` reads, parsed."""
        self._snaps: dict[ServerKey, ServerSnap] | None = None

    def reading(self, status: int, body: bytes, at: float) -> Reading:
        """The servers a `/metrics` answer holds. Only a line not in the body before is given to the
        parser, and the servers are read again only when a line they are read from came or went (an
        exporter's own counters move with every line it reads; its gauges once a stats interval)."""
        if status != 200:
            hint = " (basic auth: --basic-auth-user)" if status == 401 else ""
            return Reading(None, f"HTTP {status}{hint}", at)
        lines = body.decode("utf-8", "replace").splitlines()
        seen = set(lines)
        added, gone = seen - self._seen, self._seen - seen
        self._seen = seen
        if self._snaps is not None and not any(map(read_line, added)) and not any(map(read_line, gone)):
            return Reading(self._snaps, None, at)
        for line in gone:
            self._parsed.pop(line, None)
        try:
            for line in filter(read_line, added):
                self._parsed[line] = list(text_string_to_metric_families(line))
            self._snaps = read_families(f for line in lines for f in self._parsed.get(line, ()))
        except (ValueError, TypeError, IndexError, KeyError):
            self._seen, self._parsed, self._snaps = set(), {}, None
            return Reading(None, "not Prometheus text", at)
        return Reading(self._snaps, None, at)


class _Failed(Exception):
    """A read that ended without an answer, and why (in words)."""


def _reason(exc: BaseException) -> str:
    """A short reason a read failed, in words (never a server's own text)."""
    if isinstance(exc, _Failed):
        return str(exc)
    if isinstance(exc, ssl.SSLCertVerificationError):
        return "TLS: certificate not trusted (--tls-ca-file)"
    if isinstance(exc, ssl.SSLError):
        return "TLS error"
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    if isinstance(exc, (TimeoutError, socket.timeout)):
        return "timed out"
    if isinstance(exc, socket.gaierror):
        return "unknown host"
    if isinstance(exc, ConnectionResetError):
        return "connection reset"
    if isinstance(exc, h11.ProtocolError):
        return "not an HTTP answer"
    if isinstance(exc, OSError) and exc.strerror:
        return printable(exc.strerror.lower())
    return printable(type(exc).__name__)


class _Connection(asyncio.BufferedProtocol):
    """A kept connection to one target, in the loop's thread: a GET at a time, its answer read by h11.
    What comes in is read into the fetcher's one buffer (a plain protocol is given a new 256 KiB
    `bytes` by each read) and handed to h11 at once."""

    def __init__(self, buffer: memoryview) -> None:
        self.buffer = buffer
        self.http = h11.Connection(h11.CLIENT)
        self.transport: asyncio.Transport | None = None
        self.answer: asyncio.Future[tuple[int, bytes]] | None = None
        self.status = 0
        self.parts: list[bytes] = []
        self.size = 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def kept(self) -> bool:
        """Open, and its last answer did not end it (`Connection: close`)."""
        return (self.transport is not None and not self.transport.is_closing()
                and self.http.their_state in (h11.IDLE, h11.DONE))

    def get(self, request: h11.Request) -> asyncio.Future[tuple[int, bytes]]:
        """The status and body of the answer to `request`."""
        assert self.transport is not None
        if self.http.our_state is h11.DONE:
            self.http.start_next_cycle()
        self.status, self.parts, self.size = 0, [], 0
        self.answer = asyncio.get_running_loop().create_future()
        self.transport.write(self.http.send(request) + self.http.send(h11.EndOfMessage()))
        return self.answer

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.buffer

    def buffer_updated(self, nbytes: int) -> None:
        try:
            self.http.receive_data(bytes(self.buffer[:nbytes]))
            while self.answer is not None:
                event = self.http.next_event()
                if event is h11.NEED_DATA:
                    return
                if isinstance(event, h11.Response):
                    self.status = event.status_code
                elif isinstance(event, h11.Data):
                    self.size += len(event.data)
                    if self.size > MAX_BODY:
                        raise _Failed(f"body over {MAX_BODY >> 20} MiB")
                    self.parts.append(event.data)
                elif isinstance(event, h11.EndOfMessage):
                    self._end(None, (self.status, b"".join(self.parts)))
        except (h11.ProtocolError, _Failed) as exc:
            self._end(exc)

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        self._end(exc or _Failed("connection closed"))

    def _end(self, exc: BaseException | None, answer: tuple[int, bytes] = (0, b"")) -> None:
        """The read ends with `answer`, or with `exc` and the connection with it."""
        if exc is not None:
            self.close()
        if self.answer is not None and not self.answer.done():
            if exc is not None:
                self.answer.set_exception(exc)
            else:
                self.answer.set_result(answer)
        self.answer = None

    def close(self) -> None:
        if self.transport is not None:
            self.transport.abort()


class Fetcher:
    """Reads every URL target in one thread (an asyncio loop of its own), never waiting on one."""

    def __init__(self, targets: list[UrlTarget], timeout: float) -> None:
        self.targets = targets
        self.timeout = timeout
        self._conns: dict[UrlTarget, _Connection] = {}
        """The kept connections (the loop's thread's alone, as `_reads`)."""
        self._reads: dict[UrlTarget, asyncio.Task[None]] = {}
        self._got: dict[str, Reading] = {}
        self._buffer = memoryview(bytearray(1 << 16))
        self._arrived = threading.Condition()  # guards `_got`
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="logwatch-top-fetch", daemon=True)
        if targets:
            self._thread.start()

    def poll(self) -> dict[str, Reading]:
        """The readings that came in since the last poll; then each idle target's next read is started."""
        with self._arrived:
            got, self._got = self._got, {}
        if self.targets:
            self._loop.call_soon_threadsafe(self._cycle)
        return got

    def wait(self, deadline: float) -> dict[str, Reading]:
        """Every target read once (or given up on at `deadline`, monotonic): for `--once`."""
        if self.targets:
            self._loop.call_soon_threadsafe(self._cycle)
        with self._arrived:
            urls = {t.url for t in self.targets}
            self._arrived.wait_for(lambda: len(self._got) == len(urls),
                                   max(0.0, deadline - time.monotonic()))
            got, self._got = self._got, {}
        late = f"no answer in {self.timeout:g} s"
        return {t.url: got.get(t.url) or Reading(None, late, time.time()) for t in self.targets}

    def close(self) -> None:
        """Ends the reads under way and closes the kept connections."""
        if self._thread.is_alive():
            asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop).result()
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join()
        self._loop.close()

    # -- in the loop's thread ---------------------------------------------------------------------

    def _cycle(self) -> None:
        for target in self.targets:
            if target not in self._reads:
                self._reads[target] = self._loop.create_task(self._read(target))

    async def _read(self, target: UrlTarget) -> None:
        """One read of `target`, on its kept connection or a new one; given up after the timeout."""
        try:
            status, body = await asyncio.wait_for(self._answer(target), self.timeout)
            reading = target.reading(status, body, time.time())
        except (TimeoutError, OSError, ValueError, h11.ProtocolError, _Failed) as exc:
            late = isinstance(exc, asyncio.TimeoutError)  # wait_for's (ssl.SSLError is an OSError)
            reading = Reading(None, f"no answer in {self.timeout:g} s" if late else _reason(exc), time.time())
            if target in self._conns:
                self._conns.pop(target).close()
        finally:
            del self._reads[target]
        with self._arrived:
            self._got[target.url] = reading
            self._arrived.notify()

    async def _answer(self, target: UrlTarget) -> tuple[int, bytes]:
        conn = self._conns.get(target)
        if conn is None or not conn.kept():
            if conn is not None:
                conn.close()
            _, conn = await self._loop.create_connection(
                lambda: _Connection(self._buffer), target.host, target.port, ssl=target.context)
            self._conns[target] = conn
        return await conn.get(target.request)

    async def _shutdown(self) -> None:
        for task in self._reads.values():
            task.cancel()
        await asyncio.gather(*self._reads.values(), return_exceptions=True)
        for conn in self._conns.values():
            conn.close()
