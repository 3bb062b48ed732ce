"""The Grafana dashboard: structure, variables, PromQL syntax and metric names."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from tests.prometheus.promql import (
    DASHBOARD,
    GRAFANA_BUILTINS,
    dashboard_queries,
    data_panels,
    load_dashboard,
    metric_names,
    sample_names,
    static_exposition,
    substitute,
    variables_used,
)

DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
# Values the tests give the dashboard's variables.
VARIABLES = {"datasource": "prometheus", "job": ".*", "namespace": ".*", "window": "3600"}


@pytest.fixture(scope="module")
def dashboard() -> dict[str, Any]:
    return load_dashboard()


def test_parses_as_a_grafana_dashboard(dashboard: dict[str, Any]) -> None:
    assert json.loads(DASHBOARD.read_text()) == dashboard
    assert dashboard["uid"] == "dgl-operator" and dashboard["title"]
    assert 36 <= dashboard["schemaVersion"] <= 41
    assert dashboard.get("id") is None  # Grafana assigns it; a fixed id clashes on import
    assert dashboard["panels"]


def test_templating(dashboard: dict[str, Any]) -> None:
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert set(variables) == set(VARIABLES)
    ds = variables["datasource"]
    assert ds["type"] == "datasource" and ds["query"] == "prometheus"
    ns = variables["namespace"]
    assert ns["type"] == "query" and ns["datasource"] == DATASOURCE
    assert ns["includeAll"] and ns["multi"] and ns["allValue"] == ".*"
    assert "namespace" in ns["query"]["query"]
    window = variables["window"]
    assert all(o["value"].isdigit() for o in window["options"]), "window is in seconds"


def test_every_panel_has_a_datasource_and_targets(dashboard: dict[str, Any]) -> None:
    panels = list(data_panels(dashboard))
    assert len(panels) >= 15
    for panel in panels:
        title = panel.get("title")
        assert title, panel
        assert panel.get("datasource") == DATASOURCE, title
        targets = panel.get("targets") or []
        assert targets, f"panel {title!r} has no target"
        assert len({t["refId"] for t in targets}) == len(targets), title
        for t in targets:
            assert t.get("expr", "").strip(), f"panel {title!r}: empty expression"
            assert t.get("datasource") == DATASOURCE, title
            assert t.get("legendFormat"), title
    for row in (p for p in dashboard["panels"] if p.get("type") == "row"):
        assert not row.get("targets"), "rows group panels; they do not query"


def test_layout(dashboard: dict[str, Any]) -> None:
    ids = [p["id"] for p in dashboard["panels"]]
    ids += [p["id"] for r in dashboard["panels"] for p in r.get("panels") or []]
    assert len(ids) == len(set(ids)), "panel ids must be unique"
    cells: set[tuple[int, int]] = set()
    for panel in dashboard["panels"]:
        g = panel["gridPos"]
        assert g["x"] >= 0 and g["x"] + g["w"] <= 24 and g["h"] > 0, panel["title"]
        mine = {
            (x, y) for x in range(g["x"], g["x"] + g["w"]) for y in range(g["y"], g["y"] + g["h"])
        }
        assert not cells & mine, f"panel {panel['title']!r} overlaps another"
        cells |= mine


def test_panels_cover_the_brief(dashboard: dict[str, Any]) -> None:
    """Jobs, failure reasons, phase durations, reconciles, latency, queue, workers, leader,
    API requests: each has a panel querying its metric."""
    used = {
        name
        for _, expr in dashboard_queries(dashboard)
        for name in metric_names(substitute(expr, VARIABLES))
    }
    exported = {
        family.name
        for family in text_string_to_metric_families(static_exposition())
        if not family.name.endswith("_created")
    }
    for family in exported:
        assert any(n == family or n.startswith(family + "_") for n in used), (
            f"no panel shows {family}"
        )
    exprs = " ".join(e for _, e in dashboard_queries(dashboard))
    for grouping in ("by (reason)", "by (result)", "by (verb)", "by (code)", "histogram_quantile"):
        assert grouping in exprs, grouping


def test_every_metric_in_the_dashboard_is_exported(dashboard: dict[str, Any]) -> None:
    known = sample_names(static_exposition())
    for where, expr in dashboard_queries(dashboard):
        used = metric_names(substitute(expr, VARIABLES))
        assert used, f"{where}: no metric in {expr!r}"
        assert used <= known, f"{where} uses metrics the operator does not export: {used - known}"


def test_variables_are_defined(dashboard: dict[str, Any]) -> None:
    defined = {v["name"] for v in dashboard["templating"]["list"]} | set(GRAFANA_BUILTINS)
    for where, expr in dashboard_queries(dashboard):
        assert variables_used(expr) <= defined, where
    for panel in data_panels(dashboard):
        assert variables_used(panel["title"]) <= defined, panel["title"]


def test_expressions_parse(dashboard: dict[str, Any], promtool: Path, tmp_path: Path) -> None:
    """promtool parses every expression (variables expanded) as a recording rule."""
    queries = list(dashboard_queries(dashboard))
    rules = {
        "groups": [
            {
                "name": "dashboard",
                "rules": [
                    {"record": f"dashboard:query:{i}", "expr": substitute(expr, VARIABLES)}
                    for i, (_, expr) in enumerate(queries)
                ],
            }
        ]
    }
    path = tmp_path / "dashboard-queries.yaml"
    path.write_text(yaml.safe_dump(rules))
    out = subprocess.run(
        [str(promtool), "check", "rules", str(path)], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stdout + out.stderr
