"""A real uvicorn serving the exporter's app with `--web-config`'s TLS and basic auth, built by
`server.http_server` as watch, demo and run build it, on a free loopback port; certificates made
by the test (a throw-away CA)."""

from __future__ import annotations

import contextlib
import socket
import ssl
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import bcrypt
import httpx
import pytest
from prometheus_client import CollectorRegistry
from support import TLSFiles, make_tls_files, poll_until

from vllm_logwatch.exporting.exporter import ExporterMetrics
from vllm_logwatch.web.server import bind_socket, create_app, http_server
from vllm_logwatch.web.webconfig import WebConfig, load_web_config

pytestmark = pytest.mark.timeout(60)

PASSWORD = "correct horse battery staple"
PATHS = ("/metrics", "/healthz", "/api/v1/status", "/api/v1/history", "/", "/static/page.js", "/nothing-here")


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> TLSFiles:
    return make_tls_files(tmp_path_factory.mktemp("tls"))


def web_config(folder: Path, tls: TLSFiles, extra: str = "", users: bool = True) -> WebConfig:
    text = f"tls_server_config:\n  cert_file: {tls.server_cert}\n  key_file: {tls.server_key}\n{extra}"
    if users:
        hashed = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(4)).decode()
        text += f"basic_auth_users:\n  prometheus: '{hashed}'\n"
    path = folder / "web.yml"
    path.write_text(text, encoding="utf-8")
    return load_web_config(str(path))


@contextlib.contextmanager
def serving(web: WebConfig) -> Iterator[int]:

    metrics, registry = ExporterMetrics(), CollectorRegistry()
    metrics.register(registry)
    sock = bind_socket("127.0.0.1", 0)
    server = http_server(create_app(registry, metrics.status, web=web), web)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name="uvicorn-tls", daemon=True)
    thread.start()
    try:
        poll_until(lambda: server.started or not thread.is_alive(), 10, "uvicorn to start")
        assert server.started
        yield sock.getsockname()[1]
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


def client(port: int, tls: TLSFiles, **options: Any) -> httpx.Client:
    verify = ssl.create_default_context(cafile=tls.ca)
    return httpx.Client(base_url=f"https://127.0.0.1:{port}", verify=verify, timeout=5.0, **options)


def test_the_right_password_gets_every_endpoint_over_https(tmp_path: Path, tls: TLSFiles) -> None:
    extra = ("http_server_config:\n  headers:\n    X-Frame-Options: deny\n"
             "    Strict-Transport-Security: max-age=60\n")
    with serving(web_config(tmp_path, tls, extra)) as port, \
            client(port, tls, auth=("prometheus", PASSWORD)) as http:
        for path in PATHS[:-1]:
            response = http.get(path)
            assert response.status_code == 200, path
            assert (response.headers["x-frame-options"], response.headers["strict-transport-security"]) == (
                "deny", "max-age=60"), path
        assert "vllm_logwatch_log_lines_total" in http.get("/metrics").text
        assert http.head("/metrics").status_code == 200
        assert http.get("/nothing-here").status_code == 404


@pytest.mark.parametrize("auth", [None, ("prometheus", "wrong"), ("someone", PASSWORD), ("", "")],
                         ids=["no credentials", "wrong password", "unknown user", "empty"])
def test_no_or_wrong_credentials_get_401_on_every_path(tmp_path: Path, tls: TLSFiles, auth: Any) -> None:
    extra = "http_server_config:\n  headers:\n    X-Frame-Options: sameorigin\n"
    with serving(web_config(tmp_path, tls, extra)) as port, client(port, tls, auth=auth) as http:
        for path in PATHS:
            response = http.get(path)
            assert response.status_code == 401, path
            assert response.headers["www-authenticate"] == "Basic"
            assert response.headers["x-frame-options"] == "sameorigin"
            assert response.text == "Unauthorized\n"
            assert "vllm_logwatch" not in response.text
        assert http.head("/metrics").status_code == 401
        assert http.post("/metrics").status_code == 401


def test_plain_http_to_the_tls_port_gets_no_metrics(tmp_path: Path, tls: TLSFiles) -> None:
    with serving(web_config(tmp_path, tls)) as port:
        with httpx.Client(timeout=5.0) as plain:
            try:
                response = plain.get(f"http://127.0.0.1:{port}/metrics", auth=("prometheus", PASSWORD))
            except httpx.TransportError:
                response = None
            assert response is None or "vllm_logwatch" not in response.text
        with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
            raw.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            received = b""
            with contextlib.suppress(OSError):
                while chunk := raw.recv(65536):
                    received += chunk
        assert b"vllm_logwatch" not in received
        assert not received.startswith(b"HTTP/1.1 200")


def test_an_older_tls_than_min_version_is_refused(tmp_path: Path, tls: TLSFiles) -> None:
    with serving(web_config(tmp_path, tls, "  min_version: TLS13\n", users=False)) as port:
        old = ssl.create_default_context(cafile=tls.ca)
        old.maximum_version = ssl.TLSVersion.TLSv1_2
        with pytest.raises(httpx.ConnectError), httpx.Client(verify=old, timeout=5.0) as http:
            http.get(f"https://127.0.0.1:{port}/healthz")
        with client(port, tls) as http:
            assert http.get("/healthz").status_code == 200


def test_client_certificates_required_and_verified(tmp_path: Path, tls: TLSFiles) -> None:
    extra = f"  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: {tls.ca}\n"
    with serving(web_config(tmp_path, tls, extra, users=False)) as port:
        with client(port, tls) as http, pytest.raises(httpx.TransportError):
            http.get("/healthz")
        signed = ssl.create_default_context(cafile=tls.ca)
        signed.load_cert_chain(tls.client_cert, tls.client_key)
        with httpx.Client(verify=signed, timeout=5.0) as http:
            assert http.get(f"https://127.0.0.1:{port}/healthz").status_code == 200
