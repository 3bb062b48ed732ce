"""What the job's pods say, and the status that follows from it: pure functions, no API calls."""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from controller.api import LAUNCHER, PARTITIONER, WORKER, DGLJob
from controller.builders import ATTEMPT_ANNOTATION, REPLICA_TYPE_LABEL
from kubeclient import Obj
from podcontract import (
    DGLRUN_STATUS_FIELDS,
    MEMORY_PLAN_PREFIX,
    OOM_PREFIX,
    PROGRESS_DONE,
    WATCHER_PARTITIONER,
)

# Condition types (Kubeflow's) and reasons.
CREATED = "Created"
RUNNING = "Running"
RESTARTING = "Restarting"
SUCCEEDED = "Succeeded"
FAILED = "Failed"
SUSPENDED = "Suspended"
PODS_READY = "PodsReady"  # False: a pod of the job waits, the reason says why

REASON_CREATED = "DGLJobCreated"
REASON_RUNNING = "DGLJobRunning"
REASON_RESTARTING = "DGLJobRestarting"
REASON_SUCCEEDED = "DGLJobSucceeded"
REASON_FAILED = "DGLJobFailed"
REASON_SUSPENDED = "DGLJobSuspended"
REASON_RESUMED = "DGLJobResumed"
REASON_INVALID_SPEC = "InvalidSpec"
REASON_DEADLINE = "DeadlineExceeded"
REASON_BACKOFF_LIMIT = "BackoffLimitExceeded"
REASON_OOM_KILLED = "OOMKilled"  # a container of the job was killed for memory
# (or a process in one: dglrun's termination message starts with OOM_PREFIX and says which)
# dglrun's memory plan found a step that will not fit (its message: MEMORY_PLAN_PREFIX)
REASON_MEMORY_PLAN = "MemoryPlanExceeded"
# PodsReady: every pod of the attempt has started; or still starting after a wait was resolved
REASON_PODS_READY = "PodsReady"
REASON_PODS_STARTING = "PodsStarting"
# a pod waits: the scheduler's reason, or the kubelet's for a waiting container
REASON_UNSCHEDULABLE = "Unschedulable"
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
# schedulingPolicy.scheduleTimeoutSeconds passed with a pod not started and no reason known
REASON_SCHEDULE_TIMEOUT = "ScheduleTimeoutExceeded"
# a node holding a pod of the job is NotReady, unreachable or gone
REASON_NODE_LOST = "NodeLost"
UNREACHABLE_TAINT = "node.kubernetes.io/unreachable"

# Phases: the original operator's words, plus Restarting and Suspended.
PENDING = "Pending"
PARTITIONING = "Partitioning"
PARTITIONED = "Partitioned"
TRAINING = "Training"
COMPLETED = "Completed"
PHASE_FAILED = "Failed"
PHASE_RESTARTING = "Restarting"
PHASE_SUSPENDED = "Suspended"


