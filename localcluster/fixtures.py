"""pytest fixtures for tests against a real API server (registered in tests/conftest.py).

``control_plane`` (session): our local etcd + kube-apiserver + kube-controller-manager (the
e2e layer, which runs on any kubeconfig, has its own fixtures in e2e/conftest.py). In CI
(CI=true) a control plane that cannot start fails the run; elsewhere the dependent tests are
skipped with the reason.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from localcluster.cluster import ClusterError, ControlPlane, start


def _in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


@pytest.fixture(scope="session")
def control_plane() -> Iterator[ControlPlane]:
    workdir = Path(tempfile.mkdtemp(prefix="dgl-cluster-"))
    try:
        cp = start(workdir)
    except ClusterError as e:
        if _in_ci():
            pytest.fail(f"the control plane could not start in CI: {e}")
        pytest.skip(f"no control plane: {e}")
    try:
        yield cp
    finally:
        cp.stop()
        import shutil

        shutil.rmtree(workdir, ignore_errors=True)
