"""deploy/kubernetes/: the manifests validate, build, and run the command line logwatch accepts.

* Every manifest passes `kubernetes-validate --strict` (the PyPI package: Kubernetes' own OpenAPI
  schemas, unknown fields rejected). It has no schema for custom resources: for them it prints a
  `WARN ... Couldn't find schema` line and exits 0, so a WARN for any kind but PodMonitor and
  Kustomization fails here (a built-in kind left unchecked), and the PodMonitor is checked against
  the Prometheus Operator's documented API (`monitoring.coreos.com/v1`, `POD_MONITOR` below: the
  fields it has, with the types and patterns of the Operator's CRD for those we set).
* Each kustomization lists every manifest of its folder, and `kubectl kustomize` builds it (skipped
  where kubectl is missing).
* The containers' args are parsed by logwatch's own parser (`vllm_logwatch.options.build_parser`)
  and settings (`config.load_settings`): an option the parser does not know fails the test, naming
  the option (a manifest must not run a command logwatch would refuse).
* The security settings docs/deploy-kubernetes.md describes are the ones set.
* Run for real, their host paths moved under tmp_path: the DaemonSet's args over a kubelet tree (two
  vLLM pods labelled, another container left out by --select), the sidecar's over its tee'd launch
  file; and a real Prometheus through the PodMonitor's relabelings.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from support import ROOT

from vllm_logwatch.config import WatchSettings, load_settings
from vllm_logwatch.options import build_parser

pytestmark = pytest.mark.timeout(120)

KUBE = ROOT / "deploy" / "kubernetes"
FOLDERS = [KUBE, KUBE / "sidecar"]
MANIFESTS = sorted(p for folder in FOLDERS for p in folder.glob("*.yaml"))
NO_SCHEMA = {"PodMonitor", "PrometheusRule", "Kustomization"}
"""Kinds kubernetes-validate has no schema for: the only WARN lines it may print."""

_DURATION = {"type": "string", "pattern": r"^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?"
             r"(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$"}
_STRINGS = {"type": "array", "items": {"type": "string"}}
_ANY: dict[str, Any] = {}
_RELABEL = {
    "type": "object", "additionalProperties": False,
    "properties": {
        "sourceLabels": {"type": "array", "items": {"type": "string", "pattern": r"^[a-zA-Z_]\w*$"}},
        "separator": {"type": "string"}, "targetLabel": {"type": "string"}, "regex": {"type": "string"},
        "modulus": {"type": "integer", "minimum": 0}, "replacement": {"type": "string"},
        "action": {"enum": ["replace", "Replace", "keep", "Keep", "drop", "Drop", "hashmod", "HashMod",
                            "labelmap", "LabelMap", "labeldrop", "LabelDrop", "labelkeep", "LabelKeep",
                            "lowercase", "Lowercase", "uppercase", "Uppercase", "keepequal", "KeepEqual",
                            "dropequal", "DropEqual"]},
    },
}
_SELECTOR = {
    "type": "object", "additionalProperties": False,
    "properties": {
        "matchLabels": {"type": "object", "additionalProperties": {"type": "string"}},
        "matchExpressions": {"type": "array", "items": {
            "type": "object", "required": ["key", "operator"], "additionalProperties": False,
            "properties": {"key": {"type": "string"}, "values": _STRINGS,
                           "operator": {"enum": ["In", "NotIn", "Exists", "DoesNotExist"]}}}},
    },
}
_ENDPOINT_FIELDS = ("authorization", "basicAuth", "bearerTokenSecret", "enableHttp2", "filterRunning",
                    "followRedirects", "honorTimestamps", "noProxy", "oauth2", "params", "proxyConnectHeader",
                    "proxyFromEnvironment", "proxyUrl", "targetPort", "tlsConfig", "trackTimestampsStaleness")
_SPEC_FIELDS = ("attachMetadata", "bodySizeLimit", "convertClassicHistogramsToNHCB", "fallbackScrapeProtocol",
                "keepDroppedTargets", "labelLimit", "labelNameLengthLimit", "labelValueLengthLimit",
                "nativeHistogramBucketLimit", "nativeHistogramMinBucketFactor", "scrapeClass",
                "scrapeClassicHistograms", "scrapeNativeHistograms", "scrapeProtocols", "selectorMechanism",
                "targetLimit")
POD_MONITOR: dict[str, Any] = {
    "type": "object", "required": ["apiVersion", "kind", "metadata", "spec"], "additionalProperties": False,
    "properties": {
        "apiVersion": {"const": "monitoring.coreos.com/v1"}, "kind": {"const": "PodMonitor"},
        "metadata": {"type": "object", "required": ["name"], "properties": {
            "name": {"type": "string", "pattern": r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"},
            "labels": {"type": "object", "additionalProperties": {"type": "string"}}}},
        "spec": {
            "type": "object", "required": ["selector"], "additionalProperties": False,
            "properties": {
                "jobLabel": {"type": "string"}, "podTargetLabels": _STRINGS, "selector": _SELECTOR,
                "sampleLimit": {"type": "integer", "minimum": 0},
                "namespaceSelector": {"type": "object", "additionalProperties": False, "properties": {
                    "any": {"type": "boolean"}, "matchNames": _STRINGS}},
                "podMetricsEndpoints": {"type": "array", "items": {
                    "type": "object", "additionalProperties": False,
                    "properties": {
                        "port": {"type": "string"},
                        "portNumber": {"type": "integer", "minimum": 1, "maximum": 65535},
                        "path": {"type": "string"}, "scheme": {"enum": ["http", "https", "HTTP", "HTTPS"]},
                        "interval": _DURATION, "scrapeTimeout": _DURATION, "honorLabels": {"type": "boolean"},
                        "relabelings": {"type": "array", "items": _RELABEL},
                        "metricRelabelings": {"type": "array", "items": _RELABEL},
                        **dict.fromkeys(_ENDPOINT_FIELDS, _ANY)}}},
                **dict.fromkeys(_SPEC_FIELDS, _ANY),
            },
        },
    },
}
"""The PodMonitor of the Prometheus Operator's API reference (CRD monitoring.coreos.com_podmonitors,
operator 0.93): every field name of `spec` and of a `podMetricsEndpoints` item (an unknown one is an
error, as the API server's structural schema prunes it), and the types of those these manifests use."""

_STRING_MAP = {"type": "object", "additionalProperties": {"type": "string"}}
PROMETHEUS_RULE: dict[str, Any] = {
    "type": "object", "required": ["apiVersion", "kind", "metadata", "spec"], "additionalProperties": False,
    "properties": {
        "apiVersion": {"const": "monitoring.coreos.com/v1"}, "kind": {"const": "PrometheusRule"},
        "metadata": POD_MONITOR["properties"]["metadata"],
        "spec": {"type": "object", "additionalProperties": False, "properties": {"groups": {
            "type": "array", "items": {
                "type": "object", "required": ["name"], "additionalProperties": False,
                "properties": {
                    "name": {"type": "string", "minLength": 1}, "interval": _DURATION, "labels": _STRING_MAP,
                    "limit": {"type": "integer"}, "partial_response_strategy": {"type": "string"},
                    "query_offset": _DURATION,
                    "rules": {"type": "array", "items": {
                        "type": "object", "required": ["expr"], "additionalProperties": False,
                        "properties": {
                            "alert": {"type": "string"}, "record": {"type": "string"},
                            "expr": {"type": ["string", "integer"]}, "for": _DURATION,
                            "keep_firing_for": {**_DURATION, "minLength": 1},
                            "labels": _STRING_MAP, "annotations": _STRING_MAP}}}}}}}},
    },
}
"""The PrometheusRule of the Operator's API reference (CRD monitoring.coreos.com_prometheusrules,
operator 0.93): its groups' and rules' fields."""


def documents(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d]


def by_kind(folder: Path, kind: str) -> list[dict[str, Any]]:
    return [d for p in sorted(folder.glob("*.yaml")) for d in documents(p) if d.get("kind") == kind]


def one(folder: Path, kind: str) -> dict[str, Any]:
    [doc] = by_kind(folder, kind)
    return doc


def kubernetes_validate(*paths: Path, version: str | None = None) -> subprocess.CompletedProcess[str]:
    """`kubernetes-validate --strict` against Kubernetes `version` (default: its newest schemas)."""
    versions = ["-k", version] if version else []
    return subprocess.run([sys.executable, "-m", "kubernetes_validate", "--strict", *versions,
                           *map(str, paths)], capture_output=True, text=True, timeout=60)


OLDEST = {KUBE: "1.25.0", KUBE / "sidecar": "1.29.0"}
"""The oldest Kubernetes each folder's manifests are for (docs/deploy-kubernetes.md): 1.25, the oldest
API kubernetes-validate has; the sidecar example's native sidecar is on by default from 1.29."""


@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: str(p.relative_to(KUBE)))
def test_manifest_validates_strict(path: Path) -> None:
    result = kubernetes_validate(path)
    assert result.returncode == 0, result.stdout + result.stderr
    kinds = {d["kind"] for d in documents(path)}
    for line in result.stdout.splitlines():
        assert not line.startswith(("ERROR", "FATAL")), line
        if line.startswith("WARN"):
            assert any(f"kind {kind} " in line for kind in NO_SCHEMA & kinds), line
    assert result.stdout.count("INFO") == len(kinds - NO_SCHEMA), result.stdout
    oldest = kubernetes_validate(path, version=OLDEST[path.parent])
    assert oldest.returncode == 0 and "ERROR" not in oldest.stdout, oldest.stdout


