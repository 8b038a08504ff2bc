"""URL targets of `logwatch top` (terminal/fetch.py): one thread reads them all; a slow target is given
up after the timeout and never holds up the others; basic auth; a server that closes each connection;
a body is parsed again only when a line top reads changed."""

from __future__ import annotations

import base64
import http.server
import socket
import threading
import time
from collections.abc import Callable, Iterator

import pytest
from support import poll_until

from vllm_logwatch.terminal import fetch
from vllm_logwatch.terminal.fetch import Fetcher, Reading, UrlTarget

BODY = (b"# TYPE vllm_logwatch_requests_running gauge\n"
        b'vllm_logwatch_requests_running{engine="0",model_name="m"} 3\n'
        b"vllm_logwatch_log_lines_total 17\n")


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    auth: str | None = None
    close = False
    body = BODY

    def do_GET(self) -> None:
        if self.auth is not None and self.headers.get("Authorization") != self.auth:
            self.send_response(401)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Length", str(len(self.body)))
        if self.close:
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, format: str, *args: object) -> None:
        pass


Serve = Callable[..., str]


@pytest.fixture
def serve() -> Iterator[Serve]:
    """Starts HTTP servers of `BODY` (keyword arguments: the handler's attributes); their URLs."""
    servers: list[http.server.ThreadingHTTPServer] = []

    def start(**attributes: object) -> str:
        handler = type("Handler", (_Handler,), attributes)
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}/metrics"

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def _readings(fetcher: Fetcher, want: int, timeout: float = 5.0) -> list[dict[str, Reading]]:
    """Polls (as the app's refresh does) until `want` polls brought readings."""
    got: list[dict[str, Reading]] = []

    def enough() -> bool:
        if polled := fetcher.poll():
            got.append(polled)
        return len(got) >= want

    poll_until(enough, timeout, f"{want} polls with readings", interval=0.02)
    return got


@pytest.mark.integration
def test_a_target_that_never_answers_holds_up_no_other(serve: Serve) -> None:
    fast = serve()
    silent = socket.create_server(("127.0.0.1", 0))  # connections complete (the backlog), no answer ever
    slow = f"http://127.0.0.1:{silent.getsockname()[1]}/metrics"
    fetcher = Fetcher([UrlTarget(u) for u in (slow, fast)], timeout=1.0)
    try:
        start = time.monotonic()
        first = _readings(fetcher, 3)  # the fast one read three times while the slow one says nothing
        assert time.monotonic() - start < 1.0
        assert all(set(polled) == {fast} and polled[fast].snaps for polled in first), first
        late = poll_until(lambda: fetcher.poll().get(slow), 5.0, "the slow target given up", interval=0.05)
        assert late.snaps is None and late.error == "no answer in 1 s"
    finally:
        fetcher.close()
        silent.close()


@pytest.mark.integration
def test_basic_auth_a_refused_port_and_a_server_closing_each_connection(serve: Serve) -> None:
    header = "Basic " + base64.b64encode(b"prometheus:pw").decode()
    url = serve(auth=header, close=True)
    refused = socket.create_server(("127.0.0.1", 0))
    down = f"http://127.0.0.1:{refused.getsockname()[1]}/metrics"
    refused.close()
    with_auth = Fetcher([UrlTarget(url, ("prometheus", "pw")),
                         UrlTarget(down)], timeout=2.0)
    without = Fetcher([UrlTarget(url)], timeout=2.0)
    try:
        for readings in _readings(with_auth, 3):  # a new connection for each read: the server closes it
            if url in readings:
                snap = readings[url].snaps
                assert snap is not None and snap[()].engines["0"].values["running"] == 3.0, readings
            if down in readings:
                assert readings[down].error == "connection refused"
        assert without.wait(time.monotonic() + 5)[url].error == "HTTP 401 (basic auth: --basic-auth-user)"
    finally:
        with_auth.close()
        without.close()


@pytest.mark.integration
def test_a_body_over_the_limit_is_refused(serve: Serve, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fetch, "MAX_BODY", 40)
    url = serve()
    fetcher = Fetcher([UrlTarget(url)], timeout=2.0)
    try:
        assert (fetcher.wait(time.monotonic() + 5)[url].error or "").startswith("body over")
    finally:
        fetcher.close()


def test_a_body_is_read_again_only_when_a_line_top_reads_changed() -> None:
    target = UrlTarget("http://127.0.0.1:9/metrics")
    first = target.reading(200, BODY, 1.0).snaps
    assert first is not None and first[()].engines["0"].values["running"] == 3.0
    moved = BODY.replace(b"lines_total 17", b"lines_total 18")  # the exporter's own counter: not read
    assert target.reading(200, moved, 2.0).snaps is first
    busier = moved.replace(b"} 3\n", b"} 5\n")
    again = target.reading(200, busier, 3.0).snaps
    assert again is not first and again is not None and again[()].engines["0"].values["running"] == 5.0
    assert target.reading(200, b"vllm:num_requests_running{engine=\"0\" 1\n", 4.0).error == \
        "not Prometheus text"
    assert target.reading(200, busier, 5.0).snaps == again  # read again whole after a bad body


def test_a_url_answering_without_our_series_is_a_down_row_that_says_so(serve: Serve) -> None:
    """A URL that answers with Prometheus text but no vLLM or logwatch series (a node exporter's, given
    by mistake) is a row marked down with the reason; it had no row at all."""
    from vllm_logwatch.terminal.board import Board

    url = serve(body=b"# TYPE node_load1 gauge\nnode_load1 0.5\n")
    fetcher = Fetcher([UrlTarget(url)], timeout=2.0)
    try:
        board = Board([], fetcher, [fetch.url_name(url)])
        (view,) = board.refresh(5.0)
    finally:
        fetcher.close()
    assert (view.state, view.reason) == ("down", "no vLLM or logwatch series in its answer")
