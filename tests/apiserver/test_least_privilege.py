"""The operator with only its own RBAC (tests/support/rbac.py, what the chart grants),
through a ServiceAccount token from the TokenRequest API; and what the job's own
ServiceAccounts may do."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from controller.api import DGLJOBS
from kubeclient import EVENTS, PODS, SERVICEACCOUNTS, Forbidden, Resource, RestClient
from localcluster.cluster import ControlPlane, k8s_binaries, kubeconfig
from tests.support.apiserver import operator_identity
from tests.support.dgljobs import load_fixture
from tests.support.live import InProcessOperator, Kubelet
from tests.support.rbac import cluster_role
from tests.support.waiting import LIVE_TIMEOUT, wait_for

SECRETS = Resource("", "v1", "secrets", "Secret")
NODES = Resource("", "v1", "nodes", "Node", namespaced=False)
SAR = Resource(
    "authorization.k8s.io", "v1", "subjectaccessreviews", "SubjectAccessReview", namespaced=False
)


@pytest.fixture
def operator_kubeconfig(
    api: RestClient, control_plane: ControlPlane, crd: None, tmp_path: Path
) -> Iterator[Path]:
    with operator_identity(api, control_plane, cluster_role(), tmp_path / "sa.kubeconfig") as (
        kubeconfig,
        _user,
    ):
        yield kubeconfig


def allowed(api: RestClient, user: str, **attrs: Any) -> bool:
    review = api.create(
        SAR,
        None,
        {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": {
                "user": user,
                "groups": ["system:serviceaccounts", "system:authenticated"],
                "resourceAttributes": attrs,
            },
        },
    )
    return bool(review["status"].get("allowed"))


def test_operator_runs_a_job_with_its_own_rbac_only(
    api: RestClient, namespace: str, operator_kubeconfig: Path
) -> None:
    sa = RestClient.from_config(str(operator_kubeconfig))
    refused_calls: list[Callable[[], object]] = [
        # secrets: only create (the jobs' transfer tokens), never read
        lambda: sa.list(SECRETS, namespace),
        lambda: sa.get(SECRETS, namespace, "dgl-graphsage-transfer"),
        # nodes: read only (lost nodes), never written
        lambda: sa.patch(NODES, None, "any-node", {"metadata": {"labels": {"a": "b"}}}),
        lambda: sa.delete(NODES, None, "any-node"),
        lambda: sa.get(SECRETS, "kube-system", "anything"),
    ]
    for attempt in refused_calls:
        with pytest.raises(Forbidden):
            attempt()
    with InProcessOperator(str(operator_kubeconfig), namespace) as op:
        raw = load_fixture("seed_dgljob.yaml")
        raw["metadata"]["namespace"] = namespace
        api.create(DGLJOBS, namespace, raw)
        kubelet = Kubelet(api, namespace)
        names = [f"dgl-graphsage-{n}" for n in ("worker-0", "worker-1", "partitioner")]
        wait_for(
            lambda: (
                set(names) <= {p["metadata"]["name"] for p in api.list(PODS, namespace)["items"]}
            ),
            what="pods created under the operator's own RBAC",
            timeout=LIVE_TIMEOUT,
        )
        for i, name in enumerate(names):
            kubelet.run(name, f"10.5.0.{i + 2}")
        wait_for(
            lambda: (
                "dgl-graphsage-launcher"
                in {p["metadata"]["name"] for p in api.list(PODS, namespace)["items"]}
            ),
            what="launcher pod",
            timeout=LIVE_TIMEOUT,
        )
        kubelet.finish("dgl-graphsage-partitioner")
        kubelet.run("dgl-graphsage-launcher", "10.5.0.9")
        kubelet.finish("dgl-graphsage-launcher")

        def succeeded() -> bool:
            conds = api.get(DGLJOBS, namespace, "dgl-graphsage").get("status", {}).get("conditions")
            return any(c["type"] == "Succeeded" and c["status"] == "True" for c in conds or [])

        wait_for(succeeded, what="Succeeded under the operator's own RBAC", timeout=LIVE_TIMEOUT)
        forbidden = [
            k
            for k, v in _samples(op, "rest_client_requests_total").items()
            if k[2] == "403" and v > 0
        ]
        assert forbidden == [], f"the operator was refused: {forbidden}"
        assert _samples(op, "controller_runtime_reconcile_errors_total") == {("dgljob",): 0.0}


def _samples(op: InProcessOperator, name: str) -> dict[tuple[str, ...], float]:
    out = {}
    for metric in op.metrics.registry.collect():
        for s in metric.samples:
            if s.name == name:
                out[tuple(s.labels.values())] = s.value
    return out


def sa_kubectl(
    api: RestClient, cp: ControlPlane, namespace: str, sa: str, tmp: Path
) -> Callable[..., subprocess.CompletedProcess[str]]:
    """The real kubectl with a TokenRequest token of ``sa``, as in its pod."""
    review = api.create(
        SERVICEACCOUNTS,
        namespace,
        {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}},
        name=sa,
        subresource="token",
    )
    config = kubeconfig(
        tmp / f"{sa}.kubeconfig", cp.server, cp.pki, sa, token=review["status"]["token"]
    )
    kubectl = str(k8s_binaries("kubectl") / "kubectl")

    def run(*args: str, input: str | None = None) -> subprocess.CompletedProcess[str]:
        argv = [kubectl, f"--kubeconfig={config}", "-n", namespace, *args]
        return subprocess.run(argv, capture_output=True, text=True, timeout=60, input=input)

    return run


def test_launcher_may_exec_only_into_its_own_workers(
    api: RestClient,
    namespace: str,
    operator_kubeconfig: Path,
    control_plane: ControlPlane,
    tmp_path: Path,
) -> None:
    with InProcessOperator(str(operator_kubeconfig)):
        for job in ("a", "b"):
            raw = load_fixture("seed_dgljob.yaml")
            raw["metadata"].update(name=job, namespace=namespace)
            if job == "b":  # the original's delivery: the partitioner execs into the launcher
                raw["spec"]["partitionTransfer"] = "KubectlCp"
            api.create(DGLJOBS, namespace, raw)
        wait_for(
            lambda: (
                len(
                    api.list(
                        Resource("rbac.authorization.k8s.io", "v1", "roles", "Role"), namespace
                    )["items"]
                )
                == 4
            ),
            what="the jobs' Roles",
            timeout=LIVE_TIMEOUT,
        )
    launcher = f"system:serviceaccount:{namespace}:a-launcher"
    partitioner = f"system:serviceaccount:{namespace}:a-partitioner"

    def exec_into(user: str, pod: str) -> bool:
        return allowed(
            api,
            user,
            namespace=namespace,
            verb="create",
            resource="pods",
            subresource="exec",
            name=pod,
        )

    assert exec_into(launcher, "a-worker-0") and exec_into(launcher, "a-worker-1")
    assert not exec_into(launcher, "b-worker-0"), "exec into another job's worker"
    assert not exec_into(launcher, "a-launcher") and not exec_into(launcher, "a-partitioner")
    # partitionTransfer HTTP (a): the partitioner serves and execs into nothing
    assert not exec_into(partitioner, "a-launcher") and not exec_into(partitioner, "a-worker-0")
    b_partitioner = f"system:serviceaccount:{namespace}:b-partitioner"
    assert exec_into(b_partitioner, "b-launcher")  # KubectlCp (b): into its launcher only
    assert not exec_into(b_partitioner, "b-worker-0") and not exec_into(b_partitioner, "a-launcher")
    assert allowed(api, launcher, namespace=namespace, verb="watch", resource="pods")
    assert not allowed(api, launcher, namespace=namespace, verb="get", resource="secrets")
    assert not allowed(api, launcher, namespace=namespace, verb="delete", resource="pods")
    # dglrun's progress report, exactly as it sends it, with the launcher's own token
    kubectl = sa_kubectl(api, control_plane, namespace, "a-launcher", tmp_path)
    patch = ["--subresource=status", "--type=merge", "-p"]
    body = '{"status":{"progress":"3/5 dispatch"}}'
    done = kubectl("patch", "dgljob", "a", *patch, body)
    assert done.returncode == 0, done.stderr
    assert api.get(DGLJOBS, namespace, "a")["status"]["progress"] == "3/5 dispatch"
    other = kubectl("patch", "dgljob", "b", *patch, body)
    assert other.returncode != 0 and "forbidden" in other.stderr.lower(), other.stderr
    spec = kubectl("patch", "dgljob", "a", "--type=merge", "-p", '{"spec":{"slotsPerWorker":2}}')
    assert spec.returncode != 0 and "forbidden" in spec.stderr.lower(), spec.stderr
    # the detail beside it, as dglrun's publisher sends it: the schema takes it, `kubectl get`
    # shows the ETA column, and the last word ends the estimates (null removes them)
    from launcher.report.progress import StatusProgress

    sender = StatusProgress(
        "kubectl", "a", 4, print, interval=0, run=lambda argv: kubectl(*argv[1:])
    )
    sender.phase(5, 5, "train")
    sender.output("a-worker-0/trainer-0", "epoch 0 loss 1.25 nodes 500 time 100.00s")

    def detail() -> dict[str, Any]:
        return dict(api.get(DGLJOBS, namespace, "a")["status"].get("progressDetail") or {})

    wait_for(lambda: "loss" in (detail().get("metrics") or {}), what="the detail", timeout=30)
    got = detail()
    assert got["stepName"] == "train" and got["percentage"] == 85, got
    assert 280 <= got["estimatedRemainingSeconds"] <= 300, got  # 3 epochs of 100 s
    assert got["metrics"] == {"epoch": 1, "loss": 1.25, "samplesPerSecond": 5}, got
    admin = [str(k8s_binaries("kubectl") / "kubectl"), f"--kubeconfig={control_plane.kubeconfig}"]
    table = subprocess.run([*admin, "-n", namespace, "get", "dgljob", "a"], capture_output=True,
                           text=True, timeout=60, check=True)  # fmt: skip
    header, row = table.stdout.splitlines()[:2]
    column = header.index("ETA")
    assert "ETA" in header.split() and row[column:].startswith(got["eta"]), (header, row)
    sender.finish("done")
    final = api.get(DGLJOBS, namespace, "a")["status"]
    assert final["progress"] == "done" and final["progressDetail"]["percentage"] == 100
    assert "eta" not in final["progressDetail"], final["progressDetail"]
    # dglrun's own Events (partitions reused, a checkpoint resumed from), exactly as it sends
    # them: an Event on the job, made with the launcher's token
    from launcher.console import NORMAL
    from launcher.report.progress import StatusProgress

    uid = api.get(DGLJOBS, namespace, "a")["metadata"]["uid"]
    event = StatusProgress("kubectl", "a", 1, print, uid=uid, namespace=namespace).event_object(
        NORMAL, "Resuming", "Resuming training at epoch 2 of 4"
    )
    made = kubectl("create", "-f", "-", "-o", "name", input=json.dumps(event))
    assert made.returncode == 0, made.stderr
    name = made.stdout.strip().rsplit("/", 1)[-1]
    got = api.get(EVENTS, namespace, name)
    assert got["reason"] == "Resuming" and got["source"]["component"] == "dglrun"
    assert got["involvedObject"]["uid"] == uid and got["involvedObject"]["kind"] == "DGLJob"
    assert not allowed(api, launcher, namespace=namespace, verb="delete", resource="events")
