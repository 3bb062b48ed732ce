"""The operator against a real API server: a burst of DGLJobs, an idle window, unrelated pods.

Starts its own control plane (etcd + kube-apiserver + kube-controller-manager,
localcluster/cluster.py) in a temporary directory and runs ``python -m controller.main`` as a
subprocess against it; the operator's API requests and reconciles are read from its own
Prometheus endpoint (``rest_client_requests_total``, ``controller_runtime_reconcile_total``),
its memory from /proc/<pid>/status. Everything started here is stopped and removed at the end,
on errors and on Ctrl-C too. Prints figures only; never fails on timing.

1. burst: ``--jobs`` DGLJobs with ``--workers-per-job`` workers created at once; seconds until
   every child exists and every job's status shows them; the operator's requests per job.
2. baseline: the same number of objects created by a plain client, in the same run.
3. idle: ``--idle-seconds`` with ``--resync-period 10``: the operator's writes and reads
   (target 0: everything comes from its caches) and the reconciles the resyncs caused.
4. memory: ``--unrelated-pods`` pods without dgl labels in another namespace (never cached),
   then as many labelled like job children but owned by no DGLJob (cached); operator RSS
   before and after each (target <= 200 MB with the jobs and those pods in its cache).

    python bench/controller_bench.py [--jobs 100] [--workers-per-job 4] [--idle-seconds 120]
                                     [--unrelated-pods 10000]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import copy
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import yaml  # noqa: E402
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

from controller.api import DGLJOBS  # noqa: E402
from informers.factory import SharedInformerFactory  # noqa: E402
from informers.shared import EventHandler  # noqa: E402
from kubeclient import (  # noqa: E402  # noqa: E402
    CONFIGMAPS,
    EVENTS,
    NAMESPACES,
    PODS,
    ROLEBINDINGS,
    ROLES,
    SERVICEACCOUNTS,
    SERVICES,
    AlreadyExists,
    KubeError,
    NotFound,
    Obj,
    Resource,
    RestClient,
)
from localcluster.cluster import K8S_VERSION, ControlPlane, start  # noqa: E402
from localcluster.operator_process import OperatorProcess  # noqa: E402

CRD_PATH = REPO / "charts" / "dgl-operator" / "crds" / "qihoo.net_dgljobs.yaml"
SEED_PATH = REPO / "tests" / "support" / "fixtures" / "seed_dgljob.yaml"
CRDS = Resource(
    "apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", False
)
JOBS_NS, RAW_NS, UNRELATED_NS = "bench-jobs", "bench-raw", "bench-unrelated"
RESYNC_PERIOD = 10.0
RSS_TARGET_MB = 200.0
WRITE_VERBS = ("create", "update", "patch", "delete")
READ_VERBS = ("get", "list")
CHILD_RESOURCES = (CONFIGMAPS, SERVICEACCOUNTS, ROLES, ROLEBINDINGS, SERVICES, PODS)


def say(msg: str = "") -> None:
    print(f"controller_bench: {msg}", flush=True)


# -- the operator's own metrics ---------------------------------------------------------------


@dataclass
class Snapshot:
    """The operator's counters at one moment (or the difference of two)."""

    requests: Counter[tuple[str, str, str]] = field(default_factory=Counter)
    reconciles: Counter[str] = field(default_factory=Counter)
    depth: float = 0.0

    def __sub__(self, other: Snapshot) -> Snapshot:
        req: Counter[tuple[str, str, str]] = Counter(self.requests)
        req.subtract(other.requests)
        rec: Counter[str] = Counter(self.reconciles)
        rec.subtract(other.reconciles)
        return Snapshot(+req, +rec, self.depth)

    def total(self, verbs: Iterable[str] | None = None, *, ok: bool | None = None) -> int:
        wanted = set(verbs) if verbs is not None else None
        n = 0.0
        for (verb, _res, code), v in self.requests.items():
            if wanted is not None and verb not in wanted:
                continue
            if ok is not None and (code.startswith("2") != ok):
                continue
            n += v
        return int(n)

    def by(self, verb: str, resource: str) -> int:
        return int(
            sum(v for (vb, r, _c), v in self.requests.items() if vb == verb and r == resource)
        )

    def errors(self) -> Counter[tuple[str, str, str]]:
        return Counter({k: v for k, v in self.requests.items() if not k[2].startswith("2")})

    def reconcile_count(self) -> int:
        return int(sum(self.reconciles.values()))


