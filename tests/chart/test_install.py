"""``helm install`` / ``upgrade`` / ``uninstall`` of the chart into the local control plane
(etcd + kube-apiserver + kube-controller-manager, RBAC on, no kubelet: the operator's pods stay
Pending, so nothing waits for them). What RBAC the installed bindings really give the
operator's ServiceAccount is asked of the API server (SubjectAccessReview)."""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from controller.api import DGLJOBS
from dgl_operator.client import DGLJobClient, ReportOptions
from kubeclient import (
    CONFIGMAPS,
    NAMESPACES,
    NETWORKPOLICIES,
    PODS,
    ROLEBINDINGS,
    ROLES,
    SERVICEACCOUNTS,
    SERVICES,
    Forbidden,
    NotFound,
    Resource,
    RestClient,
)
from localcluster.cluster import ControlPlane, kubeconfig
from tests.chart.helpers import Helm
from tests.support.apiserver import CRDS
from tests.support.dgljobs import load_fixture
from tests.support.paths import CHART
from tests.support.rbac import LEADER_ELECTION_RULES, NODE_RULES, RULES
from tests.support.waiting import LIVE_TIMEOUT, wait_for

CRD_NAME = "dgljobs.qihoo.net"
DEPLOYMENTS = Resource("apps", "v1", "deployments", "Deployment")
REPLICASETS = Resource("apps", "v1", "replicasets", "ReplicaSet")
CLUSTERROLES = Resource(
    "rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", namespaced=False
)
CLUSTERROLEBINDINGS = Resource(
    "rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", namespaced=False
)
SAR = Resource(
    "authorization.k8s.io", "v1", "subjectaccessreviews", "SubjectAccessReview", namespaced=False
)
# every kind the chart may render (with default-off monitoring objects left out)
BY_KIND = {
    r.kind: r
    for r in (
        DEPLOYMENTS,
        SERVICEACCOUNTS,
        SERVICES,
        CONFIGMAPS,
        ROLES,
        ROLEBINDINGS,
        CLUSTERROLES,
        CLUSTERROLEBINDINGS,
        NETWORKPOLICIES,
    )
}

Key = tuple[str, str | None, str]  # kind, namespace, name


@pytest.fixture(scope="module")
def kube(control_plane: ControlPlane) -> RestClient:
    return RestClient.from_config(str(control_plane.kubeconfig), pool_size=8)


@dataclass
class Release:
    helm: Helm
    kubeconfig: Path
    name: str
    namespace: str
    tmp: Path
    extra_namespaces: list[str] = field(default_factory=list)

    @property
    def fullname(self) -> str:
        """The chart's object names: <release>-dgl-operator."""
        return f"{self.name}-dgl-operator"

    def run(self, *args: str, check: bool = True) -> Any:
        return self.helm.run(
            *args, "--namespace", self.namespace, "--kubeconfig", str(self.kubeconfig), check=check
        )

    def values_file(self, values: dict[str, Any]) -> str:
        f = self.tmp / f"values-{uuid.uuid4().hex[:6]}.json"
        f.write_text(json.dumps(values))
        return str(f)

    def install(self, values: dict[str, Any]) -> None:
        # Helm 4: no --wait means "hookOnly" (there are no hooks); nothing waits for the pods
        self.run(
            "install", self.name, str(CHART), "--create-namespace", "-f", self.values_file(values)
        )

    def upgrade(self, values: dict[str, Any]) -> None:
        # the given values on top of the chart's defaults (not the previous release's values)
        self.run("upgrade", self.name, str(CHART), "--reset-values", "-f", self.values_file(values))

    def status(self) -> dict[str, Any]:
        out: dict[str, Any] = json.loads(self.run("status", self.name, "-o", "json").stdout)
        return out

    def manifest_objects(self) -> set[Key]:
        docs = yaml.safe_load_all(self.run("get", "manifest", self.name).stdout)
        return {
            (d["kind"], d["metadata"].get("namespace"), d["metadata"]["name"]) for d in docs if d
        }


