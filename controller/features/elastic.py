"""Elastic jobs (``spec.elasticPolicy``): how many workers an attempt trains on, and when
that changes. Pure functions of the job, its pods and ``status.elastic``; the lifecycle's
elastic step (controller/lifecycle/elastic.py) acts on what they decide. The feature's entry
(:data:`ELASTIC`, controller/features/registry.py) gives the other steps an attempt's members
and its number, and forgets the members when an attempt ends; :func:`probe_pod` is its pod.

DGL's runtime fixes a run's membership (one partition per machine of ip_config, each server
loading the partition of its machine id), so the count changes only between attempts: an
attempt trains on a fixed set of worker pods (its *members*, the hostfile's lines, in order)
and the partition count follows it. Every attempt goes through:

    sizing    the job has its partitioner (made first, and the workers only once it has a
              node, so that it holds its room: it waits for the count in
              status.elastic.members) and ``maxReplicas`` worker pods. Once
              ``minReplicas`` of them run, it waits ``settleSeconds`` for more (not at all
              once every one runs), then the ones running are the members: the partitioner
              partitions for that count, the launcher is made for it. Below ``minReplicas``
              it waits, PodsReady saying why.
    training  the members train; the other worker pods (*standby*) stay, pending most often:
              one that runs says room has freed.
    rescale   a member lost to preemption, eviction, a deletion or a lost node: a new attempt
              (``status.elastic.rescales`` + 1, not a restart: runPolicy.backoffLimit is not
              touched) that sizes again and resumes from the last checkpoint on spec.storage.
              A crash of the training code (a container exiting non-zero) is a failure.

The attempt of a pod (its annotation) is ``restartCount + rescales``: a rescale replaces
every pod, as a restart does (no process of the old run survives in a reused pod).
"""

from __future__ import annotations

import copy
import dataclasses
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from controller.api import PROBE, DGLJob, ElasticPolicy
from controller.builders.meta import (
    OWN_SECURITY_CONTEXT,
    REPLICA_ANNOTATION,
    REPLICA_NAME_LABEL,
    REPLICA_TYPE_LABEL,
    _main,
)
from controller.machinery import objects as ob
from controller.metrics import Metrics
from controller.status.conditions import REASON_UNSCHEDULABLE, now_rfc3339, parse_time
from controller.status.pod_state import is_terminating, pod_ip, pod_phase
from controller.status.waiting import pod_waiting_problem
from dgljob.names import ACCOUNT_FIELDS
from kubeclient import Obj
from podcontract import (
    DIST_PARMETIS,
    PER_WORKER,
    STATUS_ELASTIC,
    STATUS_GROW_TO,
    STATUS_MEMBERS,
    STATUS_PARTITIONS,
)
from podcontract import settings as dglrun
from podcontract.settings import env_pairs

STATUS = STATUS_ELASTIC  # status.elastic
MEMBERS = STATUS_MEMBERS  # status.elastic.members: dglrun's partitioner reads the count there
REASON_RESCALED = "DGLJobRescaled"
REASON_WORKERS = "DGLJobWorkers"  # the members an attempt trains on, chosen
REASON_GROWING = "DGLJobGrowing"  # standby workers run: a grow asked of dglrun
# PodsReady False while sizing: within the settling window; below minReplicas (when the
# waiting pods give no reason of their own, such as Unschedulable)
REASON_SETTLING = "Settling"
REASON_TOO_FEW = "BelowMinReplicas"
PHASE_RESCALING = "Rescaling"
# why a job rescaled (status.elastic.lastRescale.reason, the metric's reason label)
GREW = "Grew"
PREEMPTED = "Preempted"  # preempted, evicted or deleted by someone else
NODE_LOST = "NodeLost"
TOO_FEW_TO_FIT = "TooFewToFit"  # dglrun's memory plan: this count's partitions do not fit
# a pod's status.reason when the kubelet or the node took it away, not its program
DISRUPTED_REASONS = frozenset({"Evicted", "Preempting", "Shutdown", "NodeShutdown", "Terminated"})
DISRUPTION_CONDITION = "DisruptionTarget"
_NEEDED = re.compile(r"\buse (\d+) or more workers\b")


