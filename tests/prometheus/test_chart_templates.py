"""templates/prometheusrule.yaml and templates/dashboard-configmap.yaml, rendered by helm: both
off by default, and when on they carry files/prometheus-rules.yaml and files/dashboard.json
unchanged (one source), with the chart's labels and the configured extra labels."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml

from kubeclient import Obj
from tests.prometheus.promql import DASHBOARD
from tests.support.paths import CHART, RULES
from tests.support.prerequisites import in_ci


@pytest.fixture(scope="module")
def chart() -> Path:
    if not (CHART / "Chart.yaml").exists():
        message = f"{CHART / 'Chart.yaml'} does not exist yet"
        if in_ci():
            pytest.fail(message)
        pytest.skip(message)
    return CHART


def render(helm: Path, chart: Path, *args: str) -> list[Obj]:
    out = subprocess.run(
        [str(helm), "template", "t", str(chart), "--namespace", "monitoring-test", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    return [d for d in yaml.safe_load_all(out.stdout) if d]


def only(docs: list[Obj], kind: str, name_suffix: str = "") -> Obj:
    found = [d for d in docs if d["kind"] == kind and d["metadata"]["name"].endswith(name_suffix)]
    assert len(found) == 1, f"{len(found)} {kind} objects"
    return found[0]


def test_off_by_default(helm: Path, chart: Path) -> None:
    docs = render(helm, chart)
    assert not [d for d in docs if d["kind"] == "PrometheusRule"]
    assert not [
        d for d in docs if d["kind"] == "ConfigMap" and "dashboard" in d["metadata"]["name"]
    ]


def test_prometheus_rule(helm: Path, chart: Path) -> None:
    docs = render(
        helm,
        chart,
        "--set",
        "prometheusRule.enabled=true",
        "--set",
        "prometheusRule.labels.release=kube-prometheus-stack",
        "--set",
        "commonLabels.team=ml",
    )
    rule = only(docs, "PrometheusRule")
    assert rule["apiVersion"] == "monitoring.coreos.com/v1"
    meta = rule["metadata"]
    assert meta["namespace"] == "monitoring-test" and meta["name"].startswith("t")
    labels = meta["labels"]
    assert labels["release"] == "kube-prometheus-stack" and labels["team"] == "ml"
    assert labels["app.kubernetes.io/instance"] == "t"
    assert all(isinstance(v, str) for v in labels.values())
    # The groups are the rules file, alert templates ({{ $labels.x }}) left for Prometheus.
    assert rule["spec"] == yaml.safe_load(RULES.read_text())
    assert "{{ $labels.namespace }}" in json.dumps(rule["spec"])


def test_dashboard_configmap(helm: Path, chart: Path) -> None:
    docs = render(
        helm,
        chart,
        "--set",
        "grafanaDashboard.enabled=true",
        "--set",
        "grafanaDashboard.labels.dashboards=dgl",
    )
    cm = only(docs, "ConfigMap", "-dashboard")
    labels = cm["metadata"]["labels"]
    assert labels["grafana_dashboard"] == "1" and labels["dashboards"] == "dgl"
    assert labels["app.kubernetes.io/instance"] == "t"
    assert cm["metadata"]["namespace"] == "monitoring-test"
    (key,) = cm["data"]
    assert key.endswith(".json")
    assert json.loads(cm["data"][key]) == json.loads(DASHBOARD.read_text())
    assert not [d for d in docs if d["kind"] == "PrometheusRule"]


def test_dashboard_label_values_are_strings(helm: Path, chart: Path) -> None:
    """An unquoted --set value (an int) still renders as a valid label value."""
    docs = render(
        helm,
        chart,
        "--set",
        "grafanaDashboard.enabled=true",
        "--set",
        "grafanaDashboard.labels.grafana_dashboard=1",
    )
    assert only(docs, "ConfigMap", "-dashboard")["metadata"]["labels"]["grafana_dashboard"] == "1"
