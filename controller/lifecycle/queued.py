"""queued? (``--kueue`` and the job's ``kueue.x-k8s.io/queue-name`` label, else its
namespace's LocalQueue named ``default``) -> Kueue's contract (controller/features/kueue.py)
acted on:

    no queue?          -> the job runs outside Kueue; with
                          --kueue-manage-jobs-without-queue-name it waits instead, without
                          pods (Queued True, QueueNameMissing, a Warning naming the label),
                          until it is labelled or its namespace gets a LocalQueue default
    no Workload?       -> create it; the job waits (Queued)
    not admitted?      -> no pods (deleted if any), Queued True with Kueue's reason and message
                          (the LocalQueue is missing, the quota is short, a check is pending)
    evicted?           -> the same; once no pod of the job runs, the Workload's reservation is
                          cleared so that Kueue queues it again
    admitted           -> Queued False; the attempt runs with the admission's placement (the
                          flavors' nodeSelector and tolerations, the checks' podSetUpdates; an
                          elastic job no more workers than admitted); the Workload's PodsReady
                          follows the job's
    finished           -> (its step at FINISHED, which the finished step runs) the Workload is
                          Finished

The Workload is the job's by owner UID. A job that was ever queued stays queued until it
finishes, its label removed or not (the queue then comes from its Workload, or
``status.queue``); a Workload that no longer stands for the job (another queue, changed
podSets) is replaced, the attempt stopped first.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

import structlog

from controller.api import DGLJob, Placement
from controller.builders import workload as built
from controller.features import kueue, registry
from controller.lifecycle.actions import STOPPED_GRACE_SECONDS, Actions
from controller.lifecycle.context import Context, Next
from controller.lifecycle.points import FeatureStep, Point
from controller.machinery import objects as ob
from controller.machinery.events import NORMAL, WARNING
from controller.status import conditions, observation, pod_state
from kubeclient import (
    LOCALQUEUES,
    PRIORITYCLASSES,
    RESOURCEFLAVORS,
    WORKLOADS,
    BadRequest,
    Invalid,
    NotFound,
    Obj,
)

log = structlog.get_logger("controller.kueue")


@dataclass
class QueueMemo:
    """What the process remembers of a queued job between its syncs (its JobMemo's, dropped
    with it: controller/memo.py)."""

    # the uid of the job told (a Warning) that its queue label was removed
    queue_label_removed_told: str = ""
    # ((uid, generation), the podSets hash of that spec): computed once per generation
    pod_sets_hash: tuple[tuple[str, int], str] | None = None
    # the placement of the job's admission (its ResourceFlavors read once), and the admission
    # it was made of (the Workload's status.admission and admissionChecks, as JSON)
    placement: Mapping[str, Placement] | None = None
    placement_of: str = ""


REASON_QUEUE_LABEL_REMOVED = "QueueLabelRemoved"


def wait_for_admission(ctx: Context, act: Actions) -> Next:
    """The job as its admission runs it (unchanged when it is not queued), or done: it waits
    for Kueue, without pods (none counted)."""
    job = ctx.job
    default = act.listers[LOCALQUEUES].get(job.namespace, kueue.DEFAULT_LOCAL_QUEUE) is not None
    owned = act.listers[WORKLOADS].controlled_by(job.uid)
    queue, wl = kueue.queue_of(job, owned, default_queue=default)
    if queue is None:
        if not act.options.kueue_manage_jobs_without_queue_name:
            return Next.GO_ON
        _hold_for_admission(
            ctx, act, kueue.REASON_QUEUE_NAME_MISSING, kueue.queue_name_missing(job)
        )
        return _waits(ctx)
    # Why a job without the label is queued, said in every waiting message (not only the
    # one of the sync that made the Workload: that sync's status, and its Event, may be lost
    # to a conflict, and the next sync finds the Workload made)
    defaulted = ""
    if kueue.defaulted(job, queue):
        defaulted = (
            f" (the job has no label {kueue.QUEUE_LABEL}: its namespace's LocalQueue {queue} "
            "takes it)"
        )
    elif kueue.queue_name(job.raw) is None:
        _label_removed(ctx, act, queue)
    if wl is None:
        name = _create_workload(ctx, act, queue)
        if name:
            ctx.status[kueue.STATUS_QUEUE] = {"localQueue": queue, "workload": name}
            message = f"Workload {name} is queued in LocalQueue {queue}{defaulted}"
            _hold_for_admission(ctx, act, kueue.REASON_PENDING, message)
        return _waits(ctx)
    if ob.being_deleted(wl):  # (replaced: the new one is made once this one is gone)
        message = f"Workload {ob.name(wl)} is being replaced"
        _hold_for_admission(ctx, act, kueue.REASON_WORKLOAD_CHANGED, message)
        return _waits(ctx)
    why = kueue.changed(wl, queue, lambda: _pod_sets_hash(act, job))
    if why is not None:
        return _replace(ctx, act, wl, why)
    st = kueue.state(wl)
    if not st.admitted:
        _hold_for_admission(ctx, act, st.reason, (st.message or "") + defaulted)
        if st.evicted and not any(pod_state.is_active(p) for p in ctx.pods):
            act.patch_status(WORKLOADS, wl, kueue.clear_reservation(wl, ctx.now))
        return _waits(ctx)
    placed = _placement(act, job, wl)
    _admitted(ctx, st)
    ready = conditions.is_true(ctx.status, conditions.PODS_READY)
    act.patch_status(WORKLOADS, wl, kueue.pods_ready(wl, ready, ctx.now))
    return ctx.go_on_with(kueue.admitted(job, placed))


def _queues(ctx: Context, act: Actions) -> bool:
    return act.options.kueue


def finish_workload(ctx: Context, act: Actions) -> Next:
    """A finished queued job: its Workload Finished (Kueue releases the quota; the finished
    step, before the spec is parsed)."""
    uid = ob.JobRef.of(ctx.raw).uid
    for wl in act.listers[WORKLOADS].controlled_by(uid):  # (its label removed or not)
        succeeded = conditions.is_true(ctx.status, conditions.SUCCEEDED)
        cond = conditions.get_condition(
            ctx.status, conditions.SUCCEEDED if succeeded else conditions.FAILED
        )
        message = str((cond or {}).get("message") or "")
        act.patch_status(WORKLOADS, wl, kueue.finished(wl, succeeded, message, ctx.now))
    return Next.GO_ON


# Kueue's steps (controller/lifecycle/points.py): before the job may start, and once it
# finished
STEPS = (
    FeatureStep(kueue.KUEUE.name, "queued", Point.BEFORE_START, _queues, wait_for_admission),
    FeatureStep(kueue.KUEUE.name, "queued", Point.FINISHED, _queues, finish_workload),
)


def _replace(ctx: Context, act: Actions, wl: Obj, why: str) -> Next:
    """The Workload no longer stands for the job: the attempt stops (no pods run outside what
    was admitted), the Workload goes, and a new one is queued once it is gone."""
    message = f"{why}: Workload {ob.name(wl)} is replaced and the job queued again"
    ctx.plan.announce(WARNING, kueue.REASON_WORKLOAD_CHANGED, message)
    _hold_for_admission(ctx, act, kueue.REASON_WORKLOAD_CHANGED, message)
    act.apply.delete(ctx.job, WORKLOADS, wl, why)
    return _waits(ctx)


def _label_removed(ctx: Context, act: Actions, queue: str) -> None:
    """Said once per job and process: the queue label went, the job stays in its queue."""
    memo = act.memos[ctx.job.key].of(QueueMemo)
    if memo.queue_label_removed_told == ctx.job.uid:
        return
    plan = ctx.plan
    plan.on_written.append(lambda: setattr(memo, "queue_label_removed_told", ctx.job.uid))
    plan.announce(
        WARNING,
        REASON_QUEUE_LABEL_REMOVED,
        f"the label {kueue.QUEUE_LABEL} was removed: the job stays under Kueue in LocalQueue "
        f"{queue} until it finishes",
    )


def _pod_sets_hash(act: Actions, job: DGLJob) -> str:
    """The job's podSets hash, computed once per spec generation (every pod event syncs an
    admitted job; building its pods each time to hash them would be wasted)."""
    memo = act.memos[job.key].of(QueueMemo)
    of = (job.uid, job.generation)
    if memo.pod_sets_hash is None or memo.pod_sets_hash[0] != of:
        memo.pod_sets_hash = (of, built.pod_sets_hash(built.pod_sets(job, act.options)))
    return memo.pod_sets_hash[1]


def _waits(ctx: Context) -> Next:
    ctx.counted = observation.observe(ctx.job, [], registry.attempt(ctx.status))
    return Next.DONE


def _create_workload(ctx: Context, act: Actions, queue: str) -> str:
    """The Workload's name; "": the API server refused it (the job failed)."""
    job = ctx.job
    wl = built.workload(job, act.options, _priority(act, job), queue)
    try:
        act.apply.create(job, WORKLOADS, wl)
    except NotFound:
        message = (
            "the Workload CRD (workloads.kueue.x-k8s.io, v1beta2) is not installed: "
            "install Kueue v0.17 or later, or run the operator without --kueue"
        )
        act.fail(ctx, conditions.REASON_INVALID_SPEC, message)
        return ""
    except (BadRequest, Invalid) as e:
        message = f"invalid spec: the API server refused the job's Workload: {e.message}"
        act.fail(ctx, conditions.REASON_INVALID_SPEC, message)
        return ""
    return str(wl["metadata"]["name"])


