"""The HTTP app (a real uvicorn), the socket binding, and the no-log-text promise checked against a
real `logwatch watch` process: a prompt planted in every kind of line never appears in any response."""

from __future__ import annotations

import contextlib
import json
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client import CollectorRegistry
from support import ROOT, run_app

from vllm_logwatch.errors import InputError
from vllm_logwatch.exporting.exporter import ExporterMetrics
from vllm_logwatch.parsing.line import parse_line
from vllm_logwatch.web.page import static_files
from vllm_logwatch.web.server import bind_socket, create_app

pytestmark = pytest.mark.timeout(60)

REPO = ROOT
REAL_LOG = REPO / "tests" / "data" / "real-vllm-cpu" / "serve_20261129T192328Z.log"
STATS = [line.rstrip("\n") for line in REAL_LOG.read_text(encoding="utf-8").splitlines()
         if "Avg prompt throughput" in line]
SECRET = "SECRET-PROMPT-7f3a9"
NEEDLE = "7f3a9"  # also catches the secret lower-cased, slugged or percent-decoded


@pytest.fixture(scope="module")
def client() -> Iterator[httpx.Client]:
    """A real uvicorn serving the app over metrics that read one real stats line; one for the module:
    its tests only read."""
    metrics, registry = ExporterMetrics(), CollectorRegistry()
    metrics.register(registry)
    event = parse_line(STATS[0])
    assert event is not None
    metrics.apply(event)
    with run_app(create_app(registry, metrics.status)) as http:
        yield http


def test_metrics_in_prometheus_text_by_default(client: httpx.Client) -> None:
    response = client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    assert 'vllm_logwatch_requests_running{engine="0",model_name="unknown"} 16.0' in response.text
    assert "# EOF" not in response.text


def test_metrics_in_openmetrics_when_asked(client: httpx.Client) -> None:
    response = client.get("/metrics", headers={"Accept": "application/openmetrics-text; version=1.0.0"})
    assert response.headers["content-type"].startswith("application/openmetrics-text")
    assert response.text.endswith("# EOF\n")
    assert "vllm_logwatch_stats_lines_total" in response.text


def test_status_and_health(client: httpx.Client) -> None:
    assert client.get("/healthz").json() == {"status": "ok"}
    status = client.get("/api/v1/status").json()
    assert status["engines"]["0"]["last"]["running"] == 16


def test_health_is_503_once_the_pipeline_died(run_app: Callable[..., Any]) -> None:
    with run_app(create_app(CollectorRegistry(), dict, health=lambda: False)) as http:
        response = http.get("/healthz")
    assert (response.status_code, response.json()) == (503, {"status": "failed"})


def test_no_generated_docs_and_no_other_routes(client: httpx.Client) -> None:
    for path in ("/docs", "/redoc", "/openapi.json", "/index.html", "/metrics/x", "/static", "/static/x.js"):
        assert client.get(path).status_code == 404, path
    assert client.post("/metrics").status_code == 405
    assert client.post("/").status_code == 405


@pytest.mark.integration  # over 0.2 s (a process, or a day of lines): make test, not smoke
def test_a_port_in_use_is_a_one_line_error() -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        busy_message = rf"^cannot listen on http://127\.0\.0\.1:{port}: address already "
        with pytest.raises(InputError, match=busy_message):
            bind_socket("127.0.0.1", port)
        result = subprocess.run(
            [sys.executable, "-m", "vllm_logwatch", "watch", str(REPO), "--listen", "127.0.0.1", "--port",
             str(port)], capture_output=True, text=True, timeout=30, check=False)
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith(f"logwatch watch: cannot listen on http://127.0.0.1:{port}: address")


