"""The real-API-server fixtures: ``api`` (a client of the ``control_plane`` of
localcluster/fixtures.py), ``crd`` (the DGLJob CRD installed and established) and
``namespace`` (a fresh one with its default ServiceAccount). The conftest.py of each area that
uses them imports them (tests/apiserver, tests/prometheus). And :func:`operator_identity`: a
ServiceAccount holding exactly a ClusterRole's rules, as a kubeconfig with its token.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubeclient import NAMESPACES, SERVICEACCOUNTS, AlreadyExists, NotFound, Resource, RestClient
from localcluster.cluster import ControlPlane, kubeconfig
from tests.support.paths import CRD_PATH
from tests.support.waiting import LIVE_TIMEOUT, wait_for

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


def install_crd(api: RestClient, path: Path = CRD_PATH) -> None:
    """Create or replace the CRD in ``path`` (the DGLJob's by default); wait until it is
    established."""
    crd = yaml.safe_load(path.read_text())
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

    wait_for(
        established,
        what=f"the CRD {crd['metadata']['name']} to be established",
        timeout=LIVE_TIMEOUT,
    )


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
        wait_for(lambda: _has_default_sa(api, name), what="the default SA", timeout=10)
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


CLUSTERROLES = Resource(
    "rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", namespaced=False
)
CLUSTERROLEBINDINGS = Resource(
    "rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", namespaced=False
)


def token_kubeconfig(api: RestClient, cp: ControlPlane, ns: str, sa: str, path: Path) -> Path:
    """A kubeconfig for ServiceAccount ``sa`` of ``ns``, with a TokenRequest token (what its
    pod would mount)."""
    review = api.create(
        SERVICEACCOUNTS,
        ns,
        {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}},
        name=sa,
        subresource="token",
    )
    return kubeconfig(path, cp.server, cp.pki, sa, token=review["status"]["token"])


SUBJECTACCESSREVIEWS = Resource(
    "authorization.k8s.io", "v1", "subjectaccessreviews", "SubjectAccessReview", namespaced=False
)
SERVICE_ACCOUNT_GROUPS = ("system:serviceaccounts", "system:authenticated")


def allowed(
    api: RestClient, user: str, groups: Sequence[str] = SERVICE_ACCOUNT_GROUPS, **attrs: Any
) -> bool:
    """Whether the API server's authorizer lets ``user`` (of ``groups``; a ServiceAccount's by
    default) do what ``attrs`` say (a SubjectAccessReview's resourceAttributes)."""
    review = api.create(
        SUBJECTACCESSREVIEWS,
        None,
        {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": {"user": user, "groups": list(groups), "resourceAttributes": attrs},
        },
    )
    return bool(review["status"].get("allowed"))


def rbac_in_effect(api: RestClient, user: str, role: dict[str, Any]) -> None:
    """Until the API server's authorizer grants ``user`` the first resource rule of ``role``:
    it reads bindings from a cache of its own, which may lag their creation (ci9 saw a
    SubjectAccessReview refuse a verb just bound)."""
    rule = next(r for r in role.get("rules") or [] if r.get("resources") and r.get("verbs"))
    first = {
        "namespace": "default",
        "verb": rule["verbs"][0],
        "group": (rule.get("apiGroups") or [""])[0],
        "resource": rule["resources"][0],
    }
    wait_for(
        lambda: allowed(api, user, **first),
        what=f"the binding of {user} in effect",
        timeout=LIVE_TIMEOUT,
    )


@contextlib.contextmanager
def operator_identity(
    api: RestClient, cp: ControlPlane, role: dict[str, Any], path: Path
) -> Iterator[tuple[Path, str]]:
    """ServiceAccount ``dgl-operator`` in a namespace of its own, bound to the ClusterRole
    ``role`` (renamed after that namespace): its kubeconfig (a TokenRequest token) and its
    user name. Everything is deleted afterwards."""
    ns = f"op-{uuid.uuid4().hex[:6]}"
    name = f"dgl-operator-{ns}"
    api.create(
        NAMESPACES, None, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}
    )
    api.create(
        SERVICEACCOUNTS,
        ns,
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "dgl-operator"}},
    )
    api.create(CLUSTERROLES, None, {**role, "metadata": {"name": name}})
    api.create(
        CLUSTERROLEBINDINGS,
        None,
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": name},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": name,
            },
            "subjects": [{"kind": "ServiceAccount", "name": "dgl-operator", "namespace": ns}],
        },
    )
    user = f"system:serviceaccount:{ns}:dgl-operator"
    try:
        rbac_in_effect(api, user, role)
        review = api.create(
            SERVICEACCOUNTS,
            ns,
            {
                "apiVersion": "authentication.k8s.io/v1",
                "kind": "TokenRequest",
                "spec": {"expirationSeconds": 3600},
            },
            name="dgl-operator",
            subresource="token",
        )
        yield (
            kubeconfig(path, cp.server, cp.pki, "dgl-operator", token=review["status"]["token"]),
            user,
        )
    finally:
        api.delete(CLUSTERROLEBINDINGS, None, name)
        api.delete(CLUSTERROLES, None, name)
        api.delete(NAMESPACES, None, ns)
