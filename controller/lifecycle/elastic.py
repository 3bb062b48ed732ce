"""elastic? (``spec.elasticPolicy``) -> choose the attempt's members, rescale when one is
taken away or room frees, and look for the next partitioner's room. What it decides comes from
the pure functions of controller/features/elastic.py:

    sizing?            -> the partitioner, then every worker pod; once minReplicas run and the
                          settling window passed, the ones running are the members (no
                          launcher before); below minReplicas PodsReady False says why
    launcher done?     -> on to the succeeded step (whatever befell a worker since)
    a member lost?     -> rescale (a new attempt, not a restart): Preempted or NodeLost
    count too small?   -> dglrun's memory plan refused it: rescale TooFewToFit, wait for K
    standby ended?     -> made again
    launcher exit 75?  -> rescale Grew (dglrun stopped at an epoch boundary, as asked)
    standbys run?      -> ask dglrun to grow (status.elastic.growTo), after the cooldown;
                          with one standby, once a probe pod found the partitioner's room
"""

from __future__ import annotations

import podcontract as pc
from controller.builders.pods import partitioner_pod
from controller.features import elastic as policies
from controller.features.elastic import probe_pod
from controller.lifecycle.actions import Actions
from controller.lifecycle.context import Context, Next
from controller.lifecycle.create import make_children
from controller.lifecycle.points import FeatureStep, Point
from controller.machinery import objects as ob
from controller.machinery.events import NORMAL, WARNING
from controller.status import conditions, failures, observation, pod_state, waiting
from kubeclient import PODS, Obj
from podcontract import DGLRUN_STATUS_FIELDS


def choose_members(ctx: Context, act: Actions) -> Next:
    """Choose the attempt's members, or rescale when one was taken away; the later steps see
    the job with its members chosen."""
    job, obs = ctx.job, ctx.obs
    policy = job.spec.elastic
    assert policy is not None
    policies.partitioned(ctx.status)  # (before a rescale clears what dglrun reported)
    st = policies.record(ctx.status)
    st["desiredWorkers"] = policy.max_replicas
    st.setdefault("workers", 0)
    st.setdefault("rescales", 0)
    st["scale"] = policies.describe(st)
    current = {ob.name(p): p for p in ctx.pods if pod_state.attempt_of(p) == ctx.attempt}
    if job.spec.members is None:
        return _size(ctx, act, current)
    launcher = obs.pod(job.launcher_name)
    if launcher is not None and pod_state.pod_phase(launcher) == "Succeeded":
        return Next.GO_ON  # (trained: whatever befell a worker since, the job succeeded)
    on_lost = [
        (name, pod_state.node_name(current[name]))
        for name in job.training_worker_names()
        if name in current and pod_state.node_name(current[name]) in ctx.lost
    ]
    taken = policies.lost_members(job, current)
    if on_lost:
        where = ", ".join(f"{n} on node {node} ({ctx.lost[node]})" for n, node in on_lost)
        return _rescale(ctx, act, policies.NODE_LOST, f"node lost: {where}")
    if taken:
        what = ", ".join(f"{n} {why}" for n, why in taken)
        return _rescale(ctx, act, policies.PREEMPTED, f"worker pod {what}")
    if _too_few_to_fit(ctx, act) or _held(ctx, launcher):
        return Next.DONE
    for name, pod in list(obs.standby.items()):  # one that ended is made again
        lost_node = act.node_lost(pod_state.node_name(pod)) is not None
        if lost_node or pod_state.pod_phase(pod) in ("Failed", "Succeeded"):
            act.delete_pod(job, pod, "a standby worker ended; it is made again")
            del obs.standby[name]  # (no room it says)
    stopped = failures.pod_failure(launcher) if launcher is not None else None
    # (dglrun exits so only when asked to grow; the standbys may have gone since)
    if stopped is not None and stopped.exit_code == pc.RESCALE_EXIT_CODE:
        message = f"launcher pod {job.launcher_name} {stopped.message or 'stopped to grow'}"
        return _rescale(ctx, act, policies.GREW, message)
    _ask_to_grow(ctx, act)
    return Next.GO_ON


