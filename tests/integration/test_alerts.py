"""grafana/prometheus.yml, alerts.yml and alerts_test.yml checked by Prometheus' own promtool
(Debian package `prometheus`): the configs load, the rules parse, and the promtool unit tests make
every alert fire when it should and stay silent when it should not.

Without promtool the promtool tests skip, unless LOGWATCH_REQUIRE_PROMETHEUS is set (CI): then fail.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from support import ROOT, required_tool

pytestmark = pytest.mark.timeout(60)

GRAFANA = ROOT / "grafana"
ALERTS = GRAFANA / "alerts.yml"
ALERTS_TEST = GRAFANA / "alerts_test.yml"
RECORDING = GRAFANA / "recording-rules.yml"


def promtool() -> str:
    return required_tool("promtool", "prometheus", "LOGWATCH_REQUIRE_PROMETHEUS")


def run_promtool(*args: str) -> str:
    proc = subprocess.run([promtool(), *args], cwd=GRAFANA, capture_output=True, text=True, timeout=60,
                          check=False)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output
    return output


def rules(path: Path = ALERTS) -> list[dict[str, Any]]:
    groups = yaml.safe_load(path.read_text(encoding="utf-8"))["groups"]
    return [rule for group in groups for rule in group["rules"]]


@pytest.mark.parametrize("config", ["prometheus.yml", "prometheus-federate.yml", "prometheus-https.yml",
                                    "prometheus-agent.yml"])
def test_promtool_check_config(config: str) -> None:
    """The scrape configs load (prometheus.yml: its rule file and its file_sd target files too)."""
    output = run_promtool("check", "config", config)
    assert "SUCCESS" in output
    if config == "prometheus.yml":
        assert "2 rule files found" in output and f"{len(rules())} rules found" in output
        assert f"{len(rules(RECORDING))} rules found" in output


def test_promtool_check_rules() -> None:
    assert f"SUCCESS: {len(rules())} rules found" in run_promtool("check", "rules", "alerts.yml")


def test_promtool_unit_tests_pass() -> None:
    assert "SUCCESS" in run_promtool("test", "rules", "alerts_test.yml")


def test_recording_rules_give_the_per_model_and_fleet_totals() -> None:
    """recording-rules_test.yml: three instances and two models (one instance serving both, one model
    on two engines): per instance and model, per model across instances, the fleet, the top instances."""
    assert f"SUCCESS: {len(rules(RECORDING))} rules found" in run_promtool("check", "rules",
                                                                          "recording-rules.yml")
    assert "SUCCESS" in run_promtool("test", "rules", "recording-rules_test.yml")
    tested = {t["expr"] for case in yaml.safe_load((GRAFANA / "recording-rules_test.yml").read_text(
        encoding="utf-8"))["tests"] for t in case["promql_expr_test"]}
    assert {r["record"] for r in rules(RECORDING) if not r["record"].startswith("instance_")} <= tested


def test_every_alert_is_tested_firing_and_silent() -> None:
    """alerts_test.yml has, for every alert, an evaluation where it fires and one where it does not."""
    tests = yaml.safe_load(ALERTS_TEST.read_text(encoding="utf-8"))
    assert tests["rule_files"] == ["alerts.yml"]
    fires: set[str] = set()
    silent: set[str] = set()
    for case in tests["tests"]:
        for check in case.get("alert_rule_test", []):
            (fires if check.get("exp_alerts") else silent).add(check["alertname"])
    names = {rule["alert"] for rule in rules()}
    assert names - fires == set(), "alerts never tested firing"
    assert names - silent == set(), "alerts never tested silent"
    assert fires | silent <= names


def test_the_issues_alerts_are_there() -> None:
    names = {rule["alert"] for rule in rules()}
    assert {"VLLMEngineStalled", "VLLMKVCacheNearFull", "VLLMWaitingQueueGrowing", "VLLMStatsLinesMissing",
            "VLLMLogwatchDown", "VLLMChildRestarting", "VLLMLogParseErrors",
            "VLLMKVTransferFailures"} <= names


@pytest.mark.parametrize("rule", rules(), ids=lambda r: r["alert"])
def test_alerts_carry_a_runbook(rule: dict[str, Any]) -> None:
    """Runbook style: a one-line summary, a description, numbered steps, and a severity."""
    assert rule["labels"]["severity"] in {"critical", "warning", "info"}
    notes = rule["annotations"]
    assert set(notes) == {"summary", "description", "runbook"}
    # Short once rendered: a source's labels ({{ with $labels.pod }} ...) print only where they are.
    shown = re.sub(r"\{\{ with \$labels\.\w+ \}\}.*?\{\{ end \}\}", "", notes["summary"])
    assert "\n" not in notes["summary"] and len(shown) < 120, shown
    steps = notes["runbook"].splitlines()
    assert len(steps) >= 2 and all(re.match(rf"{i}\. \S", s) for i, s in enumerate(steps, 1)), steps


def test_exporter_down_alert_names_the_scrape_job() -> None:
    """The `up` rule only works if its job is the one prometheus.yml scrapes logwatch with."""
    config = yaml.safe_load((GRAFANA / "prometheus.yml").read_text(encoding="utf-8"))
    jobs = {job["job_name"] for job in config["scrape_configs"]}
    up_jobs = {m for rule in rules() for m in re.findall(r'up\{job="([^"]+)"\}', rule["expr"])}
    assert up_jobs and up_jobs <= jobs


def test_decode_step_threshold_is_the_one_deploy_md_names() -> None:
    """VLLMDecodeStepSlow's threshold is the constant at the end of its expression, as docs/deploy.md
    tells the operator to edit it."""
    [rule] = [r for r in rules() if r["alert"] == "VLLMDecodeStepSlow"]
    match = re.search(r"\)\) > ([0-9.]+)$", rule["expr"].strip())
    assert match is not None, rule["expr"]
    deploy = (ROOT / "docs" / "deploy.md").read_text(encoding="utf-8")
    assert f"`> {match.group(1)}` (seconds" in deploy and f"({match.group(1)} s unless you set it)" in deploy
