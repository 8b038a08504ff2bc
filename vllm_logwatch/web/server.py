"""The HTTP side: a small FastAPI app served by uvicorn (`commands/watch.py` and `run.py` wire it up).

Its routes and answers: docs/watch.md and docs/status-api.md; FastAPI's /docs and /openapi.json are
off, and a trailing slash is 404, never a redirect (Starlette's would name the client's `Host:`). No
response ever carries log text (logs hold users' prompts). The socket is bound first, so a port in use
is a one-line error before anything starts; our signal handlers only set a flag and ask uvicorn to exit.

Example::

    app = create_app(registry, pipeline.status)
    signum = serve(app, bind_socket("127.0.0.1", 9477), pipeline.stop)   # until SIGTERM/SIGINT
"""

from __future__ import annotations

import contextlib
import errno
import logging
import math
import os
import signal
import socket
import threading
from collections.abc import Callable, Iterator, Mapping
from types import FrameType
from typing import TYPE_CHECKING, Any

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response
from prometheus_client.core import CounterMetricFamily
from prometheus_client.exposition import choose_encoder
from prometheus_client.registry import CollectorRegistry

from ..errors import InputError, UsageError
from ..exporting import catalogue
from ..exporting.families import WithLabels
from ..exporting.history import History
from .gate import ACCEPT_ERRORS
from .page import static_files

if TYPE_CHECKING:
    import uvicorn
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

    from .webconfig import BasicAuth, WebConfig

log = logging.getLogger(__name__)

EXIT_SIGINT = 130
_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
# The page loads only its own files: no inline script, no other origin (hosts may be offline anyway).
_PAGE_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
        "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"),
    "X-Content-Type-Options": "nosniff",
    "Cache-Control": "no-store",
}
_BAD_SINCE = {"error": "since must be a number of seconds since the epoch"}
_READ = ["GET", "HEAD"]  # HEAD wherever GET: the same status and headers, no body (uvicorn drops it)


def create_app(
    registry: CollectorRegistry,
    status: Callable[[], dict[str, Any]],
    health: Callable[[], bool] | None = None,
    history: History | None = None,
    *,
    web: WebConfig | None = None,
    labels: Mapping[str, str] | None = None,
) -> FastAPI:
    """The exporter's HTTP app: `/metrics` from `registry`, `/api/v1/status` and the page at `/` from
    `status()`, `/healthz` from `health()` (always healthy when None), `/api/v1/history` from
    `history` (empty when None). With `web`, its basic auth guards every path and its headers are
    on every response (TLS is the server's: `http_server`). `labels`: the exporter's `--label`s, on
    the server's own series too.

    >>> app = create_app(CollectorRegistry(), lambda: {"engines": {}})
    >>> sorted(route.path for route in app.routes)
    ['/', '/api/v1/history', '/api/v1/status', '/healthz', '/metrics', '/static/{name}']
    """
    from . import page

    history = history if history is not None else History()
    # No redirect for a trailing slash: Starlette's names the Host header the client sent.
    app = FastAPI(title="vllm-logwatch", docs_url=None, redoc_url=None, openapi_url=None,
                  redirect_slashes=False)

    # Plain `def` endpoints run in uvicorn's thread pool: a scrape takes the metrics lock and must
    # not block the event loop.
    @app.api_route("/metrics", methods=_READ)
    def metrics(request: Request) -> Response:
        encoder, content_type = choose_encoder(request.headers.get("accept", ""))
        return Response(content=encoder(registry), media_type=content_type)

    @app.api_route("/healthz", methods=_READ)
    def healthz() -> JSONResponse:
        if health is None or health():
            return JSONResponse({"status": "ok"})
        return JSONResponse({"status": "failed"}, status_code=503)

    @app.api_route("/api/v1/status", methods=_READ)
    def api_status() -> JSONResponse:
        return JSONResponse({**status(), "http": {"accept_errors": ACCEPT_ERRORS.count}})

    @app.api_route("/api/v1/history", methods=_READ)
    def api_history(request: Request) -> JSONResponse:
        # Read by hand, not as a typed parameter: FastAPI's 422 would echo the query back.
        raw = request.query_params.get("since")
        since: float | None = None
        if raw is not None:
            try:
                since = float(raw)
            except ValueError:
                return JSONResponse(_BAD_SINCE, status_code=400)
            if not math.isfinite(since):
                return JSONResponse(_BAD_SINCE, status_code=400)
        return JSONResponse(history.snapshot(since))

    @app.api_route("/", methods=_READ)
    def status_page() -> HTMLResponse:
        return HTMLResponse(page.render(status()), headers=_PAGE_HEADERS)

    @app.api_route("/static/{name}", methods=_READ)
    def static(name: str, request: Request) -> Response:
        found = static_files().get(name)
        if found is None:
            return JSONResponse({"detail": "Not Found"}, status_code=404)
        headers = {"ETag": found.etag, "Cache-Control": "no-cache", "X-Content-Type-Options": "nosniff"}
        if request.headers.get("if-none-match") == found.etag:
            return Response(status_code=304, headers=headers)
        return Response(found.body, media_type=found.media_type, headers=headers)

    # uvicorn's warning for each malformed request into a counter of `registry` (one filter per process)
    uvicorn_log = logging.getLogger("uvicorn.error")
    if _INVALID not in uvicorn_log.filters:
        uvicorn_log.addFilter(_INVALID)
    registry.register(WithLabels(_INVALID, labels or {}))
    if web is not None and (web.basic_auth_users or web.headers):
        from .webconfig import BasicAuth

        # Made here, at start: its dummy hash costs a bcrypt, which must not fall on the first request.
        auth = BasicAuth(web.basic_auth_users) if web.basic_auth_users else None
        app.add_middleware(_WebGuard, web=web, auth=auth)
    return app


