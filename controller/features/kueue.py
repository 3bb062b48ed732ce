"""Kueue's contract for a job it does not know, as pure functions of a DGLJob and its Workload.

A DGLJob labelled ``kueue.x-k8s.io/queue-name`` (and an operator run with ``--kueue``) is
queued: the operator owns a ``Workload`` (kueue.x-k8s.io/v1beta2) that asks for the job's pods,
and runs the job only while Kueue admits it. controller/builders/workload.py builds that
Workload; this module reads what Kueue wrote in its status, and writes the few status changes
the job's side owns; the steps that act on them are in controller/lifecycle/queued.py. Kueue's
Go job reconciler (pkg/controller/jobframework/reconciler.go, v0.17) is the reference:

- **podSets** (controller/builders/workload.py): ``partitioner`` (1, in the modes that have
  that pod), ``worker`` (Worker ``replicas``; an elastic job asks ``maxReplicas`` with
  ``minCount`` ``minReplicas``, so Kueue may admit it partially) and ``launcher`` (1); each
  template is the pod the operator would make (metadata: labels and annotations only).
  Immutable.
- **admission** (:func:`state`): ``Admitted`` True, not ``Evicted``. QuotaReserved alone is not
  enough (admission checks may still be pending).
- **run with podSet info** (:func:`placement`): per podSet the admitted count, the assigned
  flavors' ``nodeLabels`` as nodeSelector and their tolerations, and every admission check's
  ``podSetUpdates``: applied to the pods the operator makes (controller/api.py
  :class:`Placement`), before the operator's own labels and annotations (an update naming the
  job-name label cannot move a pod into another job's NetworkPolicy); the job's spec is never
  changed, so restoring the podSet info is making pods without it.
- **stop on eviction** (:func:`clear_reservation`): once no pod of the job runs, the
  reservation is cleared (QuotaReserved False ``Pending``, no admission, ``Requeued``) so Kueue
  queues the Workload again.
- **pods ready** (:func:`pods_ready`) and **finished** (:func:`finished`): conditions the job's
  side sets on the Workload.
- **no way around the queue** (:func:`queue_of`, :func:`changed`): the Workload is the job's by
  owner UID, never by name or label; a job that has a Workload (or had one: ``status.queue``)
  stays queued, label or not; a job without the label, in a namespace that has a LocalQueue
  named ``default``, is queued there (Kueue's ``LocalQueueDefaulting``, GA and always on in
  v0.17: always with ``--kueue``); with ``--kueue-manage-jobs-without-queue-name`` (Kueue's
  ``manageJobsWithoutQueueName``) a job left without a queue waits, without pods
  (:data:`REASON_QUEUE_NAME_MISSING`, :func:`queue_name_missing`), as Kueue keeps such a job
  suspended; a Workload no longer equivalent to the job (another queue, or
  podSets whose quota-relevant parts changed: the builder's ``pod_sets_hash``, kept on the
  Workload) is
  replaced, the running attempt stopped first, as Kueue's own integrations do.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from controller.api import LAUNCHER, PARTITIONER, WORKER, DGLJob, Placement
from controller.builders import BuildOptions
from controller.builders.kind import ChildKind, WatchedKind
from controller.machinery.slim import slim_metadata
from controller.status.conditions import get_condition, is_true, now_rfc3339
from kubeclient import LOCALQUEUES, WORKLOADS, Obj

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"
# what the Workload's podSets were made of (pod_sets_hash): a job whose hash moved on changed
POD_SETS_HASH_ANNOTATION = "dgl.qihoo.net/pod-sets-hash"
STATUS_QUEUE = "queue"  # status.queue: {localQueue, workload}, once the job was ever queued
REASON_WORKLOAD_CHANGED = "WorkloadChanged"  # Queued True: the Workload is made again
# Kueue's LocalQueueDefaulting: the LocalQueue that takes a namespace's jobs without the label
DEFAULT_LOCAL_QUEUE = "default"
# --kueue-manage-jobs-without-queue-name: Queued True, the job has no queue and waits
REASON_QUEUE_NAME_MISSING = "QueueNameMissing"
# the job's side (its status): the condition Queued, True while the job waits for Kueue to
# admit it (Kueue's reason and message), and the phase meanwhile; the events' reasons
QUEUED = "Queued"
PHASE_QUEUED = "Queued"
REASON_QUEUED = "DGLJobQueued"  # (the events'; the condition carries Kueue's reason)
REASON_ADMITTED = "DGLJobAdmitted"
# the kind as Kueue's integrations.externalFrameworks names it
EXTERNAL_FRAMEWORK = "DGLJob.v1alpha1.qihoo.net"

# Workload condition types and reasons (kueue.x-k8s.io/v1beta2)
QUOTA_RESERVED = "QuotaReserved"
ADMITTED = "Admitted"
EVICTED = "Evicted"
REQUEUED = "Requeued"
PODS_READY = "PodsReady"
FINISHED = "Finished"
REASON_PENDING = "Pending"  # (also the job's Queued reason until Kueue gives one)
# the reasons of the Workload's own conditions, which the operator writes on the Workload
WORKLOAD_NO_RESERVATION = "NoReservation"
WORKLOAD_STARTED = "Started"
WORKLOAD_WAIT_FOR_START = "WaitForStart"
WORKLOAD_WAIT_FOR_RECOVERY = "WaitForRecovery"
WORKLOAD_RECOVERED = "Recovered"
# evictions after which Kueue's own reconciler marks the Workload Requeued at once
REQUEUED_AT_ONCE = ("Preempted", "NodeFailures")

# podSet name -> the replica type of the pods it stands for
POD_SETS = {"partitioner": PARTITIONER, "worker": WORKER, "launcher": LAUNCHER}

_NOT_READY = "Not all pods are ready or succeeded"
_RECOVERING = "At least one pod has failed, waiting for recovery"
_READY = "All pods reached readiness and the workload is running"


def queue_name(raw: Obj) -> str | None:
    """The LocalQueue a DGLJob's label names (``raw``: the job object; None: not queued)."""
    labels = (raw.get("metadata") or {}).get("labels") or {}
    name = labels.get(QUEUE_LABEL)
    return name if isinstance(name, str) and name else None


