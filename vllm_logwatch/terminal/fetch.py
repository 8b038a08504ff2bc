"""URL targets of `logwatch top`: a logwatch exporter's or a vLLM server's `/metrics`, read on a kept
HTTP/1.1 connection (basic auth, a CA, a client certificate for an exporter whose `--web-config` asks
for one) and parsed by prometheus_client's text parser.

Every URL is read by one thread: an asyncio event loop, its transports (and TLS) the standard
library's, each connection's HTTP spoken by h11 (uvicorn's HTTP/1.1 library). `Fetcher.poll()` hands
over the readings that came in and asks the loop to start the next read of each target whose last one
ended; a read still going after `--timeout` seconds is given up (its target shown down, "no answer in
N s") and the next starts on a new connection, so a target that is down or slow never holds up the
others; one `send` and about one `recv` a read, one `epoll` for all the waits (bench/RESULTS.md).
Only a line not in the target's body before is given to the parser (each line is a sample), and the
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


def _reason(exc: BaseException) -> str:
    """A short reason a read failed, in words (never a server's own text)."""
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

    def __init__(self, fetcher: Fetcher, target: UrlTarget) -> None:
        self.fetcher, self.target = fetcher, target
        self.http = h11.Connection(h11.CLIENT)
        self.transport: asyncio.Transport | None = None
        self.status = 0
        self.parts: list[bytes] = []
        self.size = 0
        self.busy = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def get(self) -> None:
        assert self.transport is not None
        if self.http.our_state is h11.DONE:
            self.http.start_next_cycle()
        self.busy, self.status, self.parts, self.size = True, 0, [], 0
        self.transport.write(self.http.send(self.target.request) + self.http.send(h11.EndOfMessage()))

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.fetcher.buffer

    def buffer_updated(self, nbytes: int) -> None:
        try:
            self.http.receive_data(bytes(self.fetcher.buffer[:nbytes]))
            while self.busy:
                event = self.http.next_event()
                if event is h11.NEED_DATA:
                    return
                if isinstance(event, h11.Response):
                    self.status = event.status_code
                elif isinstance(event, h11.Data):
                    self.size += len(event.data)
                    if self.size > MAX_BODY:
                        self.fail(f"body over {MAX_BODY >> 20} MiB")
                        return
                    self.parts.append(event.data)
                elif isinstance(event, h11.EndOfMessage):
                    self.busy = False
                    if self.http.their_state is not h11.DONE:  # `Connection: close`
                        self.close()
                    self.fetcher.got(self.target, self.status, b"".join(self.parts))
        except h11.ProtocolError as exc:
            self.fail(_reason(exc))

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        if self.fetcher.conns.get(self.target) is self:
            del self.fetcher.conns[self.target]
        if self.busy:
            self.busy = False
            self.fetcher.failed(self.target, _reason(exc) if exc is not None else "connection closed")

    def fail(self, reason: str) -> None:
        """The read ends with `reason`, and the connection with it."""
        if self.busy:
            self.busy = False
            self.fetcher.failed(self.target, reason)
        self.close()

    def close(self) -> None:
        if self.fetcher.conns.get(self.target) is self:
            del self.fetcher.conns[self.target]
        if self.transport is not None:
            self.transport.abort()


class Fetcher:
    """Reads every URL target in one thread (an asyncio loop of its own), never waiting on one."""

    def __init__(self, targets: list[UrlTarget], timeout: float) -> None:
        self.targets = targets
        self.timeout = timeout
        self.conns: dict[UrlTarget, _Connection] = {}
        """The kept connections (the loop's thread's alone, as every attribute below but `_got`)."""
        self._started: dict[UrlTarget, float] = {}
        self._connecting: dict[UrlTarget, asyncio.Task[None]] = {}
        self._got: dict[str, Reading] = {}
        self.buffer = memoryview(bytearray(1 << 16))
        self._arrived = threading.Condition()  # guards `_got`
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="logwatch-top-fetch", daemon=True)
        if targets:
            self._thread.start()

    def poll(self) -> dict[str, Reading]:
        """The readings that came in since the last poll; then each idle target's next read is started
        (a read past the timeout: given up, a reading that says so)."""
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
        now = time.monotonic()
        for target in self.targets:
            started = self._started.get(target)
            if started is None:
                self._start(target, now)
            elif now - started >= self.timeout:
                self._give_up(target, f"no answer in {self.timeout:g} s")

    def _start(self, target: UrlTarget, now: float) -> None:
        self._started[target] = now
        conn = self.conns.get(target)
        if conn is not None:
            conn.get()
        else:
            self._connecting[target] = self._loop.create_task(self._connect(target))

    async def _connect(self, target: UrlTarget) -> None:
        try:
            _, conn = await self._loop.create_connection(
                lambda: _Connection(self, target), target.host, target.port, ssl=target.context)
        except (OSError, ValueError) as exc:  # ssl.SSLError and the socket's errors are OSErrors
            self.failed(target, _reason(exc))
            return
        finally:
            self._connecting.pop(target, None)
        self.conns[target] = conn
        conn.get()

    def _give_up(self, target: UrlTarget, reason: str) -> None:
        task = self._connecting.pop(target, None)
        if task is not None:
            task.cancel()
        conn = self.conns.get(target)
        if conn is not None:
            conn.busy = False
            conn.close()
        self.failed(target, reason)

    def got(self, target: UrlTarget, status: int, body: bytes) -> None:
        at = time.time()
        self._done(target, target.reading(status, body, at))

    def failed(self, target: UrlTarget, reason: str) -> None:
        self._done(target, Reading(None, reason, time.time()))

    def _done(self, target: UrlTarget, reading: Reading) -> None:
        self._started.pop(target, None)
        with self._arrived:
            self._got[target.url] = reading
            self._arrived.notify()

    async def _shutdown(self) -> None:
        for task in self._connecting.values():
            task.cancel()
        await asyncio.gather(*self._connecting.values(), return_exceptions=True)
        for conn in list(self.conns.values()):
            conn.busy = False
            conn.close()
