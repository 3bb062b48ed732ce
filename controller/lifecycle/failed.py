"""a pod failed? (or, once training runs, a worker or the launcher vanished) -> restart the
whole job while backoffLimit allows, else Failed. A failure every attempt would meet again
(failures.PERMANENT: MemoryPlanExceeded, dglrun found a step that cannot fit; FileRefused, a
process refused a file it was to load) is never retried. :func:`end_attempt` serves the
node-lost step too."""

from __future__ import annotations

from dataclasses import dataclass

from controller.api import LAUNCHER, PARTITIONER, WORKER
from controller.features import registry
from controller.lifecycle.actions import Actions
from controller.lifecycle.context import Context, Next
from controller.machinery import objects as ob
from controller.machinery.events import NORMAL, WARNING
from controller.status import conditions, failures, pod_state
from podcontract import DGLRUN_STATUS_FIELDS, STATUS_DELIVERY_BYTES

# A launcher pod lost while its attempt trains (deleted, evicted with its node drained): the
# workers' agents keep the DGL processes, and the launcher made again re-attaches to them
REASON_LAUNCHER_REPLACED = "LauncherReplaced"
RUNNING_PHASES = (conditions.PENDING, conditions.PARTITIONING, conditions.PARTITIONED,
                  conditions.TRAINING)  # fmt: skip


def restart_or_fail(ctx: Context, act: Actions) -> Next:
    failure = ctx.obs.failure or _missing_pod_failure(ctx)
    if failure is None:
        return Next.GO_ON
    if _launcher_replaced(ctx, act, failure):
        return Next.GO_ON  # (the create step makes it again once it is gone)
    return end_attempt(ctx, act, failure)


@dataclass
class ReplacedMemo:
    """The lost launcher last told of (its uid, or 'gone', and the attempt)."""

    told: str = ""


def _launcher_replaced(ctx: Context, act: Actions, failure: failures.PodFailure) -> bool:
    """The launcher, lost (gone, or being deleted: dglrun ended at SIGTERM) while the workers
    of the attempt all run: not a failure. A new launcher of the attempt is made and
    re-attaches to the DGL processes, which the workers' agents kept (a Normal Event says so,
    once per lost pod); lost before training, it replays the phases (the agents answer a
    start they run with that process). A launcher whose dglrun failed on its own (not being
    deleted) is a failure as ever; so is any loss when a worker is gone too (a restart)."""
    job, obs = ctx.job, ctx.obs
    if failure.replica_type != LAUNCHER or not job.spec.mode.workers:
        return False  # (Skip mode: the launcher itself trains; nothing runs on to re-attach to)
    if ctx.status.get("phase") not in RUNNING_PHASES:
        return False  # (the operator stops the attempt itself: a restart, a suspension)
    launcher = obs.pod(job.launcher_name)
    if launcher is not None and not pod_state.is_terminating(launcher):
        return False
    for name in job.training_worker_names():
        worker = obs.pod(name)
        if worker is None or not pod_state.is_active(worker):
            return False
    lost = f"{ob.uid(launcher) if launcher is not None else 'gone'}@{ctx.attempt}"
    memo = act.memos[job.key].of(ReplacedMemo)
    if memo.told != lost:
        memo.told = lost
        message = (
            f"launcher pod {job.launcher_name} was lost while training ({failure.message}); a "
            "new one re-attaches to the DGL processes the workers' agents kept running"
        )
        ctx.plan.announce(NORMAL, REASON_LAUNCHER_REPLACED, message)
    return True


def end_attempt(ctx: Context, act: Actions, failure: failures.PodFailure) -> Next:
    """A pod failed, vanished or sits on a lost node: restart the job while backoffLimit
    allows, else fail it."""
    policy = ctx.job.spec.run_policy
    if failure.reason == conditions.REASON_NODE_LOST:
        ctx.plan.on_written.append(lambda: act.metrics.node_losses.inc())
    # (a memory plan that does not fit, a refused file: every attempt fails so, no restart)
    retry = not failure.permanent
    if retry and ctx.attempt < policy.backoff_limit:
        _restart(ctx, act, failure)
        return Next.DONE
    reason = failure.condition_reason
    message = failure.describe()
    if retry and policy.backoff_limit > 0:
        reason = conditions.REASON_BACKOFF_LIMIT
        message += f" (backoffLimit {policy.backoff_limit} reached)"
    act.fail(ctx, reason, message)
    return Next.DONE


def _missing_pod_failure(ctx: Context) -> failures.PodFailure | None:
    """Once training runs, a worker or launcher that disappears is a failure; so is the
    partitioner that serves the parts over HTTP, gone (deleted or being deleted) before the
    launcher reported their delivery: no pull can reach it again in this attempt (without this
    the attempt ended only when the pulls gave up, 90 s later on the local cluster)."""
    job, obs = ctx.job, ctx.obs
    launcher = obs.pod(job.launcher_name)
    if launcher is None:
        if ctx.status.get("phase") == conditions.TRAINING:
            return failures.PodFailure(
                "Launcher", job.launcher_name, "", None, "PodDeleted", "deleted while training"
            )
        return None
    if not pod_state.main_started(launcher):
        return None
    delivered = ctx.status.get(STATUS_DELIVERY_BYTES) is not None
    if job.spec.pulls_partitions and not delivered and job.partitioner_name not in obs.pods:
        return failures.PodFailure(
            PARTITIONER,
            job.partitioner_name,
            "",
            None,
            "PodDeleted",
            "deleted while serving the partitions (before every worker had its part)",
        )
    for name in job.training_worker_names():
        if name not in obs.pods:
            return failures.PodFailure(
                WORKER, name, "", None, "PodDeleted", "deleted while training"
            )
    return None


def _restart(ctx: Context, act: Actions, failure: failures.PodFailure) -> None:
    job, status = ctx.job, ctx.status
    limit = job.spec.run_policy.backoff_limit
    message = f"{failure.describe()}; restarting the job (restart {ctx.attempt + 1} of {limit})"
    # a node loss says so in the reason (the history names the node); other failures:
    # the failing pod's reason is in the message
    reason = (
        failure.reason
        if failure.reason == conditions.REASON_NODE_LOST
        else conditions.REASON_RESTARTING
    )
    status["restartCount"] = ctx.attempt + 1
    status["phase"] = conditions.PHASE_RESTARTING
    registry.attempt_over(status)
    act.observe_delivery(ctx)
    for reported in DGLRUN_STATUS_FIELDS:  # the next attempt's dglrun reports afresh
        ctx.plan.clear(reported)
    ctx.set_condition(conditions.RESTARTING, True, reason, message)
    ctx.not_running(conditions.REASON_RESTARTING, message)
    if conditions.get_condition(status, conditions.PODS_READY):
        ctx.set_condition(
            conditions.PODS_READY,
            False,
            conditions.REASON_PODS_STARTING,
            "the job restarts: its pods are made again",
        )
    ctx.plan.announce(WARNING, reason, message)
    ctx.plan.on_written.append(lambda: act.metrics.jobs_restarted.labels(job.namespace).inc())