# every field of status.elastic (the CRD's status schema must list them: the API server prunes
# what it does not know)
STATUS_FIELDS = (
    "workers",
    "desiredWorkers",
    "scale",
    MEMBERS,
    "rescales",
    "rescaleSeconds",
    "lastRescale",
    "settleSince",
    "rescalingSince",
    "attemptStarted",
    STATUS_GROW_TO,
    "minWorkers",
    "partitioned",
)
PARTITIONED = "partitioned"  # status.elastic.partitioned: an attempt partitioned the graph
# A launcher that failed is not taken as a failure for this long after it ended: when a node
# dies, the trainers on the workers left lose their connections and fail first, and the node
# is seen lost only after the kubelet's silence outlasts the node monitor's grace period (50 s
# by default since Kubernetes 1.32; 20 s on the 3-node local cluster, where tests/e2e/multinode
# saw the launcher fail 17 s before) and the operator's own confirmation of it (20 s,
# controller/watched_nodes.py). A member's node lost within it makes the failure a rescale
# (NodeLost).
FAILURE_HOLD_SECONDS = 90.0


def record(status: Obj) -> Obj:
    """``status.elastic``, made if missing."""
    st: Obj = status.setdefault(STATUS, {})
    return st


def rescales(status: Obj) -> int:
    return int((status.get(STATUS) or {}).get("rescales") or 0)


def attempt(status: Obj) -> int:
    """The attempt the job's pods must carry: restarts and rescales so far."""
    return int(status.get("restartCount") or 0) + rescales(status)


def forget_members(status: Obj) -> None:
    """The next attempt sizes again (a restart, a rescale, a resume after a suspend)."""
    st = status.get(STATUS)
    if isinstance(st, dict):
        for key in (MEMBERS, "attemptStarted", STATUS_GROW_TO):
            st.pop(key, None)


def rescaled(status: Obj, now: float) -> float | None:
    """The attempt after a rescale trains: the rescale's seconds, added to
    ``status.elastic.rescaleSeconds`` (None: no rescale was under way)."""
    st = status.get(STATUS) or {}
    since = parse_time(st.get("rescalingSince"))
    if since is None:
        return None
    seconds = max(0.0, now - since)
    st.pop("rescalingSince", None)
    st["rescaleSeconds"] = round(float(st.get("rescaleSeconds") or 0) + seconds, 3)
    return seconds


def _index(job: DGLJob, name: str) -> int | None:
    prefix = f"{job.name}-worker-"
    if not name.startswith(prefix) or not name[len(prefix) :].isdigit():
        return None
    i = int(name[len(prefix) :])
    return i if i < job.spec.workers else None


def for_attempt(job: DGLJob, status: Obj) -> DGLJob:
    """``job`` with the members ``status.elastic`` chose for this attempt (unchanged when the
    job is rigid, or still sizing)."""
    if job.spec.elastic is None:
        return job
    names = (status.get(STATUS) or {}).get(MEMBERS)
    if not isinstance(names, list) or not names:
        return job
    members = tuple(i for i in (_index(job, str(n)) for n in names) if i is not None)
    if len(members) != len(names):
        return job  # (workers fewer than recorded: a spec that changed; size again)
    spec = dataclasses.replace(job.spec, members=members)
    return dataclasses.replace(job, spec=spec)


def placed(pod: Obj | None) -> bool:
    """The scheduler gave ``pod`` a node (or it runs already)."""
    if pod is None:
        return False
    if pod_phase(pod) in ("Running", "Succeeded") or (pod.get("spec") or {}).get("nodeName"):
        return True
    return any(
        c.get("type") == "PodScheduled" and c.get("status") == "True"
        for c in ob.conditions(ob.pod_status(pod))
    )


def running(job: DGLJob, pods: dict[str, Obj]) -> list[int]:
    """The indices of the worker pods that run with an IP (of the attempt ``pods`` holds)."""
    found = []
    for i in range(job.spec.workers):
        pod = pods.get(job.worker_name(i))
        if pod and pod_phase(pod) == "Running" and pod_ip(pod) and not is_terminating(pod):
            found.append(i)
    return found


def coming(job: DGLJob, pods: dict[str, Obj]) -> int:
    """The worker pods that do not run yet but may (``pods``: the attempt's, by name): not
    made yet, or not placed or started yet; not those the scheduler found no room for
    (PodScheduled False, Unschedulable: after a node is lost, the one that cannot go
    elsewhere)."""
    up = set(running(job, pods))
    count = 0
    for i in range(job.spec.workers):
        pod = pods.get(job.worker_name(i))
        problem = pod_waiting_problem(pod) if pod is not None else None
        if i not in up and (problem is None or problem.reason != REASON_UNSCHEDULABLE):
            count += 1
    return count


@dataclass(frozen=True)
class Sizing:
    """What sizing decided: the members (None: not yet), else why it waits and when to look
    again (seconds; None: when a pod changes)."""

    members: tuple[int, ...] | None = None
    waiting: str = ""
    look_again: float | None = None


