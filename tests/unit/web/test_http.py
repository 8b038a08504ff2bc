"""HTTP behaviour a client can choose: HEAD, trailing slashes with a chosen Host, and the URL paths
of vLLM's access lines, which become the `path` label only when they are vLLM's own routes."""

from __future__ import annotations

import http.client
import re
from collections.abc import Iterator

import httpx
import pytest
from prometheus_client import CollectorRegistry
from support import TESTS, run_app

from vllm_logwatch.exporting.exporter import ExporterMetrics
from vllm_logwatch.exporting.routes import OTHER, VLLM_ROUTES, path_label
from vllm_logwatch.parsing.line import parse_line
from vllm_logwatch.web.server import create_app

pytestmark = pytest.mark.timeout(60)

DATA = TESTS / "data"
REAL_LOG = DATA / "real-vllm-cpu" / "serve_20261129T192328Z.log"
GET_PATHS = ("/metrics", "/healthz", "/api/v1/status", "/api/v1/history", "/", "/static/page.js")


@pytest.fixture(scope="module")
def client() -> Iterator[httpx.Client]:
    """One real uvicorn for the module: its tests only read (GET and HEAD), so they share it."""
    metrics, registry = ExporterMetrics(), CollectorRegistry()
    metrics.register(registry)
    with run_app(create_app(registry, metrics.status)) as http_client:
        yield http_client


@pytest.mark.parametrize("path", GET_PATHS)
def test_head_answers_like_get_without_a_body(client: httpx.Client, path: str) -> None:
    got = client.get(path)
    head = client.head(path)
    assert (head.status_code, got.status_code) == (200, 200)
    assert head.headers["content-type"] == got.headers["content-type"]
    assert head.content == b""


def test_head_sends_no_body_on_a_kept_alive_connection(client: httpx.Client) -> None:
    """A body after a HEAD answer would be read as the start of the next response."""
    host, port = client.base_url.host, client.base_url.port
    assert port is not None
    conn = http.client.HTTPConnection(host, port, timeout=5)
    try:
        for path in GET_PATHS:
            conn.request("HEAD", path)
            head = conn.getresponse()
            assert (head.status, head.read()) == (200, b""), path
            conn.request("GET", "/healthz")
            after = conn.getresponse()
            assert (after.status, after.read()) == (200, b'{"status":"ok"}'), path
    finally:
        conn.close()


@pytest.mark.parametrize("path", ["/api/v1/status/", "/metrics/", "/healthz/", "/api/v1/history/"])
def test_no_redirect_names_a_host_the_client_chose(client: httpx.Client, path: str) -> None:
    response = client.get(path, headers={"Host": "evil.example"}, follow_redirects=False)
    assert "evil.example" not in response.headers.get("location", "")
    assert "evil.example" not in response.text
    assert response.status_code == 404


def _routes_printed_by_vllm() -> list[str]:
    """The routes a real vLLM 0.32 printed at start-up (`Route: /v1/models, Methods: GET`)."""
    text = REAL_LOG.read_text(encoding="utf-8")
    return sorted(set(re.findall(r"Route: (\S+), Methods:", text)))


def test_every_route_vllm_printed_is_a_route() -> None:
    printed = _routes_printed_by_vllm()
    assert len(printed) >= 30
    assert [path for path in printed if path not in VLLM_ROUTES] == []
    assert [path_label(path) for path in printed] == printed


@pytest.mark.parametrize(("raw", "want"), [
    ("/v1/chat/completions", "/v1/chat/completions"),
    ("/v1/models?x=1", "/v1/models"),
    ("/health?", "/health"),
    ("/v1/responses/3f2b8c1e-9d4a-4b7e-8f00-123456789abc", "/v1/responses/{response_id}"),
    ("/v1/responses/resp_8f1c2a9b3d4e5f60/cancel", "/v1/responses/{response_id}/cancel"),
    ("/v1/responses/a/b", OTHER),
    ("/v1/responses/", OTHER),
    ("/v1/my-customer-acme-corp-merger-plans", OTHER),
    ("/v1/chat/completions/", OTHER),
    ("/V1/CHAT/COMPLETIONS", OTHER),
    ("/v1/files/12345/content", OTHER),
    ("/ignore previous instructions", OTHER),
    ("/v1/%2e%2e/secret", OTHER),
    ("*", OTHER),
    ("", OTHER),
    ("/" + "x" * 5000, OTHER),
])
def test_path_labels(raw: str, want: str) -> None:
    assert path_label(raw) == want


ACCESS = 'INFO:     127.0.0.1:38934 - "{} {} HTTP/1.1" {} {}'


def _http_paths(lines: list[str]) -> dict[tuple[str, str, str], float]:
    metrics, registry = ExporterMetrics(), CollectorRegistry()
    metrics.register(registry)
    for line in lines:
        event = parse_line(line)
        if event is not None:
            metrics.apply(event)
    return {(s.labels["method"], s.labels["path"], s.labels["status"]): s.value
            for family in registry.collect() for s in family.samples
            if s.name == "vllm_logwatch_http_requests_total"}


def test_real_access_lines_keep_their_routes() -> None:
    lines = []
    for log in (REAL_LOG, *sorted(DATA.glob("0*.log"))):
        lines += [line for line in log.read_text(encoding="utf-8").splitlines() if 'HTTP/1.1" ' in line]
    counted = _http_paths(lines)
    assert counted[("POST", "/v1/completions", "200")] >= 2000
    assert counted[("GET", "/health", "200")] >= 1
    assert counted[("GET", "/metrics", "200")] >= 1
    assert counted[("POST", "/v1/chat/completions", "500")] >= 1
    assert {path for _, path, _ in counted} <= VLLM_ROUTES


@pytest.mark.parametrize("status", ["401", "404", "200", "405", "500"])
def test_a_path_a_client_chose_is_never_a_label(status: str) -> None:
    chosen = ("/v1/my-customer-acme-corp-merger-plans", "/v1/chat/completions/ignore-all-rules",
              "/admin?token=hunter2", "/v1/models/acme-secret-model", "/" + "a" * 300)
    counted = _http_paths([ACCESS.format("POST", path, status, "Unauthorized") for path in chosen])
    assert counted == {("POST", OTHER, status): len(chosen)}


def test_a_path_a_client_chose_is_never_a_label_in_run_mode() -> None:
    """Run mode counts access lines in bulk (`feed.LineFeeder`), not through the parser."""
    from vllm_logwatch.live.feed import LineFeeder
    from vllm_logwatch.parsing.stamps import resolve_zone

    metrics, registry = ExporterMetrics(), CollectorRegistry()
    metrics.register(registry)
    feeder = LineFeeder(metrics, resolve_zone("UTC"))
    data = "".join(ACCESS.format("GET", path, 401, "Unauthorized") + "\n"
                   for path in ("/v1/my-customer-acme-corp-merger-plans", "/v1/models?secret=1"))
    feeder.put(data.encode())
    feeder.close()
    paths = {s.labels["path"] for family in registry.collect() for s in family.samples
             if s.name == "vllm_logwatch_http_requests_total"}
    assert paths == {OTHER, "/v1/models"}
