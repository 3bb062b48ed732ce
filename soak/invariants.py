"""What must hold throughout a soak, and at its end: pure functions of what was observed (the
pods, the jobs, the quota, the objects left), each returning the violations it found. The
runner (soak/run.py) observes; these judge.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from controller.status import conditions as c
from soak.world import ATTEMPT_ANNOTATION, JOB_LABEL

Obj = dict[str, Any]
REPLICA_NAME_LABEL = "dgl-replica-name"
# what a Failed job's reason may be after a fault: each names what happened (the message says
# which pod or node, and how)
FAILURE_REASONS = {
    c.REASON_BACKOFF_LIMIT,
    c.REASON_OOM_KILLED,
    c.REASON_MEMORY_PLAN,
    c.REASON_NODE_LOST,
    c.REASON_DEADLINE,
    c.REASON_UNSCHEDULABLE,
    c.REASON_SCHEDULE_TIMEOUT,
}
RESUME_TOLERANCE = 0.01  # "within 1 point" of the uninterrupted accuracy


@dataclass(frozen=True)
class Violation:
    at: float  # seconds into the run
    rule: str
    what: str

    def line(self) -> str:
        return f"[{self.at:7.1f}s] {self.rule}: {self.what}"


@dataclass
class Attempt:
    """One attempt of a job (its launcher pod, by UID): the epochs it was seen to finish and
    the epoch it resumed at (None: it started from the first)."""

    launcher_uid: str
    done: int = 0
    resumed_at: int | None = None


@dataclass
class JobRecord:
    """A job of the soak as the runner saw it."""

    name: str
    kind: str
    namespace: str
    resumable: bool
    submitted: float
    uid: str = ""
    finished: float | None = None
    outcome: str = ""  # Succeeded | Failed | Deleted (by a fault) | "" (not finished)
    reason: str = ""
    message: str = ""
    accuracy: float | None = None
    faults: list[str] = field(default_factory=list)  # the faults that struck it
    attempts: list[Attempt] = field(default_factory=list)
    last_status: Obj = field(default_factory=dict)
    closed: bool = False  # its outcome taken and its deletion asked for (the runner's)
    restarts: list[str] = field(default_factory=list)  # why it restarted, as the looks saw it
    moved: float = -1.0  # when a look last saw its status move (-1: never; see :func:`movement`)
    movement: tuple[object, ...] = ()  # what that look saw

    def saw(self, status: Obj, at: float) -> None:
        """A look's status of the job: kept, and ``moved`` set when it moved."""
        self.last_status = status
        now = movement(status)
        if now != self.movement:
            self.movement, self.moved = now, at

    def last_moved(self) -> float:
        return max(self.moved, self.submitted)

    def saw_restart(self, status: Obj) -> None:
        """Keeps the message of a Restarting=True condition seen (it reads "running again"
        once the job runs again), once per restart."""
        for cond in status.get("conditions") or []:
            if cond.get("type") == c.RESTARTING and cond.get("status") == "True":
                message = f"{cond.get('reason', '')}: {cond.get('message', '')}"
                if not self.restarts or self.restarts[-1] != message:
                    self.restarts.append(message)


STALL_SECONDS = 90.0  # a job whose status has not moved this long is not moving


def movement(status: Obj) -> tuple[object, ...]:
    """What of a job's status moves while it works: its phase, progress (the step and the
    epoch), epochs done, percentage and restarts."""
    detail = status.get("progressDetail") or {}
    return (
        status.get("phase"),
        status.get("progress"),
        detail.get("epochsDone"),
        detail.get("percentage"),
        status.get("restartCount"),
    )


def moving(jobs: Iterable[JobRecord], at: float, stall: float = STALL_SECONDS) -> list[str]:
    """The unfinished jobs whose status moved within ``stall`` seconds of ``at`` (the soak
    waits for them past its deadline: slow is not stuck)."""
    return [
        f"{j.namespace}/{j.name}"
        for j in jobs
        if j.finished is None and at - j.last_moved() < stall
    ]


def live(pod: Obj) -> bool:
    """A pod that runs or may run: not terminal and not being deleted."""
    phase = (pod.get("status") or {}).get("phase")
    return phase in ("Pending", "Running") and not pod["metadata"].get("deletionTimestamp")


def duplicate_replicas(at: float, pods: Iterable[Obj]) -> list[Violation]:
    """Never two live pods for one replica of one attempt of one job."""
    groups: dict[tuple[str, str, str, str], list[str]] = defaultdict(list)
    for pod in pods:
        meta = pod["metadata"]
        labels = meta.get("labels") or {}
        if not live(pod) or JOB_LABEL not in labels or REPLICA_NAME_LABEL not in labels:
            continue
        attempt = (meta.get("annotations") or {}).get(ATTEMPT_ANNOTATION, "")
        key = (meta["namespace"], labels[JOB_LABEL], labels[REPLICA_NAME_LABEL], attempt)
        groups[key].append(f"{meta['name']} ({meta.get('uid', '')[:8]})")
    return [
        Violation(
            at,
            "two live pods for one replica",
            f"{ns}/{job} replica {replica} attempt {attempt}: {', '.join(names)}",
        )
        for (ns, job, replica, attempt), names in sorted(groups.items())
        if len(names) > 1
    ]


def cpu_millis(quantity: str | int | float) -> int:
    text = str(quantity)
    if text.endswith("m"):
        return int(float(text[:-1]))
    return int(float(text) * 1000)


