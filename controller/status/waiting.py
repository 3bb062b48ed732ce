"""Why the job's pods wait (:class:`WaitingProblem`): the scheduler cannot place one, or the
kubelet cannot start one of its containers; which pods have not started."""

from __future__ import annotations

import re
from dataclasses import dataclass

from controller.api import DGLJob
from controller.machinery import objects as ob
from controller.status.conditions import REASON_UNSCHEDULABLE
from controller.status.observation import Observation, replica_order
from controller.status.pod_state import is_terminating, pod_phase, pod_started
from kubeclient import Obj

CONTAINER_WAITING_REASONS = frozenset(
    {
        "ErrImagePull",
        "ImagePullBackOff",
        "InvalidImageName",
        "CreateContainerConfigError",
        "CreateContainerError",
        "CrashLoopBackOff",
    }
)
# the kubelet alternates these two while it retries a pull: one problem, not two
IMAGE_PULL_REASONS = frozenset({"ErrImagePull", "ImagePullBackOff"})


def _family(reason: str) -> str:
    return "ErrImagePull" if reason in IMAGE_PULL_REASONS else reason


@dataclass(frozen=True)
class WaitingProblem:
    """Why a pod of the job waits: the scheduler cannot place it (``Unschedulable``), or the
    kubelet cannot start one of its containers (``ErrImagePull``, ...)."""

    reason: str
    pod: str
    cause: str  # the scheduler's or the kubelet's message
    container: str = ""  # "" when the pod is not scheduled
    init: bool = False
    count: int = 1  # pods of the attempt that wait for this reason

    def headline(self) -> str:
        if self.reason == REASON_UNSCHEDULABLE:
            what = f"pod {self.pod} cannot be scheduled"
        else:
            kind = "init container" if self.init else "container"
            what = f"{kind} {self.container} of pod {self.pod} cannot start ({self.reason})"
        return f"{what}: {self.said}" if self.said else what

    @property
    def said(self) -> str:
        """The scheduler's or the kubelet's message, on one line."""
        return " ".join(self.cause.split())[:400]

    def describe(self) -> str:
        if self.count <= 1:
            return self.headline()
        return f"{self.headline()} ({self.count} pods of the job wait for {self.reason})"

    def same(self, reason: str, message: str) -> bool:
        """Is this the problem a condition with ``reason`` and ``message`` reports: the same
        reason, said the same way, whichever pod comes first now and however many pods it
        holds? The kubelet's ErrImagePull and ImagePullBackOff (one pull, retried, each with
        its own message) are one problem."""
        if _family(reason) != _family(self.reason):
            return False
        if self.reason in IMAGE_PULL_REASONS:
            return True
        told = _COUNT_SUFFIX.sub("", message)
        return told.endswith(f": {self.said}") if self.said else told == self.headline()


_COUNT_SUFFIX = re.compile(r" \(\d+ pods of the job wait for \w+\)$")


def pod_waiting_problem(pod: Obj) -> WaitingProblem | None:
    """The first reason ``pod`` waits: unschedulable, then its init containers' and its
    containers' waiting states the kubelet reports as errors."""
    if is_terminating(pod) or pod_phase(pod) not in ("Pending", "Running"):
        return None
    name = ob.name(pod)
    for c in ob.conditions(ob.pod_status(pod)):
        if (
            c.get("type") == "PodScheduled"
            and c.get("status") == "False"
            and c.get("reason") == REASON_UNSCHEDULABLE
        ):
            return WaitingProblem(REASON_UNSCHEDULABLE, name, str(c.get("message") or ""))
    for init in (True, False):
        for cs in ob.container_statuses(pod, init=init):
            waits = ob.waiting(cs)
            if waits is None:
                continue
            reason = str(waits.get("reason") or "")
            if reason in CONTAINER_WAITING_REASONS:
                message = str(waits.get("message") or "")
                return WaitingProblem(reason, name, message, str(cs.get("name") or ""), init)
    return None


def waiting_problem(job: DGLJob, obs: Observation) -> WaitingProblem | None:
    """The first problem among the attempt's pods (in :func:`replica_order`), with how many
    pods share its reason."""
    problems = [p for p in (pod_waiting_problem(obs.pods[n]) for n in obs.pods) if p]
    if not problems:
        return None
    rank = {name: i for i, name in enumerate(replica_order(job))}
    first = min(problems, key=lambda p: (rank.get(p.pod, len(rank)), p.pod))
    count = sum(1 for p in problems if _family(p.reason) == _family(first.reason))
    return WaitingProblem(first.reason, first.pod, first.cause, first.container, first.init, count)


def not_started(obs: Observation) -> list[Obj]:
    """The attempt's pods that have not started (see :func:`pod_started`)."""
    return [p for p in obs.pods.values() if not pod_started(p)]
