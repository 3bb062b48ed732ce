"""A soak: the plan's jobs submitted on time into the two LocalQueues, its faults injected on
time, every job followed to its end (then deleted, and what it owned looked for), the
invariants checked at every look and at the end, and the report.

One thread observes (every :data:`LOOK_SECONDS`: the jobs, the pods, each attempt's epochs);
faults run in threads of their own (a node powered on, a drain, an API server restart take
seconds to minutes); the main loop submits, starts faults and their second halves, closes
finished jobs and looks for leftovers.
"""

from __future__ import annotations

import contextlib
import functools
import json
import re
import statistics
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from localcluster import volumes
from localcluster.kubectl import KubectlError
from podcontract.progress import read as read_progress
from soak import faults as fl
from soak import invariants as inv
from soak.kinds import KINDS, manifest
from soak.plan import PRIORITIES, QUEUES, FaultAt, Plan, Submission
from soak.world import JOB_LABEL, OPERATOR_NAMESPACE, World, pod_processes, rss_bytes

Obj = dict[str, Any]
LOOK_SECONDS = 3.0
QUOTA_CPU = "2"  # the ClusterQueue's: ten 200m pods, two and a half 4-pod jobs
CLUSTER_QUEUE = "soak"
FAULT_RETRY_SECONDS = 5.0  # a fault with nothing to strike tries again this much later,
FAULT_PATIENCE = 180.0  # for this long
LEFTOVER_SECONDS = 120.0  # after a deletion, what the job owned must be gone within this
IDLE_WAIT, IDLE_WINDOW = 20.0, 30.0  # all done: wait, then count the operator's requests
OWNED = (
    "pods,configmaps,services,secrets,serviceaccounts,roles.rbac.authorization.k8s.io,"
    "rolebindings.rbac.authorization.k8s.io,persistentvolumeclaims,"
    "workloads.kueue.x-k8s.io,podgroups.scheduling.x-k8s.io,networkpolicies.networking.k8s.io"
)
ACCURACY = re.compile(r"dglrun: done.*test accuracy ([\d.]+)")
Say = Callable[[str], None]


@dataclass
class Injected:
    fault: FaultAt
    at: float
    what: str


@dataclass
class Report:
    seed: int
    seconds: float
    jobs: list[inv.JobRecord]
    injected: list[Injected]
    missed: list[FaultAt]  # found nothing to strike
    violations: list[inv.Violation]
    memory: str = ""
    idle: str = ""
    evidence: list[str] = field(default_factory=list)  # what the checks looked at

    def lines(self) -> list[str]:
        out = [f"soak: seed {self.seed}, {self.seconds / 60:.1f} min"]
        kinds = Counter(i.fault.kind for i in self.injected)
        out.append("| fault | injected |")
        out.append("| --- | --- |")
        out += [f"| {k} | {v} |" for k, v in sorted(kinds.items())]
        if self.missed:
            out.append(f"(found nothing to strike: {', '.join(f.kind for f in self.missed)})")
        outcomes = Counter((j.kind, j.outcome or "unfinished") for j in self.jobs)
        out.append("| job kind | outcome | jobs |")
        out.append("| --- | --- | --- |")
        out += [f"| {k} | {o} | {v} |" for (k, o), v in sorted(outcomes.items())]
        restarted = sum(1 for j in self.jobs if len(j.attempts) > 1)
        out.append(f"jobs with more than one attempt: {restarted}")
        out += self.evidence
        if self.memory:
            out.append(self.memory)
        if self.idle:
            out.append(self.idle)
        out.append(f"violations: {len(self.violations)}")
        out += [f"  {v.line()}" for v in self.violations]
        return out


