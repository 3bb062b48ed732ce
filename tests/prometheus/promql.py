"""The chart's monitoring files, and what the tests need to read them: PromQL metric names,
Grafana variables, the operator's exposition."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.metrics import MetricWrapperBase
from prometheus_client.parser import text_string_to_metric_families

from controller.machinery.prom_workqueue import PrometheusWorkqueueMetricsProvider
from controller.metrics import Metrics
from tests.support.paths import CHART, RULES

DASHBOARD = CHART / "files" / "dashboard.json"
ALERT_TESTS = Path(__file__).parent / "alerts_test.yaml"

# -- rules and dashboard ---------------------------------------------------------------------


def load_rules() -> dict[str, Any]:
    rules = yaml.safe_load(RULES.read_text())
    assert isinstance(rules, dict)
    return rules


def rules_of(rules: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for group in rules["groups"]:
        yield from group["rules"]


def recording_rule_names(rules: dict[str, Any]) -> set[str]:
    return {r["record"] for r in rules_of(rules) if "record" in r}


def load_dashboard() -> dict[str, Any]:
    dashboard = json.loads(DASHBOARD.read_text())
    assert isinstance(dashboard, dict)
    return dashboard


def data_panels(dashboard: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every panel that queries, including those inside collapsed rows; rows are layout only."""
    for panel in dashboard["panels"]:
        if panel.get("type") == "row":
            yield from panel.get("panels") or []
        else:
            yield panel


def dashboard_queries(dashboard: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """(where, PromQL with Grafana variables) for every target and query variable."""
    for panel in data_panels(dashboard):
        for t in panel.get("targets") or []:
            yield f"panel {panel['title']!r} target {t.get('refId')}", t["expr"]
    for var in dashboard["templating"]["list"]:
        if var["type"] == "query":
            query = var["query"]["query"] if isinstance(var["query"], dict) else var["query"]
            inner = re.fullmatch(r"label_values\((.*),\s*\w+\)", query)
            yield f"variable ${var['name']}", inner.group(1) if inner else query


# -- Grafana variables -----------------------------------------------------------------------

GRAFANA_BUILTINS = {
    "__rate_interval": "1m",
    "__interval": "15s",
    "__range": "1h",
    "__range_s": "3600",
}
_VARIABLE = re.compile(r"\$\{(\w+)(?::\w+)?\}|\$(\w+)")


def variables_used(expr: str) -> set[str]:
    return {m.group(1) or m.group(2) for m in _VARIABLE.finditer(expr)}


def substitute(expr: str, values: dict[str, str]) -> str:
    """Expand $var, ${var} and ${var:format} the way Grafana would (formats ignored)."""

    def value(m: re.Match[str]) -> str:
        name = m.group(1) or m.group(2)
        if name in values:
            return values[name]
        if name in GRAFANA_BUILTINS:
            return GRAFANA_BUILTINS[name]
        raise KeyError(f"no value for the Grafana variable ${name} in {expr!r}")

    return _VARIABLE.sub(value, expr)


# -- PromQL metric names ---------------------------------------------------------------------

_NOT_METRICS = {
    "and",
    "or",
    "unless",
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
    "offset",
    "bool",
    "inf",
    "nan",
}


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression selects (not functions, labels or keywords)."""
    s = re.sub(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`', '""', expr)
    s = re.sub(r"\{[^}]*\}", " ", s)  # label matchers
    s = re.sub(r"\[[^\]]*\]", " ", s)  # ranges and subqueries
    s = re.sub(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", s)
    s = re.sub(r"\boffset\s+-?\w+", " ", s)
    names = set()
    for m in re.finditer(r"(?<![\w:.$])([a-zA-Z_:][\w:]*)(\s*\()?", s):
        word, call = m.group(1), m.group(2)
        if not call and word.lower() not in _NOT_METRICS:
            names.add(word)
    return names


# -- the operator's exposition ---------------------------------------------------------------


def static_exposition() -> str:
    """The operator's registry (controller.metrics plus the work queue's) with a child of every
    labelled metric, as a live operator exposes it once every kind of event has happened."""
    metrics = Metrics()
    registry: CollectorRegistry = metrics.registry
    provider = PrometheusWorkqueueMetricsProvider(registry)
    for name in dir(provider):
        if name.startswith("new_") and name.endswith("_metric"):
            getattr(provider, name)("dgljob")
    for value in vars(metrics).values():
        if isinstance(value, MetricWrapperBase) and value._labelnames:
            value.labels(*("x" for _ in value._labelnames))
    return generate_latest(registry).decode()


def sample_names(exposition: str) -> set[str]:
    return {
        sample.name
        for family in text_string_to_metric_families(exposition)
        for sample in family.samples
    }
