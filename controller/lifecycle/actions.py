"""What the lifecycle's steps do to the world beyond the plan (:class:`Actions`): delete a
job's pods (forced on a lost node), look up nodes, hold a job without pods, fail a job, and
clean up after a finished one. One object per sync handler; the steps share it.

Creating the children is the ``create`` step's (controller/lifecycle/create.py), through
:attr:`Actions.apply`.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

import structlog

from controller.api import CLEAN_ALL, CLEAN_NONE, CLEAN_RUNNING, DGLJOBS, PROBE
from controller.builders import BuildOptions
from controller.children import Listers
from controller.features import registry
from controller.lifecycle.context import Context
from controller.machinery import objects as ob
from controller.machinery.apply import Applier
from controller.machinery.events import WARNING
from controller.machinery.expectations import Expectations
from controller.machinery.objects import JobIdentity
from controller.machinery.plan import Plan
from controller.memo import JobMemos
from controller.metrics import Metrics
from controller.status import conditions, node_loss, pod_state
from controller.watched_nodes import WatchedNodes
from kubeclient import (
    NODES,
    PODS,
    SERVICES,
    Conflict,
    KubeClient,
    KubeError,
    NotFound,
    Obj,
    Resource,
)
from podcontract import DGLRUN_STATUS_FIELDS, STATUS_DELIVERY_BYTES, STATUS_DELIVERY_SECONDS

log = structlog.get_logger("controller.lifecycle")

# The pods of an attempt that is over (evicted from its queue, restarted, rescaled) go with at most
# this grace period: their quota and their nodes are given to the next attempt or job once
# they are gone, and nothing is lost by not waiting longer (training resumes from the last
# epoch's checkpoint). The workers' `sleep 365d` of old ignored SIGTERM: with their own grace
# period (30 s unless the template says otherwise) every rescale and restart waited that long
# (demo-large's shrink did: 30 of its 82 s). (Their agent now stops on SIGTERM; a template's
# own command beside it may not.)
STOPPED_GRACE_SECONDS = 5


@dataclass
class Actions:
    """The sync handler's hands: the API client, the caches, the applier and the memos."""

    client: KubeClient
    listers: Listers
    options: BuildOptions
    metrics: Metrics
    expectations: Expectations
    apply: Applier
    # everything this process remembers about a job between syncs (controller/memo.py)
    memos: JobMemos
    # the Node cache (None: node losses are not watched for)
    nodes: WatchedNodes | None = None
    # said once per process: schedulingPolicy.queue means nothing to Coscheduling
    told_queue_ignored: bool = field(default=False)

    # -- nodes and pods ---------------------------------------------------------------------

    def node_lost(self, name: str) -> str | None:
        """Why node ``name`` is lost (None: it is not, or nodes are not watched). A node the
        cache does not hold is asked for (it may have registered a moment ago). An unwell node
        is lost only once unwell for a while (controller/watched_nodes.py), and a silent one
        never while every node is (node_loss.full_disruption: the control plane is at fault)."""
        if not name or self.nodes is None:
            return None
        node = self.nodes.lister.get("", name)
        if node is None:
            try:
                node = self.client.get(NODES, None, name)
            except NotFound:
                node = None
            except KubeError as e:
                log.warning("could not read a node of the job's pods", node=name, error=str(e))
                return None
        why = node_loss.node_lost(node)
        if why is None or node is None or node_loss.unwell(node) is None:
            return why  # well, or deleted: lost for good
        if node_loss.silent(node) and node_loss.full_disruption(self.nodes.lister.list()):
            log.info(
                "every node stopped reporting at once: the control plane is at fault, "
                "no node counts as lost",
                node=name,
            )
            return None
        if self.nodes.unwell.pending(node) > 0:
            return None  # its jobs look again once it has been unwell long enough
        return why

    def lost_nodes(self, pods: list[Obj]) -> dict[str, str]:
        """The lost nodes among those ``pods`` are bound to: name -> why."""
        lost = {}
        for name in sorted({pod_state.node_name(p) for p in pods} - {""}):
            why = self.node_lost(name)
            if why is not None:
                lost[name] = why
        return lost

    def delete_pod(self, job: JobIdentity, pod: Obj, why: str, grace: int | None = None) -> None:
        """Delete one of the job's pods; with grace period 0 on a lost node (``grace``: at most
        that many seconds, None: the pod's own)."""
        lost = self.node_lost(pod_state.node_name(pod))
        if lost is not None:
            why = f"{why}; forced: node {pod_state.node_name(pod)} is lost ({lost})"
        if grace is not None:
            own = (pod.get("spec") or {}).get("terminationGracePeriodSeconds")
            grace = min(grace, own) if isinstance(own, int) else grace
        self.apply.delete(job, PODS, pod, why, force=lost is not None, grace=grace)

    def force_stuck(self, job: JobIdentity, pods: list[Obj]) -> None:
        """Pods of the job being deleted on a lost node: no kubelet will confirm, so they
        would stay Terminating (and hold a restart, which reuses their names): force them."""
        for pod in pods:
            forced = ob.meta(pod).get("deletionGracePeriodSeconds") == 0
            if not pod_state.is_terminating(pod) or forced:
                continue
            lost = self.node_lost(pod_state.node_name(pod))
            if lost is not None:
                reason = f"node {pod_state.node_name(pod)} is lost ({lost}): forced"
                self.apply.delete(job, PODS, pod, reason, force=True)

    def patch_status(self, res: Resource, obj: Obj, patch: Obj | None) -> None:
        """Patch a child's status (``obj``, of ``res``; None: nothing to change)."""
        if patch is None:
            return
        meta = obj.get("metadata") or {}
        self.client.patch(
            res, meta.get("namespace"), str(meta.get("name")), patch, subresource="status"
        )

    # -- the job as a whole -----------------------------------------------------------------

    def hold(
        self, ctx: Context, why: str, reason: str, message: str, grace: int | None = None
    ) -> None:
        """The job runs no pods until it is let go (a suspend, a wait for a queue's admission):
        its pods deleted (``why``; ``grace``: at most that many seconds), Running False
        (``reason``, ``message``), and what the attempt reported forgotten."""
        for pod in ctx.pods:
            if not pod_state.is_terminating(pod):
                self.delete_pod(ctx.job, pod, why, grace)
        ctx.not_running(reason, message)
        for reported in DGLRUN_STATUS_FIELDS:  # the attempt after the hold reports afresh
            ctx.plan.clear(reported)
        registry.attempt_over(ctx.status)  # (the next attempt starts afresh)
        ctx.status.pop("startTime", None)  # activeDeadlineSeconds counts from the release

    def fail(self, ctx: Context, reason: str, message: str) -> None:
        """Failed (``reason``, ``message``): Running and Restarting False, the phase and the
        completion time, a Warning; a parsed job's pods are cleaned up once the status is
        written, and its TTL counts."""
        plan, status = ctx.plan, ctx.status
        ctx.set_condition(conditions.FAILED, True, reason, message)
        ctx.not_running(reason, message)
        if conditions.get_condition(status, conditions.RESTARTING):
            ctx.set_condition(conditions.RESTARTING, False, reason, message)
        status["phase"] = conditions.PHASE_FAILED
        status["completionTime"] = conditions.now_rfc3339(ctx.now)
        ns = ob.namespace(ctx.raw)
        plan.announce(WARNING, reason, message)
        plan.on_written.append(lambda: self.metrics.jobs_failed.labels(ns, reason).inc())
        if ctx.parsed:
            self.observe_delivery(ctx)
            self.finish(ctx)

    def finish(self, ctx: Context) -> None:
        """A job that has just finished: its cleanPodPolicy once the status is written, and
        its TTL."""
        job, plan = ctx.job, ctx.plan
        plan.on_written.append(lambda: self.cleanup(job, job.spec.clean_pod_policy))
        self.schedule_ttl(job, job.spec.run_policy.ttl_seconds_after_finished, plan, ctx.now)

    def observe_delivery(self, ctx: Context) -> None:
        """The attempt's delivery figures (dglrun's, over HTTP), once per attempt: when it
        ends (finished, restarted or rescaled), as the newest status read at the write shows
        them (a report our cached copy missed still counts)."""
        ns, plan = ctx.job.namespace, ctx.plan

        def observe() -> None:
            seconds = plan.seen_status.get(STATUS_DELIVERY_SECONDS)
            size = plan.seen_status.get(STATUS_DELIVERY_BYTES)
            if isinstance(seconds, (int, float)) and isinstance(size, (int, float)):
                self.metrics.delivery_duration.labels(ns).observe(seconds)
                self.metrics.delivery_bytes.labels(ns).observe(size)

        plan.on_written.append(observe)

    def cleanup(self, job: JobIdentity, policy: str) -> None:
        """Apply cleanPodPolicy to a finished job's pods (and its worker Services)."""
        if not self.expectations.satisfied(job.key):
            return
        pods = self.listers[PODS].controlled_by(job.uid)
        self.force_stuck(job, pods)
        if policy == CLEAN_NONE:  # (the probe is no replica: it goes anyway)
            pods = [p for p in pods if pod_state.replica_type(p) == PROBE]
        for pod in pods:
            if pod_state.is_terminating(pod):
                continue
            if pod_state.replica_type(pod) == PROBE:
                self.delete_pod(job, pod, "the job finished")
                continue
            if policy == CLEAN_ALL or (policy == CLEAN_RUNNING and pod_state.is_active(pod)):
                self.delete_pod(job, pod, f"cleanPodPolicy {policy}")
        if policy == CLEAN_NONE:
            return
        for svc in self.listers[SERVICES].controlled_by(job.uid):
            self.apply.delete(job, SERVICES, svc, f"cleanPodPolicy {policy}")

    def schedule_ttl(self, job: JobIdentity, ttl: int | None, plan: Plan, now: float) -> None:
        """ttlSecondsAfterFinished: look again when it passes; once it has (and the finishing
        status is written), delete the DGLJob."""
        if ttl is None:
            return
        done = conditions.parse_time(plan.status.get("completionTime")) or now
        remaining = done + ttl - now
        if remaining > 0:
            plan.requeue(remaining)
            return
        if not conditions.finished(job.status):
            plan.requeue(0.0)  # the finishing status must be written before the delete
            return
        log.info("ttlSecondsAfterFinished passed; deleting the DGLJob", job=job.key, ttl=ttl)
        with contextlib.suppress(NotFound, Conflict):
            self.client.delete(
                DGLJOBS, job.namespace, job.name, uid=job.uid, propagation_policy="Background"
            )
