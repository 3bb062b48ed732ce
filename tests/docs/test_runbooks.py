"""Every alert the chart ships has its runbook in docs/operations.md ("Alerts: what each means
and what to do", a section named after it), and every runbook there is an alert's."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
RULES = REPO / "charts" / "dgl-operator" / "files" / "prometheus-rules.yaml"
OPERATIONS = REPO / "docs" / "operations.md"
HEADING = "## Alerts: what each means and what to do"


def alerts(rules: dict[str, Any]) -> list[str]:
    return [r["alert"] for g in rules["groups"] for r in g["rules"] if "alert" in r]


def runbooks(doc: str) -> list[str]:
    """The ``### `` sections of the alerts' section."""
    section = doc.split(HEADING + "\n", 1)[1] if HEADING in doc else ""
    section = re.split(r"^## ", section, maxsplit=1, flags=re.M)[0]
    return re.findall(r"^### (\S+)$", section, re.M)


def mismatches(names: list[str], books: list[str]) -> list[str]:
    return [f"alert {a} has no runbook" for a in names if a not in books] + [
        f"runbook {b} is no alert's" for b in books if b not in names
    ]


def test_every_alert_has_its_runbook_and_every_runbook_an_alert() -> None:
    names = alerts(yaml.safe_load(RULES.read_text()))
    assert len(names) >= 9  # (the rules were read)
    assert mismatches(names, runbooks(OPERATIONS.read_text())) == []


def test_an_alert_without_a_runbook_and_a_stale_runbook_are_named() -> None:
    rules = {"groups": [{"rules": [{"record": "x"}, {"alert": "A"}, {"alert": "B"}]}]}
    doc = f"{HEADING}\n\n### A\n\ntext\n\n### Gone\n\n## Next\n\n### B\n"
    assert runbooks(doc) == ["A", "Gone"]
    assert mismatches(alerts(rules), runbooks(doc)) == [
        "alert B has no runbook",
        "runbook Gone is no alert's",
    ]
