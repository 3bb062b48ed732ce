"""Why a pod failed (:class:`PodFailure`): the first container that exited non-zero, the
condition reason and message the job's failure or restart takes from it, and whether another
attempt could do better (:data:`PERMANENT`)."""

from __future__ import annotations

from dataclasses import dataclass

from controller.machinery import objects as ob
from controller.status.conditions import (
    REASON_FILE_REFUSED,
    REASON_MEMORY_PLAN,
    REASON_NODE_LOST,
    REASON_OOM_KILLED,
)
from controller.status.pod_state import pod_phase, replica_type, terminated_state
from kubeclient import Obj
from podcontract import MEMORY_PLAN_PREFIX, OOM_PREFIX, REFUSED_PREFIX

# how much of a pod's termination message a condition quotes: a few lines of an error; a
# memory plan's refusal whole (its advice, which names the options that make the step fit,
# comes last: cut at 300 the out-of-core option was lost; the kubelet keeps 4096 bytes)
QUOTED = 300
QUOTED_PLAN = 4096
# a refusal whole (dglrun quotes up to 1000 characters of the process's line, file first)
QUOTED_REFUSAL = 1500

# The condition reasons of a failure that every attempt would meet again: the job fails at
# once, whatever backoffLimit allows (a step that cannot fit; a file a process refuses to load)
PERMANENT = frozenset({REASON_MEMORY_PLAN, REASON_FILE_REFUSED})


@dataclass(frozen=True)
class PodFailure:
    replica_type: str
    pod: str
    container: str
    exit_code: int | None
    reason: str
    message: str

    @property
    def condition_reason(self) -> str:
        """``OOMKilled`` when the kernel killed the container for memory, or a process in
        one of the job's pods (dglrun's termination message names it and its pod),
        ``MemoryPlanExceeded`` when dglrun refused to start a step that would not fit (its
        termination message says which), ``FileRefused`` when a process refused a file it was
        to load (dglrun's termination message quotes it), else ``<ReplicaType>Failed``."""
        if self.reason == REASON_OOM_KILLED or self.message.startswith(OOM_PREFIX):
            return REASON_OOM_KILLED
        if self.message.startswith(MEMORY_PLAN_PREFIX):
            return REASON_MEMORY_PLAN
        if self.message.startswith(REFUSED_PREFIX):
            return REASON_FILE_REFUSED
        if self.reason == REASON_NODE_LOST:
            return REASON_NODE_LOST
        return f"{self.replica_type}Failed"

    @property
    def permanent(self) -> bool:
        """Whether every attempt would fail the same way (:data:`PERMANENT`): no restart."""
        return self.condition_reason in PERMANENT

    def describe(self) -> str:
        if self.reason == REASON_NODE_LOST:
            return self.message  # names the nodes and the pods they held
        what = f"{self.replica_type.lower()} pod {self.pod}"
        if self.message.startswith(OOM_PREFIX):  # dglrun names the process and its pod
            return f"{self.message[len(OOM_PREFIX) :].strip()[:QUOTED]} (reported by {what})"
        if self.message.startswith(REFUSED_PREFIX):  # the process's refusal names the file
            refusal = self.message[len(REFUSED_PREFIX) :].strip()[:QUOTED_REFUSAL]
            return f"{refusal} (reported by {what})"
        if self.container:
            detail = f"container {self.container} exited with code {self.exit_code}"
            if self.reason:
                detail += f" ({self.reason})"
        else:
            detail = self.reason or "failed"
        if self.message:
            most = QUOTED_PLAN if self.message.startswith(MEMORY_PLAN_PREFIX) else QUOTED
            detail += f": {self.message.strip()[:most]}"
        return f"{what} failed: {detail}"


def pod_failure(pod: Obj) -> PodFailure | None:
    """Why a Failed pod failed: the first container that exited non-zero, init ones first."""
    if pod_phase(pod) != "Failed":
        return None
    name, st = ob.name(pod), ob.pod_status(pod)
    rtype = replica_type(pod) or "Pod"
    for init in (True, False):
        for cs in ob.container_statuses(pod, init=init):
            t = terminated_state(cs)
            if t and int(t.get("exitCode") or 0) != 0:
                return PodFailure(
                    rtype,
                    name,
                    str(cs.get("name")),
                    int(t.get("exitCode") or 0),
                    str(t.get("reason") or ""),
                    str(t.get("message") or ""),
                )
    return PodFailure(
        rtype,
        name,
        "",
        None,
        str(st.get("reason") or ""),
        str(st.get("message") or ""),
    )