@pytest.fixture
def release(
    helm: Helm, control_plane: ControlPlane, kube: RestClient, tmp_path: Path
) -> Iterator[Release]:
    suffix = uuid.uuid4().hex[:6]
    rel = Release(
        helm, control_plane.kubeconfig, f"dgl-chart-{suffix}", f"dgl-system-{suffix}", tmp_path
    )
    try:
        yield rel
    finally:
        rel.run("uninstall", rel.name, "--ignore-not-found", check=False)
        for ns in (rel.namespace, *rel.extra_namespaces):
            with contextlib.suppress(NotFound):
                kube.delete(NAMESPACES, None, ns)
        for res, name in (  # in case the uninstall failed
            (CLUSTERROLES, rel.fullname),
            (CLUSTERROLEBINDINGS, rel.fullname),
            (CLUSTERROLES, f"{rel.fullname}-edit"),
            (CLUSTERROLES, f"{rel.fullname}-view"),
        ):
            with contextlib.suppress(NotFound):
                kube.delete(res, None, name)


def exists(kube: RestClient, key: Key) -> bool:
    kind, ns, name = key
    try:
        kube.get(BY_KIND[kind], ns, name)
    except NotFound:
        return False
    return True


def crd_established(kube: RestClient) -> bool:
    try:
        crd = kube.get(CRDS, None, CRD_NAME)
    except NotFound:
        return False
    conditions = (crd.get("status") or {}).get("conditions") or []
    return any(c["type"] == "Established" and c["status"] == "True" for c in conditions)


def can(
    kube: RestClient, sa: tuple[str, str], verb: str, group: str, resource: str, ns: str
) -> bool:
    """May ServiceAccount ``sa`` (namespace, name) do this? ns '' asks for all namespaces."""
    sa_ns, sa_name = sa
    res, _, sub = resource.partition("/")
    review = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {
            "user": f"system:serviceaccount:{sa_ns}:{sa_name}",
            "groups": ["system:serviceaccounts", f"system:serviceaccounts:{sa_ns}"],
            "resourceAttributes": {
                "verb": verb,
                "group": group,
                "resource": res,
                "subresource": sub,
                "namespace": ns,
            },
        },
    }
    return bool(kube.create(SAR, None, review)["status"].get("allowed"))


