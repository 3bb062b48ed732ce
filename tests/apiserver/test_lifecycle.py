"""A DGLJob's lifecycle against the real API server (status subresource, CEL, GC, events)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from typing import Any

import pytest

from controller.api import DGLJOBS
from kubeclient import (
    CONFIGMAPS,
    EVENTS,
    PODS,
    ROLEBINDINGS,
    ROLES,
    SERVICEACCOUNTS,
    SERVICES,
    NotFound,
    RestClient,
)
from localcluster.cluster import ControlPlane, k8s_binaries
from tests.support.dgljobs import load_fixture
from tests.support.live import InProcessOperator, Kubelet
from tests.support.waiting import LIVE_TIMEOUT, wait_for

J = "dgl-graphsage"
W0, W1, PART, LAUNCH = f"{J}-worker-0", f"{J}-worker-1", f"{J}-partitioner", f"{J}-launcher"


@pytest.fixture
def operator(control_plane: ControlPlane, namespace: str) -> Iterator[InProcessOperator]:
    with InProcessOperator(str(control_plane.kubeconfig), namespace) as op:
        yield op


def create(api: RestClient, ns: str, **spec: Any) -> None:
    raw = load_fixture("seed_dgljob.yaml")
    raw["metadata"]["namespace"] = ns
    raw["spec"].update(spec)
    api.create(DGLJOBS, ns, raw)


def pods(api: RestClient, ns: str) -> dict[str, Any]:
    return {p["metadata"]["name"]: p for p in api.list(PODS, ns)["items"]}


def status(api: RestClient, ns: str) -> dict[str, Any]:
    st: dict[str, Any] = api.get(DGLJOBS, ns, J).get("status") or {}
    return st


def condition(api: RestClient, ns: str, ctype: str) -> dict[str, Any] | None:
    for c in status(api, ns).get("conditions") or []:
        if c["type"] == ctype:
            return dict(c)
    return None


def wait_condition(api: RestClient, ns: str, ctype: str, timeout: float = 30) -> dict[str, Any]:
    def true() -> dict[str, Any] | None:
        c = condition(api, ns, ctype)
        return c if c and c["status"] == "True" else None

    found: dict[str, Any] = wait_for(true, what=f"condition {ctype}", timeout=timeout)
    return found


def hostfile(api: RestClient, ns: str) -> str:
    return str(api.get(CONFIGMAPS, ns, f"{J}-config")["data"]["hostfile"])


def train(api: RestClient, ns: str) -> Kubelet:
    kubelet = Kubelet(api, ns)
    wait_for(
        lambda: {W0, W1, PART} <= set(pods(api, ns)),
        what="worker and partitioner pods",
        timeout=LIVE_TIMEOUT,
    )
    assert hostfile(api, ns) == "", "no line for a pod without an IP"
    kubelet.run(W1, "10.0.1.2")
    # the hostfile follows the pods' IPs as the kubelet reports them
    wait_for(
        lambda: hostfile(api, ns) == f"10.0.1.2 30050 {W1} slots=1\n",
        what="W1's line",
        timeout=LIVE_TIMEOUT,
    )
    kubelet.run(W0, "10.0.1.1")
    kubelet.run(PART, "10.0.1.3")
    wait_for(lambda: LAUNCH in pods(api, ns), what="the launcher pod", timeout=LIVE_TIMEOUT)
    kubelet.init_running(LAUNCH, "10.0.1.4")
    kubelet.finish(PART, seconds=12)
    wait_for(
        lambda: status(api, ns).get("phase") == "Partitioned",
        what="Partitioned",
        timeout=LIVE_TIMEOUT,
    )
    kubelet.run(LAUNCH, "10.0.1.4")
    wait_for(
        lambda: status(api, ns).get("phase") == "Training", what="Training", timeout=LIVE_TIMEOUT
    )
    return kubelet


def kubectl() -> str:
    return str(k8s_binaries("kubectl") / "kubectl")


def test_happy_path_with_kubectl(
    api: RestClient, namespace: str, operator: InProcessOperator, control_plane: ControlPlane
) -> None:
    """A manifest asking for the original's delivery (KubectlCp) runs to the end, served as
    HTTP (the job's token Secret; no partition runtime taken from the partitioner pod)."""
    ns = namespace
    create(api, ns, partitionTransfer="KubectlCp")
    wait_condition(api, ns, "Created")
    kubelet = train(api, ns)
    cm = api.get(CONFIGMAPS, ns, f"{J}-config")["data"]
    assert cm["hostfile"] == f"10.0.1.1 30050 {W0} slots=1\n10.0.1.2 30050 {W1} slots=1\n"
    assert cm["partfile"] == f"10.0.1.3 30050 {PART}\n"
    assert status(api, ns)["transferSecret"].startswith(f"{J}-transfer-")
    kubelet.finish(LAUNCH, seconds=30)
    kc = [kubectl(), "--kubeconfig", str(control_plane.kubeconfig), "-n", ns]
    out = subprocess.run(
        [*kc, "wait", "--for=condition=Succeeded", f"dgljob/{J}", "--timeout=60s"],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr
    table = subprocess.run([*kc, "get", "dglj"], capture_output=True, text=True, check=True).stdout
    assert "Completed" in table and "PHASE" in table and "WORKERS" in table
    st = status(api, ns)
    assert st["phase"] == "Completed" and st["trainingSeconds"] == 30 and st["completionTime"]
    wait_for(
        lambda: set(pods(api, ns)) == {PART, LAUNCH},
        what="running workers cleaned up",
        timeout=LIVE_TIMEOUT,
    )
    wait_for(
        lambda: api.list(SERVICES, ns)["items"] == [],
        what="the workers' Service cleaned up",
        timeout=LIVE_TIMEOUT,
    )
    lifecycle = {
        "DGLJobCreated",
        "SuccessfulCreate",
        "DGLJobPartitioning",
        "DGLJobTraining",
        "DGLJobSucceeded",
    }
    wait_for(  # (Events come from the recorder's own thread, after the status they tell of)
        lambda: lifecycle <= {e["reason"] for e in api.list(EVENTS, ns)["items"]},
        what=f"the Events {sorted(lifecycle)}", timeout=LIVE_TIMEOUT,
    )  # fmt: skip
    described = subprocess.run([*kc, "describe", "dglj", J], capture_output=True, text=True)
    assert "DGLJobSucceeded" in described.stdout


@pytest.mark.parametrize(
    ("policy", "left"),
    [("All", set()), ("None", {W0, W1, PART, LAUNCH})],
)
def test_clean_pod_policy(
    api: RestClient, namespace: str, operator: InProcessOperator, policy: str, left: set[str]
) -> None:
    create(api, namespace, cleanPodPolicy=policy)
    kubelet = train(api, namespace)
    kubelet.finish(LAUNCH)
    wait_condition(api, namespace, "Succeeded")
    wait_for(
        lambda: set(pods(api, namespace)) == left,
        what=f"pods left by {policy}",
        timeout=LIVE_TIMEOUT,
    )


def test_deleting_the_job_removes_every_child(
    api: RestClient, namespace: str, operator: InProcessOperator
) -> None:
    create(api, namespace)
    train(api, namespace)
    children = (PODS, SERVICES, CONFIGMAPS, SERVICEACCOUNTS, ROLES, ROLEBINDINGS)
    assert all(
        api.list(r, namespace, label_selector=f"dgl.qihoo.net/job-name={J}")["items"]
        for r in children
    )
    api.delete(DGLJOBS, namespace, J, propagation_policy="Background")

    def gone() -> bool:
        return not any(
            api.list(r, namespace, label_selector=f"dgl.qihoo.net/job-name={J}")["items"]
            for r in children
        )

    wait_for(gone, what="the garbage collector to remove every child", timeout=60)


def test_worker_failure_then_backoff_restart(
    api: RestClient, namespace: str, operator: InProcessOperator
) -> None:
    create(api, namespace, runPolicy={"backoffLimit": 1})
    kubelet = train(api, namespace)
    old = {n: p["metadata"]["uid"] for n, p in pods(api, namespace).items()}
    kubelet.finish(W1, exit_code=137)
    cond = wait_condition(api, namespace, "Restarting")
    assert W1 in cond["message"] and "137" in cond["message"]
    wait_for(
        lambda: (
            {W0, W1, PART} <= set(pods(api, namespace))
            and all(p["metadata"]["uid"] != old.get(n) for n, p in pods(api, namespace).items())
        ),
        what="fresh pods for the restart",
        timeout=LIVE_TIMEOUT,
    )
    kubelet = train(api, namespace)
    kubelet.finish(W0, exit_code=1)
    cond = wait_condition(api, namespace, "Failed")
    assert cond["reason"] == "BackoffLimitExceeded" and W0 in cond["message"]
    assert status(api, namespace)["restartCount"] == 1


def test_suspend_and_resume(api: RestClient, namespace: str, operator: InProcessOperator) -> None:
    create(api, namespace, runPolicy={"suspend": True})
    wait_condition(api, namespace, "Suspended")
    assert pods(api, namespace) == {}
    api.patch(DGLJOBS, namespace, J, {"spec": {"runPolicy": {"suspend": False}}})
    wait_for(
        lambda: {W0, W1, PART} <= set(pods(api, namespace)),
        what="pods after resume",
        timeout=LIVE_TIMEOUT,
    )
    api.patch(DGLJOBS, namespace, J, {"spec": {"runPolicy": {"suspend": True}}})
    wait_for(
        lambda: pods(api, namespace) == {}, what="pods deleted on suspend", timeout=LIVE_TIMEOUT
    )
    # The pods go first and the status is written after them, in the same sync: wait for it.
    wait_for(
        lambda: status(api, namespace).get("phase") == "Suspended",
        what="phase Suspended after the second suspend",
        timeout=LIVE_TIMEOUT,
    )
    suspended = condition(api, namespace, "Suspended")
    assert suspended is not None and suspended["status"] == "True"


def test_active_deadline(api: RestClient, namespace: str, operator: InProcessOperator) -> None:
    create(api, namespace, cleanPodPolicy="None", runPolicy={"activeDeadlineSeconds": 3})
    train(api, namespace)
    cond = wait_condition(api, namespace, "Failed", timeout=30)
    assert cond["reason"] == "DeadlineExceeded"
    wait_for(
        lambda: set(pods(api, namespace)) == {PART},
        what="active pods stopped",
        timeout=LIVE_TIMEOUT,
    )


def test_ttl_after_finished(api: RestClient, namespace: str, operator: InProcessOperator) -> None:
    create(api, namespace, runPolicy={"ttlSecondsAfterFinished": 2})
    kubelet = train(api, namespace)
    kubelet.finish(LAUNCH)
    wait_condition(api, namespace, "Succeeded")

    def deleted() -> bool:
        try:
            api.get(DGLJOBS, namespace, J)
        except NotFound:
            return True
        return False

    wait_for(deleted, what="TTL deletion", timeout=30)
    wait_for(lambda: pods(api, namespace) == {}, what="children collected", timeout=60)
