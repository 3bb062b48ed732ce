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
    if not true and ctype != SUSPENDED:
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
        return f"{self.replica_type}Failed"

    def describe(self) -> str:
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
    order = [
        *([job.partitioner_name] if job.spec.mode.partitioner else []),
        *(job.worker_names() if job.spec.mode.workers else []),
        job.launcher_name,
    ]
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
