"""The DGLJob sync handler: read caches, run the lifecycle's steps, write status.

One call of :meth:`JobSync.sync` handles one job key: a job deleted is forgotten (the garbage
collector removes the children); otherwise one :class:`~controller.lifecycle.Context` is
built for it and handed to each step :func:`controller.lifecycle.steps` yields in turn (the
lifecycle in docs/architecture.md: finished, invalid, caught up, created, suspended, queued,
observed, deadline, elastic, node lost, failed, succeeded, waiting, create, running) until one
says the sync is decided. This module keeps only that loop and the commit.

Status goes through the status subresource; events and metrics for a transition are emitted
only after the status write that records it succeeded.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import structlog

from clock import Clock, RealClock
from controller.api import DGLJOBS
from controller.builders import BuildOptions
from controller.children import Listers
from controller.lifecycle import Actions, Context, Next, steps
from controller.machinery import objects as ob
from controller.machinery.apply import Applier
from controller.machinery.events import EventRecorder
from controller.machinery.expectations import Expectations
from controller.machinery.plan import Plan
from controller.memo import JobMemos
from controller.metrics import Metrics
from controller.status import observation, rebase
from controller.watched_nodes import WatchedNodes
from informers.store import split_key
from kubeclient import Conflict, KubeClient, NotFound, Obj

log = structlog.get_logger("controller.sync")

STATUS_WRITE_ATTEMPTS = 3


@dataclass
class Result:
    requeue_after: float | None = None


class JobSync:
    def __init__(
        self,
        client: KubeClient,
        listers: Listers,
        *,
        options: BuildOptions,
        recorder: EventRecorder,
        metrics: Metrics,
        expectations: Expectations | None = None,
        clock: Clock | None = None,
        nodes: WatchedNodes | None = None,
    ) -> None:
        self.client = client
        self.recorder = recorder
        self.metrics = metrics
        # wall() stamps the status and judges activeDeadlineSeconds and the TTL
        self.clock: Clock = clock or RealClock()
        self.expectations = expectations or Expectations(clock=self.clock)
        # everything this process remembers about a job between syncs, in one record per
        # job key (our writes the caches may not show yet, what was created or told once),
        # dropped whole when the job is deleted: see forget()
        self.memos = JobMemos()
        # what the steps act through (nodes: the Node cache and unwell nodes; None: losses are
        # not watched)
        self.actions = Actions(
            client=client,
            listers=listers,
            options=options,
            metrics=metrics,
            expectations=self.expectations,
            apply=Applier(client, self.expectations, recorder),
            memos=self.memos,
            nodes=nodes,
        )

    # -- entry point ----------------------------------------------------------------------

    def sync(self, key: str) -> Result:
        ns, name = split_key(key)
        cached = self.actions.listers.jobs.get(ns, name)
        memo = self.memos.peek(key)
        obj = memo.job_written.newest(cached) if memo is not None else cached
        if obj is None:
            self.forget(key)
            return Result()
        if ob.being_deleted(obj):
            return Result()
        # one Event per kind of change to the children, not per child
        with self.actions.apply.batch():
            plan = self._reconcile(obj)
            if plan is None:
                return Result()
            return self._commit(key, plan)

    def forget(self, key: str) -> None:
        """The job is gone: nothing about it stays in this process."""
        self.expectations.forget(key)
        memo = self.memos.forget(key)
        if memo is not None and memo.waiting is not None:
            self.metrics.jobs_waiting.labels(*memo.waiting).dec()

    # -- the lifecycle --------------------------------------------------------------------

    def _reconcile(self, obj: Obj) -> Plan | None:
        """Run the lifecycle's steps until one decides; the plan to write (None: nothing to
        write this time)."""
        plan = Plan(obj=obj, status=copy.deepcopy(obj.get("status") or {}))
        key, ns = ob.key(obj), ob.namespace(obj)
        plan.on_written.append(lambda: self._track_waiting(key, ns, plan.waiting))
        # (the generation judged: parsed, or refused as InvalidSpec, or finished)
        plan.status["observedGeneration"] = ob.generation(obj)
        ctx = Context(raw=obj, plan=plan, now=self.clock.wall())
        for next_ in steps(ctx, self.actions):
            if next_ is Next.NOTHING:
                return None
            if next_ is Next.DONE:
                break
        if ctx.counted is not None:  # (None: the counts stay as they were)
            plan.status["replicaStatuses"] = observation.replica_statuses(ctx.counted)
        return plan

    def _track_waiting(self, key: str, ns: str, reason: str | None) -> None:
        memo = self.memos[key]
        old = memo.waiting
        new = (ns, reason) if reason else None
        if old == new:
            return
        if old is not None:
            self.metrics.jobs_waiting.labels(*old).dec()
        if new is not None:
            self.metrics.jobs_waiting.labels(*new).inc()
        memo.waiting = new

    # -- status ---------------------------------------------------------------------------

    def _commit(self, key: str, plan: Plan) -> Result:
        """Write the planned status; on a conflict, re-apply our changes to the latest
        object (dglrun's fields survive) and try again, unless the controller's own fields
        moved on too: then the plan was made on a stale copy and the job is synced again.
        Events, metrics and cleanup follow only a status that was written."""
        obj = plan.obj
        base = copy.deepcopy(obj.get("status") or {})
        status = plan.status
        for attempt in range(STATUS_WRITE_ATTEMPTS):
            plan.seen_status = obj.get("status") or {}
            if rebase.without_volatile(status) == rebase.without_volatile(obj.get("status") or {}):
                break
            body = copy.deepcopy(obj)
            body["status"] = status
            ns, name = ob.namespace(obj), ob.name(obj)
            try:
                obj = self.client.replace(DGLJOBS, ns, name, body, subresource="status")
            except Conflict:
                if attempt == STATUS_WRITE_ATTEMPTS - 1:
                    raise
                log.info("status write conflicted; re-applying it to the latest object")
                try:
                    obj = self.client.get(DGLJOBS, ns, name)
                except NotFound:
                    return Result()
                if rebase.transitioned_since(base, obj.get("status") or {}):
                    # Our copy predates a status another sync wrote: what we decided on it
                    # (a restart, a failure) may already be recorded. Decide again on this one.
                    log.info("the status moved on since our copy; syncing again from the latest")
                    self.memos[key].job_written.remember(obj)
                    return Result(requeue_after=0.0)
                status = rebase.rebase_status(base, plan.status, obj.get("status") or {})
                for field_name in plan.cleared:
                    status.pop(field_name, None)
                continue
            self.memos[key].job_written.remember(obj)
            break
        for type_, reason, message in plan.events:
            self.recorder.record(obj, type_, reason, message)
        for callback in plan.on_written:
            callback()
        return Result(plan.requeue_after)