def queue_of(
    job: DGLJob, owned: list[Obj], *, default_queue: bool = False
) -> tuple[str | None, Obj | None]:
    """The LocalQueue a job is under and its Workload (``owned``: the Workloads it controls,
    by owner UID). Its label names the queue; without one, the queue of the Workload it has,
    else the one ``status.queue`` recorded: once queued, a job stays queued until it finishes;
    else, when its namespace has a LocalQueue named ``default`` (``default_queue``), that one.
    (None, None): not queued."""
    workload = owned[0] if owned else None
    for wl in owned:  # (one being replaced, until it is gone, else the one that stands)
        if not (wl.get("metadata") or {}).get("deletionTimestamp"):
            workload = wl
    queue = queue_name(job.raw)
    if queue is None and workload is not None:
        queue = str((workload.get("spec") or {}).get("queueName") or "") or None
    if queue is None:
        recorded = (job.status.get(STATUS_QUEUE) or {}).get("localQueue")
        queue = recorded if isinstance(recorded, str) and recorded else None
    if queue is None and default_queue:
        queue = DEFAULT_LOCAL_QUEUE
    return queue, workload


def defaulted(job: DGLJob, queue: str) -> bool:
    """Whether ``queue`` is the job's by Kueue's LocalQueueDefaulting (no label: its
    namespace's LocalQueue ``default``), not by a label it had and lost."""
    return queue == DEFAULT_LOCAL_QUEUE and queue_name(job.raw) is None


