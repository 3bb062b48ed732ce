"""Tenants kept apart on the wire, with NetworkPolicy enforced (localcluster/netpol.py: the
real kube-network-policies engine): while a job runs, a pod of another namespace reaches
none of its pods, nor does a pod of the job's own namespace that is not the job's; the job's
own pods reach each other and the job succeeds.

The cluster here has no DNS. A headless Service's name resolves to the addresses of its
EndpointSlices, so "by the Service name" is tried on those addresses, which is what the
lookup would return."""

from __future__ import annotations

from typing import Any

import podcontract as pc
from e2e.helpers import (
    apply,
    conditions,
    connect,
    epochs_done,
    example_job,
    figure,
    get_job,
    kubectl_run,
    launcher_args,
    listening,
    start_prober,
    succeeded,
    wait_finished,
    wait_job,
    wait_ready,
)
from tests.support.waiting import wait_for

NAME = "iso"
IMAGE = "dgloperator/graphsage:v0.1.0"
GATE = "/tmp/go"  # the workers are Ready once it exists: the test holds the job before training


def gated_job(ns: str) -> dict[str, Any]:
    """The example, its workers Ready only once GATE exists (the launcher waits for them), and
    trained long enough to be caught training."""
    job = example_job(ns, NAME)
    args = launcher_args(job)
    args[args.index("--num-epochs") + 1] = "6"
    worker = job["spec"]["dglReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    worker["readinessProbe"] = {"exec": {"command": ["test", "-f", GATE]}, "periodSeconds": 1}
    return job


def ip_of(cluster: Any, ns: str, pod: str) -> str:
    return str(cluster.kubectl(["get", "pod", pod, "-n", ns])["status"]["podIP"])


def service_addresses(cluster: Any, ns: str, service: str) -> list[str]:
    slices = cluster.kubectl(
        ["get", "endpointslices", "-n", ns, "-l", f"kubernetes.io/service-name={service}"]
    )["items"]
    return sorted({a for s in slices for e in s.get("endpoints") or [] for a in e["addresses"]})


def test_no_pod_outside_the_job_reaches_its_pods_while_it_runs(
    cluster: Any, namespace: str, other_namespace: str
) -> None:
    foe_ns = other_namespace
    job_label = {"dgl.qihoo.net/job-name": NAME, "dgl-replica-type": "worker"}
    # a pod of another tenant, even one wearing the job's labels, and a pod of the job's own
    # namespace that is not the job's
    start_prober(cluster, foe_ns, "foe", IMAGE, job_label)
    start_prober(cluster, namespace, "neighbour", IMAGE)
    apply(cluster, gated_job(namespace))
    part, w0, w1 = f"{NAME}-partitioner", f"{NAME}-worker-0", f"{NAME}-worker-1"
    policy = cluster.kubectl(["get", "networkpolicy", f"{NAME}-pods", "-n", namespace])
    assert policy["spec"]["podSelector"] == {"matchLabels": {"dgl.qihoo.net/job-name": NAME}}

    # 1. the partitioner serves the partitions; the workers wait at the gate
    wait_ready(cluster, namespace, part, 600)
    part_ip, w0_ip, w1_ip = (ip_of(cluster, namespace, p) for p in (part, w0, w1))
    transfer = f"{part_ip}:{pc.TRANSFER_PORT}"
    by_ip = [f"{w0_ip}:{pc.DGL_PORT}", f"{w1_ip}:{pc.DGL_PORT}"]
    by_service = [
        f"{a}:{pc.DGL_PORT}" for a in service_addresses(cluster, namespace, f"{NAME}-worker")
    ]
    assert sorted(by_service) == sorted(by_ip)
    # the workers' agents (issue 58) listen from the start: a packet let through connects
    agents = [f"{w0_ip}:{pc.AGENT_PORT}", f"{w1_ip}:{pc.AGENT_PORT}"]
    own = connect(cluster, namespace, w1, [transfer, agents[0]])
    assert own == dict.fromkeys([transfer, agents[0]], "connected"), (
        f"the job's own worker must reach the partitioner and the agents: {own}"
    )
    targets = [transfer, *by_ip, *agents]
    for ns, pod in ((foe_ns, "foe"), (namespace, "neighbour")):
        got = connect(cluster, ns, pod, targets)
        # dropped, not refused: nothing listens on the DGL ports yet, so a packet let through
        # would have been answered "refused"
        assert got == dict.fromkeys(targets, "timeout"), f"{ns}/{pod} reached the job: {got}"

    # 2. training: the DGL servers listen; the same tries, by pod IP and by the Service
    for w in (w0, w1):
        kubectl_run(cluster, ["exec", "-n", namespace, w, "--", "touch", GATE])
    wait_job(cluster, namespace, NAME, lambda j: epochs_done(j) >= 1, 900, "training to start")
    tried: dict[str, str] = {}

    def caught_training() -> bool:
        if not listening(cluster, namespace, w0, pc.DGL_PORT):
            ended = conditions(get_job(cluster, namespace, NAME))
            if any(ended.get(c, {}).get("status") == "True" for c in ("Succeeded", "Failed")):
                raise AssertionError("training ended before its DGL servers were seen listening")
            return False
        tried.update(connect(cluster, foe_ns, "foe", [*by_ip, *by_service]))
        tried.update(
            {
                f"neighbour {t}": v
                for t, v in connect(cluster, namespace, "neighbour", by_ip).items()
            }
        )
        return True

    wait_for(caught_training, what="the DGL servers listening", timeout=300, interval=0.5)
    assert set(tried.values()) == {"timeout"}, f"a pod outside the job reached it: {tried}"
    done = wait_finished(cluster, namespace, NAME, timeout=900)
    assert succeeded(done), conditions(done)
    figure(
        f"network isolation: {len(tried) + len(targets) * 2} connections from outside the job "
        f"(another namespace, by pod IP and by Service; its own namespace) dropped, the "
        f"partitions reached its workers and it succeeded"
    )
