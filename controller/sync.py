"""The DGLJob sync handler: read caches, diff desired against actual, act, write status.

One call of :meth:`JobSync.sync` handles one job key; it reads like the lifecycle in
docs/architecture.md:

    deleted?          -> forget it (the garbage collector removes the children)
    finished?         -> apply cleanPodPolicy, then the TTL
    invalid spec?     -> Failed/InvalidSpec (once; no retry loop)
    suspended?        -> delete the pods, Suspended
    queued?           -> (--kueue and the queue-name label: controller/kueue_sync.py) no pods
                         until Kueue admits the job's Workload; then the admission's placement
    deadline passed?  -> Failed/DeadlineExceeded, stop every pod
    elastic?          -> (spec.elasticPolicy: controller/elastic_sync.py) choose the
                         attempt's members; a member taken away or room freed: rescale
    a node lost?      -> (a pod of the attempt is bound to a node that is NotReady, unreachable
                         or gone) NodeLost: restart or fail as for a failed pod; every pod on
                         a lost node is deleted with grace period 0 (no kubelet confirms)
    a pod failed?     -> restart the whole job while backoffLimit allows, else Failed
                         (MemoryPlanExceeded: dglrun found a step that cannot fit; never retried)
    launcher done?    -> Completed
    pods waiting?     -> PodsReady False with the first pod's reason (Unschedulable,
                         ErrImagePull, ...), a Warning once per problem; past
                         schedulingPolicy.scheduleTimeoutSeconds: Failed with that reason
    otherwise         -> create what is missing; phase from the pods

Status goes through the status subresource; events and metrics for a transition are emitted
only after the status write that records it succeeded.
"""

from __future__ import annotations

import contextlib
import copy
from dataclasses import dataclass

import structlog

from clock import Clock, RealClock
from controller import elastic
from controller import objects as ob
from controller.api import (
    CLEAN_ALL,
    CLEAN_NONE,
    CLEAN_RUNNING,
    DGLJOBS,
    PROBE,
    WAIT_FOR_WORKERS_READY,
    WORKER,
    DGLJob,
    SpecError,
    finishing,
    parse_job,
)
from controller.apply import Applier
from controller.builders import (
    JOB_NAME_LABEL,
    BuildOptions,
    Desired,
    desired,
    results_location,
    storage_claim,
)
from controller.children import ONCE_BY_KIND, Listers
from controller.elastic_sync import ElasticSteps
from controller.events import NORMAL, WARNING, EventRecorder
from controller.expectations import Expectations
from controller.kueue_sync import QueueSteps
from controller.memo import JobMemos
from controller.metrics import Metrics
from controller.objects import JobIdentity, JobRef
from controller.plan import Plan
from controller.status import (
    conditions,
    failures,
    node_loss,
    observation,
    pod_state,
    rebase,
    waiting,
)
from informers.lister import Lister
from informers.store import split_key
from kubeclient import (
    CONFIGMAPS,
    NODES,
    PODS,
    SECRETS,
    SERVICES,
    BadRequest,
    Conflict,
    Invalid,
    KubeClient,
    KubeError,
    NotFound,
    Obj,
    Resource,
)
from kubeclient import PERSISTENTVOLUMECLAIMS as PVCS
from podcontract import (
    DGLRUN_STATUS_FIELDS,
    STATUS_DELIVERY_BYTES,
    STATUS_DELIVERY_SECONDS,
    STATUS_PARTITION_SECONDS,
    STATUS_PARTITIONS,
    STATUS_PROGRESS,
)

log = structlog.get_logger("controller.sync")

_RUNNING_PHASES = (conditions.PARTITIONING, conditions.PARTITIONED, conditions.TRAINING)
_PHASE_MESSAGES = {
    conditions.PENDING: "waiting for pods",
    conditions.PARTITIONING: "partitioner is partitioning the graph",
    conditions.PARTITIONED: "graph partitioned; launcher is preparing training",
    conditions.TRAINING: "launcher is running training",
}
STATUS_WRITE_ATTEMPTS = 3


@dataclass
class Result:
    requeue_after: float | None = None