def queue_name_missing(job: DGLJob) -> str:
    """Why a job without a queue waits, under --kueue-manage-jobs-without-queue-name."""
    return (
        f"the label {QUEUE_LABEL} is required (the operator runs with "
        "--kueue-manage-jobs-without-queue-name) and the namespace "
        f"{job.namespace} has no LocalQueue named {DEFAULT_LOCAL_QUEUE}: the job waits, "
        f"without pods, until it is labelled {QUEUE_LABEL}=<a LocalQueue of its namespace> "
        f"or a LocalQueue {DEFAULT_LOCAL_QUEUE} is made there"
    )


def is_default_queue(lq: Obj) -> bool:
    """A LocalQueue that takes its namespace's jobs without the label."""
    return (lq.get("metadata") or {}).get("name") == DEFAULT_LOCAL_QUEUE


def changed(wl: Obj, queue: str, want: Callable[[], str]) -> str | None:
    """Why the Workload no longer stands for the job (None: it does): another queue, or
    podSets whose hash (``want()``: the job's :func:`pod_sets_hash` now, asked only when the
    Workload carries one) moved on since it was made (a Workload without the hash, an older
    operator's, is taken as it is)."""
    spec = wl.get("spec") or {}
    if spec.get("queueName") != queue:
        return f"the job moved from LocalQueue {spec.get('queueName')} to {queue}"
    made = ((wl.get("metadata") or {}).get("annotations") or {}).get(POD_SETS_HASH_ANNOTATION)
    if made and made != want():
        return "the job's pod templates changed since its Workload was made"
    return None


# -- what Kueue wrote --------------------------------------------------------------------------


def _status(wl: Obj) -> Obj:
    status = wl.get("status")
    return status if isinstance(status, dict) else {}


def condition(wl: Obj, kind: str) -> Obj:
    """The Workload's condition of type ``kind`` ({} if it has none): the same shape as a
    DGLJob's (controller/status/conditions.py reads both)."""
    return get_condition(_status(wl), kind) or {}


@dataclass(frozen=True)
class QueueState:
    """Where a Workload stands, for its job: ``reason`` and ``message`` are Kueue's own (why
    the job waits, or that it is admitted)."""

    admitted: bool
    reserved: bool  # quota is reserved (status.admission is set)
    evicted: bool
    finished: bool
    reason: str
    message: str


def _pending_checks(wl: Obj) -> list[str]:
    checks = _status(wl).get("admissionChecks") or []
    return [
        f"admission check {c.get('name')} is {c.get('state')}"
        + (f": {c['message']}" if c.get("message") else "")
        for c in checks
        if c.get("state") != "Ready"
    ]


def state(wl: Obj) -> QueueState:
    status = _status(wl)
    reserved = bool(status.get("admission")) and is_true(status, QUOTA_RESERVED)
    evicted = is_true(status, EVICTED)
    admitted = is_true(status, ADMITTED) and reserved and not evicted
    finished = is_true(status, FINISHED)
    if evicted:
        cond = condition(wl, EVICTED)
        reason, message = f"Evicted{cond.get('reason', '')}", cond.get("message", "")
    elif admitted:
        cond = condition(wl, ADMITTED)
        reason, message = cond.get("reason", ADMITTED), cond.get("message", "")
    elif reserved:  # quota reserved: admission checks are pending
        cond = condition(wl, ADMITTED)
        reason = cond.get("reason") or "UnsatisfiedChecks"
        message = "; ".join(_pending_checks(wl)) or cond.get("message", "")
    elif condition(wl, QUOTA_RESERVED):
        cond = condition(wl, QUOTA_RESERVED)
        reason, message = cond.get("reason") or REASON_PENDING, cond.get("message", "")
    else:
        reason, message = REASON_PENDING, "waiting for Kueue to consider the Workload"
    return QueueState(admitted, reserved, evicted, finished, reason, message)


def flavor_names(wl: Obj) -> set[str]:
    """The ResourceFlavors the admission assigned (to read their nodeLabels and
    tolerations)."""
    admission = _status(wl).get("admission") or {}
    return {
        str(name)
        for assignment in admission.get("podSetAssignments") or []
        for name in (assignment.get("flavors") or {}).values()
    }