def triples(rules: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    return sorted(
        (g, r, v)
        for rule in rules
        for g in rule["apiGroups"]
        for r in rule["resources"]
        for v in rule["verbs"]
    )


def args_of(kube: RestClient, ns: str, name: str) -> list[str]:
    dep = kube.get(DEPLOYMENTS, ns, name)
    args: list[str] = dep["spec"]["template"]["spec"]["containers"][0]["args"]
    return args


def test_install_upgrade_uninstall(release: Release, kube: RestClient) -> None:
    ns, name = release.namespace, release.name
    fullname = release.fullname
    crd_before = crd_established(kube)
    release.install({"workers": 2, "leaderElection": {"force": False}})  # (the default: on)
    assert release.status()["info"]["status"] == "deployed"

    # the CRD from crds/ (installed by Helm, or already there: Helm never replaces it)
    wait_for(lambda: crd_established(kube), what="the DGLJob CRD", timeout=30)
    if not crd_before:  # Helm created it from crds/, verbatim
        source = yaml.safe_load((CHART / "crds" / "qihoo.net_dgljobs.yaml").read_text())
        crd = kube.get(CRDS, None, CRD_NAME)
        assert crd["metadata"]["labels"] == source["metadata"]["labels"]
        assert crd["spec"]["names"] == source["spec"]["names"]
        assert [v["name"] for v in crd["spec"]["versions"]] == ["v1alpha1"]
    first = release.manifest_objects()
    assert first == {
        ("ServiceAccount", ns, fullname),
        ("ClusterRole", None, fullname),
        ("ClusterRoleBinding", None, fullname),
        ("ClusterRole", None, f"{fullname}-nodes"),
        ("ClusterRoleBinding", None, f"{fullname}-nodes"),
        ("ClusterRole", None, f"{fullname}-edit"),
        ("ClusterRole", None, f"{fullname}-view"),
        ("Service", ns, f"{fullname}-metrics"),
        ("Deployment", ns, fullname),
        # the operator's own pod: ingress to its metrics port only (networkPolicy.operator)
        ("NetworkPolicy", ns, fullname),
    }
    for key in first:
        assert exists(kube, key), key
    args = args_of(kube, ns, fullname)
    assert "--workers=2" in args and "--leader-elect" not in args
    dep = kube.get(DEPLOYMENTS, ns, fullname)
    assert dep["spec"]["template"]["spec"]["serviceAccountName"] == fullname
    assert dep["spec"]["strategy"]["type"] == "Recreate"

    # what the API server's authorizer lets the operator's ServiceAccount do
    sa = (ns, fullname)
    wait_for(
        lambda: can(kube, sa, "list", "qihoo.net", "dgljobs", ""),
        what="the ClusterRoleBinding to take effect",
        timeout=30,
    )
    for group, resource, verb in triples(RULES + NODE_RULES):
        assert can(kube, sa, verb, group, resource, ""), (group, resource, verb)
    assert not can(kube, sa, "get", "", "secrets", ns)
    assert not can(kube, sa, "patch", "", "nodes", "")
    assert not can(kube, sa, "create", "qihoo.net", "dgljobs", "")
    assert not can(kube, sa, "create", "coordination.k8s.io", "leases", ns)

    # upgrade: two replicas turn leader election on, with its Lease Role
    release.upgrade(
        {"workers": 2, "replicas": 2, "logLevel": "debug", "leaderElection": {"force": False}}
    )
    assert release.status()["version"] == 2
    second = release.manifest_objects()
    lease_role = f"{fullname}-leader-election"
    assert second == first | {("Role", ns, lease_role), ("RoleBinding", ns, lease_role)}
    dep = kube.get(DEPLOYMENTS, ns, fullname)
    assert dep["spec"]["replicas"] == 2
    assert dep["spec"]["strategy"]["type"] == "RollingUpdate"
    args = args_of(kube, ns, fullname)
    assert "--leader-elect" in args and "--log-level=debug" in args
    assert f"--leader-elect-namespace={ns}" in args
    wait_for(
        lambda: can(kube, sa, "create", "coordination.k8s.io", "leases", ns),
        what="the leader-election RoleBinding to take effect",
        timeout=30,
    )
    for group, resource, verb in triples(LEADER_ELECTION_RULES):
        assert can(kube, sa, verb, group, resource, ns)
        assert not can(kube, sa, verb, group, resource, "default")

    # and back to one replica without leader election: Helm removes the Lease Role, the
    # Deployment goes back to Recreate
    release.upgrade({"workers": 3, "leaderElection": {"force": False}})
    assert release.status()["version"] == 3
    assert release.manifest_objects() == first
    wait_for(
        lambda: not exists(kube, ("Role", ns, lease_role)),
        what="the Lease Role to go",
        timeout=LIVE_TIMEOUT,
    )
    dep = kube.get(DEPLOYMENTS, ns, fullname)
    assert dep["spec"]["strategy"]["type"] == "Recreate"
    assert dep["spec"]["replicas"] == 1
    assert "--workers=3" in args_of(kube, ns, fullname)

    # the chart's defaults: one replica that takes the Lease, and rolls (RollingUpdate)
    release.upgrade({"workers": 3})
    assert release.manifest_objects() == first | {
        ("Role", ns, lease_role), ("RoleBinding", ns, lease_role)
    }  # fmt: skip
    dep = kube.get(DEPLOYMENTS, ns, fullname)
    assert dep["spec"]["strategy"]["type"] == "RollingUpdate" and dep["spec"]["replicas"] == 1
    assert "--leader-elect" in args_of(kube, ns, fullname)

    selector = f"app.kubernetes.io/instance={name}"
    # uninstall: everything the chart made goes, except the CRD (Helm never deletes crds/)
    release.run("uninstall", name)
    made = first | second
    for key in sorted(made, key=str):
        wait_for(lambda key=key: not exists(kube, key), what=f"{key} to be deleted", timeout=60)
    # (this control plane runs no deployment controller; elsewhere the Deployment's ReplicaSets
    # and pods go with it through the garbage collector)
    for res in (REPLICASETS, PODS):
        wait_for(
            lambda res=res: not kube.list(res, ns, label_selector=selector)["items"],
            what=f"the Deployment's {res.plural} to be garbage-collected",
            timeout=60,
        )
    assert crd_established(kube), "the CRD must survive helm uninstall"
    listed = json.loads(release.run("list", "-o", "json").stdout)
    assert [r for r in listed if r["name"] == name] == []


def test_install_watching_one_namespace(release: Release, kube: RestClient) -> None:
    ns, name, fullname = release.namespace, release.name, release.fullname
    watched = f"dgl-team-{uuid.uuid4().hex[:6]}"
    release.extra_namespaces.append(watched)
    kube.create(
        NAMESPACES, None, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": watched}}
    )
    release.install({"watchNamespace": watched})
    objects = release.manifest_objects()
    assert objects == {
        ("ServiceAccount", ns, fullname),
        ("Role", watched, fullname),
        ("RoleBinding", watched, fullname),
        ("ClusterRole", None, f"{fullname}-nodes"),
        ("ClusterRoleBinding", None, f"{fullname}-nodes"),
        ("ClusterRole", None, f"{fullname}-edit"),
        ("ClusterRole", None, f"{fullname}-view"),
        ("Service", ns, f"{fullname}-metrics"),
        ("Deployment", ns, fullname),
        # the operator's own pod: ingress to its metrics port only (networkPolicy.operator)
        ("NetworkPolicy", ns, fullname),
        # leader election (the default): the Lease in the release's own namespace
        ("Role", ns, f"{fullname}-leader-election"),
        ("RoleBinding", ns, f"{fullname}-leader-election"),
    }
    assert f"--namespace={watched}" in args_of(kube, ns, fullname)
    assert not exists(kube, ("ClusterRole", None, fullname))
    sa = (ns, fullname)
    wait_for(
        lambda: can(kube, sa, "list", "qihoo.net", "dgljobs", watched),
        what="the RoleBinding to take effect",
        timeout=30,
    )
    for group, resource, verb in triples(RULES):
        assert can(kube, sa, verb, group, resource, watched), (group, resource, verb)
    assert not can(kube, sa, "list", "qihoo.net", "dgljobs", "")
    assert not can(kube, sa, "list", "qihoo.net", "dgljobs", ns)
    assert not can(kube, sa, "create", "", "pods", "default")
    release.run("uninstall", name)
    for key in sorted(objects, key=str):
        wait_for(lambda key=key: not exists(kube, key), what=f"{key} to be deleted", timeout=60)


def user(
    kube: RestClient, cp: ControlPlane, ns: str, name: str, role: str, tmp: Path
) -> RestClient:
    """ServiceAccount ``name`` in ``ns``, bound there to Kubernetes' own ClusterRole ``role``
    (edit, view) by a RoleBinding, as a platform engineer binds a team's users: a client
    with its token."""
    sa = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name}}
    kube.create(SERVICEACCOUNTS, ns, sa)
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": f"{name}-{role}"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
        "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": ns}],
    }
    kube.create(ROLEBINDINGS, ns, binding)
    request = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}}
    token = kube.create(SERVICEACCOUNTS, ns, request, name=name, subresource="token")
    path = kubeconfig(
        tmp / f"{name}.kubeconfig", cp.server, cp.pki, name, token=token["status"]["token"]
    )
    return RestClient.from_config(str(path), pool_size=2)