class _InvalidRequests(logging.Filter):
    """uvicorn's `Invalid HTTP request received.` warnings (one per malformed request: a port scanner
    writes hundreds a second) counted instead of logged, as `vllm_logwatch_http_invalid_requests`."""

    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def filter(self, record: logging.LogRecord) -> bool:
        if record.getMessage() == "Invalid HTTP request received.":
            self.count += 1
            return False
        return True

    def collect(self) -> Iterator[CounterMetricFamily]:
        spec = catalogue.spec("http_invalid_requests")
        family = CounterMetricFamily(spec.name, spec.help)
        family.add_metric([], self.count)
        yield family


_INVALID = _InvalidRequests()


_UNAUTHORIZED = b"Unauthorized\n"
_DENIED = [(b"content-type", b"text/plain; charset=utf-8"), (b"www-authenticate", b"Basic"),
           (b"x-content-type-options", b"nosniff"), (b"content-length", str(len(_UNAUTHORIZED)).encode())]


class _WebGuard:
    """ASGI middleware: the web configuration's headers on every response (replacing ours of the same
    name), and basic auth before any route, 404s included. A wrong or missing password is a 401 with
    `WWW-Authenticate: Basic` and a fixed body. Credentials checked good before are answered on the
    event loop without bcrypt; others run bcrypt off the loop, one check at a time, at most
    `MAX_PENDING_CHECKS` running or waiting: past that a request is a 401 at once, so a flood of wrong
    passwords neither blocks the loop nor holds a good password in a long queue."""

    def __init__(self, app: ASGIApp, web: WebConfig, auth: BasicAuth | None) -> None:
        import anyio

        self.app = app
        self.headers = [(name.lower().encode("ascii"), value.encode("ascii"))
                        for name, value in web.headers.items()]
        self.names = {name for name, _ in self.headers}
        self.auth = auth
        self.limiter = anyio.CapacityLimiter(1)  # a waiting check holds no thread of the pool

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start" and self.headers:
                kept = [(k, v) for k, v in message.get("headers", []) if k.lower() not in self.names]
                message = {**message, "headers": kept + self.headers}
            await send(message)

        if self.auth is not None:
            given = next((value for name, value in scope["headers"] if name == b"authorization"), None)
            if not self.auth.cached(given) and not await self._checked(given):
                await send_with_headers({"type": "http.response.start", "status": 401, "headers": _DENIED})
                await send_with_headers({"type": "http.response.body", "body": _UNAUTHORIZED})
                return
        await self.app(scope, receive, send_with_headers)

    async def _checked(self, given: bytes | None) -> bool:
        """bcrypt's answer, off the event loop; False at once when `MAX_PENDING_CHECKS` are under way."""
        import anyio.to_thread

        if self.auth is None or given is None or not self.auth.admit():
            return False
        try:
            return await anyio.to_thread.run_sync(self.auth.check, given, limiter=self.limiter)
        finally:
            self.auth.release()