def _merge(
    into: Placement,
    *,
    node_selector: Mapping[str, str] | None = None,
    tolerations: Iterable[Obj] | None = None,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
) -> Placement:
    """``into`` with more of each (a toleration it has already is not added twice)."""
    return dataclasses.replace(
        into,
        node_selector={**into.node_selector, **(node_selector or {})},
        tolerations=(
            *into.tolerations,
            *(t for t in tolerations or () if t not in into.tolerations),
        ),
        labels={**into.labels, **(labels or {})},
        annotations={**into.annotations, **(annotations or {})},
    )


def placement(wl: Obj, flavors: Mapping[str, Obj]) -> dict[str, Placement]:
    """Per replica type, what the admission adds to its pods: the count admitted, the
    assigned flavors' nodeLabels and tolerations (``flavors``: the ResourceFlavors by name),
    and each admission check's podSetUpdates."""
    status = _status(wl)
    out: dict[str, Placement] = {}
    for assignment in (status.get("admission") or {}).get("podSetAssignments") or []:
        kind = POD_SETS.get(str(assignment.get("name")))
        if kind is None:
            continue
        placed = Placement()
        for name in sorted(set((assignment.get("flavors") or {}).values())):
            spec = (flavors.get(name) or {}).get("spec") or {}
            placed = _merge(
                placed,
                node_selector=spec.get("nodeLabels") or {},
                tolerations=spec.get("tolerations") or [],
            )
        count = assignment.get("count")
        out[kind] = dataclasses.replace(placed, count=count if isinstance(count, int) else None)
    for check in status.get("admissionChecks") or []:
        for update in check.get("podSetUpdates") or []:
            kind = POD_SETS.get(str(update.get("name")))
            if kind is None:
                continue
            out[kind] = _merge(
                out.get(kind, Placement()),
                labels=update.get("labels"),
                annotations=update.get("annotations"),
                node_selector=update.get("nodeSelector"),
                tolerations=update.get("tolerations"),
            )
    return out


# -- what the job's side writes (merge patches of the Workload's status) ----------------------


def _condition(kind: str, status: bool, reason: str, message: str, now: float, wl: Obj) -> Obj:
    return {
        "type": kind,
        "status": "True" if status else "False",
        "reason": reason,
        "message": message[:32768],
        "lastTransitionTime": now_rfc3339(now),
        "observedGeneration": int((wl.get("metadata") or {}).get("generation") or 0),
    }


def _with(wl: Obj, new: Iterable[Obj]) -> list[Obj]:
    """The Workload's conditions with ``new`` set (a condition whose status is unchanged keeps
    its lastTransitionTime)."""
    changed = {}
    for cond in new:
        old = condition(wl, cond["type"])
        if old and old.get("status") == cond["status"]:
            cond = {**cond, "lastTransitionTime": old.get("lastTransitionTime")}
        changed[cond["type"]] = cond
    kept = [c for c in _status(wl).get("conditions") or [] if c.get("type") not in changed]
    return [*kept, *changed.values()]


def _status_patch(wl: Obj, status: Obj) -> Obj:
    # resourceVersion: the patch applies to what was read, or fails with a conflict
    rv = (wl.get("metadata") or {}).get("resourceVersion")
    return {"metadata": {"resourceVersion": rv}, "status": status}


def clear_reservation(wl: Obj, now: float) -> Obj | None:
    """An evicted Workload whose job has stopped: the reservation cleared, so that Kueue
    queues it again (None: nothing to clear)."""
    cond = condition(wl, EVICTED)
    if cond.get("status") != "True" or not state(wl).reserved:
        return None
    reason, message = str(cond.get("reason", "")), str(cond.get("message", ""))
    conditions = _with(
        wl,
        [
            _condition(REQUEUED, reason in REQUEUED_AT_ONCE, reason, message, now, wl),
            _condition(QUOTA_RESERVED, False, REASON_PENDING, message, now, wl),
            _condition(
                ADMITTED, False, WORKLOAD_NO_RESERVATION, "The workload has no reservation", now, wl
            ),
        ],
    )
    return _status_patch(wl, {"admission": None, "conditions": conditions})