class Operator(OperatorProcess):
    """The operator process with the figures this benchmark reads from the outside."""

    def __init__(self, kubeconfig: Path, log: Path, workers: int) -> None:
        super().__init__(
            kubeconfig, log, workers=workers, resync_period=RESYNC_PERIOD, metrics=True
        )

    def snapshot(self) -> Snapshot:
        snap = Snapshot()
        for family in text_string_to_metric_families(self.metrics()):
            for s in family.samples:
                if s.name == "rest_client_requests_total":
                    key = (s.labels["verb"], s.labels["resource"], s.labels["code"])
                    snap.requests[key] += int(s.value)
                elif s.name == "controller_runtime_reconcile_total":
                    snap.reconciles[s.labels["result"]] += int(s.value)
                elif s.name == "workqueue_depth" and s.labels.get("name") == "dgljob":
                    snap.depth = s.value
        return snap

    def memory_mb(self) -> tuple[float, float]:
        """(VmRSS, VmHWM) in MB."""
        assert self.proc is not None
        values = {}
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            key, _, rest = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                values[key] = int(rest.split()[0]) / 1024
        return values["VmRSS"], values["VmHWM"]

    def wait_quiet(self, quiet: float = 3.0, timeout: float = 120.0) -> tuple[Snapshot, bool]:
        """Until no request for ``quiet`` seconds and an empty queue (or ``timeout``)."""
        deadline = time.monotonic() + timeout
        last = self.snapshot()
        since = time.monotonic()
        while time.monotonic() < deadline:
            time.sleep(0.5)
            snap = self.snapshot()
            if snap.requests != last.requests or snap.depth > 0:
                last, since = snap, time.monotonic()
            elif time.monotonic() - since >= quiet:
                return snap, True
        return last, False


# -- cluster setup ----------------------------------------------------------------------------


def wait_for(pred: Callable[[], Any], timeout: float, interval: float = 0.1) -> bool:
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            return False
        time.sleep(interval)
    return True


def install_crd(api: RestClient) -> None:
    crd = yaml.safe_load(CRD_PATH.read_text())
    with contextlib.suppress(AlreadyExists):
        api.create(CRDS, None, crd)

    def established() -> bool:
        obj = api.get(CRDS, None, crd["metadata"]["name"])
        return any(
            c["type"] == "Established" and c["status"] == "True"
            for c in (obj.get("status") or {}).get("conditions") or []
        )

    if not wait_for(established, 30):
        raise RuntimeError("the DGLJob CRD was not established within 30s")


def make_namespace(api: RestClient, name: str) -> None:
    api.create(
        NAMESPACES, None, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    )

    def has_default_sa() -> bool:
        try:
            api.get(SERVICEACCOUNTS, name, "default")
        except NotFound:
            return False
        return True

    if not wait_for(has_default_sa, 15, 0.2):
        # The controller-manager normally does this within a second; admission only needs it.
        with contextlib.suppress(AlreadyExists):
            api.create(
                SERVICEACCOUNTS,
                name,
                {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}},
            )


def warm_up(api: RestClient) -> float:
    """The API server's first write of a fresh CRD's objects is slow (about 2 s); a dry-run
    create pays it before the burst's clock starts, and writes nothing."""
    seed = yaml.safe_load(SEED_PATH.read_text())
    started = time.monotonic()
    api.create(DGLJOBS, JOBS_NS, job_body(seed, "warm-up", 1), dry_run=True)
    return time.monotonic() - started


def run_pool(fn: Callable[[Any], Any], items: Iterable[Any], threads: int) -> list[BaseException]:
    """``fn`` over ``items`` with ``threads`` workers; returns the errors. Ctrl-C cancels."""
    pool = concurrent.futures.ThreadPoolExecutor(threads)
    try:
        futures = [pool.submit(fn, item) for item in items]
        errors = [e for f in futures if (e := f.exception()) is not None]
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown()
    return errors


# -- burst ------------------------------------------------------------------------------------


def job_body(seed: Obj, name: str, workers: int) -> Obj:
    raw = copy.deepcopy(seed)
    raw["metadata"] = {"name": name, "namespace": JOBS_NS}
    raw["spec"]["dglReplicaSpecs"]["Worker"]["replicas"] = workers
    return raw