def whole_first(job: DGLJob) -> bool:
    """Whether the job's first partitioning needs every worker: DistParMETIS with the chunks
    ``PerWorker`` (worker i holds the chunks of rank i). Later attempts, of any count, take
    their partitions from the cache (dglrun partitions for every count at once)."""
    cg = job.spec.chunked_graph
    return job.spec.partition_mode == DIST_PARMETIS and cg is not None and cg.layout == PER_WORKER


def partitioned(status: Obj) -> None:
    """Remember that an attempt partitioned the graph (dglrun reported ``status.partitions``,
    which the next attempt clears): ``status.elastic.partitioned``, for :func:`fewest`."""
    if status.get(STATUS_PARTITIONS):
        record(status)[PARTITIONED] = True


def failure_held(finished: float | None, now: float) -> float:
    """Seconds left to hold a failed launcher's failure (0: it is one), from when it ended."""
    if finished is None:
        return 0.0
    return max(0.0, finished + FAILURE_HOLD_SECONDS - now)


def fewest(policy: ElasticPolicy, st: Obj, whole: bool = False) -> int:
    """The fewest workers an attempt may have: minReplicas, or more where dglrun's memory plan
    found that fewer cannot hold the partitions (``status.elastic.minWorkers``); every one
    (maxReplicas) with ``whole`` (:func:`whole_first`) until the graph is partitioned."""
    low = max(policy.min_replicas, int(st.get("minWorkers") or 0))
    return max(low, policy.max_replicas) if whole and not st.get(PARTITIONED) else low


def size(
    policy: ElasticPolicy,
    up: list[int],
    st: Obj,
    now: float,
    whole: bool = False,
    coming: int | None = None,
) -> Sizing:
    """Choose the attempt's members from the worker indices that run (``up``); ``st`` is
    ``status.elastic``, whose ``settleSince`` (set here) starts the settling window.
    ``coming``: the worker pods that may still run (:func:`coming`; None: unknown); with none
    the window is not waited out (nothing more can come in it)."""
    low = fewest(policy, st, whole)
    if len(up) >= policy.max_replicas or (coming == 0 and len(up) >= low):
        st.pop("settleSince", None)
        return Sizing(members=tuple(up[: policy.max_replicas]))
    if len(up) < low:
        st.pop("settleSince", None)
        if low == policy.min_replicas:
            floor = f"minReplicas {low}"
        elif whole and not st.get(PARTITIONED):
            floor = (
                f"all {low} (chunkedGraph.layout PerWorker: each worker holds its own chunks, "
                "and the first partitioning reads them all)"
            )
        else:
            floor = f"the {low} the memory plan needs (minReplicas {policy.min_replicas})"
        return Sizing(
            waiting=f"{len(up)} of {floor} worker pods run; the job waits for room to start"
        )
    since = parse_time(st.get("settleSince"))
    if since is None:
        since = now
        st["settleSince"] = now_rfc3339(now)
    left = since + policy.settle_seconds - now
    if left <= 0:
        st.pop("settleSince", None)
        return Sizing(members=tuple(up))
    return Sizing(
        waiting=f"{len(up)} of {policy.max_replicas} worker pods run (minReplicas "
        f"{policy.min_replicas}): waiting {left:.0f}s more for others before training starts",
        look_again=left,
    )


def grow_to(policy: ElasticPolicy, have: int, standby_up: int, partitioner: bool) -> int | None:
    """The workers a grow would give (None: no grow): the members, and the standbys that
    run, less one for the next attempt's partitioner (made first, on the Worker template)."""
    want = min(policy.max_replicas, have + standby_up - (1 if partitioner else 0))
    return want if want > have else None


def workers_needed(message: str) -> int | None:
    """The workers dglrun's memory plan asks for in its refusal ("use K or more workers");
    None when more workers would not help (a step whose size does not depend on them)."""
    m = _NEEDED.search(message)
    return int(m.group(1)) if m else None


def disrupted(pod: Obj) -> str:
    """Why a pod was taken away rather than failed by its program ('' if it was not): the
    scheduler or the eviction API marked it (condition DisruptionTarget), or the kubelet
    evicted or shut it down (status.reason)."""
    for c in ob.conditions(ob.pod_status(pod)):
        if c.get("type") == DISRUPTION_CONDITION and c.get("status") == "True":
            return str(c.get("reason") or DISRUPTION_CONDITION)
    reason = str(ob.pod_status(pod).get("reason") or "")
    return reason if pod_phase(pod) == "Failed" and reason in DISRUPTED_REASONS else ""


def lost_members(job: DGLJob, pods: dict[str, Obj]) -> list[tuple[str, str]]:
    """The members (name, what happened) taken away: deleted, being deleted, or
    disrupted (``pods``: the attempt's pods by name, terminating ones included). A member
    that failed on its own is not lost: that is the training code's failure."""
    lost = []
    for name in job.training_worker_names():
        pod = pods.get(name)
        if pod is None:
            lost.append((name, "deleted"))
        elif is_terminating(pod):
            why = disrupted(pod)
            lost.append((name, f"being deleted ({why})" if why else "being deleted"))
        else:
            why = disrupted(pod)
            if why:
                lost.append((name, why))
    return lost


