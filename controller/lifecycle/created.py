"""a new job? -> Created (once), its start time and phase Pending. Then the job's pods are
read, and those stuck Terminating on a lost node are forced (no kubelet will confirm)."""

from __future__ import annotations

from controller.lifecycle.actions import Actions
from controller.lifecycle.context import Context, Next
from controller.machinery.events import NORMAL
from controller.status import conditions
from kubeclient import PODS


def record_creation(ctx: Context, act: Actions) -> Next:
    job, plan = ctx.job, ctx.plan
    if conditions.get_condition(ctx.status, conditions.CREATED) is None:
        message = f"DGLJob {job.key} is created."
        ctx.set_condition(conditions.CREATED, True, conditions.REASON_CREATED, message)
        ctx.status.setdefault("startTime", conditions.now_rfc3339(ctx.now))
        ctx.status.setdefault("phase", conditions.PENDING)
        ctx.status.setdefault("restartCount", 0)
        plan.announce(NORMAL, conditions.REASON_CREATED, message)
        plan.on_written.append(lambda: act.metrics.jobs_created.labels(job.namespace).inc())
    ctx.pods = act.listers[PODS].controlled_by(job.uid)
    act.force_stuck(job, ctx.pods)
    return Next.GO_ON
