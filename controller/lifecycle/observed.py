"""What the attempt's pods show: which attempt runs, the job as that attempt sees it (each
feature's view of it: controller/features/registry.py), and its pods sorted out
(controller/status/observation.py).

    a restart under way? -> the old attempt's pods go first (their names are reused); a node
                            found lost since the restart says so (reason NodeLost)
    otherwise            -> a partitioner that ended: its runtime recorded (KubectlCp); the
                            lost nodes among those the attempt's pods are bound to, for the
                            later steps
"""

from __future__ import annotations

from controller.features import registry
from controller.lifecycle.actions import STOPPED_GRACE_SECONDS, Actions
from controller.lifecycle.context import Context, Next
from controller.machinery.events import NORMAL, WARNING
from controller.status import conditions, node_loss, observation, pod_state
from kubeclient import Obj
from podcontract import STATUS_PARTITION_SECONDS


def observe_attempt(ctx: Context, act: Actions) -> Next:
    ctx.attempt = registry.attempt(ctx.status)
    job = registry.for_attempt(ctx.job, ctx.status, ctx.pods)
    obs = observation.observe(job, ctx.pods, ctx.attempt)
    ctx.go_on_with(job, obs)
    if obs.stale:
        for pod in obs.stale:
            if not pod_state.is_terminating(pod):
                act.delete_pod(job, pod, "restarting the job", STOPPED_GRACE_SECONDS)
        _node_lost_while_restarting(ctx, act, obs.stale)
        return Next.DONE
    _record_partition_time(ctx, act)
    ctx.lost = act.lost_nodes([p for p in obs.pods.values() if pod_state.is_active(p)])
    return Next.GO_ON


def _node_lost_while_restarting(ctx: Context, act: Actions, stale: list[Obj]) -> None:
    """A node died and a pod's failure (the launcher's dglrun, most often) restarted the
    job before the node was seen lost: once it is, the restart says so (reason NodeLost,
    the node named) without counting another restart."""
    cond = conditions.get_condition(ctx.status, conditions.RESTARTING)
    if (
        not cond
        or cond.get("status") != "True"
        or cond.get("reason") == conditions.REASON_NODE_LOST
    ):
        return
    running = [p for p in stale if pod_state.pod_phase(p) in ("Pending", "Running")]
    lost = act.lost_nodes(running)
    if not lost:
        return
    count = int(ctx.status.get("restartCount") or 0)
    limit = ctx.job.spec.run_policy.backoff_limit
    where = node_loss.node_loss_message(lost, running)
    message = f"{where}; restarting the job (restart {count} of {limit})"
    ctx.set_condition(conditions.RESTARTING, True, conditions.REASON_NODE_LOST, message)
    ctx.plan.announce(WARNING, conditions.REASON_NODE_LOST, message)
    ctx.plan.on_written.append(lambda: act.metrics.node_losses.inc())


def _record_partition_time(ctx: Context, act: Actions) -> None:
    """KubectlCp: the partitioner pod's runtime (it exits once it delivered). Over HTTP it
    serves until the workers have their parts: dglrun reports the time (the running step
    announces it)."""
    job = ctx.job
    if (
        not job.spec.mode.partitioner
        or job.spec.pulls_partitions
        or STATUS_PARTITION_SECONDS in ctx.status
    ):
        return
    partitioner = ctx.obs.pod(job.partitioner_name)
    if partitioner is None or pod_state.pod_phase(partitioner) != "Succeeded":
        return
    seconds = pod_state.main_run_seconds(partitioner)
    if seconds is None:
        return
    ctx.status[STATUS_PARTITION_SECONDS] = seconds
    ns = job.namespace
    ctx.plan.on_written.append(lambda: act.metrics.partition_duration.labels(ns).observe(seconds))
    ctx.plan.announce(NORMAL, "PartitionSucceeded", f"Graph partitioned in {seconds:.0f}s")
