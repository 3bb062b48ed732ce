"""The sync handler's steps for a job queued in Kueue (``--kueue``, a DGLJob labelled
``kueue.x-k8s.io/queue-name``): Kueue's contract (controller/kueue.py) acted on. JobSync
(controller/sync.py) runs them after a user's suspend and before anything else:

    no Workload?       -> create it; the job waits (Queued)
    not admitted?      -> no pods (deleted if any), Queued True with Kueue's reason and message
                          (the LocalQueue is missing, the quota is short, a check is pending)
    evicted?           -> the same; once no pod of the job runs, the Workload's reservation is
                          cleared so that Kueue queues it again
    admitted           -> Queued False; the attempt runs with the admission's placement (the
                          flavors' nodeSelector and tolerations, the checks' podSetUpdates; an
                          elastic job no more workers than admitted); the Workload's PodsReady
                          follows the job's
    finished           -> (controller/sync.py's finished step) the Workload is Finished

The class is a mixin of JobSync: the few JobSync members it uses are declared below.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

import structlog

from controller import kueue
from controller.api import DGLJob, Placement
from controller.apply import Applier
from controller.builders import BuildOptions
from controller.children import Listers
from controller.events import NORMAL, WARNING
from controller.memo import JobMemos
from controller.objects import JobRef
from controller.plan import Plan
from controller.status import conditions, pod_state
from kubeclient import (
    PRIORITYCLASSES,
    RESOURCEFLAVORS,
    WORKLOADS,
    BadRequest,
    Invalid,
    KubeClient,
    NotFound,
    Obj,
)

log = structlog.get_logger("controller.kueue")

# An evicted job's pods go with at most this grace period: Kueue gives their quota to another
# job once they are gone, and nothing is lost by not waiting longer (training resumes from the
# last epoch's checkpoint). The workers' default `sleep 365d` ignores SIGTERM: with their own
# grace period (30 s unless the template says otherwise) the quota would wait that long.
EVICTION_GRACE_SECONDS = 5


class QueueSteps:
    """Kueue's steps of the sync handler (a mixin of controller.sync.JobSync)."""

    # -- what JobSync supplies ----------------------------------------------------------------
    apply: Applier
    client: KubeClient
    listers: Listers
    memos: JobMemos
    options: BuildOptions

    def _hold(
        self,
        job: DGLJob,
        pods: list[Obj],
        plan: Plan,
        now: float,
        why: str,
        reason: str,
        message: str,
        grace: int | None = None,
    ) -> None:
        raise NotImplementedError

    def _fail(
        self,
        raw: Obj,
        plan: Plan,
        reason: str,
        message: str,
        now: float,
        *,
        job: DGLJob | None = None,
    ) -> None:
        raise NotImplementedError

    # -- the steps ------------------------------------------------------------------------------

    def _queued(self, job: DGLJob, pods: list[Obj], plan: Plan, now: float) -> DGLJob | None:
        """``job`` as its admission runs it (unchanged when it is not queued), or None: it
        waits for Kueue, without pods."""
        queue = kueue.queue_name(job.raw)
        if not self.options.kueue or queue is None:
            return job
        name = kueue.workload_name(job)
        wl = self.listers[WORKLOADS].get(job.namespace, name)
        if wl is None:
            if self._create_workload(job, plan, now):
                message = f"Workload {name} is queued in LocalQueue {queue}"
                self._wait_for_admission(job, pods, plan, now, kueue.REASON_PENDING, message)
            return None
        st = kueue.state(wl)
        if not st.admitted:
            self._wait_for_admission(job, pods, plan, now, st.reason, st.message)
            if st.evicted and not any(pod_state.is_active(p) for p in pods):
                self._patch_workload(wl, kueue.clear_reservation(wl, now))
            return None
        placed = self._placement(job, wl)
        self._admitted(job, plan, now, st)
        ready = conditions.is_true(plan.status, conditions.PODS_READY)
        self._patch_workload(wl, kueue.pods_ready(wl, ready, now))
        return kueue.admitted(job, placed)

    def _finish_workload(self, ref: JobRef, plan: Plan, now: float) -> None:
        """A finished queued job: its Workload Finished (Kueue releases the quota)."""
        if not self.options.kueue or kueue.queue_name(ref.raw) is None:
            return
        for wl in self.listers[WORKLOADS].controlled_by(ref.uid):
            succeeded = conditions.is_true(plan.status, conditions.SUCCEEDED)
            cond = conditions.get_condition(
                plan.status, conditions.SUCCEEDED if succeeded else conditions.FAILED
            )
            message = str((cond or {}).get("message") or "")
            self._patch_workload(wl, kueue.finished(wl, succeeded, message, now))

    # -- pieces ---------------------------------------------------------------------------------

    def _create_workload(self, job: DGLJob, plan: Plan, now: float) -> bool:
        """False: the API server refused the Workload (the job failed)."""
        try:
            self.apply.create(
                job, WORKLOADS, kueue.workload(job, self.options, self._priority(job))
            )
        except NotFound:
            message = (
                "the Workload CRD (workloads.kueue.x-k8s.io, v1beta2) is not installed: "
                "install Kueue v0.17 or later, or run the operator without --kueue"
            )
            self._fail(job.raw, plan, conditions.REASON_INVALID_SPEC, message, now, job=job)
            return False
        except (BadRequest, Invalid) as e:
            message = f"invalid spec: the API server refused the job's Workload: {e.message}"
            self._fail(job.raw, plan, conditions.REASON_INVALID_SPEC, message, now, job=job)
            return False
        return True

    def _priority(self, job: DGLJob) -> int | None:
        name = job.spec.run_policy.scheduling_policy.priority_class
        if not name:
            return None
        try:
            value = self.client.get(PRIORITYCLASSES, None, name).get("value")
        except NotFound:
            return None  # (the pods' admission refuses it later, naming it)
        return int(value) if isinstance(value, int) else None

    def _placement(self, job: DGLJob, wl: Obj) -> Mapping[str, Placement]:
        """The admission's placement; the flavors are read once per admission."""
        status = wl.get("status") or {}
        of = json.dumps(
            [status.get("admission"), status.get("admissionChecks")], sort_keys=True, default=str
        )
        memo = self.memos[job.key]
        if memo.placement is not None and memo.placement_of == of:
            return memo.placement
        flavors = {}
        for name in sorted(kueue.flavor_names(wl)):
            try:
                flavors[name] = self.client.get(RESOURCEFLAVORS, None, name)
            except NotFound:
                log.warning("an admitted flavor does not exist", flavor=name)
        memo.placement, memo.placement_of = kueue.placement(wl, flavors), of
        return memo.placement

    def _patch_workload(self, wl: Obj, patch: Obj | None) -> None:
        if patch is None:
            return
        meta = wl.get("metadata") or {}
        self.client.patch(
            WORKLOADS, meta.get("namespace"), str(meta.get("name")), patch, subresource="status"
        )

    def _wait_for_admission(
        self, job: DGLJob, pods: list[Obj], plan: Plan, now: float, reason: str, message: str
    ) -> None:
        """No pods until Kueue admits the job: Queued True with Kueue's reason and message."""
        old = conditions.get_condition(plan.status, conditions.QUEUED) or {}
        if old.get("status") != "True" or old.get("reason") != reason:
            kind = WARNING if reason.startswith("Evicted") else NORMAL
            plan.announce(kind, conditions.REASON_QUEUED, f"{reason}: {message}")
        if old.get("message") != message or old.get("reason") != reason:
            conditions.set_condition(plan.status, conditions.QUEUED, True, reason, message, now)
        why = "the job waits for admission by Kueue"
        queued = f"queued: {message}"
        self._hold(
            job, pods, plan, now, why, conditions.REASON_QUEUED, queued, EVICTION_GRACE_SECONDS
        )
        plan.status["phase"] = conditions.PHASE_QUEUED

    def _admitted(self, job: DGLJob, plan: Plan, now: float, st: kueue.QueueState) -> None:
        old = conditions.get_condition(plan.status, conditions.QUEUED)
        if old is None or old.get("status") == "False":
            return
        conditions.set_condition(plan.status, conditions.QUEUED, False, st.reason, st.message, now)
        plan.status.setdefault("startTime", conditions.now_rfc3339(now))
        plan.status["phase"] = conditions.PENDING
        message = f"DGLJob {job.key} is admitted by Kueue: {st.message}"
        plan.announce(NORMAL, conditions.REASON_ADMITTED, message)
