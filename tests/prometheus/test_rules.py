"""The Prometheus rules file: promtool's checks and unit tests, names, labels and annotations."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.prometheus.promql import (
    ALERT_TESTS,
    load_rules,
    metric_names,
    recording_rule_names,
    rules_of,
    sample_names,
    static_exposition,
)
from tests.support.paths import RULES

SEVERITIES = {"critical", "warning", "info"}


def run(*argv: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=120)


def test_promtool_check_rules(promtool: Path) -> None:
    out = run(promtool, "check", "rules", RULES)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "SUCCESS" in out.stdout


def test_promtool_unit_tests(promtool: Path) -> None:
    out = run(promtool, "test", "rules", ALERT_TESTS)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "SUCCESS" in out.stdout


def test_every_alert_has_a_unit_test_that_fires_it() -> None:
    tests = yaml.safe_load(ALERT_TESTS.read_text())
    fired = {
        case["alertname"]
        for test in tests["tests"]
        for case in test.get("alert_rule_test") or []
        if case.get("exp_alerts")
    }
    quiet = {
        case["alertname"]
        for test in tests["tests"]
        for case in test.get("alert_rule_test") or []
        if not case.get("exp_alerts")
    }
    alerts = {r["alert"] for r in rules_of(load_rules()) if "alert" in r}
    assert alerts - fired == set(), "alerts without a firing case"
    assert alerts - quiet == set(), "alerts without a not-firing case"


def test_every_metric_in_the_rules_is_exported() -> None:
    """Each name is a sample the operator exposes (histograms only as _bucket/_sum/_count)
    or a recording rule of the file."""
    rules = load_rules()
    known = sample_names(static_exposition()) | recording_rule_names(rules)
    for rule in rules_of(rules):
        name = rule.get("record") or rule["alert"]
        used = metric_names(rule["expr"])
        assert used, f"{name}: no metric in {rule['expr']!r}"
        assert used <= known, f"{name} uses metrics the operator does not export: {used - known}"


def test_recording_rules_follow_the_naming_convention() -> None:
    """level:metric:operations, and each is defined before the rules of its group that use it."""
    for group in load_rules()["groups"]:
        defined: set[str] = set()
        for rule in group["rules"]:
            if "record" in rule:
                assert re.fullmatch(r"[a-z_]+:[a-z_]+:[a-z0-9_]+", rule["record"]), rule["record"]
            for name in metric_names(rule["expr"]):
                if ":" in name and name in recording_rule_names({"groups": [group]}):
                    assert name in defined, f"{name} is used before it is recorded"
            if "record" in rule:
                defined.add(rule["record"])


@pytest.mark.parametrize(
    "rule",
    [r for r in rules_of(load_rules()) if "alert" in r],
    ids=lambda r: r["alert"],
)
def test_alert_labels_and_annotations(rule: dict[str, object]) -> None:
    labels = rule.get("labels")
    annotations = rule.get("annotations")
    assert isinstance(labels, dict) and labels.get("severity") in SEVERITIES
    assert isinstance(annotations, dict)
    assert {"summary", "description"} <= set(annotations)
    summary, description = str(annotations["summary"]), str(annotations["description"])
    assert "\n" not in summary and len(summary) <= 100
    assert len(description) > len(summary)
    # Whether the $labels/$value templates expand is checked by alerts_test.yaml, which
    # expects every alert's annotations verbatim.


def test_metric_name_extraction() -> None:
    expr = (
        'round(sum by (namespace, reason) ((a_total{x="y"} and a_created > time() - 3600) or '
        "increase(a_total[1h]))) / on (namespace) group_left() b:c:d offset 5m "
        "+ histogram_quantile(0.99, sum(rate(h_bucket[5m])) by (le)) > bool 1e3"
    )
    assert metric_names(expr) == {"a_total", "a_created", "b:c:d", "h_bucket"}
