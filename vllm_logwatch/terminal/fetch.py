"""URL targets of `logwatch top`: a logwatch exporter's or a vLLM server's `/metrics`, read with the
standard library's HTTP client on a kept connection (basic auth, a CA, a client certificate for an
exporter whose `--web-config` asks for one) and prometheus_client's text parser.

Each URL is read in a thread of a pool, so a target that is down or slow never holds up the others:
`Fetcher.poll()` hands over the readings that came in and starts the next read of each target whose
last one ended; a read still going after the timeout shows its target down ("no answer in N s").
Only the lines `series.read_families` reads are given to the parser, and only when one of them
changed (an exporter's own counters move with every line it reads; its gauges once a stats interval).
"""

from __future__ import annotations

import base64
import concurrent.futures
import hashlib
import http.client
import socket
import ssl
import time
from dataclasses import dataclass
from urllib.parse import urlsplit

from prometheus_client.parser import text_string_to_metric_families

from ..shown import printable
from .series import ServerKey, ServerSnap, read_families, wanted_lines

__all__ = ["ClientOptions", "Fetcher", "Reading", "UrlTarget", "is_url", "url_name"]

MAX_BODY = 32 << 20
"""A /metrics body past this is refused (an exporter's is tens of KiB, a vLLM server's a few hundred)."""


def is_url(target: str) -> bool:
    return target.startswith(("http://", "https://"))


@dataclass(frozen=True)
class ClientOptions:
    """How URL targets are read: the `--basic-auth-*` and `--tls-*` options of `logwatch top`."""

    user: str | None = None
    password: str | None = None
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    insecure: bool = False
    timeout: float = 2.0

    def context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=self.ca_file)
        if self.insecure:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        if self.cert_file:
            context.load_cert_chain(self.cert_file, self.key_file)
        return context


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
    """One `/metrics` URL."""

    def __init__(self, url: str, options: ClientOptions, context: ssl.SSLContext | None = None) -> None:
        self.url = url
        self.name = url_name(url)
        self.options = options
        if context is None and url.startswith("https://"):
            context = options.context()
        self._context = context
        self._digest: bytes | None = None
        self._snaps: dict[ServerKey, ServerSnap] | None = None
        self._conn: http.client.HTTPConnection | None = None
        parts = urlsplit(url)
        self._path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        self._headers = {"Accept": "text/plain", "Connection": "keep-alive"}
        if options.user is not None:
            pair = f"{options.user}:{options.password or ''}".encode()
            self._headers["Authorization"] = "Basic " + base64.b64encode(pair).decode()

    def _get(self) -> tuple[int, bytes]:
        """One GET on the kept connection (HTTP/1.1 keep-alive: no new connection, no TLS handshake a
        second); once more on a new one when the kept one was closed by the server meanwhile."""
        for attempt in (0, 1):
            fresh = self._conn is None
            if self._conn is None:
                self._conn = self._connect()
            try:
                self._conn.request("GET", self._path, headers=self._headers)
                response = self._conn.getresponse()
                body = response.read(MAX_BODY + 1)
                if response.will_close:
                    self._drop()
                return response.status, body
            except (OSError, http.client.HTTPException):
                self._drop()
                if fresh or attempt:
                    raise
        raise AssertionError("unreachable")

    def _connect(self) -> http.client.HTTPConnection:
        parts = urlsplit(self.url)
        host, port = parts.hostname or "", parts.port
        if parts.scheme == "https":
            return http.client.HTTPSConnection(host, port, timeout=self.options.timeout,
                                               context=self._context)
        return http.client.HTTPConnection(host, port, timeout=self.options.timeout)

    def close(self) -> None:
        self._drop()

    def _drop(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def read(self) -> Reading:
        """Fetch and parse the URL now (blocking, at most about `timeout` seconds a step)."""
        at = time.time()
        try:
            status, body = self._get()
        except (OSError, http.client.HTTPException, ValueError) as exc:
            return Reading(None, _reason(exc), at)
        if status != 200:
            hint = " (basic auth: --basic-auth-user)" if status == 401 else ""
            return Reading(None, f"HTTP {status}{hint}", at)
        if len(body) > MAX_BODY:
            return Reading(None, f"body over {MAX_BODY >> 20} MiB", at)
        text = wanted_lines(body.decode("utf-8", "replace"))
        digest = hashlib.blake2b(text.encode(), digest_size=16).digest()
        if digest != self._digest or self._snaps is None:
            try:
                self._snaps = read_families(text_string_to_metric_families(text))
            except (ValueError, TypeError, IndexError, KeyError):
                self._digest, self._snaps = None, None
                return Reading(None, "not Prometheus text", at)
            self._digest = digest
        return Reading(self._snaps, None, at)


def _reason(exc: BaseException) -> str:
    """A short reason a read failed, in words (never a server's own text)."""
    inner = exc
    if isinstance(inner, ssl.SSLCertVerificationError):
        return "TLS: certificate not trusted (--tls-ca-file)"
    if isinstance(inner, ssl.SSLError):
        return "TLS error"
    if isinstance(inner, ConnectionRefusedError):
        return "connection refused"
    if isinstance(inner, (TimeoutError, socket.timeout)):
        return "timed out"
    if isinstance(inner, socket.gaierror):
        return "unknown host"
    if isinstance(inner, ConnectionResetError):
        return "connection reset"
    if isinstance(inner, http.client.HTTPException):
        return "not an HTTP answer"
    if isinstance(inner, OSError) and inner.strerror:
        return printable(inner.strerror.lower())
    return printable(type(inner).__name__)


class Fetcher:
    """Reads every URL target in a pool of threads, never waiting on one."""

    def __init__(self, targets: list[UrlTarget], timeout: float) -> None:
        self.targets = targets
        self.timeout = timeout
        self._pool = (concurrent.futures.ThreadPoolExecutor(min(32, len(targets)), "logwatch-top-fetch")
                      if targets else None)
        self._running: dict[str, tuple[float, concurrent.futures.Future[Reading]]] = {}

    def poll(self) -> dict[str, Reading]:
        """The readings that came in since the last poll (a target still unread after the timeout: a
        reading that says so); then each idle target's next read is started."""
        got: dict[str, Reading] = {}
        now = time.monotonic()
        for target in self.targets:
            running = self._running.get(target.url)
            if running is not None:
                started, future = running
                if not future.done():
                    if now - started > self.timeout + 1.0:
                        got[target.url] = Reading(None, f"no answer in {now - started:.0f} s", time.time())
                    continue
                got[target.url] = future.result()
                del self._running[target.url]
            if self._pool is not None:
                self._running[target.url] = (now, self._pool.submit(target.read))
        return got

    def wait(self, deadline: float) -> dict[str, Reading]:
        """Every target read once (or given up on at `deadline`, monotonic): for `--once`."""
        for target in self.targets:
            if target.url not in self._running and self._pool is not None:
                self._running[target.url] = (time.monotonic(), self._pool.submit(target.read))
        futures = [f for _, f in self._running.values()]
        concurrent.futures.wait(futures, timeout=max(0.0, deadline - time.monotonic()))
        got = {}
        for target in self.targets:
            started, future = self._running.pop(target.url)
            late = Reading(None, f"no answer in {time.monotonic() - started:.0f} s", time.time())
            got[target.url] = future.result() if future.done() else late
        return got

    def close(self) -> None:
        """Ends the reads (one under way ends within the timeout) and closes the kept connections."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
        for target in self.targets:
            target.close()
