"""The job's pods sorted out for one sync (:func:`observe`): the attempt's pods, stale and
terminating ones, the counts in ``replicaStatuses``, the first failure, and the running phase
they show (where the launcher partitions, the one dglrun's typed progress shows)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import structlog

from controller.api import LAUNCHER, PARTITIONER, PROBE, WORKER, DGLJob
from controller.machinery import objects as ob
from controller.status.conditions import PARTITIONED, PARTITIONING, PENDING, TRAINING
from controller.status.failures import PodFailure, pod_failure
from controller.status.pod_state import (
    attempt_of,
    container_status,
    is_ready,
    is_terminating,
    main_started,
    pod_ip,
    pod_phase,
    replica_type,
    terminated_state,
)
from kubeclient import Obj
from podcontract import WATCHER_PARTITIONER
from podcontract.progress import ProgressReading, read

log = structlog.get_logger("controller.status")


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
    # elastic jobs: the attempt's worker pods that are not its members (by name)
    standby: dict[str, Obj] = field(default_factory=dict)
    # elastic jobs: the pod that finds room for the next attempt's partitioner (not in pods)
    probe: Obj | None = None
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
        desired[WORKER] = len(job.spec.training_workers)
    members = set(job.training_worker_names())
    obs.counts = {t: ReplicaCounts(n) for t, n in desired.items()}
    for pod in pods:
        name = ob.name(pod)
        if attempt_of(pod) != attempt:
            obs.stale.append(pod)
            continue
        if replica_type(pod) == WORKER and name not in members:
            obs.standby[name] = pod  # (an elastic attempt's: not in its hostfile)
            continue
        if is_terminating(pod):
            obs.terminating.append(name)
            continue
        if replica_type(pod) == PROBE:
            obs.probe = pod
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
    t = terminated_state(container_status(launcher, WATCHER_PARTITIONER, init=True))
    return bool(t and int(t.get("exitCode") or 0) == 0) or main_started(launcher)


def workers_up(job: DGLJob, obs: Observation) -> bool:
    """Every worker of the attempt and the partitioner (if still needed) run with an IP."""
    names = job.training_worker_names()
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


# dglrun's steps, as ``progressDetail.step`` numbers them: 1 partition and 2 deliver, then
# 3 dispatch (each worker checks its part), 4 configure, 5 train
_LAST_PARTITIONING_STEP = 2
_DISPATCH_STEP = 3
_RUNNING = (PARTITIONING, PARTITIONED, TRAINING)


def phase_from_progress(progress: ProgressReading, shown: str = "") -> str:
    """The phase dglrun's progress (:func:`podcontract.progress.read`: the typed detail, or an
    older dglrun's text) shows, when the launcher itself partitions (DistParMETIS): steps 1
    and 2 (partition, deliver) are Partitioning, 3 (dispatch) Partitioned, the rest Training,
    and so is the whole job done (100%). Before the first report dglrun is partitioning: that
    is what it starts with. A detail not to be trusted (``problem``) changes nothing: the
    running phase ``shown`` stays."""
    d = progress.detail
    if d is None:
        return shown if progress.problem and shown in _RUNNING else PARTITIONING
    if d.percentage >= 100:
        return TRAINING
    if d.step <= _LAST_PARTITIONING_STEP:
        return PARTITIONING
    return PARTITIONED if d.step == _DISPATCH_STEP else TRAINING


def phase_for(job: DGLJob, obs: Observation, status: Mapping[str, Any] | None = None) -> str:
    """The running phase (the job is neither finished, suspended nor restarting); ``status``
    the job's (dglrun's progress in it, the phase it shows)."""
    launcher = obs.pods.get(job.launcher_name)
    if job.spec.mode.partitions_in_launcher:
        if not main_started(launcher):
            return PENDING
        progress = read(status)
        if progress.problem:
            log.warning("dglrun's progress is not read", job=job.key, problem=progress.problem)
        return phase_from_progress(progress, str((status or {}).get("phase") or ""))
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


def replica_order(job: DGLJob) -> list[str]:
    """The job's pod names in the order problems are reported: partitioner, the attempt's
    workers by index, launcher."""
    return [
        *([job.partitioner_name] if job.spec.mode.partitioner else []),
        *(job.training_worker_names() if job.spec.mode.workers else []),
        job.launcher_name,
    ]