def test_docs_metric_table_matches_the_catalogue() -> None:
    result = subprocess.run([sys.executable, str(REPO / "tools" / "metrics_table.py"), "--check",
                             str(REPO / "docs" / "metrics.md")], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


def test_metrics_table_checks_docs_metrics_md_by_default() -> None:
    """`--check` with no file checks docs/metrics.md, the page that holds the table."""
    result = subprocess.run([sys.executable, str(REPO / "tools" / "metrics_table.py"), "--check"],
                            capture_output=True, text=True, check=False, cwd=REPO / "tests")
    assert result.returncode == 0, result.stdout + result.stderr


# -- no raw log text in any response -----------------------------------------------------------------

PLANTED = [
    # vLLM's request log (--enable-log-requests) prints the prompt itself
    f"(APIServer pid=29214) INFO 11-29 19:24:01 [logger.py:39] Received request cmpl-x-0: prompt: "
    f"'{SECRET} tell me a story', params: SamplingParams(n=1, temperature=0.7), prompt_token_ids: [1, 2]",
    f"(APIServer pid=29214) WARNING 11-29 19:24:01 [serving_chat.py:200] Chat template error for '{SECRET}'",
    f"(APIServer pid=29214) ERROR 11-29 19:24:01 [serving_chat.py:210] Error in request {SECRET}: "
    "out of memory",
    f'INFO:     127.0.0.1:39134 - "GET /v1/models?q={SECRET} HTTP/1.1" 200 OK',
    f'INFO:     127.0.0.1:39134 - "POST /v1/completions/{SECRET}%20tell%20me HTTP/1.1" 404 Not Found',
    f'INFO:     127.0.0.1:39134 - "GET /v1/{SECRET}-with%27quote HTTP/1.1" 404 Not Found',
    f"{STATS[3]}, {SECRET} hit rate: 5.0%, {SECRET}: 7",  # unknown stats field names
    f"(APIServer pid=29214) INFO 11-29 19:24:02 [loggers.py:335] Engine 000: Avg prompt throughput: {SECRET}",
    json.dumps({"message": f"Received request {SECRET}", "levelname": "WARNING"}),
    f"Traceback (most recent call last): {SECRET}",
    STATS[4],
]

# Leaks found and fixed: a prompt quoting the version banner, and a 404 path (what a client typed).
KNOWN_LEAKS = [
    pytest.param(
        f"(APIServer pid=29214) INFO 11-29 19:24:01 [logger.py:39] Received request cmpl-y-0: prompt: "
        f"'vLLM server version {SECRET}, serving model x', params: SamplingParams(n=1)",
        id="prompt-read-as-version-banner"),
    pytest.param(
        f'INFO:     127.0.0.1:39134 - "GET /v1/{SECRET} HTTP/1.1" 404 Not Found',
        id="bare-word-404-path"),
]


@contextlib.contextmanager
def _watching(tmp_path: Path, lines: list[str], logwatch_watch: Callable[..., Any],
              poll_until: Callable[..., Any]) -> Iterator[Any]:
    folder = tmp_path / "logs"
    folder.mkdir()
    log = folder / "serve_20261129_192328.log"
    log.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    with logwatch_watch(folder, "--from-start") as watch:
        poll_until(lambda: watch.status()["pipeline"]["lines_applied"] == len(lines), 15,
                   "every planted line")
        yield watch


def _bodies(watch: Any) -> dict[str, str]:
    """Every route of the app (the page, each static file, the history from its start and from a
    `since`), in both exposition formats, and a few that do not exist."""
    app = create_app(CollectorRegistry(), dict)
    paths = sorted({getattr(route, "path", "") for route in app.routes if hasattr(route, "methods")})
    assert paths == ["/", "/api/v1/history", "/api/v1/status", "/healthz", "/metrics", "/static/{name}"]
    paths = [p for p in paths if "{" not in p] + [f"/static/{name}" for name in static_files()]
    bodies = {path: watch.get(path).text for path in paths}
    assert '<tr data-engine="0"' in bodies["/"], "the page shows the engine"
    assert '"engines":{"0":{"time":[' in bodies["/api/v1/history"], "the history has its points"
    bodies["/metrics openmetrics"] = watch.get(
        "/metrics", headers={"Accept": "application/openmetrics-text; version=1.0.0"}).text
    bodies["/api/v1/history?since=0"] = watch.get("/api/v1/history", params={"since": "0"}).text
    for probe in (f"/{SECRET}", f"/metrics/{SECRET}", f"/api/v1/status?q={SECRET}",
                  f"/api/v1/history?since={SECRET}", f"/static/{SECRET}", f"/?q={SECRET}"):
        response = watch.get(probe)
        bodies[probe] = f"{response.status_code} {response.headers} {response.text}"
    return bodies


@pytest.mark.integration  # over 0.2 s (a process, or a day of lines): make test, not smoke
def test_no_planted_prompt_in_any_response(
    tmp_path: Path, logwatch_watch: Callable[..., Any], poll_until: Callable[..., Any]
) -> None:
    with _watching(tmp_path, PLANTED, logwatch_watch, poll_until) as watch:
        bodies = _bodies(watch)
        samples = watch.samples()
    # The lines were read and counted, not ignored:
    assert samples[("vllm_logwatch_log_messages_total", frozenset({("level", "ERROR")}))] >= 1
    assert samples[("vllm_logwatch_parse_errors_total", frozenset({("what", "stats")}))] == 1
    assert samples[("vllm_logwatch_unknown_fields_total", frozenset())] == 2
    assert ("vllm_logwatch_http_requests_total",
            frozenset({("method", "POST"), ("path", "{other}"), ("status", "404")})) in samples
    for where, body in bodies.items():
        assert NEEDLE not in body.lower(), f"planted text in {where}"
    assert NEEDLE not in watch.stderr().lower(), "nor in the exporter's own log"


@pytest.mark.parametrize("line", KNOWN_LEAKS)
def test_known_leaks(
    line: str, tmp_path: Path, logwatch_watch: Callable[..., Any], poll_until: Callable[..., Any]
) -> None:
    with _watching(tmp_path, [line, STATS[0]], logwatch_watch, poll_until) as watch:
        bodies = _bodies(watch)
    for where, body in bodies.items():
        assert NEEDLE not in body.lower(), f"planted text in {where}"


def test_the_servers_own_series_carry_the_exporters_labels() -> None:
    """`--label` is on every series: the HTTP server's counter and the record stream's were without it
    (a pod's invalid requests matched no pod in the dashboard)."""
    from prometheus_client import generate_latest

    from vllm_logwatch.exporting.families import WithLabels
    from vllm_logwatch.live.records import RecordStream

    registry = CollectorRegistry()
    create_app(registry, lambda: {"engines": {}}, labels={"pod": "vllm-0"})
    registry.register(WithLabels(RecordStream("-"), {"pod": "vllm-0"}))
    text = generate_latest(registry).decode()
    for family in ("http_invalid_requests", "records_written", "records_dropped"):
        assert f'vllm_logwatch_{family}_total{{pod="vllm-0"}} ' in text, text
