"""Which layer may import which: workqueue, podprogram and podcontract use only the standard
library, launcher and kubectl_download only it and those two, kubeclient (the only HTTP code)
knows nothing of caches, informers know nothing of the
controller, and nothing imports the controller."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
STDLIB = set(sys.stdlib_module_names) | {"__future__"}

# package -> (project packages it may import, third-party packages it may import)
ALLOWED: dict[str, tuple[set[str], set[str]]] = {
    "workqueue": (set(), set()),
    "podprogram": (set(), set()),
    # the names the operator and its pods' programs agree on (both sides import them)
    "podcontract": (set(), set()),
    "kubeclient": (set(), {"kubernetes", "urllib3"}),
    "informers": ({"kubeclient"}, {"structlog"}),
    "controller": (
        {"workqueue", "kubeclient", "informers", "podcontract"},
        {"kubernetes", "prometheus_client", "structlog"},
    ),
    "launcher": ({"podprogram", "podcontract"}, set()),
    "watcher_loop": (
        {"kubeclient", "informers", "podprogram", "podcontract"},
        {"kubernetes", "urllib3", "structlog"},
    ),
    "kubectl_download": ({"podprogram", "podcontract"}, set()),
    # the MPI ranks of the ParMETIS modes: the chunked format comes from launcher (stdlib)
    "distpart": ({"launcher", "podcontract"}, {"numpy", "mpi4py", "pandas", "torch", "dgl", "ogb"}),
}


def imports(path: Path) -> set[str]:
    """Top-level module names imported anywhere in the file (module level and in functions)."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.add(node.module.split(".")[0])
    return out


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_layering(package: str) -> None:
    own, third = ALLOWED[package]
    files = sorted((REPO / package).rglob("*.py"))
    assert files, f"{package} has no modules"
    for f in files:
        bad = imports(f) - STDLIB - {package} - own - third
        assert not bad, f"{f.relative_to(REPO)} imports {sorted(bad)}: not allowed in {package}"
