"""A DGLJob's lifecycle as a pipeline of steps: :func:`steps`, one line a step, run in order by
the sync handler (controller/sync.py) on one :class:`~controller.lifecycle.context.Context` and
one :class:`~controller.lifecycle.actions.Actions`. Each step is a function of one module: it
looks at the job and returns ``GO_ON`` (the next step looks), ``DONE`` (decided: the status is
written) or ``NOTHING`` (nothing to decide yet). The sync keeps only the loop and the status
write; a new policy is one more step here.

    reported        -> dglrun's report of the running attempt (``<job>-report``), checked,
                       copied into the status; its Events recorded once; a refusal said
    finished?       -> cleanPodPolicy, then the TTL; then the features' steps (finished): a
                       queued job's Workload Finished
    invalid spec?   -> Failed/InvalidSpec (once; no retry loop)
    caught up?      -> no: decide nothing until the caches show our writes (no status write)
    created         -> Created (once); pods stuck Terminating on a lost node forced
    suspended?      -> delete the pods, Suspended (resumed: said so)
    (before start)  -> the features' steps there: queued? (--kueue and the queue-name label)
                       no pods until Kueue admits the job's Workload; then the admission's
                       placement
    observed        -> the attempt and what its pods show; a restart under way: the old
                       attempt's pods go first
    deadline?       -> Failed/DeadlineExceeded, stop every pod
    (while running) -> the features' steps there: elastic? (spec.elasticPolicy) choose the
                       attempt's members; a member taken away or room freed: rescale
    a node lost?    -> NodeLost: restart or fail as for a failed pod
    a pod failed?   -> restart the whole job while backoffLimit allows, else Failed
                       (MemoryPlanExceeded: dglrun found a step that cannot fit; never retried)
    launcher done?  -> Succeeded
    pods waiting?   -> PodsReady False with the first pod's reason, a Warning once per
                       problem; past scheduleTimeoutSeconds: Failed with that reason
    create          -> the storage, then what is missing
    running         -> the phase from the pods, Running

Layering (tests/test_layering.py, CONTROLLER_FLOORS): the steps import the controller's job
logic and machinery, never the sync handler; a step imports another step's module only where
it shares its work (node_lost: failed's end of an attempt; elastic: create's children;
finished: the features' steps at FINISHED). A feature's own step is one entry of
:data:`FEATURE_STEPS` (controller/lifecycle/feature_steps.py), made by its step's module, that
names its :class:`Point` (controller/lifecycle/points.py); the features reach the other steps
through their entries (controller/features/registry.py).
"""

from __future__ import annotations

from collections.abc import Iterator

from controller.lifecycle import (
    caught_up,
    create,
    created,
    deadline,
    failed,
    feature_steps,
    finished,
    invalid,
    node_lost,
    observed,
    reported,
    running,
    succeeded,
    suspended,
    waiting,
)
from controller.lifecycle.actions import Actions
from controller.lifecycle.context import Context, Next
from controller.lifecycle.feature_steps import FEATURE_STEPS
from controller.lifecycle.points import FeatureStep, Point


def steps(ctx: Context, act: Actions) -> Iterator[Next]:
    """The lifecycle's steps, in order: each runs once the one before it said go on (the
    caller stops at the first that does not)."""
    yield reported.copy_report(ctx, act)
    yield finished.clean_up(ctx, act)
    yield invalid.parse(ctx, act)
    yield caught_up.wait_for_caches(ctx, act)
    yield created.record_creation(ctx, act)
    yield suspended.suspend_or_resume(ctx, act)
    yield from feature_steps.at(Point.BEFORE_START, ctx, act)
    yield observed.observe_attempt(ctx, act)
    yield deadline.enforce_deadline(ctx, act)
    yield from feature_steps.at(Point.WHILE_RUNNING, ctx, act)
    yield node_lost.restart_for_lost_node(ctx, act)
    yield failed.restart_or_fail(ctx, act)
    yield succeeded.complete(ctx, act)
    yield waiting.explain_waiting(ctx, act)
    yield create.create_children(ctx, act)
    yield running.mark_running(ctx, act)


__all__ = ["FEATURE_STEPS", "Actions", "Context", "FeatureStep", "Next", "Point", "steps"]
