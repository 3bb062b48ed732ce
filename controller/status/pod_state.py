"""What one pod says: its phase, whether it is active, ready or started, its containers'
states, its node; pure functions of the pod's JSON."""

from __future__ import annotations

from controller.builders import ATTEMPT_ANNOTATION, REPLICA_TYPE_LABEL
from controller.status.conditions import parse_time
from kubeclient import Obj


def pod_phase(pod: Obj) -> str:
    return str((pod.get("status") or {}).get("phase") or "Pending")


def is_terminating(pod: Obj) -> bool:
    return bool((pod.get("metadata") or {}).get("deletionTimestamp"))


def is_active(pod: Obj) -> bool:
    return not is_terminating(pod) and pod_phase(pod) in ("Pending", "Running")


def is_ready(pod: Obj) -> bool:
    if pod_phase(pod) != "Running":
        return False
    for c in (pod.get("status") or {}).get("conditions") or []:
        if c.get("type") == "Ready":
            return bool(c.get("status") == "True")
    return False


def pod_ip(pod: Obj | None) -> str:
    return str(((pod or {}).get("status") or {}).get("podIP") or "")


def replica_type(pod: Obj) -> str:
    return str(((pod.get("metadata") or {}).get("labels") or {}).get(REPLICA_TYPE_LABEL) or "")


def attempt_of(pod: Obj) -> int:
    raw = ((pod.get("metadata") or {}).get("annotations") or {}).get(ATTEMPT_ANNOTATION, "0")
    try:
        return int(raw)
    except (TypeError, ValueError):
        return -1


def main_container_name(pod: Obj) -> str:
    containers = (pod.get("spec") or {}).get("containers") or [{}]
    return str(containers[0].get("name") or "")


def container_status(pod: Obj, name: str, init: bool = False) -> Obj | None:
    key = "initContainerStatuses" if init else "containerStatuses"
    for cs in (pod.get("status") or {}).get(key) or []:
        if cs.get("name") == name:
            return dict(cs)
    return None


def terminated_state(cs: Obj | None) -> Obj | None:
    if not cs:
        return None
    t = (cs.get("state") or {}).get("terminated")
    return dict(t) if isinstance(t, dict) else None


def main_started(pod: Obj | None) -> bool:
    if not pod:
        return False
    cs = container_status(pod, main_container_name(pod))
    state = (cs or {}).get("state") or {}
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


def creation_time(obj: Obj) -> float | None:
    return parse_time((obj.get("metadata") or {}).get("creationTimestamp"))


def pod_started(pod: Obj) -> bool:
    """The pod got past scheduling and container creation: it runs (or ran), or one of its
    init containers does (the launcher waits for its peers in one, for as long as that
    takes)."""
    if pod_phase(pod) != "Pending":
        return True
    for cs in (pod.get("status") or {}).get("initContainerStatuses") or []:
        state = cs.get("state") or {}
        if "running" in state or "terminated" in state:
            return True
    return False


def node_name(pod: Obj) -> str:
    return str((pod.get("spec") or {}).get("nodeName") or "")