def pods_ready(wl: Obj, ready: bool, now: float) -> Obj | None:
    """The Workload's PodsReady condition for an admitted job whose pods are (not) all ready,
    as Kueue's reconciler words it (None: it says so already)."""
    old = condition(wl, PODS_READY)
    if ready:
        recovering = old.get("reason") in (
            WORKLOAD_WAIT_FOR_RECOVERY,
            WORKLOAD_RECOVERED,
        )
        cond = (True, WORKLOAD_RECOVERED if recovering else WORKLOAD_STARTED, _READY)
    elif old.get("status") == "True" or old.get("reason") == WORKLOAD_WAIT_FOR_RECOVERY:
        cond = (False, WORKLOAD_WAIT_FOR_RECOVERY, _RECOVERING)
    else:
        cond = (False, WORKLOAD_WAIT_FOR_START, _NOT_READY)
    if old.get("status") == ("True" if cond[0] else "False") and old.get("reason") == cond[1]:
        return None
    new = _condition(PODS_READY, cond[0], cond[1], cond[2], now, wl)
    return _status_patch(wl, {"conditions": _with(wl, [new])})


def finished(wl: Obj, succeeded: bool, message: str, now: float) -> Obj | None:
    """The Workload Finished, Succeeded or Failed with the job's message (None: it is
    already)."""
    if is_true(_status(wl), FINISHED):
        return None
    reason = "Succeeded" if succeeded else "Failed"
    new = _condition(FINISHED, True, reason, message, now, wl)
    return _status_patch(wl, {"conditions": _with(wl, [new])})


def admitted(job: DGLJob, placed: Mapping[str, Placement]) -> DGLJob:
    """``job`` as its admission runs it: each replica type's placement, and an elastic job's
    workers no more than the count admitted (Kueue admits partially down to ``minCount``)."""
    spec = dataclasses.replace(job.spec, placement=dict(placed))
    worker = placed.get(WORKER)
    policy = spec.elastic
    if policy is not None and worker is not None and worker.count is not None:
        top = max(policy.min_replicas, min(worker.count, policy.max_replicas))
        lowered = dataclasses.replace(policy, max_replicas=top, declared_max=policy.ceiling)
        spec = dataclasses.replace(spec, elastic=lowered)
    return dataclasses.replace(job, spec=spec)


def _kueue(options: BuildOptions) -> bool:
    return options.kueue


class Kueue:
    """The feature's entry (controller/features/registry.py): a queued job's Workload,
    watched: created once (its podSets are immutable); its status is read (Kueue's admission)
    and written (PodsReady, Finished, a reservation cleared) whole. The LocalQueues, watched
    and never written: one named ``default`` made or deleted queues its namespace's jobs
    (whether it is there decides the queue of a job without the label). The rest is the
    queued step's (controller/lifecycle/queued.py)."""

    name = "kueue"
    kinds = (
        ChildKind(
            WORKLOADS,
            once=True,
            enabled=_kueue,
            missing="--kueue: the Workload CRD (workloads.kueue.x-k8s.io, v1beta2) is not "
            "installed: install Kueue (docs/operations.md, Running under Kueue)",
        ),
    )
    watches = (
        WatchedKind(
            LOCALQUEUES,
            concerns=is_default_queue,
            enabled=_kueue,
            transform=slim_metadata,
            missing="--kueue: the LocalQueue CRD (localqueues.kueue.x-k8s.io, v1beta2) is not "
            "installed: install Kueue (docs/operations.md, Running under Kueue)",
        ),
    )


KUEUE = Kueue()
