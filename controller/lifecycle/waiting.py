"""pods waiting? -> PodsReady False with the first pod's reason (Unschedulable, ErrImagePull,
...), a Warning once per problem; True once every pod of the attempt that exists has started.
Past schedulingPolicy.scheduleTimeoutSeconds: Failed with that reason."""

from __future__ import annotations

from controller.api import CLEAN_NONE, DGLJob
from controller.lifecycle.actions import Actions
from controller.lifecycle.context import Context, Next
from controller.machinery import objects as ob
from controller.machinery.events import WARNING
from controller.status import conditions, observation, pod_state, waiting
from kubeclient import PODS, Obj


def explain_waiting(ctx: Context, act: Actions) -> Next:
    """Say why the attempt's pods wait (PodsReady); past scheduleTimeoutSeconds, fail the
    job with that reason."""
    job, obs, plan, now = ctx.job, ctx.obs, ctx.plan, ctx.now
    problem = waiting.waiting_problem(job, obs)
    _pods_ready(ctx, problem)
    cond = conditions.get_condition(ctx.status, conditions.PODS_READY) or {}
    if problem is not None:
        plan.waiting = str(cond.get("reason") or problem.reason)
    timeout = job.spec.run_policy.scheduling_policy.schedule_timeout_seconds
    unstarted = waiting.not_started(obs)
    if timeout is None or not unstarted:
        return Next.GO_ON
    # each pod's own wait counts from its creation (an attempt's pods are made together,
    # at its start; a pod made later, like the launcher, gets the whole timeout too)
    created = {ob.name(p): pod_state.creation_time(p) or now for p in unstarted}
    remaining = min(created.values()) + timeout - now
    if remaining > 0:
        plan.requeue(remaining)
        return Next.GO_ON
    late = [
        n for n in observation.replica_order(job) if n in created and created[n] + timeout <= now
    ]
    late += sorted(n for n in created if n not in late and created[n] + timeout <= now)
    limit = f"schedulingPolicy.scheduleTimeoutSeconds ({timeout}s)"
    if problem is not None:
        reason = str(cond.get("reason") or problem.reason)
        who = problem.pod if problem.pod in late else late[0]
        message = f"{cond.get('message') or problem.describe()}; pod {who} did not start "
        message += f"within {limit}"
    else:
        reason = conditions.REASON_SCHEDULE_TIMEOUT
        pod = obs.pods[late[0]]
        message = f"pod {late[0]} did not start within {limit}: {_pending_state(pod)}"
    act.fail(ctx, reason, message)
    if job.spec.clean_pod_policy == CLEAN_NONE:  # (the others delete them anyway)
        plan.on_written.append(lambda: _delete_not_started(act, job))
    plan.waiting = None
    return Next.DONE


def _pods_ready(ctx: Context, problem: waiting.WaitingProblem | None) -> None:
    """PodsReady: False with the first waiting pod's reason (a Warning once per problem:
    the condition already written says whether it is news), True once every pod of the
    attempt that exists has started."""
    cond = conditions.get_condition(ctx.status, conditions.PODS_READY)
    was_false = cond is not None and cond.get("status") == "False"
    if problem is not None:
        message, reason = problem.describe(), problem.reason
        if (
            cond is not None
            and was_false
            and problem.same(str(cond.get("reason")), str(cond.get("message")))
        ):
            # the same problem: no news (the count of pods it holds may have changed)
            if problem.reason not in waiting.IMAGE_PULL_REASONS:
                ctx.set_condition(conditions.PODS_READY, False, reason, message)
            return
        ctx.set_condition(conditions.PODS_READY, False, reason, message)
        ctx.plan.announce(WARNING, reason, message)
        return
    if not ctx.obs.pods:
        return
    unstarted = waiting.not_started(ctx.obs)
    if not unstarted:
        ctx.set_condition(
            conditions.PODS_READY,
            True,
            conditions.REASON_PODS_READY,
            "every pod of the job has started",
        )
    elif cond is not None and was_false and cond.get("reason") != conditions.REASON_PODS_STARTING:
        rank = {n: i for i, n in enumerate(observation.replica_order(ctx.job))}
        names = sorted((ob.name(p) for p in unstarted), key=lambda n: rank.get(n, 0))
        message = f"waiting for pods to start: {', '.join(names)}"
        ctx.set_condition(conditions.PODS_READY, False, conditions.REASON_PODS_STARTING, message)


def _delete_not_started(act: Actions, job: DGLJob) -> None:
    for pod in act.listers[PODS].controlled_by(job.uid):
        if not pod_state.is_terminating(pod) and not pod_state.pod_started(pod):
            act.delete_pod(job, pod, "its pods did not start within scheduleTimeoutSeconds")


def _pending_state(pod: Obj) -> str:
    """What a pod that has not started is doing, in a few words."""
    scheduled = any(
        c.get("type") == "PodScheduled" and c.get("status") == "True"
        for c in ob.conditions(ob.pod_status(pod))
    )
    if not scheduled and not pod_state.node_name(pod):
        return "not scheduled"
    for init in (True, False):
        for cs in ob.container_statuses(pod, init=init):
            w = ob.waiting(cs)
            if w is not None and w.get("reason"):
                return f"container {cs.get('name')} is {w.get('reason')}"
    where = pod_state.node_name(pod)
    return f"scheduled on {where}, its containers not started" if where else "not started"
