"""The dashboard's source variables (namespace, pod, container, script) against a real Prometheus.

Two real `logwatch watch` exporters follow the real CPU log: one whose series carry a pod's labels
(namespace=vllm, pod=vllm-0, container=vllm: set with --label on one followed file, as the pods
layout sets them per container), one with none (a host's plain log). A real Prometheus scrapes both.
Every dashboard query, with the variables as Grafana sends them:

* at "All" (.*), returns the series of both: a series without the labels matches .* too;
* with the pod selected, returns that pod's series alone (but Prometheus' own `up`, a target's
  series: both targets).

The variable queries list the pod's labels.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from support import poll_until, prometheus_binary, run_watch, serve_prometheus
from test_grafana import (
    _LABEL_VALUES,
    CPU_LOG,
    RUN_MODE_ONLY,
    SOURCE_VARIABLES,
    load_dashboard,
    metric_names,
    substitute,
    targets,
    variable_queries,
)

pytestmark = [pytest.mark.timeout(90), pytest.mark.prometheus]

POD = {"namespace": "vllm", "pod": "vllm-0", "container": "vllm"}


def test_source_variables_select_a_pod_and_all_keeps_unlabelled_series(tmp_path: Path) -> None:
    prometheus_binary()  # skip (or fail in CI) before starting anything
    for name in ("pod", "host"):
        (tmp_path / name).mkdir()
        shutil.copy(CPU_LOG, tmp_path / name / CPU_LOG.name)
    labels = [arg for key, value in POD.items() for arg in ("--label", f"{key}={value}")]
    with run_watch(tmp_path / "pod" / CPU_LOG.name, "--from-start", *labels, log_dir=tmp_path) as pod, \
            run_watch(tmp_path / "host" / CPU_LOG.name, "--from-start", log_dir=tmp_path) as host:
        config = {"global": {"scrape_interval": "500ms", "scrape_timeout": "500ms"}, "scrape_configs": [
            {"job_name": "vllm-logwatch", "static_configs": [{"targets": [pod.address, host.address]}]}]}
        path = tmp_path / "prometheus.yml"
        path.write_text(yaml.safe_dump(config), encoding="utf-8")
        with serve_prometheus(path, tmp_path) as prom:
            def read_by_both() -> bool:  # and scraped twice since (a rate needs two samples of each)
                found = prom.query("vllm_logwatch_requests_running")
                twice = prom.query('count_over_time(vllm_logwatch_requests_running[1m]) >= 3')
                return ({r["metric"]["instance"] for r in found} == {pod.address, host.address}
                        == {r["metric"]["instance"] for r in twice})

            poll_until(read_by_both, 60, "Prometheus to scrape both exporters' stats")
            both = f"({pod.address}|{host.address})".replace(".", "\\\\.")
            common = {"job": "vllm-logwatch", "instance": both, "model_name": ".*", "engine": ".*",
                      "__rate_interval": "1m", "__interval": "1m", "__range": "5m", "gpu_hour_cost": "2"}
            every = {**common, **dict.fromkeys(SOURCE_VARIABLES, ".*")}
            one_pod = {**common, **POD, "script": ".*"}

            def instances(expr: str, values: dict[str, str]) -> set[str]:
                result: list[dict[str, Any]] = prom.query(substitute(expr, values))
                return {r["metric"].get("instance", "?") for r in result}

            checked = 0
            for title, ref, expr in targets(load_dashboard()):
                if metric_names(expr) <= RUN_MODE_ONLY:
                    continue  # logwatch run's series: neither watch has them
                at_all = instances(expr, every)
                if not at_all:
                    continue  # a panel for lines the CPU log lacks (spec decode, KV transfers, ...)
                if "?" in at_all:
                    continue  # summed over the instances: no label tells the two apart
                assert at_all == {pod.address, host.address}, (title, ref, at_all)
                expected = at_all if metric_names(expr) == {"up"} else {pod.address}
                assert instances(expr, one_pod) == expected, (title, ref)
                checked += 1
            assert checked >= 15, checked  # 18 panels with per-instance data from the CPU log
            listed = {}
            for name, query in variable_queries(load_dashboard()).items():
                match = _LABEL_VALUES.match(substitute(query, every))
                assert match is not None
                selector, label = match.groups()
                body = prom.client.get(f"/api/v1/label/{label}/values", params={"match[]": selector}).json()
                listed[name] = set(body["data"])
    assert {name: listed[name] for name in SOURCE_VARIABLES} == {
        "namespace": {"vllm"}, "pod": {"vllm-0"}, "container": {"vllm"}, "script": set()}
