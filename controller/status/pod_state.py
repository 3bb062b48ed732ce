"""What one pod says: its phase, whether it is active, ready or started, its containers'
states, its node; pure functions of the pod's JSON (read through
controller/machinery/objects.py)."""

from __future__ import annotations

from controller.builders import ATTEMPT_ANNOTATION, REPLICA_TYPE_LABEL
from controller.machinery import objects as ob
from controller.machinery.objects import ContainerStatus, StateTerminated
from controller.status.conditions import parse_time
from kubeclient import Obj


def pod_phase(pod: Obj) -> str:
    return ob.pod_status(pod).get("phase") or "Pending"


def is_terminating(pod: Obj) -> bool:
    return ob.being_deleted(pod)


def is_active(pod: Obj) -> bool:
    return not is_terminating(pod) and pod_phase(pod) in ("Pending", "Running")


def is_ready(pod: Obj) -> bool:
    if pod_phase(pod) != "Running":
        return False
    for c in ob.conditions(ob.pod_status(pod)):
        if c.get("type") == "Ready":
            return c.get("status") == "True"
    return False


def pod_ip(pod: Obj | None) -> str:
    return ob.pod_status(pod).get("podIP") or ""


def replica_type(pod: Obj) -> str:
    return str(ob.labels(pod).get(REPLICA_TYPE_LABEL) or "")


def attempt_of(pod: Obj) -> int:
    raw = ob.annotation(pod, ATTEMPT_ANNOTATION)
    try:
        return int(raw if raw is not None else "0")
    except (TypeError, ValueError):
        return -1


def main_container_name(pod: Obj) -> str:
    containers = ob.pod_spec(pod).get("containers") or [{}]
    return containers[0].get("name") or ""


def container_status(pod: Obj, name: str, init: bool = False) -> ContainerStatus | None:
    for cs in ob.container_statuses(pod, init=init):
        if cs.get("name") == name:
            return cs
    return None


def terminated_state(cs: ContainerStatus | None) -> StateTerminated | None:
    return ob.terminated(cs)


def main_started(pod: Obj | None) -> bool:
    if not pod:
        return False
    state = ob.state(container_status(pod, main_container_name(pod)))
    return "running" in state or "terminated" in state


def main_run_seconds(pod: Obj | None) -> float | None:
    """How long the main container ran, once it terminated."""
    if not pod:
        return None
    t = terminated_state(container_status(pod, main_container_name(pod)))
    if not t:
        return None
    start, end = parse_time(t.get("startedAt")), parse_time(t.get("finishedAt"))
    if start is None or end is None:
        return None
    return max(0.0, end - start)


def finished_at(pod: Obj | None) -> float | None:
    """When the main container terminated (None: it has not)."""
    if not pod:
        return None
    t = terminated_state(container_status(pod, main_container_name(pod)))
    return parse_time(t.get("finishedAt")) if t else None


def creation_time(obj: Obj) -> float | None:
    return parse_time(ob.meta(obj).get("creationTimestamp"))


def pod_started(pod: Obj) -> bool:
    """The pod got past scheduling and container creation: it runs (or ran), or one of its
    init containers runs (the launcher waits for its peers in one, for as long as that
    takes). An init container that has ended is not enough: every worker's first one (the
    agent's install) ends at once, and its main container may still wait for its image."""
    if pod_phase(pod) != "Pending":
        return True
    return any("running" in ob.state(cs) for cs in ob.container_statuses(pod, init=True))


def node_name(pod: Obj) -> str:
    return ob.pod_spec(pod).get("nodeName") or ""