def pod_cpu(pod: Obj) -> int:
    """The pod's CPU request as Kueue counts it: its containers', or its largest init
    container's if more."""
    spec = pod["spec"]

    def req(c: Obj) -> int:
        return cpu_millis(((c.get("resources") or {}).get("requests") or {}).get("cpu", 0))

    main = sum(req(c) for c in spec.get("containers") or [])
    init = max((req(c) for c in spec.get("initContainers") or []), default=0)
    return max(main, init)


def over_quota(at: float, pods: Iterable[Obj], quota_millis: int) -> list[Violation]:
    """The live pods of queued jobs, placed on a node, never ask for more CPU than the
    ClusterQueue's quota (what Kueue admitted is all that runs)."""
    placed = [
        p
        for p in pods
        if live(p)
        and p["spec"].get("nodeName")
        and JOB_LABEL in (p["metadata"].get("labels") or {})
    ]
    used = sum(pod_cpu(p) for p in placed)
    if used <= quota_millis:
        return []
    names = ", ".join(sorted(p["metadata"]["name"] for p in placed))
    return [
        Violation(at, "admitted pods over the quota", f"{used}m CPU of {quota_millis}m: {names}")
    ]


def leftovers(at: float, job: JobRecord, objects: Iterable[Obj]) -> list[Violation]:
    """After the job's deletion: nothing it owned (by owner UID or its job-name label)."""
    left = []
    for obj in objects:
        meta = obj["metadata"]
        owners = {o.get("uid") for o in meta.get("ownerReferences") or []}
        if job.uid in owners or (meta.get("labels") or {}).get(JOB_LABEL) == job.name:
            left.append(f"{obj['kind']} {meta['name']}")
    if not left:
        return []
    return [
        Violation(
            at,
            "left after the job's deletion",
            f"{job.namespace}/{job.name}: {', '.join(sorted(left))}",
        )
    ]


def outcome(at: float, job: JobRecord) -> list[Violation]:
    """Every job ends Succeeded, or Failed with a reason that names what happened: a fault
    that struck it (a job no fault struck has nothing to fail of), and only a fault that
    struck it restarts it (an API server restart strikes no job: dglrun follows the workers
    through their agents, not through the API server)."""
    where = f"{job.namespace}/{job.name} ({job.kind})"
    restarted = []
    restarts = int(job.last_status.get("restartCount") or 0)  # (a preemption is no restart)
    if restarts and not job.faults:
        restarted.append(
            Violation(
                at,
                "restarted though no fault struck it",
                f"{where}: {restarts} restarts ({'; '.join(job.restarts) or 'why not seen'})",
            )
        )
    if job.outcome in ("Succeeded", "Deleted"):
        return restarted
    if job.outcome == "":
        phase = job.last_status.get("phase")
        return [
            Violation(
                at,
                "stuck",
                f"{where} never finished: phase {phase}, "
                f"progress {job.last_status.get('progress')!r}, "
                f"conditions {conditions_line(job.last_status)}; "
                f"its status last moved at {job.last_moved():.1f}s",
            ),
            *restarted,
        ]
    found = restarted
    if job.reason not in FAILURE_REASONS or not job.message:
        found.append(
            Violation(
                at,
                "failed without a reason that names what happened",
                f"{where}: {job.reason!r} {job.message!r}",
            )
        )
    if not job.faults:
        found.append(
            Violation(
                at, "failed though no fault struck it", f"{where}: {job.reason}: {job.message}"
            )
        )
    return found


def conditions_line(status: Obj) -> str:
    return ", ".join(
        f"{c.get('type')}={c.get('status')}({c.get('reason', '')})"
        for c in status.get("conditions") or []
    )


def resumed(at: float, job: JobRecord, reference: Mapping[str, float]) -> list[Violation]:
    """A resumable job interrupted and resumed: no whole epoch trained twice (each attempt
    resumed at or after every epoch an earlier one finished), and its accuracy within
    RESUME_TOLERANCE of the uninterrupted jobs' of its kind (``reference``)."""
    if not job.resumable or job.outcome != "Succeeded" or len(job.attempts) < 2:
        return []
    where = f"{job.namespace}/{job.name} ({job.kind})"
    found = []
    before = 0
    for i, attempt in enumerate(job.attempts):
        trained = attempt.done > 0 or attempt.resumed_at is not None
        start = attempt.resumed_at or 0
        if i and trained and before > start:
            found.append(
                Violation(
                    at,
                    "an epoch trained twice",
                    f"{where}: attempt {i + 1} started at epoch {start}, "
                    f"after {before} epoch(s) were done",
                )
            )
        before = max(before, attempt.done)
    ref = reference.get(job.kind)
    if ref is not None and job.accuracy is not None and abs(job.accuracy - ref) > RESUME_TOLERANCE:
        found.append(
            Violation(
                at,
                "resumed accuracy off",
                f"{where}: {job.accuracy:.4f} against {ref:.4f} uninterrupted",
            )
        )
    return found


def memory_flat(at: float, warm: int, end: int, process: str) -> list[Violation]:
    """The operator's memory at the end is at most 1.2x its memory after warm-up."""
    if end <= 1.2 * warm:
        return []
    return [
        Violation(
            at,
            "operator memory grew",
            f"{process}: {end / 2**20:.1f} MiB at the end, {warm / 2**20:.1f} MiB "
            f"after warm-up ({end / warm:.2f}x)",
        )
    ]


def idle_requests(at: float, counts: Mapping[str, float], seconds: float) -> list[Violation]:
    """Once nothing is left to do, the operator sends no request (but for its watches and its
    leader Lease)."""
    busy = {k: v for k, v in counts.items() if v > 0}
    if not busy:
        return []
    listed = ", ".join(f"{k}: {v:g}" for k, v in sorted(busy.items()))
    return [Violation(at, "operator not idle", f"{listed} in {seconds:g}s with nothing to do")]
