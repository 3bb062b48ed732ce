"""finished? -> apply cleanPodPolicy, then the TTL; then the features' steps at ``FINISHED``
(controller/lifecycle/points.py: a queued job's Workload is Finished).

Before the spec is parsed: a finished job is cleaned up and deleted after its TTL whatever its
spec (one an upgrade's stricter API refuses included), read leniently from the raw object.
"""

from __future__ import annotations

from controller.api import finishing
from controller.lifecycle.actions import Actions
from controller.lifecycle.context import Context, Next
from controller.lifecycle.feature_steps import at
from controller.lifecycle.points import Point
from controller.machinery.objects import JobRef
from controller.status import conditions


def clean_up(ctx: Context, act: Actions) -> Next:
    if not conditions.finished(ctx.status):
        return Next.GO_ON
    ref = JobRef.of(ctx.raw)
    policies = finishing(ref.raw)
    act.cleanup(ref, policies.clean_pod_policy)
    act.schedule_ttl(ref, policies.ttl_seconds_after_finished, ctx.plan, ctx.now)
    for _ in at(Point.FINISHED, ctx, act):
        pass  # (each runs; the job is done whatever they say)
    return Next.DONE
