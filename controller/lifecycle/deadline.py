"""deadline passed? (runPolicy.activeDeadlineSeconds, counted from status.startTime) ->
Failed/DeadlineExceeded, every pod stopped whatever cleanPodPolicy says. Before it: look
again when it passes."""

from __future__ import annotations

from controller.lifecycle.actions import Actions
from controller.lifecycle.context import Context, Next
from controller.status import conditions, pod_state


def enforce_deadline(ctx: Context, act: Actions) -> Next:
    job = ctx.job
    deadline = job.spec.run_policy.active_deadline_seconds
    started = conditions.parse_time(ctx.status.get("startTime"))
    if deadline is None or started is None:
        return Next.GO_ON
    remaining = started + deadline - ctx.now
    if remaining > 0:
        ctx.plan.requeue(remaining)
        return Next.GO_ON
    message = f"DGLJob {job.key} ran longer than activeDeadlineSeconds ({deadline}s)"
    act.fail(ctx, conditions.REASON_DEADLINE, message)
    for pod in ctx.pods:  # the deadline stops everything, whatever cleanPodPolicy says
        if pod_state.is_active(pod):
            act.delete_pod(job, pod, "activeDeadlineSeconds exceeded")
    ctx.counted = None  # (the counts stay as they were)
    return Next.DONE