def test_users_bound_to_edit_submit_and_follow_jobs_and_view_only_reads(
    release: Release, kube: RestClient, control_plane: ControlPlane, tmp_path: Path
) -> None:
    """The chart's user roles (rbac.userRoles) aggregated into `edit` and `view`: what a team's
    user bound to one of them in a namespace may do with DGLJobs there, asked of the API server
    with their own token; what dglctl also calls (the launcher's log, events, the results
    reader) is the built-in roles' own. Uninstalled, the grant goes with the chart."""
    release.install({})
    team = f"dgl-team-{uuid.uuid4().hex[:6]}"
    release.extra_namespaces.append(team)
    kube.create(
        NAMESPACES, None, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": team}}
    )
    wait_for(lambda: crd_established(kube), what="the DGLJob CRD", timeout=30)
    alice = user(kube, control_plane, team, "alice", "edit", tmp_path)
    bob = user(kube, control_plane, team, "bob", "view", tmp_path)
    edit, view = (team, "alice"), (team, "bob")
    wait_for(
        lambda: (
            can(kube, edit, "create", "qihoo.net", "dgljobs", team)
            and can(kube, view, "watch", "qihoo.net", "dgljobs", team)
        ),
        what="the aggregation controller to add the chart's rules to edit and view",
        timeout=LIVE_TIMEOUT,
    )

    job = load_fixture("seed_dgljob.yaml")
    job["metadata"].update(name="alice-gnn", namespace=team)
    alice.create(DGLJOBS, team, job)
    assert alice.get(DGLJOBS, team, "alice-gnn")["metadata"]["name"] == "alice-gnn"
    assert [j["metadata"]["name"] for j in bob.list(DGLJOBS, team)["items"]] == ["alice-gnn"]
    assert (
        bob.get(DGLJOBS, team, "alice-gnn")["spec"] == alice.get(DGLJOBS, team, "alice-gnn")["spec"]
    )
    suspend = {"spec": {"runPolicy": {"suspend": True}}}
    alice.patch(DGLJOBS, team, "alice-gnn", suspend)  # dglctl suspend
    # dglctl report --no-claim reads what `view` may: the job, its pods, the events, the logs
    page = tmp_path / "alice-gnn.html"
    seen = DGLJobClient(team, api=bob).report("alice-gnn", page, ReportOptions(claim=False))
    assert (seen.name, seen.namespace) == ("alice-gnn", team)
    assert f"DGLJob {team}/alice-gnn" in page.read_text()
    with pytest.raises(Forbidden):
        bob.create(DGLJOBS, team, {**job, "metadata": {"name": "bob-gnn", "namespace": team}})
    with pytest.raises(Forbidden):
        bob.delete(DGLJOBS, team, "alice-gnn")
    with pytest.raises(Forbidden):
        alice.list(DGLJOBS, "default")  # bound in the team's namespace only

    # follow (the launcher's log, the events) and collect (dglctl results: a reader pod, its
    # NetworkPolicy and its token's Secret, read through the pod proxy): Kubernetes' own edit
    # and view
    for verb, group, resource in [
        ("get", "", "pods/log"),
        ("list", "", "events"),
        ("watch", "qihoo.net", "dgljobs"),
        ("get", "qihoo.net", "dgljobs/status"),
    ]:
        assert can(kube, edit, verb, group, resource, team), (verb, resource)
        assert can(kube, view, verb, group, resource, team), (verb, resource)
    for verb, group, resource in [
        ("create", "", "pods"),
        ("delete", "", "pods"),
        ("get", "", "pods/proxy"),
        ("create", "networking.k8s.io", "networkpolicies"),
        ("delete", "networking.k8s.io", "networkpolicies"),
        ("create", "", "secrets"),
        ("delete", "", "secrets"),
        ("delete", "qihoo.net", "dgljobs"),
    ]:
        assert can(kube, edit, verb, group, resource, team), (verb, resource)
        assert not can(kube, view, verb, group, resource, team), (verb, resource)
    # nobody but the operator and the job's own pods writes a job's status
    assert not can(kube, edit, "update", "qihoo.net", "dgljobs/status", team)

    alice.delete(DGLJOBS, team, "alice-gnn")
    release.run("uninstall", release.name)
    wait_for(
        lambda: not can(kube, edit, "create", "qihoo.net", "dgljobs", team),
        what="the chart's rules to leave edit",
        timeout=LIVE_TIMEOUT,
    )