def standby(job: DGLJob, name: str) -> bool:
    """A worker pod of an elastic attempt that is not one of its members."""
    if job.spec.members is None:
        return False
    i = _index(job, name)
    return i is not None and i not in job.spec.members


def describe(st: Obj) -> str:
    workers, desired = int(st.get("workers") or 0), int(st.get("desiredWorkers") or 0)
    return f"{workers}/{desired}"


def probe_pod(job: DGLJob, partitioner: Obj) -> Obj:
    """The room-finder, made of ``partitioner`` (the job's partitioner pod, as
    controller/builders/pods.py builds it): that pod as the scheduler sees it (its main
    container's requests and limits, its node selector, affinity, tolerations, priority and
    volumes), running nothing but ``sleep``. Placed, it shows that the next attempt's
    partitioner has room beside the standby workers that run (controller/lifecycle/elastic.py)."""
    pod = partitioner
    meta = pod["metadata"]
    meta["name"] = job.probe_name
    meta["labels"].update({REPLICA_NAME_LABEL: job.probe_name, REPLICA_TYPE_LABEL: PROBE})
    meta["annotations"][REPLICA_ANNOTATION] = PROBE
    main = _main(pod)
    keep = ("name", "image", "imagePullPolicy", "resources", "volumeMounts")
    spec = pod["spec"]
    # (the partitioner's requests and limits, as the scheduler must see them; the operator's
    # own restricted context: sleep needs no more, whatever the template's says)
    probe = {k: main[k] for k in keep if k in main}
    probe["command"] = ["sleep", "infinity"]
    probe["securityContext"] = copy.deepcopy(OWN_SECURITY_CONTEXT)
    spec["containers"] = [probe]
    spec["securityContext"] = {
        "runAsNonRoot": True,
        "seccompProfile": {"type": "RuntimeDefault"},
        **{k: v for k, v in (spec.get("securityContext") or {}).items() if k == "fsGroup"},
    }
    spec.pop("initContainers", None)
    spec["terminationGracePeriodSeconds"] = 0
    # sleep talks to no API: no token, and not the partitioner's account (a projected token
    # volume of the template would be that account's)
    for key in ACCOUNT_FIELDS:
        spec.pop(key, None)
    spec["automountServiceAccountToken"] = False
    return pod


class Elastic:
    """The feature's entry (controller/features/registry.py): an attempt trains on the
    members status.elastic chose; a rescale is an attempt; an attempt's end forgets them;
    queued, the job may be admitted with its fewest workers; dglrun's settings of the rule."""

    name = "elastic"

    def mutate_pod_sets(self, job: DGLJob, sets: list[Obj]) -> list[Obj]:
        """Queued (Kueue), the job asks ``maxReplicas`` workers and may be admitted with as
        few as ``minReplicas`` (its worker podSet's minCount)."""
        policy = job.spec.elastic
        if policy is not None and policy.min_replicas < job.spec.workers:
            for ps in sets:
                if ps["name"] == "worker":
                    ps["minCount"] = policy.min_replicas
        return sets

    def for_attempt(self, job: DGLJob, status: Obj, pods: Iterable[Obj]) -> DGLJob:
        return for_attempt(job, status)

    def job_env(self, job: DGLJob, role: str) -> tuple[tuple[str, str], ...]:
        """An elastic job's rule, and its attempt's count once the members are chosen (the
        partitioner, made before, reads it from the job's status)."""
        policy = job.spec.elastic
        if policy is None:
            return ()
        members = job.spec.members
        return env_pairs(
            dglrun.ELASTIC.pair(True),
            dglrun.PARTITION_COUNTS.pair(tuple(range(policy.min_replicas, policy.ceiling + 1))),
            None if members is None else dglrun.NUM_PARTITIONS.pair(len(members)),
        )

    def attempts(self, status: Obj) -> int:
        return rescales(status)

    def attempt_over(self, status: Obj) -> None:
        forget_members(status)

    def training(self, job: DGLJob, status: Obj, now: float) -> Callable[[Metrics], None] | None:
        """After a rescale: its seconds (status.elastic.rescaleSeconds and the metric)."""
        if job.spec.elastic is None:
            return None
        seconds = rescaled(status, now)
        if seconds is None:
            return None
        ns = job.namespace
        return lambda metrics: metrics.rescale_duration.labels(ns).observe(seconds)


ELASTIC = Elastic()
