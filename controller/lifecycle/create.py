"""otherwise -> the storage (spec.storage), then every child that is missing: the ConfigMap
(updated when it differs), RBAC and the Secret once, the Services, the pods the attempt lacks;
the launcher once the workers are up when launcherCreationPolicy says so. A child the API
server refuses for good fails the job (InvalidSpec, quoting it). The pods made are counted in
this sync's replicaStatuses (the status is written once, not again when the cache sees them).
:func:`make_children` also serves an attempt whose workers are being chosen (no launcher yet)."""

from __future__ import annotations

import structlog

from controller.api import WAIT_FOR_WORKERS_READY, DGLJob
from controller.builders import JOB_NAME_LABEL
from controller.builders.desired import Desired, desired
from controller.children import ONCE_BY_KIND
from controller.features import transfer
from controller.features.storage import results_location, storage_claim
from controller.lifecycle.actions import Actions
from controller.lifecycle.context import Context, Next
from controller.machinery import objects as ob
from controller.machinery.events import NORMAL, WARNING
from controller.status import conditions, observation
from kubeclient import (
    CONFIGMAPS,
    PODS,
    SECRETS,
    SERVICES,
    BadRequest,
    Forbidden,
    Invalid,
    NotFound,
    Obj,
    Resource,
)
from kubeclient import PERSISTENTVOLUMECLAIMS as PVCS

log = structlog.get_logger("controller.lifecycle")


def create_children(ctx: Context, act: Actions) -> Next:
    created = make_children(ctx, act)
    if created is None:
        ctx.counted = None  # (the job failed, or waits for its storage: counts as they were)
        return Next.DONE
    if created:
        ctx.counted = observation.observe(ctx.job, [*ctx.pods, *created], ctx.attempt)
    return Next.GO_ON


def make_children(
    ctx: Context, act: Actions, *, sizing: bool = False, partitioner_placed: bool = True
) -> list[Obj] | None:
    """The storage, then the children that are missing; the pods made (None: the job
    failed, or waits for its storage). ``sizing``: the attempt's workers are being chosen, no
    launcher yet; one that needs its partitioner makes it alone until it is placed
    (``partitioner_placed``)."""
    try:
        if not _storage_ready(ctx, act):
            return None
        return _create_missing(ctx, act, sizing=sizing, placed=partitioner_placed)
    except (BadRequest, Invalid) as e:
        # The API server refuses what the job's templates produce: retrying cannot help.
        message = f"invalid spec: the API server refused a child object: {e.message}"
        act.fail(ctx, conditions.REASON_INVALID_SPEC, message)
        return None
    except Forbidden as e:
        if any(words in e.message for words in _REFUSED_FOR_GOOD):
            message = f"invalid spec: the API server refused a child object: {e.message}"
            act.fail(ctx, conditions.REASON_INVALID_SPEC, message)
        else:
            _refused_for_now(ctx, e.message)
        return None


# A 403 that no retry mends: the namespace's Pod Security level refuses what the templates
# make, or a ResourceQuota requires requests or limits that they lack. Any other (a quota
# used up, which frees; the operator's RBAC, which its installer mends) is retried, and said.
_REFUSED_FOR_GOOD = ("violates PodSecurity", "must specify")
REASON_CREATE_REFUSED = "FailedCreate"  # PodsReady False: a child refused for now
RETRY_REFUSED_SECONDS = 15.0


def _refused_for_now(ctx: Context, message: str) -> None:
    """PodsReady False quoting the API server (a Warning once per message); looked at again
    soon."""
    text = f"the API server refused a child object (retried): {message}"
    old = conditions.get_condition(ctx.status, conditions.PODS_READY) or {}
    if old.get("message") != text:
        ctx.plan.announce(WARNING, REASON_CREATE_REFUSED, text)
    ctx.set_condition(conditions.PODS_READY, False, REASON_CREATE_REFUSED, text)
    ctx.plan.requeue(RETRY_REFUSED_SECONDS)


def _create_missing(ctx: Context, act: Actions, *, sizing: bool, placed: bool) -> list[Obj]:
    """Create the children that do not exist; returns the pods created, as their metadata and
    the phase the API server gives every new pod (Pending)."""
    ctx.go_on_with(transfer.chosen(ctx.job))  # (a new job's Secret name: random)
    job, obs = ctx.job, ctx.obs
    if job.transfer_secret:
        ctx.status[transfer.STATUS] = job.transfer_secret
    want = desired(job, act.options, obs.pods, ctx.attempt)
    # Refuse to touch anything if one name is taken by someone else's object.
    _check_ownership(act, job, want)
    present = set(obs.pods) | set(obs.terminating) | set(obs.standby)
    if want.config_map is not None:
        written = act.memos[job.key].config_written
        cm = written.newest(act.listers[CONFIGMAPS].get(job.namespace, job.config_name))
        if cm is None:
            act.apply.create(job, CONFIGMAPS, want.config_map)
        elif (cm.get("data") or {}) != want.config_map["data"]:
            written.remember(act.apply.update_data(CONFIGMAPS, cm, want.config_map["data"]))
    reports = act.listers[CONFIGMAPS]
    if want.report is not None and reports.get(job.namespace, job.report_name) is None:
        act.apply.create(job, CONFIGMAPS, want.report)
    _tell_ignored(act, job, want)
    for child in want.once:
        if child["kind"] == "Secret":
            _create_secret_once(act, job, child)
            continue
        res = ONCE_BY_KIND[child["kind"]]
        if act.listers[res].get(job.namespace, child["metadata"]["name"]) is None:
            act.apply.create(job, res, child)
    for svc in want.services:
        if act.listers[SERVICES].get(job.namespace, svc["metadata"]["name"]) is None:
            act.apply.create(job, SERVICES, svc)
    pods = [p for p in want.workers if p["metadata"]["name"] not in present]
    partitioned = observation.partition_done(job, obs)
    needs_partitioner = want.partitioner is not None and not partitioned
    if want.partitioner is not None and needs_partitioner and job.partitioner_name not in present:
        pods.append(want.partitioner)
    if sizing and needs_partitioner and not placed:
        # the partitioner holds its room before the workers may take all of it (pods made
        # in the same second are queued in no set order): the workers wait for it
        pods = [p for p in pods if p is want.partitioner]
    if (
        not sizing
        and job.launcher_name not in present
        and (
            not job.spec.mode.workers
            or job.spec.launcher_creation_policy != WAIT_FOR_WORKERS_READY
            or observation.workers_up(job, obs)
        )
    ):
        pods.append(want.launcher)
    created = [act.apply.create(job, PODS, pod) for pod in pods]
    return [{**c, "status": {"phase": "Pending"}} for c in created if c is not None]