def queue_objects() -> list[Obj]:
    """The PriorityClasses, the flavor, the ClusterQueue (preemption of lower priorities
    within it) and a LocalQueue per namespace."""
    objs: list[Obj] = [
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": name},
            "value": value,
        }
        for name, value in zip(PRIORITIES, (100, 1000), strict=True)
    ]
    objs.append(
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ResourceFlavor",
            "metadata": {"name": "soak-flavor"},
            "spec": {},
        }
    )
    objs.append(
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ClusterQueue",
            "metadata": {"name": CLUSTER_QUEUE},
            "spec": {
                "namespaceSelector": {},
                "preemption": {"withinClusterQueue": "LowerPriority"},
                "resourceGroups": [
                    {
                        "coveredResources": ["cpu", "memory"],
                        "flavors": [
                            {
                                "name": "soak-flavor",
                                "resources": [
                                    {"name": "cpu", "nominalQuota": QUOTA_CPU},
                                    {"name": "memory", "nominalQuota": "64Gi"},
                                ],
                            }
                        ],
                    }
                ],
            },
        }
    )
    for queue in QUEUES:
        objs.append({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": queue}})
        objs.append(
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "LocalQueue",
                "metadata": {"name": queue, "namespace": queue},
                "spec": {"clusterQueue": CLUSTER_QUEUE},
            }
        )
    return objs


def error_event(line: str) -> str:
    """What a log line says, without its time: a JSON line's ``event`` (the operator logs
    JSON), so that the same cause counts once however often it comes; else the line."""
    with contextlib.suppress(ValueError, AttributeError):
        event = json.loads(line).get("event")
        if isinstance(event, str):
            return event[:240]
    return line[:240]


def exit_cause(status: Obj, last_error: Callable[[], str]) -> str:
    """A container's last exit as ``<reason> exit <code>``; one that did not die of SIGKILL
    (137: a fault's kill, the kubelet's or the kernel's) adds ``last_error()``, the last error
    line of its log."""
    ended = (status.get("lastState") or {}).get("terminated") or {}
    code = ended.get("exitCode")
    cause = f"{ended.get('reason') or 'unknown'} exit {code if code is not None else '?'}"
    if code not in (None, 137) and (why := last_error()):
        cause += f": {why}"
    return cause


@dataclass
class Soak:
    world: World
    plan: Plan
    say: Say
    drain_seconds: float  # after the last submission, how long jobs may take to finish
    jobs: dict[str, inv.JobRecord] = field(default_factory=dict)  # "<ns>/<name>"
    violations: list[inv.Violation] = field(default_factory=list)
    injected: list[Injected] = field(default_factory=list)
    missed: list[FaultAt] = field(default_factory=list)
    down: dict[str, str] = field(default_factory=dict)  # node away -> "<at>s <its fault>"
    lock: threading.Lock = field(default_factory=threading.Lock)
    stop: threading.Event = field(default_factory=threading.Event)
    memory: list[tuple[float, str, int]] = field(default_factory=list)  # (t, pod, RSS)
    started: float = 0.0
    looks: int = 0  # the looks taken (each: every invariant that holds throughout)
    peak_pods: int = 0  # the most live job pods seen at once
    peak_cpu: int = 0  # the most CPU (millis) placed at once
    deletions_checked: int = 0  # deleted jobs whose children were all seen gone
    operator_pods: set[str] = field(default_factory=set)  # every operator pod seen
    exits: dict[str, str] = field(default_factory=dict)  # "<pod> #<restarts>" -> its cause

    def now(self) -> float:
        return time.monotonic() - self.started

    def violate(self, found: list[inv.Violation]) -> None:
        """Keep each violation once (one that lasts is seen at every look: its first time)."""
        with self.lock:
            seen = {(v.rule, v.what) for v in self.violations}
            for v in found:
                if (v.rule, v.what) not in seen:
                    seen.add((v.rule, v.what))
                    self.violations.append(v)
                    self.say(f"VIOLATION {v.line()}")

    # -- setup -------------------------------------------------------------------------

    def setup(self) -> None:
        for obj in queue_objects():
            self.world.apply(obj)
        self._volumes()

    def _volumes(self) -> None:
        volumes.ensure(self.world, self.world.dir / "volumes")

    # -- observing ---------------------------------------------------------------------

    def observe(self) -> None:
        last_memory = -1e9
        while not self.stop.wait(LOOK_SECONDS):
            try:
                self.look()
                if self.now() - last_memory >= 10:
                    self.sample_operator()
                    last_memory = self.now()
            except (KubectlError, OSError, ValueError) as e:  # (the API server restarting)
                self.say(f"look failed ({e}); looking again")

    def look(self) -> None:
        at = self.now()
        pods = [p for ns in QUEUES for p in self.world.items("pods", ns)]
        self.violate(inv.duplicate_replicas(at, pods))
        self.violate(inv.over_quota(at, pods, inv.cpu_millis(QUOTA_CPU)))
        placed = [p for p in pods if inv.live(p) and p["spec"].get("nodeName")]
        with self.lock:
            for key, fault in fl.struck_while_away(pods, self.down).items():
                record = self.jobs.get(key)
                if record is not None and fault not in record.faults:
                    record.faults.append(fault)
                    self.say(f"[{at:7.1f}s] {key}: a pod placed on a node away ({fault})")
            self.looks += 1
            self.peak_pods = max(self.peak_pods, len(placed))
            self.peak_cpu = max(self.peak_cpu, sum(inv.pod_cpu(p) for p in placed))
        launchers = {
            fl.job_of(p): p
            for p in pods
            if inv.live(p)
            and p["metadata"]["name"].endswith("-launcher")
            and JOB_LABEL in (p["metadata"].get("labels") or {})
        }
        for ns in QUEUES:
            for job in self.world.items("dgljobs", ns):
                key = f"{ns}/{job['metadata']['name']}"
                with self.lock:
                    record = self.jobs.get(key)
                    if record is None or record.uid not in ("", job["metadata"]["uid"]):
                        continue
                    record.uid = job["metadata"]["uid"]
                    record.saw(job.get("status") or {}, at)
                    record.saw_restart(record.last_status)
                    self._attempt(record, launchers.get(key))

    def _attempt(self, record: inv.JobRecord, launcher: Obj | None) -> None:
        """The attempt the job's launcher pod stands for, with its epochs and resume point."""
        if launcher is None:
            return
        uid = launcher["metadata"]["uid"]
        if not record.attempts or record.attempts[-1].launcher_uid != uid:
            record.attempts.append(inv.Attempt(uid))
        attempt = record.attempts[-1]
        status = record.last_status
        detail = read_progress(status).detail  # (epochsDone: the epochs done, as a count)
        if detail is not None:
            attempt.done = max(attempt.done, detail.epochs_done)
        resume = (status.get("resume") or {}).get("epoch")
        if isinstance(resume, int):
            attempt.resumed_at = resume

    def sample_operator(self) -> None:
        """The leader's memory (its process's RSS) and the operator's container exits."""
        leader = self.world.leader()
        pods = {p["metadata"]["name"]: p for p in self.world.operator_pods()}
        self._exits(list(pods.values()))
        if leader not in pods:
            return
        rss = [
            (r, pid)
            for pid in pod_processes(pods[leader]["metadata"]["uid"])
            if (r := rss_bytes(pid)) is not None
        ]
        if rss:
            most, pid = max(rss)  # (the operator's process: a restarted container is another)
            with self.lock:
                self.memory.append((self.now(), f"{leader} pid {pid}", most))

    def _exits(self, pods: list[Obj]) -> None:
        """Each operator container exit seen (a restart count that grew), with its cause: the
        kubelet's reason and exit code, and for one not killed by SIGKILL the last
        error its log printed (why an operator gives up: a lost lease, a failed start)."""
        for pod in pods:
            name = pod["metadata"]["name"]
            self.operator_pods.add(name)
            for status in (pod.get("status") or {}).get("containerStatuses") or []:
                key = f"{name} #{status.get('restartCount', 0)}"
                if status.get("restartCount", 0) == 0 or key in self.exits:
                    continue
                self.exits[key] = exit_cause(status, functools.partial(self._last_error, name))
                self.say(f"[{self.now():7.1f}s] operator exit: {key}: {self.exits[key]}")

    def _last_error(self, pod: str) -> str:
        try:
            text = self.world.run(
                "logs", "-n", OPERATOR_NAMESPACE, pod, "--previous", "--tail", "200"
            )
        except KubectlError:
            return ""
        errors = [line for line in text.splitlines() if "error" in line.lower()]
        return error_event(errors[-1]) if errors else ""

    # -- submitting, faults, closing ---------------------------------------------------

    def submit(self, sub: Submission) -> None:
        if KINDS[sub.kind].storage:
            self._volumes()
        obj = manifest(sub.kind, sub.queue, sub.name, sub.queue, sub.priority)
        with self.lock:
            self.jobs[f"{sub.queue}/{sub.name}"] = inv.JobRecord(
                sub.name, sub.kind, sub.queue, KINDS[sub.kind].storage, self.now()
            )
        self.world.apply(obj)
        self.say(f"[{self.now():7.1f}s] submitted {sub.queue}/{sub.name} ({sub.priority})")

    def strike(self, fault: FaultAt, first: float) -> None:
        """Inject ``fault`` (in its own thread); with nothing to strike (or the API server
        away: another fault), again a little later, for FAULT_PATIENCE seconds."""
        struck: fl.Struck | None = None
        while True:
            try:
                scene = fl.Scene(self.world, QUEUES, self.nodes, set(self.down))
                struck = fl.FAULTS[fault.kind](scene, fault.rng(self.plan.seed))
            except KubectlError as e:
                self.say(f"[{self.now():7.1f}s] fault {fault.kind}: {e}; trying again")
                struck = None
            except (OSError, RuntimeError) as e:
                struck = fl.Struck(f"{fault.kind} failed to strike: {e}")
            if struck is not None or self.now() - first >= FAULT_PATIENCE or self.stop.is_set():
                break
            time.sleep(FAULT_RETRY_SECONDS)
        if struck is None:
            with self.lock:
                self.missed.append(fault)
            self.say(f"[{self.now():7.1f}s] fault {fault.kind}: nothing to strike")
            return
        at = self.now()
        line = f"{at:.0f}s {struck.what}"  # (one string: a look adds it to a job only once)
        with self.lock:
            self.injected.append(Injected(fault, at, struck.what))
            for key in struck.jobs:
                if key in self.jobs:
                    self.jobs[key].faults.append(line)
                    if fault.kind == fl.DELETES:
                        self.jobs[key].outcome = "Deleted"
                        self.jobs[key].finished = at
            self.down.update(dict.fromkeys(struck.nodes, line))
        self.say(f"[{at:7.1f}s] FAULT {fault.kind}: {struck.what}")
        if struck.then is not None:
            time.sleep(struck.after)
            self.second_half(struck)
            with self.lock:
                for node in struck.nodes:
                    self.down.pop(node, None)

    def second_half(self, struck: fl.Struck) -> None:
        """A fault's second half (a node powered on, uncordoned, a job resumed): tried again
        while the API server is away (another fault), for FAULT_PATIENCE seconds."""
        assert struck.then is not None
        since = self.now()
        while True:
            try:
                self.say(f"[{self.now():7.1f}s] {struck.then()}")
                return
            except (KubectlError, OSError, RuntimeError) as e:
                if self.now() - since >= FAULT_PATIENCE:
                    self.violate(
                        [
                            inv.Violation(
                                self.now(), "a fault's second half failed", f"{struck.what}: {e}"
                            )
                        ]
                    )
                    return
                self.say(f"[{self.now():7.1f}s] {struck.what}: its second half: {e}; again")
                time.sleep(FAULT_RETRY_SECONDS)

    @property
    def nodes(self) -> list[str]:
        return [n["metadata"]["name"] for n in self.world.items("nodes")]

    def close(self, record: inv.JobRecord) -> None:
        """A finished job: its outcome and accuracy kept, then it is deleted."""
        conds = {c["type"]: c for c in record.last_status.get("conditions") or []}
        for kind in ("Succeeded", "Failed"):
            if conds.get(kind, {}).get("status") == "True":
                record.outcome = kind
                record.reason = str(conds[kind].get("reason") or "")
                record.message = str(conds[kind].get("message") or "")
        record.finished = self.now()
        if record.outcome == "Succeeded":
            record.accuracy = self.accuracy(record)
        self.say(
            f"[{record.finished:7.1f}s] {record.namespace}/{record.name}: {record.outcome}"
            f"{' ' + record.reason if record.outcome == 'Failed' else ''}"
            f"{f' accuracy {record.accuracy:.4f}' if record.accuracy is not None else ''}"
            f" ({len(record.attempts)} attempt(s))"
        )
        self.violate(inv.outcome(self.now(), record))
        self.world.run(
            "delete",
            "dgljob",
            record.name,
            "-n",
            record.namespace,
            "--wait=false",
            "--ignore-not-found",
        )

    def accuracy(self, record: inv.JobRecord) -> float | None:
        """The test accuracy the launcher's log ends with (asked again while the API server is
        away: another fault); None for a job that prints none (Skip)."""
        since = self.now()
        while True:
            try:
                log = self.world.run(
                    "logs", f"{record.name}-launcher", "-n", record.namespace, "--tail=200"
                )
            except KubectlError as e:
                if self.now() - since < FAULT_PATIENCE:
                    time.sleep(FAULT_RETRY_SECONDS)
                    continue
                self.say(f"{record.namespace}/{record.name}: no log: {e}")
                return None
            found = ACCURACY.findall(log)
            return float(found[-1]) if found else None

    def left(self, record: inv.JobRecord) -> list[inv.Violation]:
        objects = self.world.items(OWNED, record.namespace)
        return inv.leftovers(self.now(), record, objects)

    # -- the run -------------------------------------------------------------------------

    def run(self) -> Report:
        self.setup()
        self.started = time.monotonic()
        watcher = threading.Thread(target=self.observe, daemon=True)
        watcher.start()
        submissions = list(self.plan.submissions)
        pending_faults = list(self.plan.faults)
        threads: list[threading.Thread] = []
        checks: list[tuple[float, inv.JobRecord]] = []  # (deleted at, job): leftovers
        # jobs may take drain_seconds after the last submission, which waits for a free slot
        # (``concurrent``) and so may come well after the plan's submit window
        deadline = self.plan.size.submit_seconds + self.drain_seconds
        while True:
            now = self.now()
            with self.lock:
                open_jobs = sum(1 for j in self.jobs.values() if j.finished is None)
            try:  # (the API server away, another fault: again at the next tick)
                while (
                    submissions
                    and submissions[0].at <= now
                    and open_jobs < self.plan.size.concurrent
                ):
                    self.submit(submissions[0])
                    submissions.pop(0)
                    open_jobs += 1
                    deadline = max(deadline, now + self.drain_seconds)
                self._close_finished(checks)
            except RuntimeError as e:  # (kubectl's, and localcluster.volumes')
                self.say(f"[{now:7.1f}s] {e}; again in a second")
            while pending_faults and pending_faults[0].at <= now:
                fault = pending_faults.pop(0)
                t = threading.Thread(target=self.strike, args=(fault, now), daemon=True)
                t.start()
                threads.append(t)
            self._check_leftovers(checks)
            with self.lock:
                unfinished = [j for j in self.jobs.values() if j.finished is None]
            if not submissions and not unfinished and not checks:
                break
            # past the deadline, jobs that still move are waited for (slow is not stuck), up to
            # a second drain time
            if now > deadline and (
                now > deadline + self.drain_seconds or not inv.moving(unfinished, now)
            ):
                break
            time.sleep(1.0)
        if submissions:  # (the jobs before them never ended: the plan was not run whole)
            self.violate(
                [
                    inv.Violation(
                        self.now(),
                        "stuck",
                        f"{len(submissions)} job(s) never submitted: "
                        f"{', '.join(s.name for s in submissions)}",
                    )
                ]
            )
        for t in threads:
            t.join(300)
        self.stop.set()
        watcher.join(30)
        try:
            return self.finish(checks)
        finally:
            self.teardown()

    def teardown(self) -> None:
        """The queues and namespaces go (the jobs with them): the cluster as it was."""
        for ns in QUEUES:
            self.world.run(
                "delete", "namespace", ns, "--ignore-not-found", "--timeout=180s", check=False
            )
        self.world.run(
            "delete", "clusterqueue", CLUSTER_QUEUE, "--wait=false", "--ignore-not-found"
        )

    def _close_finished(self, checks: list[tuple[float, inv.JobRecord]]) -> None:
        with self.lock:
            records = list(self.jobs.values())
        for record in records:
            if record.closed:
                continue
            conds = {c["type"]: c.get("status") for c in record.last_status.get("conditions") or []}
            if record.outcome == "Deleted":  # (by a fault: looked for once it is gone)
                record.closed = True
                checks.append((self.now(), record))
            elif "True" in (conds.get("Succeeded"), conds.get("Failed")):
                self.close(record)
                record.closed = True
                checks.append((self.now(), record))

    def _check_leftovers(self, checks: list[tuple[float, inv.JobRecord]]) -> None:
        for deleted, record in list(checks):
            if self.now() - deleted < 10:
                continue
            try:
                found = self.left(record)
            except KubectlError:
                continue
            if not found:
                checks.remove((deleted, record))
                self.deletions_checked += 1
            elif self.now() - deleted > LEFTOVER_SECONDS:
                self.violate(found)
                checks.remove((deleted, record))

    def finish(self, checks: list[tuple[float, inv.JobRecord]]) -> Report:
        at = self.now()
        for _, record in checks:  # (the run's end came first)
            self.violate(self.left(record))
        with self.lock:
            records = list(self.jobs.values())
        for record in records:
            if record.finished is None:
                self.violate(inv.outcome(at, record))
        reference = {
            kind: statistics.median(accs)
            for kind in KINDS
            if (
                accs := [
                    j.accuracy
                    for j in records
                    if j.kind == kind
                    and j.accuracy is not None
                    and len(j.attempts) == 1
                    and not j.faults
                ]
            )
        }
        for record in records:
            self.violate(inv.resumed(at, record, reference))
        memory = self._memory(at)
        operator = self._operator()
        idle = self._idle(at)
        resumed = [r for r in records if r.resumable and len(r.attempts) > 1]
        evidence = [
            f"looks: {self.looks} (every {LOOK_SECONDS:g}s); at most {self.peak_pods} job pods "
            f"placed at once, {self.peak_cpu}m CPU of the quota's {inv.cpu_millis(QUOTA_CPU)}m",
            f"deleted jobs seen with nothing left: {self.deletions_checked} of {len(records)}",
            f"resumed jobs checked: {len(resumed)} (uninterrupted accuracy by kind: "
            + (", ".join(f"{k} {v:.4f}" for k, v in sorted(reference.items())) or "none")
            + ")",
        ]
        return Report(
            self.plan.seed,
            at,
            records,
            self.injected,
            self.missed,
            list(self.violations),
            memory,
            idle,
            [*evidence, operator],
        )

    def _memory(self, at: float) -> str:
        """The leader's memory: the longest-lived leader process's RSS a quarter into its life
        (warmed up) against its last; and over the whole run, every leader's after the first
        one warmed up against that first warm figure (a new leader fills its caches again)."""
        by: dict[str, list[tuple[float, int]]] = {}
        for t, proc, rss in self.memory:
            by.setdefault(proc, []).append((t, rss))
        if not by:
            return "operator memory: no sample"

        def warmed(samples: list[tuple[float, int]]) -> tuple[float, int]:
            span = samples[-1][0] - samples[0][0]
            return next((t, r) for t, r in samples if t - samples[0][0] >= span / 4)

        proc, samples = max(by.items(), key=lambda kv: kv[1][-1][0] - kv[1][0][0])
        span = samples[-1][0] - samples[0][0]
        _, warm = warmed(samples)
        end = samples[-1][1]
        self.violate(inv.memory_flat(at, warm, end, proc))
        first = next(iter(by.values()))
        since, first_warm = warmed(first)
        later = [(r, p) for t, p, r in self.memory if t >= since]
        peak, peak_proc = max(later)
        self.violate(inv.memory_flat(at, first_warm, peak, f"{peak_proc} (the run's peak)"))
        return (
            f"operator memory: {len(by)} leader process(es); the longest-lived ({proc}, "
            f"{span / 60:.1f} min): {warm / 2**20:.1f} MiB warmed up, {end / 2**20:.1f} MiB at "
            f"its end ({end / warm:.2f}x); over the run: {peak / 2**20:.1f} MiB at most "
            f"({peak / first_warm:.2f}x the first leader's {first_warm / 2**20:.1f} MiB warmed up)"
        )

    def _operator(self) -> str:
        """How often the operator's containers exited, by cause, and its pods replaced (a
        drained or powered-off node's)."""
        causes = Counter(self.exits.values())
        by_cause = "; ".join(f"{c} x{n}" for c, n in causes.most_common())
        return (
            f"operator container exits: {len(self.exits)}"
            + (f" ({by_cause})" if by_cause else "")
            + f"; operator pods seen: {len(self.operator_pods)}"
        )

    def _idle(self, at: float) -> str:
        leader = self.world.leader()
        if leader is None:
            return "operator requests when idle: no leader"
        time.sleep(IDLE_WAIT)
        first = self._requests(leader)
        time.sleep(IDLE_WINDOW)
        second = self._requests(leader)
        delta = {k: second.get(k, 0) - v for k, v in first.items()}
        delta.update({k: v for k, v in second.items() if k not in first})
        self.violate(inv.idle_requests(self.now(), delta, IDLE_WINDOW))
        sent = sum(v for v in delta.values() if v > 0)
        return f"operator requests when idle ({leader}, {IDLE_WINDOW:g}s): {sent:g}"

    def _requests(self, pod: str) -> dict[str, float]:
        """The leader's rest_client_requests_total by verb and resource, but watches and its
        Lease (its renewals are what a leader does when idle)."""
        text = self.world.run(
            "get", "--raw", f"/api/v1/namespaces/{OPERATOR_NAMESPACE}/pods/{pod}:8080/proxy/metrics"
        )
        out: dict[str, float] = {}
        for line in text.splitlines():
            if not line.startswith("rest_client_requests_total{"):
                continue
            labels = dict(re.findall(r'(\w+)="([^"]*)"', line))
            resource = labels.get("resource", "")
            if labels.get("verb", "").upper() == "WATCH" or resource.split(".")[0] == "leases":
                continue
            key = f"{labels.get('verb')} {labels.get('resource')}"
            out[key] = out.get(key, 0) + float(line.rsplit(" ", 1)[1])
        return out


def run(world: World, plan: Plan, say: Say, drain_seconds: float) -> Report:
    return Soak(world, plan, say, drain_seconds).run()
