"""Least privilege for the job's pods (issue 57), on a real API server: a job cannot borrow
another job's service account (nor its own launcher's); the worker pods the operator makes
carry no service-account token; the results reader's token is not in its pod's spec. Each
attack is refused, and a twin shows what the same check lets through (or what the API server
alone would have allowed)."""

from __future__ import annotations

import base64
import contextlib
import copy
import json
import threading
from pathlib import Path

import pytest

from controller.api import DGLJOBS, LAUNCHER, WORKER
from dgl_operator.client import ResultsCopyFailed, results
from kubeclient import PODS, ROLEBINDINGS, SECRETS, Invalid, NotFound, Obj, RestClient
from localcluster.cluster import ControlPlane
from tests.support.apiserver import allowed
from tests.support.dgljobs import load_fixture
from tests.support.live import InProcessOperator
from tests.support.waiting import LIVE_TIMEOUT, wait_for

ACCOUNT = "automountServiceAccountToken"


def seed(ns: str, name: str) -> Obj:
    raw = load_fixture("seed_dgljob.yaml")
    raw["metadata"].update(name=name, namespace=ns)
    return raw


def wearing(raw: Obj, rtype: str, field: str, account: str) -> Obj:
    """``raw`` whose ``rtype`` template names ``account`` (a Launcher's: in Skip mode, where
    the launcher runs with its template's account)."""
    raw = copy.deepcopy(raw)
    if rtype == LAUNCHER:
        raw["spec"]["partitionMode"] = "Skip"
        del raw["spec"]["dglReplicaSpecs"][WORKER]
    raw["spec"]["dglReplicaSpecs"][rtype]["template"]["spec"][field] = account
    return raw


def pods(api: RestClient, namespace: str) -> set[str]:
    return {p["metadata"]["name"] for p in api.list(PODS, namespace)["items"]}


def token_volumes(pod: Obj) -> list[str]:
    """The pod's volumes that hold a service-account token (the ServiceAccount admission
    plugin's kube-api-access-*, or a template's own projected one)."""
    return [
        v["name"]
        for v in pod["spec"].get("volumes") or []
        for source in (v.get("projected") or {}).get("sources") or []
        if "serviceAccountToken" in source
    ]


def test_borrowing_another_jobs_service_account_is_refused(
    api: RestClient, namespace: str, control_plane: ControlPlane
) -> None:
    """Attack: job b's Worker template (or a Skip launcher's) wears a-launcher, whose Role
    may write a's report (and read a's pods). The API server itself would run such a pod (the
    twin below: a pod naming a-launcher is admitted and that account may patch a-report), so the
    DGLJob is refused at admission, naming the field; so is b wearing its own launcher's."""
    with InProcessOperator(str(control_plane.kubeconfig), namespace):
        api.create(DGLJOBS, namespace, seed(namespace, "a"))
        wait_for(
            lambda: "a-worker-0" in pods(api, namespace), what="a's workers", timeout=LIVE_TIMEOUT
        )
    user = f"system:serviceaccount:{namespace}:a-launcher"
    groups = ["system:serviceaccounts", "system:authenticated"]
    report_a = dict(namespace=namespace, verb="patch", resource="configmaps", name="a-report")
    assert allowed(api, user, groups, **report_a), "the stake: a-launcher may write a's report"
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "borrower"},
        "spec": {"serviceAccountName": "a-launcher", "containers": [{"name": "m", "image": "x"}]},
    }
    made = api.create(PODS, namespace, pod, dry_run=True)  # (the API server alone: admitted)
    assert made["spec"]["serviceAccountName"] == "a-launcher"
    for rtype, field, account in [
        (WORKER, "serviceAccountName", "a-launcher"),
        (WORKER, "serviceAccount", "a-launcher"),
        (WORKER, "serviceAccountName", "a-partitioner"),
        (WORKER, "serviceAccountName", "b-launcher"),  # its own launcher's exec rights
        (LAUNCHER, "serviceAccountName", "a-launcher"),
    ]:
        raw = wearing(seed(namespace, "b"), rtype, field, account)
        with pytest.raises(Invalid) as err:
            api.create(DGLJOBS, namespace, raw, field_validation="Strict", dry_run=True)
        text = err.value.message
        where = f"spec.dglReplicaSpecs.{rtype}.template.spec.{field}"
        assert where in text and "service account the operator makes" in text, text
        # the twin: the same job wearing an account of its own is admitted
        own = wearing(seed(namespace, "b"), rtype, field, "trainer")
        api.create(DGLJOBS, namespace, own, field_validation="Strict", dry_run=True)