def _elastic(ctx: Context, act: Actions) -> bool:
    return ctx.job.spec.elastic is not None


# elastic jobs' step (controller/lifecycle/points.py): while the attempt runs
STEPS = (
    FeatureStep(policies.ELASTIC.name, "elastic", Point.WHILE_RUNNING, _elastic, choose_members),
)


def _held(ctx: Context, launcher: Obj | None) -> bool:
    """The launcher failed (not to grow): not a failure yet while a member's node may still be
    seen lost (controller/features/elastic.py FAILURE_HOLD_SECONDS); True: held, looked at again."""
    stopped = failures.pod_failure(launcher) if launcher is not None else None
    if stopped is None or stopped.exit_code == pc.RESCALE_EXIT_CODE:
        return False
    left = policies.failure_held(pod_state.finished_at(launcher), ctx.now)
    if left <= 0:
        return False
    ctx.plan.requeue(left)
    return True


def _too_few_to_fit(ctx: Context, act: Actions) -> bool:
    """dglrun's memory plan refused the attempt's count (its partitions would not fit the
    workers' memory): the job waits for the workers it needs, up to maxReplicas, rather
    than fail. True: rescaled."""
    policy = ctx.job.spec.elastic
    assert policy is not None
    failure = ctx.obs.failure
    if failure is None or failure.condition_reason != conditions.REASON_MEMORY_PLAN:
        return False
    need = policies.workers_needed(failure.message)
    if need is None or need > policy.max_replicas:
        return False  # (no count it may have fits: the failure it is)
    policies.record(ctx.status)["minWorkers"] = need
    message = f"{failure.describe()}; the job waits for {need} workers"
    _rescale(ctx, act, policies.TOO_FEW_TO_FIT, message)
    return True


def _ask_to_grow(ctx: Context, act: Actions) -> None:
    """Standby workers run (room freed): ask dglrun to stop at the next epoch boundary
    (status.elastic.growTo), once the attempt trains and its cooldown has passed.

    The next attempt's partitioner (the Worker template's pod, made first) needs room too:
    with one more running standby than the workers a grow adds, it has it. Otherwise (one
    standby runs, say) a probe, a sleeping pod of the partitioner's requests, looks for
    that room: placed, the grow takes every standby that runs; pending, it waits (room
    freed elsewhere places it). It goes with the attempt, or when no standby runs."""
    job, obs = ctx.job, ctx.obs
    policy = job.spec.elastic
    assert policy is not None
    st = policies.record(ctx.status)
    have = len(job.spec.training_workers)
    up = len(policies.running(job, obs.standby))
    most = policies.grow_to(policy, have, up, partitioner=False)
    if most is None:
        st.pop(pc.STATUS_GROW_TO, None)
        if obs.probe is not None:
            act.delete_pod(job, obs.probe, "no standby worker runs: no room to look for")
        return
    if ctx.status.get("phase") != conditions.TRAINING:
        return
    started = conditions.parse_time(st.get("attemptStarted")) or ctx.now
    left = started + policy.cooldown_seconds - ctx.now
    if left > 0:
        ctx.plan.requeue(left)
        return
    want = policies.grow_to(policy, have, up, partitioner=job.spec.mode.partitioner)
    if want is None:  # (the partitioner would take the room of the one that runs)
        if obs.probe is None:
            if job.probe_name not in obs.terminating:
                partitioner = partitioner_pod(job, act.options, policies.attempt(ctx.status))
                probe = probe_pod(job, partitioner)
                act.apply.create(job, PODS, probe)
            return
        if not policies.placed(obs.probe):
            return
        want = most
    if st.get(pc.STATUS_GROW_TO) != want:
        st[pc.STATUS_GROW_TO] = want
        ctx.plan.announce(
            NORMAL,
            policies.REASON_GROWING,
            f"room for more workers (standby worker pods run): the job grows from {have} "
            f"to {want} workers at the next epoch boundary",
        )