def _storage_ready(ctx: Context, act: Actions) -> bool:
    """spec.storage: make the claim from the template (once per job and process), or see
    that the user's claim exists (pods that mount a missing claim wait for it: a Warning
    says why). ``status.results`` tells where the results go, once the claim exists: a
    claim the API server refuses, or one that never appears, leaves none. False: the job
    failed (the caller fails it on a refusal)."""
    job = ctx.job
    location = results_location(job)
    if location is None:
        return True
    memo = act.memos[job.key]
    if memo.claim_ready_for == job.uid:
        ctx.status["results"] = location
        return True
    ctx.status.pop("results", None)  # (until the claim is seen: set below)
    claim = storage_claim(job)
    made = claim is not None and act.apply.create_unwatched(job, PVCS, claim)
    if claim is not None and not made and not _claim_reusable(ctx, act):
        return False
    if claim is None and not _user_claim_exists(ctx, act):
        return True
    ctx.status["results"] = location
    # (once the status is written: a sync that fails to write it does all this again)
    ctx.plan.on_written.append(lambda: setattr(memo, "claim_ready_for", job.uid))
    return True


def _claim_reusable(ctx: Context, act: Actions) -> bool:
    """The template's claim exists already: made for an earlier job of this name, it is
    used again (an Event says so); anybody else's fails the job."""
    job = ctx.job
    name = job.claim_name
    assert name is not None
    existing = act.client.get(PVCS, job.namespace, name)
    if ob.labels(existing).get(JOB_NAME_LABEL) != job.name:
        message = (
            f"invalid spec: spec.storage.claimTemplate: PersistentVolumeClaim {name} "
            f"exists and was not made for DGLJob {job.name}; delete or rename it, or "
            "use it with spec.storage.claimName"
        )
        act.fail(ctx, conditions.REASON_INVALID_SPEC, message)
        return False
    ctx.plan.announce(
        NORMAL,
        "ClaimReused",
        f"Using the PersistentVolumeClaim {name} kept from an earlier DGLJob {job.name}",
    )
    return True


def _user_claim_exists(ctx: Context, act: Actions) -> bool:
    """spec.storage.claimName: does it exist? While it does not, a Warning (once per job
    and process) says the pods wait for it, and the job is looked at again soon."""
    job = ctx.job
    name = job.claim_name
    assert name is not None
    try:
        act.client.get(PVCS, job.namespace, name)
    except NotFound:
        memo = act.memos[job.key]
        if memo.claim_missing_told != job.uid:
            ctx.plan.on_written.append(lambda: setattr(memo, "claim_missing_told", job.uid))
            ctx.plan.announce(
                WARNING,
                "ClaimNotFound",
                f"spec.storage.claimName: PersistentVolumeClaim {name} does not exist "
                f"in namespace {job.namespace}; the job's pods wait for it",
            )
        ctx.plan.requeue(10.0)
        return False
    return True


def _tell_ignored(act: Actions, job: DGLJob, want: Desired) -> None:
    """schedulingPolicy.queue means nothing to Coscheduling: say so once per process."""
    if want.pod_group is None or not job.spec.run_policy.scheduling_policy.queue:
        return
    if not act.told_queue_ignored:
        act.told_queue_ignored = True
        log.warning(
            "spec.runPolicy.schedulingPolicy.queue is ignored: scheduler-plugins' "
            "Coscheduling has no queues (said once)",
            job=job.key,
        )


def _create_secret_once(act: Actions, job: DGLJob, secret: Obj) -> None:
    """The transfer token: created blind once per job and process. A Secret of that name
    that exists already is ours from before a restart of the operator: its name is random and
    was recorded only once it existed (controller/features/transfer.py)."""
    memo = act.memos[job.key]
    if memo.secret_made_for == job.uid:
        return
    act.apply.create_unwatched(job, SECRETS, secret)
    memo.secret_made_for = job.uid


def _check_ownership(act: Actions, job: DGLJob, want: Desired) -> None:
    children: list[tuple[Resource, Obj]] = []
    if want.config_map is not None:
        children.append((CONFIGMAPS, want.config_map))
    if want.report is not None:
        children.append((CONFIGMAPS, want.report))
    once = [c for c in want.once if c["kind"] in ONCE_BY_KIND]
    children += [(ONCE_BY_KIND[c["kind"]], c) for c in once]
    children += [(SERVICES, s) for s in want.services]
    pods = [*want.workers, want.launcher]
    if want.partitioner is not None:
        pods.append(want.partitioner)
    children += [(PODS, p) for p in pods]
    for res, child in children:
        existing = act.listers[res].get(job.namespace, child["metadata"]["name"])
        act.apply.check_owned(job, res, existing)
