"""The sync handler's steps for elastic jobs (``spec.elasticPolicy``): choose an attempt's
members, rescale when one is taken away or room frees, and look for the next partitioner's
room. What they decide comes from the pure functions of controller/elastic.py; JobSync
(controller/sync.py) runs them, between its deadline and its failure steps:

    sizing?            -> the partitioner, then every worker pod; once minReplicas run and the
                          settling window passed, the ones running are the members (no
                          launcher before); below minReplicas PodsReady False says why
    launcher done?     -> on to JobSync's success (whatever befell a worker since)
    a member lost?     -> rescale (a new attempt, not a restart): Preempted or NodeLost
    count too small?   -> dglrun's memory plan refused it: rescale TooFewToFit, wait for K
    standby ended?     -> made again
    launcher exit 75?  -> rescale Grew (dglrun stopped at an epoch boundary, as asked)
    standbys run?      -> ask dglrun to grow (status.elastic.growTo), after the cooldown;
                          with one standby, once a probe pod found the partitioner's room

The class is a mixin of JobSync: the few JobSync members it uses are declared below.
"""

from __future__ import annotations

import podcontract as pc
from controller import elastic
from controller import objects as ob
from controller.api import DGLJob
from controller.apply import Applier
from controller.builders import BuildOptions, probe_pod
from controller.events import NORMAL, WARNING
from controller.metrics import Metrics
from controller.objects import JobIdentity
from controller.plan import Plan
from controller.status import conditions, failures, observation, pod_state, waiting
from kubeclient import PODS, Obj
from podcontract import DGLRUN_STATUS_FIELDS