def test_strict_validation_rejects_a_misspelled_field(tmp_path: Path) -> None:
    """The check above can fail: one typo in the DaemonSet's security context is an ERROR."""
    text = (KUBE / "daemonset.yaml").read_text(encoding="utf-8")
    assert text.count("readOnlyRootFilesystem: true") >= 1
    bad = tmp_path / "daemonset.yaml"
    bad.write_text(text.replace("readOnlyRootFilesystem: true", "readOnlyRootFileSystem: true", 1),
                   encoding="utf-8")
    result = kubernetes_validate(bad)
    assert result.returncode == 1 and "readOnlyRootFileSystem" in result.stdout, result.stdout


@pytest.mark.parametrize("folder", FOLDERS, ids=lambda p: str(p.relative_to(ROOT)))
def test_pod_monitor_follows_the_operator_api(folder: Path) -> None:
    monitor = one(folder, "PodMonitor")
    jsonschema.validate(monitor, POD_MONITOR)
    [endpoint] = monitor["spec"]["podMetricsEndpoints"]
    # Prometheus refuses a timeout longer than the interval.
    assert seconds(endpoint["scrapeTimeout"]) <= seconds(endpoint["interval"]) == 10
    # It selects the pods that serve the port it scrapes.
    [workload] = [d for d in (by_kind(folder, "DaemonSet") + by_kind(folder, "Deployment"))]
    labels = workload["spec"]["template"]["metadata"]["labels"]
    assert monitor["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert endpoint["port"] in {port["name"] for c in containers(workload) for port in c.get("ports", [])}
    # job="vllm-logwatch", which VLLMLogwatchDown (grafana/alerts.yml) and the dashboard expect.
    assert {"targetLabel": "job", "replacement": "vllm-logwatch"} in endpoint["relabelings"]
    assert 'up{job="vllm-logwatch"}' in (ROOT / "grafana" / "alerts.yml").read_text(encoding="utf-8")
    for rule in endpoint["relabelings"]:
        re.compile(rule.get("regex", "(.*)"))
        if rule.get("action", "replace").lower() == "replace":
            assert "targetLabel" in rule, rule


def test_prometheus_rule_is_alerts_yml_for_the_operator() -> None:
    """deploy/kubernetes/prometheusrule.yaml is what tools/prometheus_rule.py writes from
    grafana/alerts.yml and recording-rules.yml (which promtool tests), and follows the Operator's API."""
    check = subprocess.run([sys.executable, str(ROOT / "tools" / "prometheus_rule.py"), "--check"],
                           capture_output=True, text=True, timeout=60)
    assert check.returncode == 0, check.stderr
    rule = one(KUBE, "PrometheusRule")
    jsonschema.validate(rule, PROMETHEUS_RULE)
    alerts, recording = (yaml.safe_load((ROOT / "grafana" / name).read_text(encoding="utf-8"))
                         for name in ("alerts.yml", "recording-rules.yml"))
    assert rule["spec"]["groups"] == alerts["groups"] + recording["groups"]  # the fleet row's rules too
    bad = {**rule, "spec": {"groups": [{"name": "x", "rules": [{"alert": "A", "expr": "up", "for": "2 m"}]}]}}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, PROMETHEUS_RULE)


