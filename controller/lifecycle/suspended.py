"""suspended? -> delete the pods (with at most a stopped attempt's grace, 5 s: the attempt is
over, and a resumed job trains from its last checkpoint; the workers' `sleep` ignores SIGTERM
and would hold the namespace's quota and the job's names 30 s), Suspended (no pods are
counted). Resumed? -> said so, and the start time counts again from now."""

from __future__ import annotations

from controller.features import registry
from controller.lifecycle.actions import STOPPED_GRACE_SECONDS, Actions
from controller.lifecycle.context import Context, Next
from controller.machinery.events import NORMAL
from controller.status import conditions, observation


def suspend_or_resume(ctx: Context, act: Actions) -> Next:
    job = ctx.job
    if job.spec.run_policy.suspend:
        if not conditions.is_true(ctx.status, conditions.SUSPENDED):
            message = f"DGLJob {job.key} is suspended."
            ctx.set_condition(conditions.SUSPENDED, True, conditions.REASON_SUSPENDED, message)
            ctx.plan.announce(NORMAL, conditions.REASON_SUSPENDED, message)
        why = "the job is suspended"
        act.hold(ctx, why, conditions.REASON_SUSPENDED, why, STOPPED_GRACE_SECONDS)
        ctx.status["phase"] = conditions.PHASE_SUSPENDED
        ctx.counted = observation.observe(job, [], registry.attempt(ctx.status))
        return Next.DONE
    if conditions.is_true(ctx.status, conditions.SUSPENDED):
        message = f"DGLJob {job.key} is resumed."
        ctx.set_condition(conditions.SUSPENDED, False, conditions.REASON_RESUMED, message)
        ctx.status["startTime"] = conditions.now_rfc3339(ctx.now)
        ctx.status["phase"] = conditions.PENDING
        ctx.plan.announce(NORMAL, conditions.REASON_RESUMED, message)
    return Next.GO_ON