class ElasticSteps:
    """Elastic jobs' steps of the sync handler (a mixin of controller.sync.JobSync)."""

    # -- what JobSync supplies ----------------------------------------------------------------
    apply: Applier
    metrics: Metrics
    options: BuildOptions

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
        raise NotImplementedError

    def _delete_pod(self, job: JobIdentity, pod: Obj, why: str, grace: int | None = None) -> None:
        raise NotImplementedError

    def _node_lost(self, name: str) -> str | None:
        raise NotImplementedError

    def _not_running(self, plan: Plan, reason: str, message: str, now: float) -> None:
        raise NotImplementedError

    def _observe_delivery(self, job: DGLJob, plan: Plan) -> None:
        raise NotImplementedError

    # -- the steps ------------------------------------------------------------------------------

    def _elastic(
        self,
        job: DGLJob,
        obs: observation.Observation,
        pods: list[Obj],
        lost: dict[str, str],
        attempt: int,
        plan: Plan,
        now: float,
    ) -> tuple[DGLJob, observation.Observation] | None:
        """spec.elasticPolicy: choose the attempt's members, or rescale when one was taken
        away. Returns the job (its members chosen) and what its pods show, to go on with;
        None when this sync is done."""
        policy = job.spec.elastic
        assert policy is not None
        st = elastic.record(plan.status)
        st["desiredWorkers"] = policy.max_replicas
        st.setdefault("workers", 0)
        st.setdefault("rescales", 0)
        st["scale"] = elastic.describe(st)
        current = {ob.name(p): p for p in pods if pod_state.attempt_of(p) == attempt}
        if job.spec.members is None:
            return self._elastic_size(job, obs, current, attempt, plan, now)
        launcher = obs.pod(job.launcher_name)
        if launcher is not None and pod_state.pod_phase(launcher) == "Succeeded":
            return job, obs  # (trained: whatever befell a worker since, the job succeeded)
        on_lost = [
            (name, pod_state.node_name(current[name]))
            for name in job.training_worker_names()
            if name in current and pod_state.node_name(current[name]) in lost
        ]
        taken = elastic.lost_members(job, current)
        if on_lost:
            where = ", ".join(f"{n} on node {node} ({lost[node]})" for n, node in on_lost)
            self._rescale(job, elastic.NODE_LOST, f"node lost: {where}", plan, now)
            return None
        if taken:
            what = ", ".join(f"{n} {why}" for n, why in taken)
            self._rescale(job, elastic.PREEMPTED, f"worker pod {what}", plan, now)
            return None
        if self._too_few_to_fit(job, obs, plan, now):
            return None
        for name, pod in list(obs.standby.items()):  # one that ended is made again
            lost_node = self._node_lost(pod_state.node_name(pod)) is not None
            if lost_node or pod_state.pod_phase(pod) in ("Failed", "Succeeded"):
                self._delete_pod(job, pod, "a standby worker ended; it is made again")
                del obs.standby[name]  # (no room it says)
        stopped = failures.pod_failure(launcher) if launcher is not None else None
        # (dglrun exits so only when asked to grow; the standbys may have gone since)
        if stopped is not None and stopped.exit_code == pc.RESCALE_EXIT_CODE:
            message = f"launcher pod {job.launcher_name} {stopped.message or 'stopped to grow'}"
            self._rescale(job, elastic.GREW, message, plan, now)
            return None
        self._ask_to_grow(job, obs, plan, now)
        return job, obs

    def _too_few_to_fit(
        self, job: DGLJob, obs: observation.Observation, plan: Plan, now: float
    ) -> bool:
        """dglrun's memory plan refused the attempt's count (its partitions would not fit the
        workers' memory): the job waits for the workers it needs, up to maxReplicas, rather
        than fail. True: rescaled."""
        policy = job.spec.elastic
        assert policy is not None
        failure = obs.failure
        if failure is None or failure.condition_reason != conditions.REASON_MEMORY_PLAN:
            return False
        need = elastic.workers_needed(failure.message)
        if need is None or need > policy.max_replicas:
            return False  # (no count it may have fits: the failure it is)
        elastic.record(plan.status)["minWorkers"] = need
        message = f"{failure.describe()}; the job waits for {need} workers"
        self._rescale(job, elastic.TOO_FEW_TO_FIT, message, plan, now)
        return True

    def _ask_to_grow(
        self, job: DGLJob, obs: observation.Observation, plan: Plan, now: float
    ) -> None:
        """Standby workers run (room freed): ask dglrun to stop at the next epoch boundary
        (status.elastic.growTo), once the attempt trains and its cooldown has passed.

        The next attempt's partitioner (the Worker template's pod, made first) needs room too:
        with one more running standby than the workers a grow adds, it has it. Otherwise (one
        standby runs, say) a probe, a sleeping pod of the partitioner's requests, looks for
        that room: placed, the grow takes every standby that runs; pending, it waits (room
        freed elsewhere places it). It goes with the attempt, or when no standby runs."""
        policy = job.spec.elastic
        assert policy is not None
        st = elastic.record(plan.status)
        have = len(job.spec.training_workers)
        up = len(elastic.running(job, obs.standby))
        most = elastic.grow_to(policy, have, up, partitioner=False)
        if most is None:
            st.pop(pc.STATUS_GROW_TO, None)
            if obs.probe is not None:
                self._delete_pod(job, obs.probe, "no standby worker runs: no room to look for")
            return
        if plan.status.get("phase") != conditions.TRAINING:
            return
        started = conditions.parse_time(st.get("attemptStarted")) or now
        left = started + policy.cooldown_seconds - now
        if left > 0:
            plan.requeue(left)
            return
        want = elastic.grow_to(policy, have, up, partitioner=job.spec.mode.partitioner)
        if want is None:  # (the partitioner would take the room of the one that runs)
            if obs.probe is None:
                if job.probe_name not in obs.terminating:
                    probe = probe_pod(job, self.options, elastic.attempt(plan.status))
                    self.apply.create(job, PODS, probe)
                return
            if not elastic.placed(obs.probe):
                return
            want = most
        if st.get(pc.STATUS_GROW_TO) != want:
            st[pc.STATUS_GROW_TO] = want
            plan.announce(
                NORMAL,
                elastic.REASON_GROWING,
                f"room for more workers (standby worker pods run): the job grows from {have} "
                f"to {want} workers at the next epoch boundary",
            )

    def _elastic_size(
        self,
        job: DGLJob,
        obs: observation.Observation,
        current: dict[str, Obj],
        attempt: int,
        plan: Plan,
        now: float,
    ) -> tuple[DGLJob, observation.Observation] | None:
        """Sizing: the partitioner and every worker pod are made, no launcher, until the
        members are chosen."""
        policy = job.spec.elastic
        assert policy is not None
        st = elastic.record(plan.status)
        up = {}
        for name, pod in current.items():  # taken away before the attempt started: made again
            gone = self._node_lost(pod_state.node_name(pod)) is not None or elastic.disrupted(pod)
            if gone and not pod_state.is_terminating(pod):
                self._delete_pod(job, pod, "taken away while the job chose its workers")
            if not gone:
                up[name] = pod
        sizing = elastic.size(policy, elastic.running(job, up), st, now)
        if sizing.members is None:
            if obs.failure is not None:  # (a worker's program failed: a failure, as ever)
                return job, obs
            if self._create(job, obs, attempt, plan, now, sizing=True) is None:
                return None
            problem = waiting.waiting_problem(job, obs)
            message = sizing.waiting + (f"; {problem.headline()}" if problem else "")
            if sizing.look_again is not None:
                reason = elastic.REASON_SETTLING
            else:
                reason = problem.reason if problem is not None else elastic.REASON_TOO_FEW
            conditions.set_condition(
                plan.status, conditions.PODS_READY, False, reason, message, now
            )
            if sizing.look_again is not None:
                plan.requeue(sizing.look_again)
            if plan.status.get("phase") != elastic.PHASE_RESCALING:
                plan.status["phase"] = conditions.PENDING
            return None
        names = [job.worker_name(i) for i in sizing.members]
        st["members"] = names
        st["workers"] = len(names)
        st["attemptStarted"] = conditions.now_rfc3339(now)
        st["scale"] = elastic.describe(st)
        last = st.get("lastRescale")
        if isinstance(last, dict) and "to" not in last:
            last["to"] = len(names)
        plan.announce(
            NORMAL,
            elastic.REASON_WORKERS,
            f"training with {len(names)} of {policy.max_replicas} workers "
            f"(minReplicas {policy.min_replicas}): {', '.join(names)}",
        )
        job = elastic.for_attempt(job, plan.status)
        return job, observation.observe(job, list(current.values()), attempt)

    def _rescale(self, job: DGLJob, reason: str, message: str, plan: Plan, now: float) -> None:
        """A new attempt with the workers there will be: not a restart (backoffLimit is not
        counted); it resumes from the last checkpoint."""
        st = elastic.record(plan.status)
        st["rescales"] = int(st.get("rescales") or 0) + 1
        was = int(st.get("workers") or 0)
        st["lastRescale"] = {"reason": reason, "from": was, "time": conditions.now_rfc3339(now)}
        elastic.forget_members(plan.status)
        st.pop(pc.STATUS_GROW_TO, None)
        st.setdefault("rescalingSince", conditions.now_rfc3339(now))
        text = f"{message}; rescaling from {was} workers (not counted as a restart)"
        plan.status["phase"] = elastic.PHASE_RESCALING
        self._observe_delivery(job, plan)
        for reported in DGLRUN_STATUS_FIELDS:  # the next attempt's dglrun reports afresh
            plan.clear(reported)
        self._not_running(plan, elastic.REASON_RESCALED, text, now)
        plan.announce(WARNING if reason != elastic.GREW else NORMAL, elastic.REASON_RESCALED, text)
        ns = job.namespace
        plan.on_written.append(lambda: self.metrics.jobs_rescaled.labels(ns, reason).inc())

    def _rescaled(self, job: DGLJob, plan: Plan, now: float) -> None:
        """The attempt after a rescale trains: the rescale's seconds are counted."""
        st = plan.status.get(elastic.STATUS) or {}
        since = conditions.parse_time(st.get("rescalingSince"))
        if since is None:
            return
        seconds = max(0.0, now - since)
        st.pop("rescalingSince", None)
        st["rescaleSeconds"] = round(float(st.get("rescaleSeconds") or 0) + seconds, 3)
        ns = job.namespace
        plan.on_written.append(lambda: self.metrics.rescale_duration.labels(ns).observe(seconds))