def expected_children(job: str, workers: int) -> set[tuple[str, str]]:
    """Everything created before any pod runs (the launcher waits for running workers)."""
    out = {("configmaps", f"{job}-config"), ("pods", f"{job}-partitioner")}
    for plural in ("serviceaccounts", "roles", "rolebindings"):
        out |= {(plural, f"{job}-launcher"), (plural, f"{job}-partitioner")}
    for i in range(workers):
        out |= {("services", f"{job}-worker-{i}"), ("pods", f"{job}-worker-{i}")}
    return out


def status_shows_children(obj: Obj, workers: int) -> bool:
    status = obj.get("status") or {}
    worker = (status.get("replicaStatuses") or {}).get("Worker") or {}
    created = any(
        c.get("type") == "Created" and c.get("status") == "True"
        for c in status.get("conditions") or []
    )
    return created and worker.get("ready") == f"0/{workers}" and worker.get("active") == workers


class Watcher:
    """The bench's own informers on the jobs' namespace: when each child / status first shows."""

    def __init__(self, api: RestClient, workers: int) -> None:
        self.workers = workers
        self.first_seen: dict[tuple[str, str], float] = {}
        self.status_at: dict[str, float] = {}
        self._lock = threading.Lock()
        self.stop_event = threading.Event()
        self.factory = SharedInformerFactory(api, namespace=JOBS_NS)
        for res in CHILD_RESOURCES:
            self.factory.informer_for(res).add_event_handler(self._child_handler(res.plural))
        self.factory.informer_for(DGLJOBS).add_event_handler(
            EventHandler(on_add=self._job, on_update=lambda _old, new: self._job(new))
        )

    def _child_handler(self, plural: str) -> EventHandler:
        def on_add(obj: Obj) -> None:
            key = (plural, obj["metadata"]["name"])
            now = time.monotonic()
            with self._lock:
                self.first_seen.setdefault(key, now)

        return EventHandler(on_add=on_add)

    def _job(self, obj: Obj) -> None:
        if status_shows_children(obj, self.workers):
            now = time.monotonic()
            with self._lock:
                self.status_at.setdefault(obj["metadata"]["name"], now)

    def __enter__(self) -> Watcher:
        self.factory.start(self.stop_event)
        if not self.factory.wait_for_cache_sync(self.stop_event, timeout=30):
            raise RuntimeError("the bench's own informers did not sync")
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop_event.set()
        self.factory.join(5)

    def progress(self, want: set[tuple[str, str]], jobs: list[str]) -> tuple[int, int]:
        with self._lock:
            return len(want - self.first_seen.keys()), len(set(jobs) - self.status_at.keys())

    def last(self, want: set[tuple[str, str]], jobs: list[str]) -> tuple[float, float]:
        """When the last of ``want`` appeared, and the last of ``jobs`` showed it (0: never)."""
        with self._lock:
            children = [self.first_seen.get(k, 0.0) for k in want]
            status = [self.status_at.get(n, 0.0) for n in jobs]
        return max(children, default=0.0), max(status, default=0.0)


@dataclass
class Burst:
    jobs: int
    workers: int
    create_seconds: float = 0.0
    children_seconds: float | None = None
    status_seconds: float | None = None
    quiet_seconds: float | None = None
    missing_children: int = 0
    missing_status: int = 0
    delta: Snapshot = field(default_factory=Snapshot)
    events_in_namespace: int = 0

    @property
    def complete(self) -> bool:
        return self.children_seconds is not None and self.status_seconds is not None


def burst(api: RestClient, op: Operator, jobs: int, workers: int, timeout: float) -> Burst:
    seed = yaml.safe_load(SEED_PATH.read_text())
    names = [f"bench-{i:04d}" for i in range(jobs)]
    want = set().union(*(expected_children(n, workers) for n in names))
    out = Burst(jobs, workers)
    with Watcher(api, workers) as watcher:
        before = op.snapshot()
        t0 = time.monotonic()
        errors = run_pool(
            lambda n: api.create(DGLJOBS, JOBS_NS, job_body(seed, n, workers)), names, 8
        )
        out.create_seconds = time.monotonic() - t0
        if errors:
            raise RuntimeError(f"{len(errors)} DGLJob creates failed, first: {errors[0]}")
        done = wait_for(lambda: watcher.progress(want, names) == (0, 0), timeout, 0.1)
        out.missing_children, out.missing_status = watcher.progress(want, names)
        last_child, last_status = watcher.last(want, names)
        if out.missing_children == 0:
            out.children_seconds = last_child - t0
        if out.missing_status == 0:
            out.status_seconds = last_status - t0
        after, quiet = op.wait_quiet()
        if done and quiet:
            out.quiet_seconds = time.monotonic() - t0 - 3.0
        out.delta = after - before
    out.events_in_namespace = len(api.list(EVENTS, JOBS_NS)["items"])
    return out


