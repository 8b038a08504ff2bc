"""Write deploy/kubernetes/prometheusrule.yaml, the Prometheus Operator's form of grafana/alerts.yml
and grafana/recording-rules.yml.

    python tools/prometheus_rule.py           # write it
    python tools/prometheus_rule.py --check   # exit 1 if the committed file is not what this writes

grafana/alerts.yml and grafana/recording-rules.yml stay the one source of the rules (promtool tests
them there: grafana/alerts_test.yml, recording-rules_test.yml); the PrometheusRule carries the same
groups under `spec`, the alerts' then the recording rules' (the dashboard's fleet row reads those), so a
Prometheus run by the Operator loads them with `kubectl apply -k deploy/kubernetes/`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
ALERTS = ROOT / "grafana" / "alerts.yml"
RECORDING = ROOT / "grafana" / "recording-rules.yml"
OUT = ROOT / "deploy" / "kubernetes" / "prometheusrule.yaml"
HEADER = ("# Generated from grafana/alerts.yml and grafana/recording-rules.yml by tools/prometheus_rule.py:\n"
          "# edit the rules there, then run\n"
          "#   python tools/prometheus_rule.py\n"
          "# Your Prometheus must select it: add the label its ruleSelector asks for\n"
          "# (kube-prometheus-stack: `release: <its release name>`).\n")


class _Dumper(yaml.SafeDumper):
    """Multi-line strings (runbooks) as literal blocks, as alerts.yml writes them."""


def _text(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _text)


def prometheus_rule() -> dict[str, Any]:
    groups = [group for path in (ALERTS, RECORDING)
              for group in yaml.safe_load(path.read_text(encoding="utf-8"))["groups"]]
    return {"apiVersion": "monitoring.coreos.com/v1", "kind": "PrometheusRule",
            "metadata": {"name": "vllm-logwatch", "labels": {"app.kubernetes.io/name": "vllm-logwatch"}},
            "spec": {"groups": groups}}


def render() -> str:
    return HEADER + yaml.dump(prometheus_rule(), Dumper=_Dumper, sort_keys=False, width=1000,
                              allow_unicode=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--check", action="store_true", help="compare with the committed file, write nothing")
    args = ap.parse_args(argv)
    text = render()
    if args.check:
        same = OUT.exists() and OUT.read_text(encoding="utf-8") == text
        if not same:
            print(f"{OUT.relative_to(ROOT)} is not what {Path(__file__).name} writes: run it",
                  file=sys.stderr)
        return 0 if same else 1
    OUT.write_text(text, encoding="utf-8")
    print(f"wrote {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
