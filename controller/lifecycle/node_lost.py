"""a node lost? (a pod of the attempt is bound to a node that is NotReady, unreachable or
gone) -> NodeLost: restart or fail as for a failed pod; every pod on a lost node is deleted
with grace period 0 (no kubelet confirms). The lost nodes were looked up by the observed
step; an elastic job's lost members were rescaled away before this step."""

from __future__ import annotations

from controller.lifecycle.actions import Actions
from controller.lifecycle.context import Context, Next
from controller.lifecycle.failed import end_attempt
from controller.status import node_loss


def restart_for_lost_node(ctx: Context, act: Actions) -> Next:
    failure = node_loss.node_loss_failure(ctx.job, ctx.obs, ctx.lost)
    if failure is None:
        return Next.GO_ON
    return end_attempt(ctx, act, failure)