def now_rfc3339(now: float) -> str:
    return datetime.fromtimestamp(now, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(value: Any) -> float | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.strptime(value, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp()
    except ValueError:
        try:
            return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
        except ValueError:
            return None


# -- conditions -----------------------------------------------------------------------------


def get_condition(status: Obj, ctype: str) -> Obj | None:
    for c in status.get("conditions") or []:
        if c.get("type") == ctype:
            return dict(c)
    return None


def is_true(status: Obj, ctype: str) -> bool:
    c = get_condition(status, ctype)
    return bool(c and c.get("status") == "True")


def set_condition(
    status: Obj, ctype: str, true: bool, reason: str, message: str, now: float
) -> bool:
    """Set one condition in place; lastTransitionTime changes only when status flips.
    Returns True when anything changed."""
    value = "True" if true else "False"
    conditions = [dict(c) for c in status.get("conditions") or []]
    stamp = now_rfc3339(now)
    for c in conditions:
        if c.get("type") != ctype:
            continue
        if c.get("status") == value and c.get("reason") == reason and c.get("message") == message:
            return False
        if c.get("status") != value:
            c["lastTransitionTime"] = stamp
        c.update(status=value, reason=reason, message=message, lastUpdateTime=stamp)
        status["conditions"] = conditions
        return True
    if not true and ctype not in (SUSPENDED, PODS_READY):
        return False  # an absent condition already means False; do not clutter the list
    conditions.append(
        {
            "type": ctype,
            "status": value,
            "reason": reason,
            "message": message,
            "lastUpdateTime": stamp,
            "lastTransitionTime": stamp,
        }
    )
    status["conditions"] = conditions
    return True


def finished(status: Obj) -> bool:
    return is_true(status, SUCCEEDED) or is_true(status, FAILED)


# -- pods -----------------------------------------------------------------------------------


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


def _terminated(cs: Obj | None) -> Obj | None:
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
    t = _terminated(container_status(pod, main_container_name(pod)))
    if not t:
        return None
    start, end = parse_time(t.get("startedAt")), parse_time(t.get("finishedAt"))
    if start is None or end is None:
        return None
    return max(0.0, end - start)


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
        termination message says which), else ``<ReplicaType>Failed``."""
        if self.reason == REASON_OOM_KILLED or self.message.startswith(OOM_PREFIX):
            return REASON_OOM_KILLED
        if self.message.startswith(MEMORY_PLAN_PREFIX):
            return REASON_MEMORY_PLAN
        if self.reason == REASON_NODE_LOST:
            return REASON_NODE_LOST
        return f"{self.replica_type}Failed"

    def describe(self) -> str:
        if self.reason == REASON_NODE_LOST:
            return self.message  # names the nodes and the pods they held
        what = f"{self.replica_type.lower()} pod {self.pod}"
        if self.message.startswith(OOM_PREFIX):  # dglrun names the process and its pod
            return f"{self.message[len(OOM_PREFIX) :].strip()[:300]} (reported by {what})"
        if self.container:
            detail = f"container {self.container} exited with code {self.exit_code}"
            if self.reason:
                detail += f" ({self.reason})"
        else:
            detail = self.reason or "failed"
        if self.message:
            detail += f": {self.message.strip()[:300]}"
        return f"{what} failed: {detail}"


def pod_failure(pod: Obj) -> PodFailure | None:
    """Why a Failed pod failed: the first container that exited non-zero, init ones first."""
    if pod_phase(pod) != "Failed":
        return None
    meta = pod.get("metadata") or {}
    st = pod.get("status") or {}
    rtype = replica_type(pod) or "Pod"
    for key in ("initContainerStatuses", "containerStatuses"):
        for cs in st.get(key) or []:
            t = _terminated(cs)
            if t and int(t.get("exitCode") or 0) != 0:
                return PodFailure(
                    rtype,
                    str(meta.get("name")),
                    str(cs.get("name")),
                    int(t.get("exitCode") or 0),
                    str(t.get("reason") or ""),
                    str(t.get("message") or ""),
                )
    return PodFailure(
        rtype,
        str(meta.get("name")),
        "",
        None,
        str(st.get("reason") or ""),
        str(st.get("message") or ""),
    )


# -- observation ----------------------------------------------------------------------------


@dataclass
class ReplicaCounts:
    desired: int
    active: int = 0
    succeeded: int = 0
    failed: int = 0
    ready: int = 0

    def as_status(self) -> Obj:
        return {
            "active": self.active,
            "succeeded": self.succeeded,
            "failed": self.failed,
            "ready": f"{self.ready}/{self.desired}",
        }


@dataclass
class Observation:
    """The job's pods, sorted out. ``pods`` holds only current-attempt, non-terminating pods."""

    pods: dict[str, Obj] = field(default_factory=dict)
    stale: list[Obj] = field(default_factory=list)
    terminating: list[str] = field(default_factory=list)
    counts: dict[str, ReplicaCounts] = field(default_factory=dict)
    failure: PodFailure | None = None
    missing: list[str] = field(default_factory=list)

    def pod(self, name: str) -> Obj | None:
        return self.pods.get(name)


def observe(job: DGLJob, pods: list[Obj], attempt: int) -> Observation:
    obs = Observation()
    desired = {LAUNCHER: 1}
    if job.spec.mode.partitioner:
        desired[PARTITIONER] = 1
    if job.spec.mode.workers:
        desired[WORKER] = job.spec.workers
    obs.counts = {t: ReplicaCounts(n) for t, n in desired.items()}
    for pod in pods:
        name = str((pod.get("metadata") or {}).get("name"))
        if attempt_of(pod) != attempt:
            obs.stale.append(pod)
            continue
        if is_terminating(pod):
            obs.terminating.append(name)
            continue
        obs.pods[name] = pod
        counts = obs.counts.get(replica_type(pod))
        if counts is None:
            continue
        phase = pod_phase(pod)
        if phase in ("Pending", "Running"):
            counts.active += 1
        elif phase == "Succeeded":
            counts.succeeded += 1
        elif phase == "Failed":
            counts.failed += 1
        if is_ready(pod):
            counts.ready += 1
    obs.failure = _first_failure(job, obs)
    return obs


def _first_failure(job: DGLJob, obs: Observation) -> PodFailure | None:
    order = replica_order(job)
    launcher_done = pod_phase(obs.pods.get(job.launcher_name) or {}) == "Succeeded"
    for name in order:
        pod = obs.pods.get(name)
        if pod is None:
            continue
        failure = pod_failure(pod)
        if failure:
            return failure
        if replica_type(pod) == WORKER and pod_phase(pod) == "Succeeded" and not launcher_done:
            return PodFailure(
                WORKER, name, "", None, "WorkerExited", "exited before training finished"
            )
    return None


def partition_done(job: DGLJob, obs: Observation) -> bool:
    """The partitioner pod's work is done (True in the modes without one)."""
    if not job.spec.mode.partitioner:
        return True
    if pod_phase(obs.pods.get(job.partitioner_name) or {}) == "Succeeded":
        return True
    launcher = obs.pods.get(job.launcher_name)
    if launcher is None:
        return False
    t = _terminated(container_status(launcher, WATCHER_PARTITIONER, init=True))
    return bool(t and int(t.get("exitCode") or 0) == 0) or main_started(launcher)


def workers_up(job: DGLJob, obs: Observation) -> bool:
    """Every worker and the partitioner (if still needed) run with an IP."""
    names = job.worker_names()
    if not partition_done(job, obs):
        names.append(job.partitioner_name)
    for name in names:
        pod = obs.pods.get(name)
        if pod is None or not pod_ip(pod):
            return False
        if pod_phase(pod) != "Running" and not (
            name == job.partitioner_name and pod_phase(pod) == "Succeeded"
        ):
            return False
    return True


_PROGRESS_STEP = re.compile(r"^(?:failed in )?(\d+)/\d+ ")


def phase_from_progress(progress: str) -> str:
    """The phase dglrun's ``status.progress`` shows, when the launcher itself partitions
    (DistParMETIS): ``1/5 partition`` and ``2/5 deliver`` are Partitioning, ``3/5 dispatch``
    (checking each worker's part) Partitioned, the rest Training. Before the first report
    dglrun is partitioning: that is what it starts with."""
    if progress == PROGRESS_DONE:
        return TRAINING
    m = _PROGRESS_STEP.match(progress or "")
    if not m:
        return PARTITIONING
    step = int(m.group(1))
    return PARTITIONING if step <= 2 else PARTITIONED if step == 3 else TRAINING


def phase_for(job: DGLJob, obs: Observation, progress: str = "") -> str:
    """The running phase (the job is neither finished, suspended nor restarting)."""
    launcher = obs.pods.get(job.launcher_name)
    if job.spec.mode.partitions_in_launcher:
        return phase_from_progress(progress) if main_started(launcher) else PENDING
    if main_started(launcher):
        return TRAINING
    if not job.spec.mode.partitioner:
        return PENDING
    if partition_done(job, obs):
        return PARTITIONED
    if pod_phase(obs.pods.get(job.partitioner_name) or {}) == "Running":
        return PARTITIONING
    return PENDING


def replica_statuses(obs: Observation) -> Obj:
    return {t: c.as_status() for t, c in sorted(obs.counts.items())}


def rebase_status(base: Obj, ours: Obj, theirs: Obj) -> Obj:
    """Our changes (``base`` -> ``ours``) applied on top of someone else's newer ``theirs``.

    Fields we did not touch keep their value; conditions merge by type."""
    out = copy.deepcopy(theirs)
    for key in set(base) | set(ours):
        if key == "conditions" or base.get(key) == ours.get(key):
            continue
        if key in ours:
            out[key] = copy.deepcopy(ours[key])
        else:
            out.pop(key, None)
    before = {c.get("type"): c for c in base.get("conditions") or []}
    after = {c.get("type"): c for c in ours.get("conditions") or []}
    merged = [dict(c) for c in out.get("conditions") or []]
    index = {c.get("type"): i for i, c in enumerate(merged)}
    for ctype, cond in after.items():
        if before.get(ctype) == cond:
            continue
        if ctype in index:
            merged[index[ctype]] = dict(cond)
        else:
            merged.append(dict(cond))
    if merged or "conditions" in out:
        out["conditions"] = merged
    return out


def transitioned_since(base: Obj, latest: Obj) -> bool:
    """Did someone other than dglrun change the status since ``base`` (that is, a sync of ours
    whose write this copy predates)? A decision made on ``base`` is then stale."""

    def ours(status: Obj) -> Obj:
        out = without_volatile(status)
        for key in DGLRUN_STATUS_FIELDS:
            out.pop(key, None)
        return out

    return ours(base) != ours(latest)


def without_volatile(status: Obj) -> Obj:
    """Status minus timestamps that change on every write (to compare meaningfully)."""
    out = copy.deepcopy(status)
    for c in out.get("conditions") or []:
        c.pop("lastUpdateTime", None)
    return out


# -- pods that wait -------------------------------------------------------------------------


def replica_order(job: DGLJob) -> list[str]:
    """The job's pod names in the order problems are reported: partitioner, workers by
    index, launcher."""
    return [
        *([job.partitioner_name] if job.spec.mode.partitioner else []),
        *(job.worker_names() if job.spec.mode.workers else []),
        job.launcher_name,
    ]


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
    name = str((pod.get("metadata") or {}).get("name") or "")
    st = pod.get("status") or {}
    for c in st.get("conditions") or []:
        if (
            c.get("type") == "PodScheduled"
            and c.get("status") == "False"
            and c.get("reason") == REASON_UNSCHEDULABLE
        ):
            return WaitingProblem(REASON_UNSCHEDULABLE, name, str(c.get("message") or ""))
    for key, init in (("initContainerStatuses", True), ("containerStatuses", False)):
        for cs in st.get(key) or []:
            waiting = (cs.get("state") or {}).get("waiting")
            if not isinstance(waiting, dict):
                continue
            reason = str(waiting.get("reason") or "")
            if reason in CONTAINER_WAITING_REASONS:
                message = str(waiting.get("message") or "")
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


# -- nodes ----------------------------------------------------------------------------------


def node_name(pod: Obj) -> str:
    return str((pod.get("spec") or {}).get("nodeName") or "")


def node_lost(node: Obj | None) -> str | None:
    """Why a node cannot run its pods any more (None: it can): gone, being deleted, Ready not
    True (the node controller sets Unknown once the kubelet stops reporting), or tainted
    unreachable. A node that has not reported Ready yet (just registered) is not lost."""
    if node is None:
        return "deleted"
    meta = node.get("metadata") or {}
    if meta.get("deletionTimestamp"):
        return "being deleted"
    for c in (node.get("status") or {}).get("conditions") or []:
        if c.get("type") == "Ready" and c.get("status") != "True":
            detail = str(c.get("message") or c.get("reason") or "").strip()
            return f"Ready={c.get('status')}" + (f": {detail}" if detail else "")
    for t in (node.get("spec") or {}).get("taints") or []:
        if t.get("key") == UNREACHABLE_TAINT:
            return f"tainted {UNREACHABLE_TAINT}"
    return None


def node_loss_message(lost: dict[str, str], pods: list[Obj]) -> str:
    """``node n is lost (why): pods a, b ran there`` for each lost node holding one of
    ``pods`` (nodes by name)."""
    held: dict[str, list[str]] = {}
    for pod in pods:
        where = node_name(pod)
        if where in lost:
            held.setdefault(where, []).append(str((pod.get("metadata") or {}).get("name")))
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
        key=lambda p: rank.get(str(p["metadata"]["name"]), len(rank)),
    )
    if not hit:
        return None
    first = hit[0]
    return PodFailure(
        replica_type(first) or "Pod",
        str(first["metadata"]["name"]),
        "",
        None,
        REASON_NODE_LOST,
        node_loss_message(lost, hit),
    )