def report_burst(b: Burst) -> int:
    """Print the burst's figures; returns how many child objects the operator created."""
    jobs, w = b.jobs, b.workers
    d = b.delta
    head = f"burst: {jobs} jobs x {w} workers"
    say(f"{head}: DGLJobs created by the bench in {b.create_seconds:.1f} s (8 threads)")
    if b.complete:
        assert b.children_seconds is not None and b.status_seconds is not None
        quiet = f", operator quiet at {b.quiet_seconds:.1f} s" if b.quiet_seconds else ""
        say(
            f"{head}: all children in {b.children_seconds:.1f} s, "
            f"status in {b.status_seconds:.1f} s{quiet}"
        )
    else:
        say(
            f"{head}: INCOMPLETE: {b.missing_children} children never appeared, "
            f"{b.missing_status} jobs never showed them in status"
        )
    say(
        f"  (children per job: ConfigMap, 2 ServiceAccounts, 2 Roles, 2 RoleBindings, {w} "
        f"Services, {w} worker pods, partitioner pod = {8 + 2 * w}; status: Created condition and "
        f'replicaStatuses.Worker active={w}, ready="0/{w}")'
    )
    total, writes = d.total(), d.total(WRITE_VERBS)
    event_writes = d.by("create", "events") + d.by("patch", "events")
    status_writes = d.by("update", "dgljobs.qihoo.net")
    children = sum(
        int(v) for (verb, res, code), v in d.requests.items()
        if verb == "create" and res != "events" and code.startswith("2")
    )  # fmt: skip
    say(
        f"burst: requests per job: {total / jobs:.1f} (writes {writes / jobs:.1f}: "
        f"{children / jobs:.1f} child creates, {status_writes / jobs:.1f} status updates, "
        f"{event_writes / jobs:.1f} events; reads {d.total(READ_VERBS) / jobs:.1f}, "
        f"watches {d.total(['watch']) / jobs:.2f})"
    )
    say(
        f"burst: writes per job without events: {(writes - event_writes) / jobs:.1f} "
        f"(the children themselves are {8 + 2 * w} creates per job)"
    )
    by: Counter[tuple[str, str]] = Counter()
    for (verb, res, _code), v in d.requests.items():
        by[(verb, res)] += v
    say("burst: requests by verb+resource (total, per job):")
    for (verb, res), v in sorted(by.items(), key=lambda kv: (-kv[1], kv[0])):
        say(f"  {verb:<7} {res:<40} {int(v):>7,}  {v / jobs:6.2f}")
    errs = d.errors()
    detail = ", ".join(f"{v} {k[0]} {k[1]} -> {k[2]}" for k, v in sorted(errs.items()))
    say(
        f"burst: failed requests (HTTP >= 400 or no answer): {sum(errs.values()):.0f}"
        + (f" ({detail})" if detail else "")
    )
    say(
        f"burst: reconciles {d.reconcile_count():,} ({d.reconcile_count() / jobs:.1f} per job; "
        + ", ".join(f"{k} {int(v)}" for k, v in sorted(d.reconciles.items()))
        + ")"
    )
    expected_events = 2 * w + 2
    say(
        f"burst: Events in {JOBS_NS}: {b.events_in_namespace:,} = "
        f"{b.events_in_namespace / jobs:.1f} per job (expected {expected_events}: DGLJobCreated "
        f"+ SuccessfulCreatePod x{w + 1} + SuccessfulCreateService x{w})"
    )
    missing = expected_events * jobs - b.events_in_namespace
    failed = int(sum(v for k, v in errs.items() if k[1] == "events"))
    if missing > 0 and failed == 0:
        say(
            f"burst: {missing:,} Events were never written and no event write failed: the "
            "operator's EventRecorder drops events silently when its queue (1000) is full"
        )
    elif missing > 0:
        say(f"burst: {missing:,} Events missing; {failed:,} event writes failed")
    return children


