"""Nodes that can no longer run the job's pods (NotReady, unreachable, gone), and the
failure a pod bound to one of them is.

A node is *silent* when only its missing heartbeats say it is lost (the node lifecycle
controller set Ready=Unknown or tainted it unreachable). When every node is silent at once,
the control plane, not the nodes, is the likely cause (an API server or etcd away longer than
the node monitor's grace, 50 s by default): Kubernetes' node lifecycle controller then evicts
nothing and lifts its unreachable taints, and the operator, alike, counts no silent node as
lost (``full_disruption``). Stop 65's CI: an API server restart of a one-node cluster left the
kubelet's lease unrenewed past the grace, and five jobs created in the next 25 s failed
NodeLost while the kubelet ran them."""

from __future__ import annotations

from collections.abc import Iterable

from controller.api import DGLJob
from controller.machinery import objects as ob
from controller.status.conditions import REASON_NODE_LOST
from controller.status.failures import PodFailure
from controller.status.observation import Observation, replica_order
from controller.status.pod_state import is_active, node_name, replica_type
from kubeclient import Obj

UNREACHABLE_TAINT = "node.kubernetes.io/unreachable"


def node_lost(node: Obj | None) -> str | None:
    """Why a node cannot run its pods any more (None: it can): gone, being deleted, Ready not
    True (the node controller sets Unknown once the kubelet stops reporting), or tainted
    unreachable. A node that has not reported Ready yet (just registered) is not lost. (Its
    caller, Actions.node_lost, waits out an ``unwell`` one and asks ``full_disruption`` of a
    ``silent`` one.)"""
    if node is None:
        return "deleted"
    if ob.being_deleted(node):
        return "being deleted"
    c = _not_ready(node)
    if c is not None:
        detail = str(c.get("message") or c.get("reason") or "").strip()
        return f"Ready={c.get('status')}" + (f": {detail}" if detail else "")
    if _unreachable(node):
        return f"tainted {UNREACHABLE_TAINT}"
    return None


def _not_ready(node: Obj) -> ob.Condition | None:
    """The node's Ready condition when it is not True (None: Ready, or never reported)."""
    for c in ob.conditions(ob.node_status(node)):
        if c.get("type") == "Ready" and c.get("status") != "True":
            return c
    return None


def _unreachable(node: Obj) -> bool:
    return any(t.get("key") == UNREACHABLE_TAINT for t in ob.node_spec(node).get("taints") or [])


def silent(node: Obj) -> bool:
    """Lost by missing heartbeats alone: Ready=Unknown or tainted unreachable, and not being
    deleted (a kubelet's own Ready=False is not silence)."""
    if ob.being_deleted(node):
        return False
    c = _not_ready(node)
    return c.get("status") == "Unknown" if c is not None else _unreachable(node)


def unwell(node: Obj) -> str | None:
    """How a node that may recover is unwell: ``silent`` (missing heartbeats), ``not ready``
    (its kubelet's own Ready=False); None when it is well, or deleted (lost for good)."""
    if ob.being_deleted(node):
        return None
    if silent(node):
        return "silent"
    return "not ready" if _not_ready(node) is not None else None


def full_disruption(nodes: Iterable[Obj]) -> bool:
    """Every node (one at least) silent at once: the control plane is at fault, not them."""
    seen = False
    for node in nodes:
        if not silent(node):
            return False
        seen = True
    return seen


def node_loss_message(lost: dict[str, str], pods: list[Obj]) -> str:
    """``node n is lost (why): pods a, b ran there`` for each lost node holding one of
    ``pods`` (nodes by name)."""
    held: dict[str, list[str]] = {}
    for pod in pods:
        where = node_name(pod)
        if where in lost:
            held.setdefault(where, []).append(ob.name(pod))
    parts = [
        f"node {n} is lost ({lost[n]}): pods {', '.join(sorted(held[n]))} ran there"
        for n in sorted(held)
    ]
    return "; ".join(parts)


def node_loss_failure(job: DGLJob, obs: Observation, lost: dict[str, str]) -> PodFailure | None:
    """A pod of the attempt that has not finished is bound to a lost node: DistDGL cannot go
    on without it."""
    if not lost:
        return None
    rank = {name: i for i, name in enumerate(replica_order(job))}
    hit = sorted(
        (p for p in obs.pods.values() if node_name(p) in lost and is_active(p)),
        key=lambda p: rank.get(ob.name(p), len(rank)),
    )
    if not hit:
        return None
    first = hit[0]
    return PodFailure(
        replica_type(first) or "Pod",
        ob.name(first),
        "",
        None,
        REASON_NODE_LOST,
        node_loss_message(lost, hit),
    )