def bind_socket(host: str, port: int) -> socket.socket:
    """A listening TCP socket, or `InputError` with a one-line reason (port in use, bad address)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise UsageError(f"--listen {host!r}: not an address of this host ({exc.strerror})") from None
    family, kind, proto, _, address = infos[0]
    # The protocol number matters: asyncio sets TCP_NODELAY on accepted connections only when the
    # listening socket says IPPROTO_TCP; with proto 0 every keep-alive response waits ~40 ms for an ACK.
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        sock.bind(address)
        sock.listen(128)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            reason = "address already in use (another exporter? choose one with --port)"
        elif exc.errno in (errno.EACCES, errno.EPERM):
            reason = "permission denied (ports below 1024 need privileges)"
        else:
            reason = os.strerror(exc.errno).lower() if exc.errno else type(exc).__name__
        raise InputError(f"cannot listen on {url_of(host, port, '')}: {reason}") from None
    sock.setblocking(False)
    return sock


def url_of(host: str, port: int, path: str = "/metrics", *, scheme: str = "http") -> str:
    """`http://host:port/path` (or `https://`), with brackets around an IPv6 address; a listen address
    of every interface (`0.0.0.0`, `::`) is shown as this host's name, which a browser can reach.

    >>> url_of("127.0.0.1", 9477), url_of("::1", 9477, "/")
    ('http://127.0.0.1:9477/metrics', 'http://[::1]:9477/')
    >>> url_of("0.0.0.0", 9477) == f"http://{socket.gethostname()}:9477/metrics"
    True
    """
    if host in ("0.0.0.0", "::"):
        host = socket.gethostname()
    shown = f"[{host}]" if ":" in host else host
    return f"{scheme}://{shown}:{port}{path}"


def http_server(app: Any, web: WebConfig | None = None) -> uvicorn.Server:
    """The server of every logwatch command (watch, demo, run), to `run(sockets=[bind_socket(...)])`:
    uvicorn accepting through `gate.py` (a connection cap, a request head deadline, out of descriptors
    counted), with no access log, no lifespan, no `Server` header, no WebSocket, idle keep-alive
    connections closed after 5 s, 5 s to finish requests at shutdown; uvicorn's own TLS when `web` has
    `tls_server_config`, with its lowest TLS version set on the context uvicorn makes. (No
    `limit_concurrency`: its 503 comes once a request head is complete, and `gate.py` caps the
    connections before.)"""
    import uvicorn

    from .gate import Server

    tls = web.tls if web is not None else None
    minimum = tls.minimum_version if tls is not None else None

    class Config(uvicorn.Config):
        def load(self) -> None:
            super().load()
            if self.ssl is not None and minimum is not None:
                self.ssl.minimum_version = minimum

    options: dict[str, Any] = {}
    if tls is not None:
        options = {"ssl_certfile": tls.cert_file, "ssl_keyfile": tls.key_file,
                   "ssl_ca_certs": tls.client_ca_file or None, "ssl_cert_reqs": tls.cert_reqs}
    return Server(Config(app, log_config=None, log_level="warning", access_log=False, lifespan="off",
                         ws="none", server_header=False, timeout_keep_alive=5, timeout_graceful_shutdown=5,
                         **options))


@contextlib.contextmanager
def _stop_signals(on_signal: Callable[[int], None]) -> Iterator[None]:
    """While inside: SIGINT, SIGTERM and SIGHUP call `on_signal`; the previous handlers come back after.

    uvicorn installs its own handlers while it runs and, once stopped, re-raises the signal it got;
    the re-raised signal lands here and is recorded, instead of killing the process before the
    pipeline has written its state file."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handle(signum: int, frame: FrameType | None) -> None:
        on_signal(signum)

    originals = {sig: signal.signal(sig, handle) for sig in _STOP_SIGNALS}
    try:
        yield
    finally:
        for sig, original in originals.items():
            signal.signal(sig, original)


def serve(app: FastAPI, sock: socket.socket, on_stop: Callable[[], None], web: WebConfig | None,
          ) -> int | None:
    """Serve `app` on `sock` (from `bind_socket`) until SIGTERM, SIGINT or SIGHUP (main thread); returns
    that signal's number, or None. `on_stop` runs once the server is down, whatever happened (stop the
    pipeline there); `web` for TLS."""
    server = http_server(app, web)  # uvicorn, imported here: `logwatch parse` never pays for it
    received: list[int] = []

    def on_signal(signum: int) -> None:
        received.append(signum)
        server.should_exit = True  # a signal before uvicorn's own handlers are in place

    try:
        with _stop_signals(on_signal):
            server.run(sockets=[sock])
    finally:
        sock.close()
        on_stop()
    return received[0] if received else None