class JobSync(ElasticSteps, QueueSteps):
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
        nodes: Lister | None = None,
    ) -> None:
        self.client = client
        self.listers = listers
        # the Node cache (None: node losses are not watched for)
        self.nodes = nodes
        self.options = options
        self.recorder = recorder
        self.metrics = metrics
        # wall() stamps the status and judges activeDeadlineSeconds and the TTL
        self.clock: Clock = clock or RealClock()
        self.expectations = expectations or Expectations(clock=self.clock)
        self.apply = Applier(client, self.expectations, recorder)
        # everything this process remembers about a job between syncs, in one record per
        # job key (our writes the caches may not show yet, what was created or told once),
        # dropped whole when the job is deleted: see forget()
        self.memos = JobMemos()
        self._queue_ignored_told = False

    # -- entry point ----------------------------------------------------------------------

    def sync(self, key: str) -> Result:
        ns, name = split_key(key)
        cached = self.listers.jobs.get(ns, name)
        memo = self.memos.peek(key)
        obj = memo.job_written.newest(cached) if memo is not None else cached
        if obj is None:
            self.forget(key)
            return Result()
        if ob.being_deleted(obj):
            return Result()
        with self.apply.batch():  # one Event per kind of change to the children, not per child
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
        """Act on the children and decide the new status (written by the caller)."""
        now = self.clock.wall()
        plan = Plan(obj=obj, status=copy.deepcopy(obj.get("status") or {}))
        key, ns = ob.key(obj), ob.namespace(obj)
        plan.on_written.append(lambda: self._track_waiting(key, ns, plan.waiting))
        # (the generation judged: parsed, or refused as InvalidSpec, or finished)
        plan.status["observedGeneration"] = ob.generation(obj)
        if conditions.finished(plan.status):
            # before the spec is parsed: a finished job is cleaned up and deleted after its
            # TTL whatever its spec (one an upgrade's stricter API refuses included)
            self._finished(JobRef.of(obj), plan, now)
            self._finish_workload(JobRef.of(obj), plan, now)
            return plan
        try:
            job = parse_job(obj)
        except SpecError as e:
            self._fail(obj, plan, conditions.REASON_INVALID_SPEC, f"invalid spec: {e}", now)
            return plan
        if not self.expectations.satisfied(job.key):
            log.debug("waiting for the cache to see our writes", job=job.key)
            return None
        self._created(job, plan, now)
        counted = self._run(job, plan, now)
        if counted is not None:  # (None: the counts stay as they were)
            plan.status["replicaStatuses"] = observation.replica_statuses(counted)
        return plan

    def _run(self, job: DGLJob, plan: Plan, now: float) -> observation.Observation | None:
        """The lifecycle of a job that is neither finished nor invalid: act, and decide the
        status but its ``replicaStatuses``; returns the pods to count there (None: leave
        them as they were)."""
        pods = self.listers[PODS].controlled_by(job.uid)
        self._force_stuck(job, pods)
        if job.spec.run_policy.suspend:
            self._suspend(job, pods, plan, now)
            return observation.observe(job, [], elastic.attempt(plan.status))
        self._resume_if_suspended(job, plan, now)
        queued = self._queued(job, pods, plan, now)  # (--kueue: controller/kueue_sync.py)
        if queued is None:
            return observation.observe(job, [], elastic.attempt(plan.status))
        job = queued
        attempt = elastic.attempt(plan.status)
        job = elastic.for_attempt(job, plan.status)
        obs = observation.observe(job, pods, attempt)
        if obs.stale:
            # A restart is under way: old attempt's pods go first (their names are reused).
            for pod in obs.stale:
                if not pod_state.is_terminating(pod):
                    self._delete_pod(job, pod, "restarting the job")
            self._node_lost_while_restarting(job, obs.stale, plan, now)
            return obs
        self._record_partition_time(job, obs, plan)
        if self._deadline_passed(job, pods, plan, now):
            return None
        lost = self._lost_nodes([p for p in obs.pods.values() if pod_state.is_active(p)])
        if job.spec.elastic is not None:
            going_on = self._elastic(job, obs, pods, lost, attempt, plan, now)
            if going_on is None:
                return obs
            job, obs = going_on
        failure = (
            node_loss.node_loss_failure(job, obs, lost)
            or obs.failure
            or self._missing_pod_failure(job, obs, plan)
        )
        if failure is not None:
            self._failed_pod(job, failure, attempt, plan, now)
            return obs
        launcher = obs.pod(job.launcher_name)
        if launcher is not None and pod_state.pod_phase(launcher) == "Succeeded":
            self._succeed(job, launcher, plan, now)
            return obs
        if self._watch_waiting(job, obs, plan, now):
            return obs
        created = self._create(job, obs, attempt, plan, now)
        if created is None:
            return None
        self._set_running_phase(job, obs, plan, now)
        if created:  # counted now: the status is written once, not again when the cache sees them
            return observation.observe(job, [*pods, *created], attempt)
        return obs

    def _create(
        self,
        job: DGLJob,
        obs: observation.Observation,
        attempt: int,
        plan: Plan,
        now: float,
        *,
        sizing: bool = False,
    ) -> list[Obj] | None:
        """The storage, then the children that are missing; the pods made (None: the job
        failed, or waits for its storage)."""
        try:
            if not self._storage_ready(job, plan, now):
                return None
            return self._create_missing(job, obs, attempt, sizing=sizing)
        except (BadRequest, Invalid) as e:
            # The API server refuses what the job's templates produce: retrying cannot help.
            message = f"invalid spec: the API server refused a child object: {e.message}"
            self._fail(job.raw, plan, conditions.REASON_INVALID_SPEC, message, now, job=job)
            return None

    def _failed_pod(
        self, job: DGLJob, failure: failures.PodFailure, attempt: int, plan: Plan, now: float
    ) -> None:
        """A pod failed, vanished or sits on a lost node: restart the job while backoffLimit
        allows, else fail it."""
        if failure.reason == conditions.REASON_NODE_LOST:
            plan.on_written.append(lambda: self.metrics.node_losses.inc())
        # (a memory plan that does not fit fails again on every attempt: no restart)
        retry = failure.condition_reason != conditions.REASON_MEMORY_PLAN
        if retry and attempt < job.spec.run_policy.backoff_limit:
            self._restart(job, failure, attempt, plan, now)
            return
        reason = failure.condition_reason
        message = failure.describe()
        if retry and job.spec.run_policy.backoff_limit > 0:
            reason = conditions.REASON_BACKOFF_LIMIT
            message += f" (backoffLimit {job.spec.run_policy.backoff_limit} reached)"
        self._fail(job.raw, plan, reason, message, now, job=job)

    # -- steps ----------------------------------------------------------------------------

    def _created(self, job: DGLJob, plan: Plan, now: float) -> None:
        if conditions.get_condition(plan.status, conditions.CREATED) is not None:
            return
        message = f"DGLJob {job.key} is created."
        conditions.set_condition(
            plan.status, conditions.CREATED, True, conditions.REASON_CREATED, message, now
        )
        plan.status.setdefault("startTime", conditions.now_rfc3339(now))
        plan.status.setdefault("phase", conditions.PENDING)
        plan.status.setdefault("restartCount", 0)
        plan.announce(NORMAL, conditions.REASON_CREATED, message)
        plan.on_written.append(lambda: self.metrics.jobs_created.labels(job.namespace).inc())

    def _suspend(self, job: DGLJob, pods: list[Obj], plan: Plan, now: float) -> None:
        if not conditions.is_true(plan.status, conditions.SUSPENDED):
            message = f"DGLJob {job.key} is suspended."
            conditions.set_condition(
                plan.status, conditions.SUSPENDED, True, conditions.REASON_SUSPENDED, message, now
            )
            plan.announce(NORMAL, conditions.REASON_SUSPENDED, message)
        why = "the job is suspended"
        self._hold(job, pods, plan, now, why, conditions.REASON_SUSPENDED, why)
        plan.status["phase"] = conditions.PHASE_SUSPENDED

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
        """The job runs no pods until it is let go (a suspend, a wait for Kueue's admission):
        its pods deleted (``why``; ``grace``: at most that many seconds), Running False
        (``reason``, ``message``), and what the attempt reported forgotten."""
        for pod in pods:
            if not pod_state.is_terminating(pod):
                self._delete_pod(job, pod, why, grace)
        self._not_running(plan, reason, message, now)
        for reported in DGLRUN_STATUS_FIELDS:  # the attempt after the hold reports afresh
            plan.clear(reported)
        elastic.forget_members(plan.status)  # (the next attempt is sized again)
        plan.status.pop("startTime", None)  # activeDeadlineSeconds counts from the release

    def _resume_if_suspended(self, job: DGLJob, plan: Plan, now: float) -> None:
        if not conditions.is_true(plan.status, conditions.SUSPENDED):
            return
        message = f"DGLJob {job.key} is resumed."
        conditions.set_condition(
            plan.status, conditions.SUSPENDED, False, conditions.REASON_RESUMED, message, now
        )
        plan.status["startTime"] = conditions.now_rfc3339(now)
        plan.status["phase"] = conditions.PENDING
        plan.announce(NORMAL, conditions.REASON_RESUMED, message)

    def _deadline_passed(self, job: DGLJob, pods: list[Obj], plan: Plan, now: float) -> bool:
        deadline = job.spec.run_policy.active_deadline_seconds
        started = conditions.parse_time(plan.status.get("startTime"))
        if deadline is None or started is None:
            return False
        remaining = started + deadline - now
        if remaining > 0:
            plan.requeue(remaining)
            return False
        message = f"DGLJob {job.key} ran longer than activeDeadlineSeconds ({deadline}s)"
        self._fail(job.raw, plan, conditions.REASON_DEADLINE, message, now, job=job)
        for pod in pods:  # the deadline stops everything, whatever cleanPodPolicy says
            if pod_state.is_active(pod):
                self._delete_pod(job, pod, "activeDeadlineSeconds exceeded")
        return True

    def _missing_pod_failure(
        self, job: DGLJob, obs: observation.Observation, plan: Plan
    ) -> failures.PodFailure | None:
        """Once training runs, a worker or launcher that disappears is a failure."""
        launcher = obs.pod(job.launcher_name)
        if launcher is None:
            if plan.status.get("phase") == conditions.TRAINING:
                return failures.PodFailure(
                    "Launcher", job.launcher_name, "", None, "PodDeleted", "deleted while training"
                )
            return None
        if not pod_state.main_started(launcher):
            return None
        for name in job.training_worker_names():
            if name not in obs.pods:
                return failures.PodFailure(
                    WORKER, name, "", None, "PodDeleted", "deleted while training"
                )
        return None

    def _restart(
        self, job: DGLJob, failure: failures.PodFailure, attempt: int, plan: Plan, now: float
    ) -> None:
        limit = job.spec.run_policy.backoff_limit
        message = f"{failure.describe()}; restarting the job (restart {attempt + 1} of {limit})"
        # a node loss says so in the reason (the history names the node); other failures:
        # the failing pod's reason is in the message
        reason = (
            failure.reason
            if failure.reason == conditions.REASON_NODE_LOST
            else conditions.REASON_RESTARTING
        )
        plan.status["restartCount"] = attempt + 1
        plan.status["phase"] = conditions.PHASE_RESTARTING
        elastic.forget_members(plan.status)
        self._observe_delivery(job, plan)
        for reported in DGLRUN_STATUS_FIELDS:  # the next attempt's dglrun reports afresh
            plan.clear(reported)
        conditions.set_condition(plan.status, conditions.RESTARTING, True, reason, message, now)
        self._not_running(plan, conditions.REASON_RESTARTING, message, now)
        if conditions.get_condition(plan.status, conditions.PODS_READY):
            conditions.set_condition(
                plan.status,
                conditions.PODS_READY,
                False,
                conditions.REASON_PODS_STARTING,
                "the job restarts: its pods are made again",
                now,
            )
        plan.announce(WARNING, reason, message)
        plan.on_written.append(lambda: self.metrics.jobs_restarted.labels(job.namespace).inc())

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
        conditions.set_condition(plan.status, conditions.FAILED, True, reason, message, now)
        self._not_running(plan, reason, message, now)
        if conditions.get_condition(plan.status, conditions.RESTARTING):
            conditions.set_condition(
                plan.status, conditions.RESTARTING, False, reason, message, now
            )
        plan.status["phase"] = conditions.PHASE_FAILED
        plan.status["completionTime"] = conditions.now_rfc3339(now)
        ns = ob.namespace(raw)
        plan.announce(WARNING, reason, message)
        plan.on_written.append(lambda: self.metrics.jobs_failed.labels(ns, reason).inc())
        if job is not None:
            self._observe_delivery(job, plan)
            plan.on_written.append(lambda: self._cleanup(job, job.spec.clean_pod_policy))
            self._schedule_ttl(job, job.spec.run_policy.ttl_seconds_after_finished, plan, now)

    def _succeed(self, job: DGLJob, launcher: Obj, plan: Plan, now: float) -> None:
        message = f"DGLJob {job.key} successfully completed."
        conditions.set_condition(
            plan.status, conditions.SUCCEEDED, True, conditions.REASON_SUCCEEDED, message, now
        )
        self._not_running(plan, conditions.REASON_SUCCEEDED, message, now)
        plan.status["phase"] = conditions.COMPLETED
        plan.status["completionTime"] = conditions.now_rfc3339(now)
        seconds = pod_state.main_run_seconds(launcher)
        if seconds is not None:
            plan.status["trainingSeconds"] = seconds
            ns = job.namespace
            plan.on_written.append(
                lambda: self.metrics.training_duration.labels(ns).observe(seconds)
            )
        plan.announce(NORMAL, conditions.REASON_SUCCEEDED, message)
        self._observe_delivery(job, plan)
        plan.on_written.append(lambda: self.metrics.jobs_successful.labels(job.namespace).inc())
        plan.on_written.append(lambda: self._cleanup(job, job.spec.clean_pod_policy))
        self._schedule_ttl(job, job.spec.run_policy.ttl_seconds_after_finished, plan, now)

    def _not_running(self, plan: Plan, reason: str, message: str, now: float) -> None:
        if conditions.get_condition(plan.status, conditions.RUNNING):
            conditions.set_condition(plan.status, conditions.RUNNING, False, reason, message, now)

    def _observe_delivery(self, job: DGLJob, plan: Plan) -> None:
        """The attempt's delivery figures (dglrun's, over HTTP), once per attempt: when it
        ends (finished or restarted), as the newest status read at the write shows them (a
        report our cached copy missed still counts)."""
        ns = job.namespace

        def observe() -> None:
            seconds = plan.seen_status.get(STATUS_DELIVERY_SECONDS)
            size = plan.seen_status.get(STATUS_DELIVERY_BYTES)
            if isinstance(seconds, (int, float)) and isinstance(size, (int, float)):
                self.metrics.delivery_duration.labels(ns).observe(seconds)
                self.metrics.delivery_bytes.labels(ns).observe(size)

        plan.on_written.append(observe)

    def _record_partition_time(self, job: DGLJob, obs: observation.Observation, plan: Plan) -> None:
        """KubectlCp: the partitioner pod's runtime (it exits once it delivered). Over HTTP it
        serves until the workers have their parts: dglrun reports the time (see
        :meth:`_partition_reported`)."""
        if (
            not job.spec.mode.partitioner
            or job.spec.pulls_partitions
            or STATUS_PARTITION_SECONDS in plan.status
        ):
            return
        partitioner = obs.pod(job.partitioner_name)
        if partitioner is None or pod_state.pod_phase(partitioner) != "Succeeded":
            return
        seconds = pod_state.main_run_seconds(partitioner)
        if seconds is None:
            return
        plan.status[STATUS_PARTITION_SECONDS] = seconds
        ns = job.namespace
        plan.on_written.append(lambda: self.metrics.partition_duration.labels(ns).observe(seconds))
        plan.announce(NORMAL, "PartitionSucceeded", f"Graph partitioned in {seconds:.0f}s")

    def _partition_reported(self, job: DGLJob, plan: Plan) -> None:
        """dglrun partitioned and reported how long it took (``status.partitionSeconds``, with
        its progress): DistParMETIS on the workers, or a partitioner that serves the parts."""
        seconds = plan.status.get(STATUS_PARTITION_SECONDS)
        took = f" in {seconds:.0f}s" if isinstance(seconds, (int, float)) else ""
        where = " on the workers" if job.spec.mode.partitions_in_launcher else ""
        message = f"Graph partitioned{where}{took}"
        if (plan.status.get(STATUS_PARTITIONS) or {}).get("reused"):
            message = f"Partitions reused from the job's storage{took} (not partitioned again)"
        plan.announce(NORMAL, "PartitionSucceeded", message)
        if isinstance(seconds, (int, float)):
            ns, value = job.namespace, float(seconds)
            plan.on_written.append(
                lambda: self.metrics.partition_duration.labels(ns).observe(value)
            )

    def _set_running_phase(
        self, job: DGLJob, obs: observation.Observation, plan: Plan, now: float
    ) -> None:
        phase = observation.phase_for(job, obs, str(plan.status.get(STATUS_PROGRESS) or ""))
        previous = plan.status.get("phase")
        if (
            (job.spec.mode.partitions_in_launcher or job.spec.pulls_partitions)
            and previous in (conditions.PENDING, conditions.PARTITIONING)
            and phase in (conditions.PARTITIONED, conditions.TRAINING)
        ):
            self._partition_reported(job, plan)
        plan.status["phase"] = phase
        if phase == conditions.TRAINING and job.spec.elastic is not None:
            self._rescaled(job, plan, now)
        if phase in _RUNNING_PHASES:
            message = f"DGLJob {job.key} is running: {_PHASE_MESSAGES[phase]}."
            changed = conditions.set_condition(
                plan.status, conditions.RUNNING, True, conditions.REASON_RUNNING, message, now
            )
            if changed and previous != phase:
                plan.announce(NORMAL, f"DGLJob{phase}", message)
            if conditions.is_true(plan.status, conditions.RESTARTING):
                conditions.set_condition(
                    plan.status,
                    conditions.RESTARTING,
                    False,
                    conditions.REASON_RUNNING,
                    "running again",
                    now,
                )

    # -- pods that wait ---------------------------------------------------------------------

    def _watch_waiting(
        self, job: DGLJob, obs: observation.Observation, plan: Plan, now: float
    ) -> bool:
        """Say why the attempt's pods wait (PodsReady); past scheduleTimeoutSeconds, fail the
        job with that reason. True: the job failed."""
        problem = waiting.waiting_problem(job, obs)
        self._pods_ready(job, obs, problem, plan, now)
        cond = conditions.get_condition(plan.status, conditions.PODS_READY) or {}
        if problem is not None:
            plan.waiting = str(cond.get("reason") or problem.reason)
        timeout = job.spec.run_policy.scheduling_policy.schedule_timeout_seconds
        unstarted = waiting.not_started(obs)
        if timeout is None or not unstarted:
            return False
        # each pod's own wait counts from its creation (an attempt's pods are made together,
        # at its start; a pod made later, like the launcher, gets the whole timeout too)
        created = {ob.name(p): pod_state.creation_time(p) or now for p in unstarted}
        remaining = min(created.values()) + timeout - now
        if remaining > 0:
            plan.requeue(remaining)
            return False
        late = [
            n
            for n in observation.replica_order(job)
            if n in created and created[n] + timeout <= now
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
        self._fail(job.raw, plan, reason, message, now, job=job)
        if job.spec.clean_pod_policy == CLEAN_NONE:  # (the others delete them anyway)
            plan.on_written.append(lambda: self._delete_not_started(job))
        plan.waiting = None
        return True

    def _pods_ready(
        self,
        job: DGLJob,
        obs: observation.Observation,
        problem: waiting.WaitingProblem | None,
        plan: Plan,
        now: float,
    ) -> None:
        """PodsReady: False with the first waiting pod's reason (a Warning once per problem:
        the condition already written says whether it is news), True once every pod of the
        attempt that exists has started."""
        cond = conditions.get_condition(plan.status, conditions.PODS_READY)
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
                    conditions.set_condition(
                        plan.status, conditions.PODS_READY, False, reason, message, now
                    )
                return
            conditions.set_condition(
                plan.status, conditions.PODS_READY, False, reason, message, now
            )
            plan.announce(WARNING, reason, message)
            return
        if not obs.pods:
            return
        unstarted = waiting.not_started(obs)
        if not unstarted:
            conditions.set_condition(
                plan.status,
                conditions.PODS_READY,
                True,
                conditions.REASON_PODS_READY,
                "every pod of the job has started",
                now,
            )
        elif (
            cond is not None and was_false and cond.get("reason") != conditions.REASON_PODS_STARTING
        ):
            rank = {n: i for i, n in enumerate(observation.replica_order(job))}
            names = sorted((ob.name(p) for p in unstarted), key=lambda n: rank.get(n, 0))
            message = f"waiting for pods to start: {', '.join(names)}"
            conditions.set_condition(
                plan.status,
                conditions.PODS_READY,
                False,
                conditions.REASON_PODS_STARTING,
                message,
                now,
            )

    def _delete_not_started(self, job: DGLJob) -> None:
        for pod in self.listers[PODS].controlled_by(job.uid):
            if not pod_state.is_terminating(pod) and not pod_state.pod_started(pod):
                self._delete_pod(job, pod, "its pods did not start within scheduleTimeoutSeconds")

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

    # -- lost nodes -----------------------------------------------------------------------

    def _node_lost(self, name: str) -> str | None:
        """Why node ``name`` is lost (None: it is not, or nodes are not watched). A node the
        cache does not hold is asked for (it may have registered a moment ago)."""
        if not name or self.nodes is None:
            return None
        node = self.nodes.get("", name)
        if node is None:
            try:
                node = self.client.get(NODES, None, name)
            except NotFound:
                node = None
            except KubeError as e:
                log.warning("could not read a node of the job's pods", node=name, error=str(e))
                return None
        return node_loss.node_lost(node)

    def _lost_nodes(self, pods: list[Obj]) -> dict[str, str]:
        """The lost nodes among those ``pods`` are bound to: name -> why."""
        lost = {}
        for name in sorted({pod_state.node_name(p) for p in pods} - {""}):
            why = self._node_lost(name)
            if why is not None:
                lost[name] = why
        return lost

    def _delete_pod(self, job: JobIdentity, pod: Obj, why: str, grace: int | None = None) -> None:
        """Delete one of the job's pods; with grace period 0 on a lost node (``grace``: at most
        that many seconds, None: the pod's own)."""
        lost = self._node_lost(pod_state.node_name(pod))
        if lost is not None:
            why = f"{why}; forced: node {pod_state.node_name(pod)} is lost ({lost})"
        self.apply.delete(job, PODS, pod, why, force=lost is not None, grace=grace)

    def _force_stuck(self, job: JobIdentity, pods: list[Obj]) -> None:
        """Pods of the job being deleted on a lost node: no kubelet will confirm, so they
        would stay Terminating (and hold a restart, which reuses their names): force them."""
        for pod in pods:
            forced = ob.meta(pod).get("deletionGracePeriodSeconds") == 0
            if not pod_state.is_terminating(pod) or forced:
                continue
            lost = self._node_lost(pod_state.node_name(pod))
            if lost is not None:
                reason = f"node {pod_state.node_name(pod)} is lost ({lost}): forced"
                self.apply.delete(job, PODS, pod, reason, force=True)

    def _node_lost_while_restarting(
        self, job: DGLJob, stale: list[Obj], plan: Plan, now: float
    ) -> None:
        """A node died and a pod's failure (the launcher's dglrun, most often) restarted the
        job before the node was seen lost: once it is, the restart says so (reason NodeLost,
        the node named) without counting another restart."""
        cond = conditions.get_condition(plan.status, conditions.RESTARTING)
        if (
            not cond
            or cond.get("status") != "True"
            or cond.get("reason") == conditions.REASON_NODE_LOST
        ):
            return
        running = [p for p in stale if pod_state.pod_phase(p) in ("Pending", "Running")]
        lost = self._lost_nodes(running)
        if not lost:
            return
        count = int(plan.status.get("restartCount") or 0)
        limit = job.spec.run_policy.backoff_limit
        where = node_loss.node_loss_message(lost, running)
        message = f"{where}; restarting the job (restart {count} of {limit})"
        conditions.set_condition(
            plan.status, conditions.RESTARTING, True, conditions.REASON_NODE_LOST, message, now
        )
        plan.announce(WARNING, conditions.REASON_NODE_LOST, message)
        plan.on_written.append(lambda: self.metrics.node_losses.inc())

    # -- children -------------------------------------------------------------------------

    def _create_missing(
        self, job: DGLJob, obs: observation.Observation, attempt: int, *, sizing: bool
    ) -> list[Obj]:
        """Create the children that do not exist (``sizing``: an elastic job choosing its
        attempt's workers, no launcher yet); returns the pods created, as their metadata and
        the phase the API server gives every new pod (Pending)."""
        want = desired(job, self.options, obs.pods, attempt)
        # Refuse to touch anything if one name is taken by someone else's object.
        self._check_ownership(job, want)
        present = set(obs.pods) | set(obs.terminating) | set(obs.standby)
        if want.config_map is not None:
            cm = self.memos[job.key].config_written.newest(
                self.listers[CONFIGMAPS].get(job.namespace, job.config_name)
            )
            if cm is None:
                self.apply.create(job, CONFIGMAPS, want.config_map)
            elif (cm.get("data") or {}) != want.config_map["data"]:
                updated = self.apply.update_data(CONFIGMAPS, cm, want.config_map["data"])
                self.memos[job.key].config_written.remember(updated)
        self._tell_ignored(job, want)
        for child in want.once:
            if child["kind"] == "Secret":
                self._create_secret_once(job, child)
                continue
            res = ONCE_BY_KIND[child["kind"]]
            if self.listers[res].get(job.namespace, child["metadata"]["name"]) is None:
                self.apply.create(job, res, child)
        for svc in want.services:
            if self.listers[SERVICES].get(job.namespace, svc["metadata"]["name"]) is None:
                self.apply.create(job, SERVICES, svc)
        pods = [p for p in want.workers if p["metadata"]["name"] not in present]
        partitioned = observation.partition_done(job, obs)
        needs_partitioner = want.partitioner is not None and not partitioned
        if (
            want.partitioner is not None
            and needs_partitioner
            and job.partitioner_name not in present
        ):
            pods.append(want.partitioner)
        if sizing and needs_partitioner and not elastic.placed(obs.pod(job.partitioner_name)):
            # the partitioner holds its room before the workers may take all of it (pods made
            # in the same second are queued in no set order): the workers wait for it
            pods = [p for p in pods if p is want.partitioner]
        if (
            not sizing
            and job.launcher_name not in present
            and (
                not job.spec.mode.workers
                or job.spec.launcher_creation_policy != WAIT_FOR_WORKERS_READY
                or observation.workers_up(job, obs)
            )
        ):
            pods.append(want.launcher)
        created = [self.apply.create(job, PODS, pod) for pod in pods]
        return [{**c, "status": {"phase": "Pending"}} for c in created if c is not None]

    def _storage_ready(self, job: DGLJob, plan: Plan, now: float) -> bool:
        """spec.storage: make the claim from the template (once per job and process), or see
        that the user's claim exists (pods that mount a missing claim wait for it: a Warning
        says why). ``status.results`` tells where the results go, once the claim exists: a
        claim the API server refuses, or one that never appears, leaves none. False: the job
        failed (the caller fails it on a refusal)."""
        location = results_location(job)
        if location is None:
            return True
        if self.memos[job.key].claim_ready_for == job.uid:
            plan.status["results"] = location
            return True
        plan.status.pop("results", None)  # (until the claim is seen: set below)
        claim = storage_claim(job)
        made = claim is not None and self.apply.create_unwatched(job, PVCS, claim)
        if claim is not None and not made and not self._claim_reusable(job, plan, now):
            return False
        if claim is None and not self._user_claim_exists(job, plan):
            return True
        plan.status["results"] = location
        # (once the status is written: a sync that fails to write it does all this again)
        memo = self.memos[job.key]
        plan.on_written.append(lambda: setattr(memo, "claim_ready_for", job.uid))
        return True

    def _claim_reusable(self, job: DGLJob, plan: Plan, now: float) -> bool:
        """The template's claim exists already: made for an earlier job of this name, it is
        used again (an Event says so); anybody else's fails the job."""
        name = job.claim_name
        assert name is not None
        existing = self.client.get(PVCS, job.namespace, name)
        if ob.labels(existing).get(JOB_NAME_LABEL) != job.name:
            message = (
                f"invalid spec: spec.storage.claimTemplate: PersistentVolumeClaim {name} "
                f"exists and was not made for DGLJob {job.name}; delete or rename it, or "
                "use it with spec.storage.claimName"
            )
            self._fail(job.raw, plan, conditions.REASON_INVALID_SPEC, message, now, job=job)
            return False
        plan.announce(
            NORMAL,
            "ClaimReused",
            f"Using the PersistentVolumeClaim {name} kept from an earlier DGLJob {job.name}",
        )
        return True

    def _user_claim_exists(self, job: DGLJob, plan: Plan) -> bool:
        """spec.storage.claimName: does it exist? While it does not, a Warning (once per job
        and process) says the pods wait for it, and the job is looked at again soon."""
        name = job.claim_name
        assert name is not None
        try:
            self.client.get(PVCS, job.namespace, name)
        except NotFound:
            memo = self.memos[job.key]
            if memo.claim_missing_told != job.uid:
                plan.on_written.append(lambda: setattr(memo, "claim_missing_told", job.uid))
                plan.announce(
                    WARNING,
                    "ClaimNotFound",
                    f"spec.storage.claimName: PersistentVolumeClaim {name} does not exist "
                    f"in namespace {job.namespace}; the job's pods wait for it",
                )
            plan.requeue(10.0)
            return False
        return True

    def _tell_ignored(self, job: DGLJob, want: Desired) -> None:
        """schedulingPolicy.queue means nothing to Coscheduling: say so once per process."""
        if want.pod_group is None or not job.spec.run_policy.scheduling_policy.queue:
            return
        if not self._queue_ignored_told:
            self._queue_ignored_told = True
            log.warning(
                "spec.runPolicy.schedulingPolicy.queue is ignored: scheduler-plugins' "
                "Coscheduling has no queues (said once)",
                job=job.key,
            )

    def _create_secret_once(self, job: DGLJob, secret: Obj) -> None:
        """The transfer token: created blind once per job and process (a Secret of that name
        that exists already, ours from before a restart of the operator, is used as is)."""
        memo = self.memos[job.key]
        if memo.secret_made_for == job.uid:
            return
        self.apply.create_unwatched(job, SECRETS, secret)
        memo.secret_made_for = job.uid

    def _check_ownership(self, job: DGLJob, want: Desired) -> None:
        children: list[tuple[Resource, Obj]] = []
        if want.config_map is not None:
            children.append((CONFIGMAPS, want.config_map))
        once = [c for c in want.once if c["kind"] in ONCE_BY_KIND]
        children += [(ONCE_BY_KIND[c["kind"]], c) for c in once]
        children += [(SERVICES, s) for s in want.services]
        pods = [*want.workers, want.launcher]
        if want.partitioner is not None:
            pods.append(want.partitioner)
        children += [(PODS, p) for p in pods]
        for res, child in children:
            existing = self.listers[res].get(job.namespace, child["metadata"]["name"])
            self.apply.check_owned(job, res, existing)

    def _cleanup(self, job: JobIdentity, policy: str) -> None:
        """Apply cleanPodPolicy to a finished job's pods (and its worker Services)."""
        if not self.expectations.satisfied(job.key):
            return
        pods = self.listers[PODS].controlled_by(job.uid)
        self._force_stuck(job, pods)
        if policy == CLEAN_NONE:  # (an elastic job's probe is no replica: it goes anyway)
            pods = [p for p in pods if pod_state.replica_type(p) == PROBE]
        for pod in pods:
            if pod_state.is_terminating(pod):
                continue
            if pod_state.replica_type(pod) == PROBE:
                self._delete_pod(job, pod, "the job finished")
                continue
            if policy == CLEAN_ALL or (policy == CLEAN_RUNNING and pod_state.is_active(pod)):
                self._delete_pod(job, pod, f"cleanPodPolicy {policy}")
        if policy == CLEAN_NONE:
            return
        for svc in self.listers[SERVICES].controlled_by(job.uid):
            self.apply.delete(job, SERVICES, svc, f"cleanPodPolicy {policy}")

    def _finished(self, job: JobRef, plan: Plan, now: float) -> None:
        """A finished job: its cleanPodPolicy, then its TTL, read leniently from the raw
        object (its spec is not parsed)."""
        policies = finishing(job.raw)
        self._cleanup(job, policies.clean_pod_policy)
        self._schedule_ttl(job, policies.ttl_seconds_after_finished, plan, now)

    def _schedule_ttl(self, job: JobIdentity, ttl: int | None, plan: Plan, now: float) -> None:
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
