"""The real-API-server fixtures: ``api`` (a client of the ``control_plane`` of
localcluster/fixtures.py), ``crd`` (the DGLJob CRD installed and established) and
``namespace`` (a fresh one with its default ServiceAccount). The conftest.py of each area that
uses them imports them (tests/apiserver, tests/prometheus).
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator

import pytest
import yaml

from kubeclient import NAMESPACES, SERVICEACCOUNTS, AlreadyExists, NotFound, Resource, RestClient
from localcluster.cluster import ControlPlane
from tests.support.paths import CRD_PATH
from tests.support.waiting import wait_for

CRDS = Resource(
    "apiextensions.k8s.io",
    "v1",
    "customresourcedefinitions",
    "CustomResourceDefinition",
    namespaced=False,
)


@pytest.fixture(scope="session")
def api(control_plane: ControlPlane) -> RestClient:
    return RestClient.from_config(str(control_plane.kubeconfig), pool_size=32)


def install_crd(api: RestClient) -> None:
    crd = yaml.safe_load(CRD_PATH.read_text())
    try:
        current = api.get(CRDS, None, crd["metadata"]["name"])
        crd["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
        api.replace(CRDS, None, crd["metadata"]["name"], crd)
    except NotFound:
        api.create(CRDS, None, crd)

    def established() -> bool:
        obj = api.get(CRDS, None, crd["metadata"]["name"])
        return any(
            c["type"] == "Established" and c["status"] == "True"
            for c in (obj.get("status") or {}).get("conditions") or []
        )

    wait_for(established, what="the DGLJob CRD to be established")


@pytest.fixture(scope="session")
def crd(api: RestClient) -> None:
    install_crd(api)


@pytest.fixture
def namespace(api: RestClient, crd: None) -> Iterator[str]:
    name = f"t-{uuid.uuid4().hex[:8]}"
    api.create(
        NAMESPACES, None, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    )
    try:
        wait_for(lambda: _has_default_sa(api, name), timeout=10, what="the default SA")
    except AssertionError:
        # After API server restarts the controller-manager's informers may still be in
        # their backoff; the object is all admission needs, so create it ourselves.
        with contextlib.suppress(AlreadyExists):
            api.create(
                SERVICEACCOUNTS,
                name,
                {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}},
            )
    yield name
    api.delete(NAMESPACES, None, name)


def _has_default_sa(api: RestClient, ns: str) -> bool:
    try:
        api.get(SERVICEACCOUNTS, ns, "default")
    except NotFound:
        return False
    return True
