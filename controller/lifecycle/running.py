"""The last step: the phase the attempt's pods show (Pending, Partitioning, Partitioned,
Training), Running True while they run (an Event when the phase changes), Restarting False
once running again; the partition's figures announced when dglrun reports them (DistParMETIS,
a partitioner that serves its parts); what the features count once the attempt trains
(controller/features/registry.py)."""

from __future__ import annotations

import functools

from controller.features import registry
from controller.lifecycle.actions import Actions
from controller.lifecycle.context import Context, Next
from controller.machinery.events import NORMAL
from controller.status import conditions, observation
from podcontract import STATUS_PARTITION_SECONDS, STATUS_PARTITIONS

_RUNNING_PHASES = (conditions.PARTITIONING, conditions.PARTITIONED, conditions.TRAINING)
_PHASE_MESSAGES = {
    conditions.PENDING: "waiting for pods",
    conditions.PARTITIONING: "partitioner is partitioning the graph",
    conditions.PARTITIONED: "graph partitioned; launcher is preparing training",
    conditions.TRAINING: "launcher is running training",
}


def mark_running(ctx: Context, act: Actions) -> Next:
    job, status = ctx.job, ctx.status
    phase = observation.phase_for(job, ctx.obs, status)
    previous = status.get("phase")
    if (
        (job.spec.mode.partitions_in_launcher or job.spec.pulls_partitions)
        and previous in (conditions.PENDING, conditions.PARTITIONING)
        and phase in (conditions.PARTITIONED, conditions.TRAINING)
    ):
        _partition_reported(ctx, act)
    status["phase"] = phase
    if phase == conditions.TRAINING:
        for count in registry.training(job, status, ctx.now):
            ctx.plan.on_written.append(functools.partial(count, act.metrics))
    if phase in _RUNNING_PHASES:
        message = f"DGLJob {job.key} is running: {_PHASE_MESSAGES[phase]}."
        changed = ctx.set_condition(conditions.RUNNING, True, conditions.REASON_RUNNING, message)
        if changed and previous != phase:
            ctx.plan.announce(NORMAL, f"DGLJob{phase}", message)
        if conditions.is_true(status, conditions.RESTARTING):
            ctx.set_condition(
                conditions.RESTARTING, False, conditions.REASON_RUNNING, "running again"
            )
    return Next.DONE


def _partition_reported(ctx: Context, act: Actions) -> None:
    """dglrun partitioned and reported how long it took (``status.partitionSeconds``, with
    its progress): DistParMETIS on the workers, or a partitioner that serves the parts."""
    job, status = ctx.job, ctx.status
    seconds = status.get(STATUS_PARTITION_SECONDS)
    took = f" in {seconds:.0f}s" if isinstance(seconds, (int, float)) else ""
    where = " on the workers" if job.spec.mode.partitions_in_launcher else ""
    message = f"Graph partitioned{where}{took}"
    if (status.get(STATUS_PARTITIONS) or {}).get("reused"):
        message = f"Partitions reused from the job's storage{took} (not partitioned again)"
    ctx.plan.announce(NORMAL, "PartitionSucceeded", message)
    if isinstance(seconds, (int, float)):
        ns, value = job.namespace, float(seconds)
        ctx.plan.on_written.append(lambda: act.metrics.partition_duration.labels(ns).observe(value))
