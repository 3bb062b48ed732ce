"""launcher done? -> Succeeded (Completed), the training time observed, cleanPodPolicy once
the status is written, then the TTL."""

from __future__ import annotations

from controller.lifecycle.actions import Actions
from controller.lifecycle.context import Context, Next
from controller.machinery.events import NORMAL
from controller.status import conditions, pod_state


def complete(ctx: Context, act: Actions) -> Next:
    job, plan = ctx.job, ctx.plan
    launcher = ctx.obs.pod(job.launcher_name)
    if launcher is None or pod_state.pod_phase(launcher) != "Succeeded":
        return Next.GO_ON
    message = f"DGLJob {job.key} successfully completed."
    ctx.set_condition(conditions.SUCCEEDED, True, conditions.REASON_SUCCEEDED, message)
    ctx.not_running(conditions.REASON_SUCCEEDED, message)
    ctx.status["phase"] = conditions.COMPLETED
    ctx.status["completionTime"] = conditions.now_rfc3339(ctx.now)
    seconds = pod_state.main_run_seconds(launcher)
    ns = job.namespace
    if seconds is not None:
        ctx.status["trainingSeconds"] = seconds
        plan.on_written.append(lambda: act.metrics.training_duration.labels(ns).observe(seconds))
    plan.announce(NORMAL, conditions.REASON_SUCCEEDED, message)
    act.observe_delivery(ctx)
    plan.on_written.append(lambda: act.metrics.jobs_successful.labels(ns).inc())
    act.finish(ctx)
    return Next.DONE
