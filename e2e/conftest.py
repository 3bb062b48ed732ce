"""e2e fixtures: a real cluster through pytest-kubernetes, with the operator installed by Helm.

* ``pytest e2e --k8s-kubeconfig PATH`` (or ``--k8s-provider kind|k3d|minikube``) runs against
  that cluster; the images must already be in it (``kind load docker-image ...``).
* Without either, and as root, the session brings up this machine's single-node cluster
  (localcluster/node.py: containerd + kubelet + control plane, images built without Docker),
  or reuses the one ``make cluster-up`` / ``make demo`` left running. In CI a missing
  prerequisite fails.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from e2e.helpers import NODE_KUBECONFIG, figures, fresh_namespace
from localcluster.cluster import ClusterError, k8s_binaries
from localcluster.helm import install_operator
from localcluster.node import DEFAULT_DIR, running
from tests.support.browser import running_browser
from tests.support.prerequisites import unavailable


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if figures:
        terminalreporter.section("e2e figures")
        for line in figures:
            terminalreporter.write_line(line)


@pytest.fixture(scope="session")
def kubeconfig(request: pytest.FixtureRequest) -> Iterator[Path]:
    given = request.config.getoption("k8s_kubeconfig") or request.config.getoption(
        "k8s_kubeconfig_override"
    )
    provider = request.config.getoption("k8s_provider")
    # our kubectl first on PATH: pytest-kubernetes calls `kubectl`
    os.environ["PATH"] = f"{k8s_binaries('kubectl')}:{os.environ['PATH']}"
    if given or provider:
        yield Path(given) if given else Path("")
        return
    if running(DEFAULT_DIR) and NODE_KUBECONFIG.exists():
        yield NODE_KUBECONFIG  # a cluster `make cluster-up`/`make demo` left running
        return
    if os.geteuid() != 0:
        unavailable("the local single-node cluster needs root; or pass --k8s-kubeconfig")
    from localcluster.node import main as node_main

    try:
        if node_main(["up", "--kueue"]) != 0:
            unavailable("the local single-node cluster did not come up (see above)")
    except ClusterError as e:
        unavailable(f"the local single-node cluster did not come up: {e}")
    try:
        yield NODE_KUBECONFIG
    finally:
        node_main(["down"])


@pytest.fixture(scope="session")
def cluster(kubeconfig: Path, k8s_manager: Any, request: pytest.FixtureRequest) -> Any:
    """A pytest-kubernetes cluster manager (external provider for a kubeconfig)."""
    provider = request.config.getoption("k8s_provider")
    if provider and provider != "external":
        manager = k8s_manager(provider)("dgl-e2e")
    else:
        from pytest_kubernetes.providers import select_provider_manager

        klass = select_provider_manager("external", {"kubeconfig": str(kubeconfig)})
        manager = klass("dgl-e2e", None, kubeconfig)
    manager.create()  # a no-op for a running cluster
    return manager


@pytest.fixture(scope="session")
def operator(cluster: Any, kubeconfig: Path) -> Iterator[str]:
    """The operator installed from charts/dgl-operator (namespace dgl-system), with this
    checkout's images when the cluster is this machine's node. There, Kueue runs too (started
    with the cluster, or now for one `make cluster-up` left without it) and the operator has
    ``kueue=true``: every other test's jobs carry no queue label, so Kueue leaves them alone."""
    digest = ""
    values = {}
    started = None
    if kubeconfig == NODE_KUBECONFIG:
        from localcluster import kueue
        from localcluster.kubectl import Kubectl
        from localcluster.node import refresh_images

        digest = refresh_images().get("dgl-operator", "")
        if not kueue.running():
            started = kueue.start(DEFAULT_DIR, kubeconfig, Kubectl(kubeconfig, timeout=60))
        values["kueue"] = "true"
    install_operator(Path(cluster.kubeconfig), digest, values)
    try:
        yield "dgl-system"
    finally:
        if started is not None:
            from localcluster import kueue

            kueue.stop(started)


@pytest.fixture
def namespace(cluster: Any, operator: str) -> Iterator[str]:
    yield from fresh_namespace(cluster)


@pytest.fixture
def other_namespace(cluster: Any, operator: str) -> Iterator[str]:
    """Another tenant's namespace (where attacks on a job come from)."""
    yield from fresh_namespace(cluster, "e2e-foe")


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    """Headless chromium for the tests that open dglctl report's page (tests.support.browser)."""
    with running_browser() as driver:
        yield driver
