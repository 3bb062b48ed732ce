"""e2e/helpers.py's own checks, without a cluster."""

from __future__ import annotations

from typing import Any

import pytest

from e2e.helpers import fresh_namespace


def node(name: str, disk_pressure: str) -> dict[str, Any]:
    condition = {"type": "DiskPressure", "status": disk_pressure, "message": "low on disk"}
    return {"metadata": {"name": name}, "status": {"conditions": [condition]}}


class Nodes:
    """A pytest-kubernetes manager's kubectl that answers ``get nodes`` alone."""

    def __init__(self, *nodes: dict[str, Any]) -> None:
        self.items = list(nodes)
        self.calls: list[list[str]] = []

    def kubectl(self, argv: list[str], as_dict: bool = True) -> Any:
        self.calls.append(argv)
        return {"items": self.items} if argv == ["get", "nodes"] else ""


def test_an_e2e_namespace_is_not_made_while_a_node_is_under_disk_pressure() -> None:
    calm = Nodes(node("n1", "False"))
    names = fresh_namespace(calm)
    assert next(names).startswith("e2e-")
    assert calm.calls[1][:2] == ["create", "namespace"]
    full = Nodes(node("n1", "True"))
    with pytest.raises(pytest.exit.Exception, match="n1: DiskPressure: low on disk"):
        next(fresh_namespace(full))
    assert full.calls == [["get", "nodes"]]  # no namespace made