def _size(ctx: Context, act: Actions, current: dict[str, Obj]) -> Next:
    """Sizing: the partitioner and every worker pod are made, no launcher, until the
    members are chosen."""
    job, obs = ctx.job, ctx.obs
    policy = job.spec.elastic
    assert policy is not None
    st = policies.record(ctx.status)
    up = {}
    for name, pod in current.items():  # taken away before the attempt started: made again
        gone = act.node_lost(pod_state.node_name(pod)) is not None or policies.disrupted(pod)
        if gone and not pod_state.is_terminating(pod):
            act.delete_pod(job, pod, "taken away while the job chose its workers")
        if not gone:
            up[name] = pod
    whole = policies.whole_first(job)
    # a rescale does not wait out the window for workers the scheduler has no room for (the
    # job was training; a grow brings them back when room frees); a first attempt does
    coming = policies.coming(job, up) if st.get("rescalingSince") else None
    sizing = policies.size(policy, policies.running(job, up), st, ctx.now, whole, coming)
    if sizing.members is None:
        if obs.failure is not None:  # (a worker's program failed: a failure, as ever)
            return Next.GO_ON
        placed = policies.placed(obs.pod(job.partitioner_name))
        if make_children(ctx, act, sizing=True, partitioner_placed=placed) is None:
            return Next.DONE
        problem = waiting.waiting_problem(job, obs)
        message = sizing.waiting + (f"; {problem.headline()}" if problem else "")
        if sizing.look_again is not None:
            reason = policies.REASON_SETTLING
        else:
            reason = problem.reason if problem is not None else policies.REASON_TOO_FEW
        ctx.set_condition(conditions.PODS_READY, False, reason, message)
        if sizing.look_again is not None:
            ctx.plan.requeue(sizing.look_again)
        if ctx.status.get("phase") != policies.PHASE_RESCALING:
            ctx.status["phase"] = conditions.PENDING
        return Next.DONE
    names = [job.worker_name(i) for i in sizing.members]
    st["members"] = names
    st["workers"] = len(names)
    st["attemptStarted"] = conditions.now_rfc3339(ctx.now)
    st["scale"] = policies.describe(st)
    last = st.get("lastRescale")
    if isinstance(last, dict) and "to" not in last:
        last["to"] = len(names)
    ctx.plan.announce(
        NORMAL,
        policies.REASON_WORKERS,
        f"training with {len(names)} of {policy.max_replicas} workers "
        f"(minReplicas {policy.min_replicas}): {', '.join(names)}",
    )
    job = policies.for_attempt(job, ctx.status)
    return ctx.go_on_with(job, observation.observe(job, list(current.values()), ctx.attempt))


def _rescale(ctx: Context, act: Actions, reason: str, message: str) -> Next:
    """A new attempt with the workers there will be: not a restart (backoffLimit is not
    counted); it resumes from the last checkpoint."""
    st = policies.record(ctx.status)
    st["rescales"] = int(st.get("rescales") or 0) + 1
    was = int(st.get("workers") or 0)
    st["lastRescale"] = {"reason": reason, "from": was, "time": conditions.now_rfc3339(ctx.now)}
    policies.forget_members(ctx.status)
    st.pop(pc.STATUS_GROW_TO, None)
    st.setdefault("rescalingSince", conditions.now_rfc3339(ctx.now))
    text = f"{message}; rescaling from {was} workers (not counted as a restart)"
    ctx.status["phase"] = policies.PHASE_RESCALING
    act.observe_delivery(ctx)
    for reported in DGLRUN_STATUS_FIELDS:  # the next attempt's dglrun reports afresh
        ctx.plan.clear(reported)
    ctx.not_running(policies.REASON_RESCALED, text)
    kind = WARNING if reason != policies.GREW else NORMAL
    ctx.plan.announce(kind, policies.REASON_RESCALED, text)
    ns = ctx.job.namespace
    ctx.plan.on_written.append(lambda: act.metrics.jobs_rescaled.labels(ns, reason).inc())
    return Next.DONE
