"""Fixtures for tests against the real API server (the control_plane fixture, localcluster/fixtures.py)."""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from localcluster.cluster import ControlPlane
from informers.errors import AlreadyExists, NotFound
from informers.resources import NAMESPACES, SERVICEACCOUNTS, Resource
from informers.rest import RestClient
from tests.controller.conftest import CRD_PATH

CRDS = Resource(
    "apiextensions.k8s.io",
    "v1",
    "customresourcedefinitions",
    "CustomResourceDefinition",
    namespaced=False,
)


def wait_for(
    pred: Any, timeout: float = 30.0, what: str = "condition", interval: float = 0.05
) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = pred()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


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