@pytest.mark.parametrize("change", [
    lambda m: m["spec"].update(podMetricEndpoints=m["spec"].pop("podMetricsEndpoints")),
    lambda m: m["spec"]["podMetricsEndpoints"][0].update(interval="10 s"),
    lambda m: m["spec"]["podMetricsEndpoints"][0]["relabelings"][0].update(action="rename"),
    lambda m: m["spec"].pop("selector"),
], ids=["misspelled-field", "bad-duration", "unknown-action", "no-selector"])
def test_pod_monitor_schema_rejects_mistakes(change: Any) -> None:
    monitor = one(KUBE, "PodMonitor")
    change(monitor)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(monitor, POD_MONITOR)


def seconds(duration: str) -> float:
    match = re.fullmatch(r"(\d+)(ms|s|m)", duration)
    assert match, duration
    return int(match[1]) * {"ms": 0.001, "s": 1, "m": 60}[match[2]]


@pytest.mark.parametrize("folder", FOLDERS, ids=lambda p: str(p.relative_to(ROOT)))
def test_kustomization_lists_every_manifest_of_its_folder(folder: Path) -> None:
    kustomization = yaml.safe_load((folder / "kustomization.yaml").read_text(encoding="utf-8"))
    files = {p.name for p in folder.iterdir() if p.is_file() and p.name != "kustomization.yaml"}
    assert sorted(kustomization["resources"]) == sorted(files)
    # The image tag is the package's version.
    version = re.search(r'^version = "(.+)"', (ROOT / "pyproject.toml").read_text(), re.M)
    assert version and kustomization["images"] == [{"name": "vllm-logwatch", "newTag": version[1]}]


