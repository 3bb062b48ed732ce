"""docs/api.md names every reason the code can put on a DGLJob, a condition's reason or an
Event's, read from the code (``REASON_* = "..."`` constants, and the literal reasons given to
``announce`` and ``event``), and every field of the CRD's status schema (each top-level field
in the status table, each of an object's fields in its row): never from a hand-written list."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
API = REPO / "docs" / "api.md"
# the packages whose reasons reach a DGLJob: the operator's conditions and Events, and the
# Events dglrun asks for in its report
SOURCES = ("controller", "launcher")
CRD = REPO / "charts" / "dgl-operator" / "crds" / "qihoo.net_dgljobs.yaml"
REASON_NAME = re.compile(r"^REASON_[A-Z0-9_]+$")
EMITTERS = {"announce", "event"}  # Plan.announce(type, reason, message), Progress.event(...)


def reasons_in(path: Path) -> Iterator[tuple[str, int]]:
    """``(reason, line)`` for each reason ``path`` defines or gives an Event literally."""
    tree = ast.parse(path.read_text(), str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
            names = [t.id for t in node.targets if isinstance(t, ast.Name)]
            if any(REASON_NAME.match(n) for n in names) and isinstance(node.value.value, str):
                yield node.value.value, node.lineno
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in EMITTERS
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
        ):
            yield node.args[1].value, node.lineno


def code_reasons(root: Path = REPO) -> dict[str, str]:
    """``reason -> where`` (the first place that names it) over :data:`SOURCES`."""
    found: dict[str, str] = {}
    for package in SOURCES:
        for path in sorted((root / package).rglob("*.py")):
            for reason, line in reasons_in(path):
                found.setdefault(reason, f"{path.relative_to(root)}:{line}")
    return found


def undocumented(reasons: dict[str, str], doc: str) -> list[str]:
    named = set(re.findall(r"`([A-Za-z]+)`", doc))
    return [f"{r} ({where})" for r, where in sorted(reasons.items()) if r not in named]


def test_every_reason_the_code_gives_is_in_the_api_reference() -> None:
    reasons = code_reasons()
    assert len(reasons) > 40, sorted(reasons)  # (the reading found them)
    missing = undocumented(reasons, API.read_text())
    assert not missing, "docs/api.md does not name these reasons: " + ", ".join(missing)


def test_a_reason_the_reference_lacks_is_named_with_where_the_code_gives_it(
    tmp_path: Path,
) -> None:
    package = tmp_path / "controller"
    package.mkdir()
    (package / "x.py").write_text(
        'REASON_NEW = "BrandNew"\n'
        "def f(plan):\n"
        '    plan.announce("Warning", "AlsoNew", "m")\n'
        '    plan.announce("Normal", f"DGLJob{1}", "m")  # (not a literal: not read)\n'
    )
    (tmp_path / "launcher").mkdir()
    reasons = code_reasons(tmp_path)
    assert reasons == {"BrandNew": "controller/x.py:1", "AlsoNew": "controller/x.py:3"}
    assert undocumented(reasons, "reasons: `AlsoNew`") == ["BrandNew (controller/x.py:1)"]


def status_schema(crd: dict[str, Any]) -> dict[str, Any]:
    version = crd["spec"]["versions"][0]
    return dict(version["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"])


def status_rows(doc: str) -> dict[str, str]:
    """The status table of api.md: ``field -> its row``, for each backticked field of a row's
    first cell (``memory.<partition|train>`` is ``memory``)."""
    section = re.split(r"^## status$", doc, maxsplit=1, flags=re.M)[1].split("\n### ", 1)[0]
    rows: dict[str, str] = {}
    for line in section.splitlines():
        cells = line.split("|")
        if len(cells) > 2:
            for name in re.findall(r"`([A-Za-z]+)", cells[1]):
                rows[name] = line
    return rows


def undocumented_status(schema: dict[str, Any], doc: str) -> list[str]:
    rows = status_rows(doc)
    missing = [f"status.{k}" for k in schema if k not in rows]
    for key, prop in schema.items():
        named = set(re.findall(r"`([A-Za-z]+)`", rows.get(key, "")))
        missing += [f"status.{key}.{f}" for f in prop.get("properties") or {} if f not in named]
    return missing


def test_every_status_field_of_the_crd_is_in_the_api_reference() -> None:
    schema = status_schema(yaml.safe_load(CRD.read_text()))
    assert {"elastic", "progressDetail", "memory"} <= set(schema)  # (the reading found them)
    missing = undocumented_status(schema, API.read_text())
    assert not missing, "docs/api.md's status table lacks: " + ", ".join(missing)


def test_a_status_field_the_reference_lacks_is_named() -> None:
    schema: dict[str, Any] = {
        "elastic": {"properties": {"workers": {}, "partitioned": {}}},
        "resume": {"properties": {"epoch": {}}},
        "brandNew": {},
    }
    doc = (
        "## status\n\n| field | meaning |\n| --- | --- |\n"
        "| `elastic` | `workers` (how many) |\n| `resume` | `epoch` |\n\n### Conditions\n"
    )
    assert undocumented_status(schema, doc) == ["status.brandNew", "status.elastic.partitioned"]
