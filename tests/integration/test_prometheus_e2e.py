"""A real Prometheus scrapes a real `logwatch watch` every second while the test appends real vLLM log
lines to a fresh launch file; Prometheus' HTTP API must then answer with the values those lines hold.

Needs the `prometheus` binary (Debian package `prometheus`); skipped without it, unless
LOGWATCH_REQUIRE_PROMETHEUS is set (CI), which makes its absence a failure.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from support import ROOT, TESTS

pytestmark = [pytest.mark.prometheus, pytest.mark.timeout(90)]

REAL_LOG = TESTS / "data" / "real-vllm-cpu" / "serve_20261129T192328Z.log"
REAL_LINES = [line + "\n" for line in REAL_LOG.read_bytes().decode("utf-8").split("\n")[:-1]]
_NUMBERS = re.compile(r"Avg generation throughput: ([\d.]+) tokens/s, Running: (\d+) reqs, .*?"
                      r"KV cache usage: ([\d.]+)%")
SERIES = '{job="logwatch", engine="0", model_name="tiny-llama"}'


def _stats_until(count: int) -> tuple[list[str], list[tuple[float, int, float]]]:
    """The log's lines up to its `count`-th stats line, and (gen tok/s, running, KV %) of each."""
    values: list[tuple[float, int, float]] = []
    for end, line in enumerate(REAL_LINES, 1):
        m = _NUMBERS.search(line)
        if m is not None:
            values.append((float(m.group(1)), int(m.group(2)), float(m.group(3))))
            if len(values) == count:
                return REAL_LINES[:end], values
    raise AssertionError(f"fewer than {count} stats lines")


def test_prometheus_scrapes_the_values_of_appended_lines(
    tmp_path: Path, logwatch_watch: Callable[..., Any], prometheus: Callable[..., Any],
) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    launch = logs / f"serve_{datetime.now(UTC):%Y%m%d_%H%M%S}.log"  # a fresh launch file
    with logwatch_watch(logs) as watch, prometheus([watch.address]) as prom:
        first_lines, _ = _stats_until(3)
        all_lines, values = _stats_until(8)
        with open(launch, "a", encoding="utf-8") as log:
            log.write("".join(first_lines))
            log.flush()
            gen, running, kv = values[2]
            prom.wait_value(f"vllm_logwatch_generation_throughput_tokens_per_second{SERIES}", gen)
            # then the server goes on: five more stats lines, with access lines between them
            log.write("".join(all_lines[len(first_lines):]))
        gen, running, kv = values[-1]
        prom.wait_value(f"vllm_logwatch_generation_throughput_tokens_per_second{SERIES}", gen)
        prom.wait_value(f"vllm_logwatch_requests_running{SERIES}", running)
        prom.wait_value(f"vllm_logwatch_kv_cache_usage_ratio{SERIES}", kv / 100)
        # Stats lines are exactly 2 s apart in this log (VLLM_LOG_STATS_INTERVAL=2): every line's
        # throughput counts for 2 s, the first one's too once the second shows the spacing.
        tokens = sum(2.0 * g for g, _, _ in values)
        prom.wait_value(f"vllm_logwatch_generation_tokens_total{SERIES}", tokens, rel=1e-9)
        assert prom.value(f"vllm_logwatch_stats_lines_total{SERIES}") == len(values)
        assert prom.value('vllm_logwatch_server_info{version="0.32.0", model_name="tiny-llama"}') == 1
        assert prom.targets_up()


def test_prometheus_scrapes_watch_over_https_with_basic_auth(
    tmp_path: Path, logwatch_watch: Callable[..., Any],
) -> None:
    """grafana/prometheus-https.yml, pointed at a `logwatch watch --web-config` with a certificate of a
    throw-away CA: `up` is 1 and the values arrive; without credentials, with a wrong password, or in
    plain HTTP nobody gets the metrics."""
    import ssl

    import bcrypt
    import httpx
    import yaml
    from support import make_tls_files, serve_prometheus

    tls = make_tls_files(tmp_path / "tls")
    password = "scrape-password-for-the-test"
    hashed = bcrypt.hashpw(password.encode(), bcrypt.gensalt(4)).decode()
    web = tmp_path / "web.yml"
    web.write_text(f"tls_server_config:\n  cert_file: {tls.server_cert}\n  key_file: {tls.server_key}\n"
                   f"basic_auth_users:\n  prometheus: '{hashed}'\n", encoding="utf-8")
    (tmp_path / "password").write_text(password, encoding="utf-8")
    config = yaml.safe_load((ROOT / "grafana" / "prometheus-https.yml").read_text())
    config["global"].update(scrape_interval="500ms", scrape_timeout="500ms")
    job = config["scrape_configs"][0]
    job["tls_config"]["ca_file"] = str(tls.ca)
    job["basic_auth"]["password_file"] = str(tmp_path / "password")
    logs = tmp_path / "logs"
    logs.mkdir()
    launch = logs / f"serve_{datetime.now(UTC):%Y%m%d_%H%M%S}.log"
    verify = ssl.create_default_context(cafile=tls.ca)
    client = {"verify": verify, "auth": ("prometheus", password)}
    with logwatch_watch(logs, "--web-config", str(web), scheme="https", client_options=client) as watch:
        job["static_configs"] = [{"targets": [watch.address]}]
        folder = tmp_path / "prometheus"
        folder.mkdir()
        (folder / "prometheus.yml").write_text(yaml.safe_dump(config), encoding="utf-8")
        with serve_prometheus(folder / "prometheus.yml", folder) as prom:
            lines, values = _stats_until(3)
            launch.write_text("".join(lines), encoding="utf-8")
            series = '{job="vllm-logwatch", engine="0", model_name="tiny-llama"}'
            prom.wait_value(f"vllm_logwatch_requests_running{series}", values[-1][1])
            prom.wait_value('up{job="vllm-logwatch"}', 1)
        for auth in (None, ("prometheus", "wrong")):
            response = httpx.get(f"https://{watch.address}/metrics", verify=verify, auth=auth, timeout=5)
            assert (response.status_code, response.text) == (401, "Unauthorized\n")
        try:
            plain = httpx.get(f"http://{watch.address}/metrics", auth=client["auth"], timeout=5).text
        except httpx.TransportError:
            plain = ""
        assert "vllm_logwatch" not in plain
        said = watch.stderr()
        assert "TLS (from TLS12, client certificates: NoClientCert), basic auth for 1 user(s)" in said
        assert "serving https://" in said