@pytest.mark.parametrize("folder", FOLDERS, ids=lambda p: str(p.relative_to(ROOT)))
def test_kubectl_kustomize_builds(folder: Path, tmp_path: Path) -> None:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl is missing: kustomize build not tried")
    result = subprocess.run([kubectl, "kustomize", str(folder)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    built = [d for d in yaml.safe_load_all(result.stdout) if d]
    names = {(d["kind"], d["metadata"]["name"]) for p in sorted(folder.glob("*.yaml"))
             if p.name != "kustomization.yaml" for d in documents(p)}
    assert {(d["kind"], d["metadata"]["name"]) for d in built} == names
    images = {c["image"] for d in built if d["kind"] in ("DaemonSet", "Deployment") for c in containers(d)}
    assert "vllm-logwatch:0.1.0" in images
    # What kustomize made of them (namespace set, image tag) validates too.
    (tmp_path / "built.yaml").write_text(result.stdout, encoding="utf-8")
    validated = kubernetes_validate(tmp_path / "built.yaml")
    assert validated.returncode == 0 and "ERROR" not in validated.stdout, validated.stdout
    if folder == KUBE:
        namespaces = {d["metadata"].get("namespace") for d in built if d["kind"] != "Namespace"}
        assert namespaces == {"vllm-logwatch"}


def containers(workload: dict[str, Any]) -> list[dict[str, Any]]:
    spec = workload["spec"]["template"]["spec"]
    return [*spec.get("initContainers", []), *spec["containers"]]


def logwatch_args(args: list[str], env: dict[str, str] | None = None) -> WatchSettings:
    """`logwatch ARGS` as logwatch reads it; fails the test on options the parser does not know."""
    assert args[0] == "watch", args
    parser = build_parser("watch")
    [watch] = [a for a in parser._subparsers._group_actions if a.dest == "command"]  # type: ignore[union-attr]
    known = watch.choices["watch"]._option_string_actions  # type: ignore[index]
    unknown = [word for word in args if word.startswith("--") and word.split("=")[0] not in known]
    if unknown:
        pytest.fail(f"logwatch watch has no {', '.join(unknown)}: a manifest runs a command logwatch refuses")
    return load_settings(WatchSettings, vars(parser.parse_args(args)), env or {})


def test_an_option_the_parser_does_not_know_fails_the_test() -> None:
    with pytest.raises(BaseException) as raised:  # a skip (BaseException too) must not pass for a failure
        logwatch_args(["watch", "/var/log/pods", "--no-such-option", "1"])
    assert raised.type is pytest.fail.Exception and "--no-such-option" in str(raised.value), raised


def test_daemonset_runs_a_valid_watch_command() -> None:
    daemonset = one(KUBE, "DaemonSet")
    [container] = daemonset["spec"]["template"]["spec"]["containers"]
    settings = logwatch_args(container["args"])
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    assert settings.target == "/var/log/pods" == mounts["pod-logs"]["mountPath"]
    assert settings.layout == "pods" and settings.select == ["*/*/vllm"]  # namespace/pod/container
    assert settings.state_file == mounts["state"]["mountPath"] + "/state.json"
    assert settings.port == container["ports"][0]["containerPort"] and settings.listen == "0.0.0.0"


def test_sidecar_runs_a_valid_watch_command() -> None:
    deployment = one(KUBE / "sidecar", "Deployment")
    [logwatch] = deployment["spec"]["template"]["spec"]["initContainers"]
    [vllm] = deployment["spec"]["template"]["spec"]["containers"]
    settings = logwatch_args(logwatch["args"])
    shared = {m["name"]: m["mountPath"] for m in vllm["volumeMounts"]}
    assert settings.target.rstrip("/") == shared["logs"]
    # vLLM's output goes to a launch file in that folder, whose name the folder target matches.
    assert f'tee -a "{shared["logs"]}/vllm_$(date +%Y%m%d_%H%M%S).log"' in vllm["args"][0]
    assert settings.layout == "scripts" and settings.pattern == "*.log" and settings.from_start
    assert logwatch["restartPolicy"] == "Always"  # a native sidecar: it runs before vLLM's first line


def test_daemonset_has_least_privilege() -> None:
    """docs/deploy-kubernetes.md, "Privileges": non-root with the group root, read-only mounts, no
    capability but CHOWN in the one-shot init container that hands the state folder over."""
    pod = one(KUBE, "DaemonSet")["spec"]["template"]["spec"]
    security = pod["securityContext"]
    assert security["runAsNonRoot"] is True and security["runAsUser"] != 0
    assert security["supplementalGroups"] == [0] and security["seccompProfile"] == {"type": "RuntimeDefault"}
    assert pod["automountServiceAccountToken"] is False
    # GPU nodes' usual taint, and no other (an empty key with Exists would tolerate every taint)
    assert pod["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["pod-logs"]["hostPath"] == {"path": "/var/log/pods", "type": "Directory"}
    assert volumes["state"]["hostPath"]["type"] == "DirectoryOrCreate"
    [init] = pod["initContainers"]
    [main] = pod["containers"]
    for container in (init, main):
        context = container["securityContext"]
        assert context["allowPrivilegeEscalation"] is False and context["readOnlyRootFilesystem"] is True
        assert context["capabilities"]["drop"] == ["ALL"]
        assert container["resources"]["requests"] and container["resources"]["limits"]
        for mount in container["volumeMounts"]:
            assert mount.get("readOnly", False) == (mount["name"] == "pod-logs")
    assert "add" not in main["securityContext"]["capabilities"]
    assert init["securityContext"]["capabilities"]["add"] == ["CHOWN"]
    state = volumes["state"]["hostPath"]["path"]
    assert init["command"] == ["chown", f"{security['runAsUser']}:{security['runAsGroup']}", state]
    for probe in ("livenessProbe", "readinessProbe"):
        assert main[probe]["httpGet"] == {"path": "/healthz", "port": "metrics"}
    assert main["ports"] == [{"name": "metrics", "containerPort": 9477, "protocol": "TCP"}]
    assert main["resources"] == {"requests": {"cpu": "20m", "memory": "64Mi"},
                                 "limits": {"cpu": "500m", "memory": "256Mi"}}  # as the docs say


def test_sidecar_has_least_privilege() -> None:
    pod = one(KUBE / "sidecar", "Deployment")["spec"]["template"]["spec"]
    [logwatch] = pod["initContainers"]
    context = logwatch["securityContext"]
    assert context["runAsNonRoot"] is True and context["runAsUser"] == 65532
    assert context["allowPrivilegeEscalation"] is False and context["readOnlyRootFilesystem"] is True
    assert context["capabilities"] == {"drop": ["ALL"]}
    assert context["seccompProfile"] == {"type": "RuntimeDefault"}
    assert {m["name"]: m.get("readOnly", False) for m in logwatch["volumeMounts"]} == {
        "logs": True, "logwatch-state": False}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["logs"] == {"name": "logs", "emptyDir": {"sizeLimit": "4Gi"}}
    assert "emptyDir" in volumes["logwatch-state"]


def test_network_policy_lets_only_prometheus_reach_the_port() -> None:
    """docs/deploy-kubernetes.md, "Who can reach it": ingress to the DaemonSet's pods from the
    Prometheus pods of the monitoring namespace, on the metrics port, and from nothing else."""
    policy = one(KUBE, "NetworkPolicy")["spec"]
    labels = one(KUBE, "DaemonSet")["spec"]["template"]["metadata"]["labels"]
    assert policy["podSelector"]["matchLabels"].items() <= labels.items()
    assert policy["policyTypes"] == ["Ingress"]
    [rule] = policy["ingress"]
    namespace = {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}
    assert rule["from"] == [{"namespaceSelector": namespace,
                             "podSelector": {"matchLabels": {"app.kubernetes.io/name": "prometheus"}}}]
    [main] = one(KUBE, "DaemonSet")["spec"]["template"]["spec"]["containers"]
    assert rule["ports"] == [{"port": main["ports"][0]["name"], "protocol": "TCP"}]


def test_service_and_namespace() -> None:
    service = one(KUBE, "Service")
    assert service["spec"]["ports"] == [{"name": "metrics", "port": 9477, "targetPort": "metrics",
                                         "protocol": "TCP"}]
    labels = one(KUBE, "DaemonSet")["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= labels.items()
    kustomization = yaml.safe_load((KUBE / "kustomization.yaml").read_text(encoding="utf-8"))
    namespace = one(KUBE, "Namespace")["metadata"]
    assert namespace["name"] == kustomization["namespace"]
    # hostPath volumes are outside the baseline and restricted Pod Security Standards.
    assert namespace["labels"]["pod-security.kubernetes.io/enforce"] == "privileged"


OPERATOR_TARGET_LABELS = {"namespace": "vllm-logwatch", "pod": "vllm-logwatch-x7k2p", "container": "logwatch",
                          "job": "vllm-logwatch/vllm-logwatch", "endpoint": "metrics"}
"""What the Operator's generated scrape config puts on a PodMonitor target before the PodMonitor's own
relabelings (pkg/prometheus/promcfg.go: namespace, container, pod, job, endpoint, in that order):
here logwatch's own pod."""


def prometheus_relabel(rule: dict[str, Any]) -> dict[str, Any]:
    """A PodMonitor relabeling as Prometheus' relabel_config (the Operator only renames the keys)."""
    names = {"sourceLabels": "source_labels", "targetLabel": "target_label"}
    converted = {names.get(key, key): value for key, value in rule.items()}
    if "action" in converted:
        converted["action"] = converted["action"].lower()
    return converted


def test_pod_monitor_keeps_the_vllm_pods_labels_in_a_real_prometheus(tmp_path: Path) -> None:
    """A real Prometheus scrapes a real `logwatch watch` whose series carry namespace, pod and container
    (set with --label on one followed file, as the pods layout sets them per container), through the
    scrape config the Operator makes of podmonitor.yaml: the series keep the vLLM pod's labels,
    unrenamed; instance is the node, job vllm-logwatch. Without the labeldrop, the same scrape renames
    them to exported_*."""
    from support import run_watch, serve_prometheus

    logs = tmp_path / "logs"
    logs.mkdir()
    [bundled] = (ROOT / "vllm_logwatch" / "data").glob("serve_*.log")
    shutil.copy(bundled, logs / bundled.name)
    vllm_pod = {"namespace": "vllm", "pod": "vllm-0", "container": "vllm"}
    [endpoint] = one(KUBE, "PodMonitor")["spec"]["podMetricsEndpoints"]
    rules = [prometheus_relabel(r) for r in endpoint["relabelings"]]
    without_drop = [r for r in rules if r.get("action") != "labeldrop"]
    assert len(without_drop) == len(rules) - 1
    labels = [arg for key, value in vllm_pod.items() for arg in ("--label", f"{key}={value}")]
    with run_watch(logs / bundled.name, "--from-start", *labels) as watch:
        target = {"targets": [watch.address],
                  "labels": {**OPERATOR_TARGET_LABELS, "__meta_kubernetes_pod_node_name": "gpu-node-1"}}
        config = {"global": {"scrape_interval": "500ms", "scrape_timeout": "500ms"}, "scrape_configs": [
            {"job_name": "podmonitor", "static_configs": [target], "relabel_configs": rules},
            {"job_name": "without-labeldrop", "static_configs": [target], "relabel_configs": without_drop}]}
        path = tmp_path / "prometheus.yml"
        path.write_text(yaml.safe_dump(config), encoding="utf-8")
        with serve_prometheus(path, tmp_path) as prom:
            prom.wait_value('count(up{job="vllm-logwatch", instance="gpu-node-1"} == 1)', 2, timeout=60)
            series = poll_series(prom, 'vllm_logwatch_requests_running{endpoint="metrics"}', 2)
        # The DaemonSet's memory request holds a logwatch following a log (docs: about 50 MB).
        assert watch.rss_bytes() < 64 * 2**20
    kept = [s for s in series if "exported_namespace" not in s]
    renamed = [s for s in series if "exported_namespace" in s]
    assert len(kept) == len(renamed) == 1, series
    assert {k: kept[0].get(k) for k in [*vllm_pod, "instance", "job"]} == {
        **vllm_pod, "instance": "gpu-node-1", "job": "vllm-logwatch"}
    # The failure the labeldrop prevents: the target's labels win, the vLLM pod's are renamed.
    assert {k: renamed[0][k] for k in ("namespace", "pod", "exported_namespace", "exported_pod")} == {
        "namespace": "vllm-logwatch", "pod": "vllm-logwatch-x7k2p", "exported_namespace": "vllm",
        "exported_pod": "vllm-0"}


def poll_series(prom: Any, expr: str, count: int) -> list[dict[str, str]]:
    from support import poll_until

    def check() -> list[dict[str, str]] | None:
        found = [r["metric"] for r in prom.query(expr)]
        return found if len(found) == count else None

    return poll_until(check, 60, f"{count} series of {expr}")


def test_daemonset_command_follows_a_kubelet_tree(tmp_path: Path) -> None:
    """The DaemonSet's own args, its host paths moved under tmp_path, over a kubelet tree: two vLLM pods
    and a container of another name. The vLLM pods' series come with their namespace, pod and
    container; --select leaves the other one out."""
    from support import run_watch

    [bundled] = (ROOT / "vllm_logwatch" / "data").glob("serve_*.log")
    cri = "".join(f"2026-12-01T10:00:{i % 60:02d}.{i:09d}Z stdout F {line}\n"
                  for i, line in enumerate(bundled.read_text(encoding="utf-8").splitlines()))
    pods = tmp_path / "var-log-pods"
    for namespace, pod, container in (("vllm", "vllm-0", "vllm"), ("vllm", "vllm-1", "vllm"),
                                      ("monitoring", "exporter-0", "exporter")):
        folder = pods / f"{namespace}_{pod}_0b7c1f7e-{pod}" / container
        folder.mkdir(parents=True)
        (folder / "0.log").write_text(cri, encoding="utf-8")
    [container] = one(KUBE, "DaemonSet")["spec"]["template"]["spec"]["containers"]
    args = list(container["args"])
    port_at = args.index("--port")
    del args[port_at:port_at + 2]  # run_watch gives it a free port
    moved = {"/var/log/pods": str(pods), "/var/lib/vllm-logwatch/state.json": str(tmp_path / "state.json")}
    args = [moved.get(word, word) for word in args]
    assert args[:2] == ["watch", str(pods)]
    logwatch_args(args)  # fails, naming the option, if the parser does not know one
    with run_watch(args[1], "--from-start", *args[2:]) as watch:
        for pod in ("vllm-0", "vllm-1"):
            watch.wait_sample("vllm_logwatch_stats_lines_total", {
                "namespace": "vllm", "pod": pod, "container": "vllm", "engine": "0",
                "model_name": "tiny-llama"}, expected=lambda v: v > 0, timeout=20)
        pods_seen = {dict(labels).get("pod") for (_, labels) in watch.samples()}
    assert pods_seen == {"vllm-0", "vllm-1", None}, pods_seen
    assert (tmp_path / "state.json").exists()


def test_sidecar_command_follows_the_tee_d_launch_file(tmp_path: Path) -> None:
    """The sidecar's args, /logs and /state moved under tmp_path, over the file vLLM's command tees to
    (vllm_<YYYYmmdd_HHMMSS>.log): one source, script="vllm"."""
    from support import run_watch

    [bundled] = (ROOT / "vllm_logwatch" / "data").glob("serve_*.log")
    logs = tmp_path / "logs"
    logs.mkdir()
    shutil.copy(bundled, logs / "vllm_20261201_100000.log")
    [logwatch] = one(KUBE / "sidecar", "Deployment")["spec"]["template"]["spec"]["initContainers"]
    moved = {"/logs/": f"{logs}/", "/state/state.json": str(tmp_path / "state.json")}
    args = [moved.get(word, word) for word in logwatch["args"]]
    logwatch_args(args)
    with run_watch(args[1], *args[2:]) as watch:  # --from-start is among them
        watch.wait_sample("vllm_logwatch_stats_lines_total", {
            "script": "vllm", "engine": "0", "model_name": "tiny-llama"}, expected=lambda v: v > 0,
            timeout=20)