def test_the_worker_pods_the_operator_makes_carry_no_token(
    api: RestClient, namespace: str, control_plane: ControlPlane
) -> None:
    """The pods as the API server holds them (after its ServiceAccount admission plugin): a
    worker has automountServiceAccountToken false and no token volume. The twin: the
    partitioner, which needs the API, has its account's token volume (the same search finds
    it)."""
    with InProcessOperator(str(control_plane.kubeconfig), namespace):
        api.create(DGLJOBS, namespace, seed(namespace, "tok"))
        names = ["tok-worker-0", "tok-worker-1", "tok-partitioner"]
        wait_for(lambda: set(names) <= pods(api, namespace), what="the pods", timeout=LIVE_TIMEOUT)
    for name in names[:2]:
        worker = api.get(PODS, namespace, name)
        assert worker["spec"][ACCOUNT] is False, name
        assert token_volumes(worker) == [], name
        assert worker["spec"]["serviceAccountName"] == "default"  # (the API server's default)
    partitioner = api.get(PODS, namespace, "tok-partitioner")
    assert partitioner["spec"]["serviceAccountName"] == "tok-partitioner"
    assert partitioner["spec"][ACCOUNT] is True
    assert token_volumes(partitioner), partitioner["spec"].get("volumes")


def test_the_results_readers_token_is_not_in_its_pod(
    api: RestClient, namespace: str, tmp_path: Path
) -> None:
    """Attack: whoever may get pods (Kubernetes' view) reads the reader pod's spec. The
    copy's token is in a Secret made for it (view may not read Secrets), referenced by the
    pod, and deleted with it. The twin: the same search finds the token in the Secret, and
    view may read the pod where it used to be."""
    src = results.ResultsSource(namespace, "claim", "/runs/j-1", job="j", image="reader:1")
    seen: dict[str, Obj] = {}

    def watch() -> None:
        def made() -> bool:
            for pod in api.list(PODS, namespace)["items"]:
                name = pod["metadata"]["name"]
                if name.startswith("j-results-"):
                    seen["pod"], seen["secret"] = pod, api.get(SECRETS, namespace, name)
                    return True
            return False

        wait_for(made, what="the reader pod", timeout=LIVE_TIMEOUT)

    watcher = threading.Thread(target=watch)
    watcher.start()
    with pytest.raises(ResultsCopyFailed, match="did not start within"):
        results.copy(api, src, tmp_path / "dest", start_timeout=10)  # (no kubelet runs it)
    watcher.join(LIVE_TIMEOUT)
    pod, secret = seen["pod"], seen["secret"]
    name = pod["metadata"]["name"]
    encoded = secret["data"][results.TOKEN_KEY]  # (as whoever may read Secrets gets it)
    token = base64.b64decode(encoded).decode()
    assert len(token) >= 32
    assert encoded in json.dumps(secret)  # the twin: the search finds it where it is
    assert token not in json.dumps(pod) and encoded not in json.dumps(pod)
    env = {e["name"]: e for e in pod["spec"]["containers"][0]["env"]}
    assert env[results.TOKEN_ENV]["valueFrom"]["secretKeyRef"] == {
        "name": name,
        "key": results.TOKEN_KEY,
    }
    assert pod["spec"][ACCOUNT] is False and token_volumes(pod) == []
    # deleted with the pod
    with pytest.raises(NotFound):
        api.get(SECRETS, namespace, name)
    # who may read the pod may not read the Secret: Kubernetes' own view
    rbac = "rbac.authorization.k8s.io"
    binding = {
        "apiVersion": f"{rbac}/v1",
        "kind": "RoleBinding",
        "metadata": {"name": "peeker-view"},
        "roleRef": {"apiGroup": rbac, "kind": "ClusterRole", "name": "view"},
        "subjects": [{"apiGroup": rbac, "kind": "User", "name": "peeker"}],
    }
    api.create(ROLEBINDINGS, namespace, binding)

    def peeks(resource: str) -> bool:
        return allowed(api, "peeker", ["system:authenticated"], namespace=namespace,
                       verb="get", resource=resource, name=name)  # fmt: skip

    wait_for(lambda: peeks("pods"), what="view's binding", timeout=LIVE_TIMEOUT)
    assert not peeks("secrets")
    with contextlib.suppress(NotFound):
        api.delete(ROLEBINDINGS, namespace, "peeker-view")