def _priority(act: Actions, job: DGLJob) -> int | None:
    name = job.spec.run_policy.scheduling_policy.priority_class
    if not name:
        return None
    try:
        value = act.client.get(PRIORITYCLASSES, None, name).get("value")
    except NotFound:
        return None  # (the pods' admission refuses it later, naming it)
    return int(value) if isinstance(value, int) else None


def _placement(act: Actions, job: DGLJob, wl: Obj) -> Mapping[str, Placement]:
    """The admission's placement; the flavors are read once per admission."""
    status = wl.get("status") or {}
    of = json.dumps(
        [status.get("admission"), status.get("admissionChecks")], sort_keys=True, default=str
    )
    memo = act.memos[job.key].of(QueueMemo)
    if memo.placement is not None and memo.placement_of == of:
        return memo.placement
    flavors = {}
    for name in sorted(kueue.flavor_names(wl)):
        try:
            flavors[name] = act.client.get(RESOURCEFLAVORS, None, name)
        except NotFound:
            log.warning("an admitted flavor does not exist", flavor=name)
    memo.placement, memo.placement_of = kueue.placement(wl, flavors), of
    return memo.placement


def _hold_for_admission(ctx: Context, act: Actions, reason: str, message: str) -> None:
    """No pods until Kueue admits the job: Queued True with Kueue's reason and message."""
    old = conditions.get_condition(ctx.status, kueue.QUEUED) or {}
    if old.get("status") != "True" or old.get("reason") != reason:
        warn = reason.startswith("Evicted") or reason == kueue.REASON_QUEUE_NAME_MISSING
        kind = WARNING if warn else NORMAL
        ctx.plan.announce(kind, kueue.REASON_QUEUED, f"{reason}: {message}")
    if old.get("message") != message or old.get("reason") != reason:
        ctx.set_condition(kueue.QUEUED, True, reason, message)
    why = "the job waits for admission by Kueue"
    act.hold(ctx, why, kueue.REASON_QUEUED, f"queued: {message}", STOPPED_GRACE_SECONDS)
    ctx.status["phase"] = kueue.PHASE_QUEUED


def _admitted(ctx: Context, st: kueue.QueueState) -> None:
    old = conditions.get_condition(ctx.status, kueue.QUEUED)
    if old is None or old.get("status") == "False":
        return
    ctx.set_condition(kueue.QUEUED, False, st.reason, st.message)
    ctx.status.setdefault("startTime", conditions.now_rfc3339(ctx.now))
    ctx.status["phase"] = conditions.PENDING
    message = f"DGLJob {ctx.job.key} is admitted by Kueue: {st.message}"
    ctx.plan.announce(NORMAL, kueue.REASON_ADMITTED, message)