# -- baseline ---------------------------------------------------------------------------------


def raw_create_rate(kubeconfig: Path, count: int, threads: int) -> tuple[float, int]:
    """ConfigMaps/s for ``count`` creates by a plain client with ``threads`` threads."""
    api = RestClient.from_config(str(kubeconfig), pool_size=threads + 4, user_agent="bench-raw")

    def create(i: int) -> None:
        api.create(CONFIGMAPS, RAW_NS, {
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": f"raw-{i:06d}", "labels": {"app": "bench-raw"}},
            "data": {"hostfile": "", "partfile": "", "leadfile": ""},
        })  # fmt: skip

    started = time.monotonic()
    errors = run_pool(create, range(count), threads)
    return count / (time.monotonic() - started), len(errors)


# -- memory -----------------------------------------------------------------------------------


def create_unrelated_pods(
    api: RestClient, count: int, threads: int, *, prefix: str, labels: dict[str, str]
) -> tuple[float, int]:
    def create(i: int) -> None:
        api.create(PODS, UNRELATED_NS, {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"{prefix}-{i:06d}", "labels": labels},
            "spec": {"containers": [{"name": "main", "image": "busybox:1.36",
                                     "command": ["sleep", "infinity"]}]},
        })  # fmt: skip

    started = time.monotonic()
    errors = run_pool(create, range(count), threads)
    return time.monotonic() - started, len(errors)


