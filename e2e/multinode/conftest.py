"""Fixtures of the multi-node e2e session: this machine's cluster of 3 nodes with the
Coscheduling scheduler and Kueue's manager (localcluster/node.py ``up --nodes 3
--scheduler-plugins --kueue``), the operator installed by Helm with ``kueue=true``.

It runs as a pytest session of its own (``pytest e2e/multinode``; ``make test`` runs it after
``pytest tests e2e --ignore=e2e/multinode``): the single-node session and this one both own
10.88.0.1. A running cluster is reused when it has at least 3 Ready nodes and the second
scheduler (``make cluster-up NODES=3 SCHEDULER_PLUGINS=1``); one with fewer nodes fails the
session (skips it outside CI), saying to run ``make cluster-down``. Otherwise the session brings
the cluster up and tears it down at its end.

The fixtures here override e2e/conftest.py's of the same names (``kubeconfig``, ``cluster``,
``operator``, ``namespace``), so a test written for the single-node session runs here as is.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from e2e.helpers import fresh_namespace
from e2e.multinode.helpers import NODES, MultiNode
from localcluster.cluster import ClusterError, k8s_binaries
from localcluster.helm import install_operator
from localcluster.kubectl import Kubectl, KubectlError
from localcluster.node import (
    COSCHEDULER,
    DEFAULT_DIR,
    node_names,
    running,
    schedulers,
)
from tests.support.prerequisites import unavailable

POWERS_OFF = "powers_off_a_node"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", f"{POWERS_OFF}: the test kills a node (runs last: it may stay down)"
    )


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests that power a node off run after all the others (a stable sort keeps the rest in
    file order): a node they power off may stay down for the rest of the session."""
    items.sort(key=lambda item: item.get_closest_marker(POWERS_OFF) is not None)


def _ready_nodes(kubeconfig: Path) -> list[str]:
    try:
        nodes = Kubectl(kubeconfig, timeout=60).json("get", "nodes")["items"]
    except KubectlError:
        return []
    return [
        n["metadata"]["name"]
        for n in nodes
        if any(
            c["type"] == "Ready" and c["status"] == "True"
            for c in n.get("status", {}).get("conditions") or []
        )
    ]


@pytest.fixture(scope="session")
def multinode() -> Iterator[MultiNode]:
    # our kubectl first on PATH: pytest-kubernetes calls `kubectl`
    os.environ["PATH"] = f"{k8s_binaries('kubectl')}:{os.environ['PATH']}"
    kubeconfig = DEFAULT_DIR / "control-plane" / "admin.kubeconfig"
    if running(DEFAULT_DIR):
        ready = _ready_nodes(kubeconfig)
        if len(ready) < NODES or COSCHEDULER not in schedulers(DEFAULT_DIR):
            unavailable(
                f"a cluster with {len(ready)} Ready node(s) and schedulers "
                f"{schedulers(DEFAULT_DIR)} runs from {DEFAULT_DIR}; the multi-node e2e tests "
                f"need {NODES} Ready nodes and {COSCHEDULER}: run `make cluster-down` first"
            )
        yield MultiNode(DEFAULT_DIR, kubeconfig, node_names(DEFAULT_DIR))
        return
    if os.geteuid() != 0:
        unavailable("the local multi-node cluster needs root")
    from localcluster.node import main as node_main

    try:
        if node_main(["up", "--nodes", str(NODES), "--scheduler-plugins", "--kueue"]) != 0:
            unavailable("the local multi-node cluster did not come up (see above)")
    except ClusterError as e:
        unavailable(f"the local multi-node cluster did not come up: {e}")
    try:
        yield MultiNode(DEFAULT_DIR, kubeconfig, node_names(DEFAULT_DIR))
    finally:
        node_main(["down"])


@pytest.fixture(scope="session")
def multinode_kubeconfig(multinode: MultiNode) -> Path:
    return multinode.kubeconfig


@pytest.fixture(scope="session")
def kubeconfig(multinode_kubeconfig: Path) -> Path:
    """(e2e/conftest.py's, which would bring up a single node, never runs here)"""
    return multinode_kubeconfig


@pytest.fixture(scope="session")
def cluster(multinode_kubeconfig: Path) -> Any:
    """A pytest-kubernetes cluster manager for the multi-node cluster."""
    from pytest_kubernetes.providers import select_provider_manager

    klass = select_provider_manager("external", {"kubeconfig": str(multinode_kubeconfig)})
    manager = klass("dgl-e2e-multinode", None, multinode_kubeconfig)
    manager.create()  # a no-op for a running cluster
    return manager


@pytest.fixture(scope="session")
def operator_values() -> dict[str, str]:
    """Helm values (``--set key=value``) the operator is installed with; override this fixture
    in a conftest to change them."""
    return {}


@pytest.fixture(scope="session")
def operator(cluster: Any, operator_values: dict[str, str], multinode: MultiNode) -> Iterator[str]:
    """The operator installed from charts/dgl-operator (namespace dgl-system) with this
    checkout's images and ``kueue=true``, Kueue's manager running (started with the cluster,
    or now for one left running without it): only a job with the queue label goes through
    Kueue (test_elastic.py's)."""
    from localcluster import kueue
    from localcluster.node import refresh_images

    digest = refresh_images().get("dgl-operator", "")
    started = None
    if not kueue.running():
        kubectl = Kubectl(multinode.kubeconfig, timeout=60)
        try:
            started = kueue.start(DEFAULT_DIR, multinode.kubeconfig, kubectl)
        except ClusterError as e:
            unavailable(f"Kueue's manager did not start: {e}")
    values = {"kueue": "true", **operator_values}
    install_operator(Path(cluster.kubeconfig), digest, values)
    _installed.update(digest=digest, values=values)
    try:
        yield "dgl-system"
    finally:
        if started is not None:
            kueue.stop(started)


_installed: dict[str, Any] = {}


@pytest.fixture
def install(cluster: Any, operator: str) -> Callable[[dict[str, str]], None]:
    """helm upgrade of the operator with other values than the session's (the same image),
    e.g. gang scheduling on; a test that changes them puts ``{}`` back when it is done."""

    def upgrade(values: dict[str, str]) -> None:
        merged = {**_installed.get("values", {}), **values}
        install_operator(Path(cluster.kubeconfig), _installed.get("digest", ""), merged)

    return upgrade


@pytest.fixture
def stop_node(multinode: MultiNode) -> Callable[[str], None]:
    """Power a node off (MultiNode.stop_node): for the rest of the session, unless the test
    powers it on again with ``start_node``."""
    return multinode.stop_node


@pytest.fixture
def start_node(multinode: MultiNode) -> Callable[[str], None]:
    """Power a stopped node on again (MultiNode.start_node)."""
    return multinode.start_node


@pytest.fixture
def operator_node(cluster: Any, operator: str) -> str:
    """The node the operator's pod runs on (a test that kills a node spares it)."""
    items = cluster.kubectl(["get", "pods", "-n", operator])["items"]
    running = [p for p in items if p["status"].get("phase") == "Running"]
    assert running, f"no running operator pod in {operator}"
    return str(running[0]["spec"]["nodeName"])


@pytest.fixture
def namespace(cluster: Any, operator: str) -> Iterator[str]:
    yield from fresh_namespace(cluster)
