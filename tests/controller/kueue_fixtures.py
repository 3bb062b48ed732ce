"""Kueue's side of the tests of --kueue (tests/controller/test_kueue.py, test_rbac.py): a
flavor, a queued job, the Workload statuses Kueue's scheduler writes."""

from __future__ import annotations

import copy
from typing import Any

from controller.api import DGLJob, parse_job
from controller.features import kueue
from kubeclient import WORKLOADS, Obj
from tests.controller.harness import NS, Harness, seed

T = 1_700_000_000.0
FLAVOR: Obj = {
    "apiVersion": "kueue.x-k8s.io/v1beta2",
    "kind": "ResourceFlavor",
    "metadata": {"name": "on-demand"},
    "spec": {
        "nodeLabels": {"pool": "on-demand"},
        "tolerations": [
            {"key": "pool", "operator": "Equal", "value": "od", "effect": "NoSchedule"}
        ],
    },
}


def queued(queue: str = "team-a", **spec: Any) -> Obj:
    raw = seed(**spec)
    raw["metadata"]["labels"] = {kueue.QUEUE_LABEL: queue}
    return raw


def parsed(raw: Obj) -> DGLJob:
    raw = copy.deepcopy(raw)
    raw["metadata"].setdefault("uid", "0f1e2d3c-0000-4000-8000-000000000001")
    raw["metadata"].setdefault("namespace", NS)
    return parse_job(raw)


def cond(kind: str, status: bool, reason: str, message: str = "") -> Obj:
    return {"type": kind, "status": "True" if status else "False", "reason": reason,
            "message": message, "lastTransitionTime": "2026-11-26T10:00:00Z"}  # fmt: skip


def admission(worker_count: int = 2) -> Obj:
    def assign(name: str, count: int) -> Obj:
        return {"name": name, "flavors": {"cpu": "on-demand", "memory": "on-demand"},
                "count": count, "resourceUsage": {"cpu": "1"}}  # fmt: skip

    return {
        "clusterQueue": "cq",
        "podSetAssignments": [
            assign("partitioner", 1), assign("worker", worker_count), assign("launcher", 1)
        ],
    }  # fmt: skip


def admitted_status(worker_count: int = 2, **extra: Any) -> Obj:
    return {
        "admission": admission(worker_count),
        "conditions": [
            cond("QuotaReserved", True, "QuotaReserved", "Quota reserved in ClusterQueue cq"),
            cond("Admitted", True, "Admitted", "The workload is admitted"),
        ],
        **extra,
    }


def workload(h: Harness) -> Obj:
    (wl,) = h.kube.objects(WORKLOADS, NS)
    return wl


def kueue_writes(h: Harness, status: Obj) -> None:
    """Kueue's scheduler writes the Workload's status."""
    wl = workload(h)
    h.kube.patch(WORKLOADS, NS, wl["metadata"]["name"], {"status": status}, subresource="status")


def local_queue(name: str = kueue.DEFAULT_LOCAL_QUEUE, namespace: str = NS) -> Obj:
    """A LocalQueue (what the operator reads of it: that it is there)."""
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"clusterQueue": "cq"}}  # fmt: skip