# -- main -------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--jobs", type=int, default=100)
    p.add_argument("--workers-per-job", type=int, default=4)
    p.add_argument("--idle-seconds", type=float, default=120.0)
    p.add_argument("--unrelated-pods", type=int, default=10_000)
    p.add_argument("--operator-workers", type=int, default=4, help="the operator's --workers")
    p.add_argument("--raw-threads", type=int, default=0,
                   help="baseline client threads (default: --operator-workers)")  # fmt: skip
    p.add_argument("--burst-timeout", type=float, default=300.0)
    a = p.parse_args(argv)
    raw_threads = a.raw_threads or a.operator_workers

    def on_term(signum: int, _frame: Any) -> None:
        raise KeyboardInterrupt(signal.Signals(signum).name)

    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, on_term)
    workdir = Path(tempfile.mkdtemp(prefix="dgl-controller-bench-"))
    cp: ControlPlane | None = None
    op: Operator | None = None
    results: dict[str, tuple[bool, str]] = {}
    try:
        say(
            f"python {sys.version.split()[0]}, kube-apiserver {K8S_VERSION}, "
            f"{os.cpu_count()} CPUs; work dir {workdir}"
        )
        started = time.monotonic()
        cp = start(workdir / "cluster")
        api = RestClient.from_config(str(cp.kubeconfig), pool_size=32, user_agent="bench")
        install_crd(api)  # before the operator starts, or its DGLJob informer backs off
        for ns in (JOBS_NS, RAW_NS, UNRELATED_NS):
            make_namespace(api, ns)
        warm = warm_up(api)
        say(
            f"control plane up, CRD installed, namespaces ready in "
            f"{time.monotonic() - started:.1f} s; first DGLJob write (a dry run) took {warm:.1f} s "
            "(API server warm-up, kept out of the burst)"
        )
        op = Operator(cp.kubeconfig, workdir / "operator.log", a.operator_workers)
        ready_in = op.start().wait_ready()
        assert op.proc is not None
        rss, _ = op.memory_mb()
        say(
            f"operator: subprocess pid {op.proc.pid}, --workers {a.operator_workers} "
            f"--resync-period {RESYNC_PERIOD:g}, ready in {ready_in:.1f} s, RSS {rss:.1f} MB"
        )

        # 1. burst
        b = burst(api, op, a.jobs, a.workers_per_job, a.burst_timeout)
        children = report_burst(b)
        if b.complete:
            text = f"all children + status for {a.jobs}/{a.jobs} jobs ({b.status_seconds:.1f} s)"
        else:
            text = (
                f"{b.missing_children} children missing, {b.missing_status}/{a.jobs} jobs "
                f"without status after {a.burst_timeout:g} s"
            )
        results["burst complete"] = (b.complete, text)

        # 2. baseline
        if children:
            rate, errors = raw_create_rate(cp.kubeconfig, children, raw_threads)
            say(
                f"baseline: plain client created {children:,} ConfigMaps in {RAW_NS} with "
                f"{raw_threads} threads (= operator workers): {rate:.1f}/s"
                + (f" ({errors} failed)" if errors else "")
            )
            if b.children_seconds:
                op_rate = children / b.children_seconds
                say(
                    f"burst: operator created {children:,} objects in {b.children_seconds:.1f} s = "
                    f"{op_rate:.1f}/s; raw create rate {rate:.1f}/s; operator at "
                    f"{op_rate / rate:.2f}x of raw"
                )
                say(
                    "  (the operator's objects are mostly pods and RBAC, heavier to admit than "
                    "ConfigMaps; its time also includes watch latency and status writes)"
                )

        # 3. idle
        before = op.snapshot()
        time.sleep(a.idle_seconds)
        idle = op.snapshot() - before
        writes, reads = idle.total(WRITE_VERBS), idle.total(READ_VERBS)
        resyncs = int(a.idle_seconds // RESYNC_PERIOD)
        say(
            f"idle: {a.idle_seconds:g} s with --resync-period {RESYNC_PERIOD:g}: "
            f"{idle.reconcile_count():,} reconciles (about {a.jobs * resyncs:,} expected: "
            f"{a.jobs} jobs x {resyncs} resyncs)"
        )
        say(
            f"idle: operator API writes {writes} (target 0), reads {reads} (get/list, target 0), "
            f"watch (re)opens {idle.total(['watch'])}"
        )
        for (verb, res, code), v in sorted(idle.requests.items()):
            say(f"  {verb} {res} -> {code}: {int(v)}")
        results["idle writes"] = (writes == 0, f"{writes} writes in {a.idle_seconds:g} s")
        results["idle reads"] = (reads == 0, f"{reads} get/list in {a.idle_seconds:g} s")

        # 4. memory: pods the operator never caches, then pods it must cache
        rss_start, _ = op.memory_mb()
        say(f"memory: operator RSS {rss_start:.1f} MB with the {a.jobs} jobs' children cached")
        steps = (
            ("other", {"app": "unrelated"}, "without the dgl.qihoo.net/job-name label: the "
             "child informers are label-selected, so these never reach the caches"),
            ("stray", {"dgl.qihoo.net/job-name": "none"}, "labelled like a job's children but "
             "owned by no DGLJob: they enter the pod cache (and the handlers ignore them)"),
        )  # fmt: skip
        for prefix, labels, what in steps:
            rss_before, _ = op.memory_mb()
            snap = op.snapshot()
            seconds, errors = create_unrelated_pods(
                api, a.unrelated_pods, 16, prefix=prefix, labels=labels
            )
            made = a.unrelated_pods - errors
            say(
                f"memory: {made:,} pods {what}; created in {seconds:.1f} s "
                f"({made / seconds:.0f}/s, 16 threads)" + (f", {errors} failed" if errors else "")
            )
            time.sleep(5)
            during = op.snapshot() - snap
            rss_after, hwm = op.memory_mb()
            say(
                f"memory: operator RSS {rss_after:.1f} MB ({rss_after - rss_before:+.1f} MB, "
                f"{(rss_after - rss_before) * 1024 / max(made, 1):.2f} kB/pod), peak "
                f"{hwm:.1f} MB; its requests meanwhile: {during.total()} "
                f"(writes {during.total(WRITE_VERBS)}), reconciles {during.reconcile_count()}"
            )
        results["memory"] = (
            rss_after <= RSS_TARGET_MB,
            f"RSS {rss_after:.1f} MB <= {RSS_TARGET_MB:g} MB with the jobs and "
            f"{a.unrelated_pods:,} other pods in its cache",
        )

        say(f"summary ({time.monotonic() - started:.0f} s):")
        for name, (ok, text) in results.items():
            say(f"  {name}: {text}: {'met' if ok else 'NOT met'}")
        return 0
    except KeyboardInterrupt:
        say("interrupted; cleaning up")
        return 130
    except (RuntimeError, KubeError, OSError) as e:
        say(f"failed: {e}")
        if op is not None:
            say(f"operator log tail:\n{op.tail()}")
        return 1
    finally:
        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(signum, signal.SIG_IGN)  # let the cleanup finish
        if op is not None:
            op.stop()
        if cp is not None:
            cp.stop()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
