"""``make demo-large``: a graph shaped like ogbn-products across three nodes, a node lost mid-
training, nothing lost.

    python -m bench.demo_large [--scale 1.0] [--epochs 4] [--lose-after 2] [--node-memory 7Gi]
                               [--report demo-large.html] [--no-baseline] [--keep-cluster]
                               [--kueue]

What it does, on this machine's 3-node Kubernetes (``localcluster``, one CPU and
``--node-memory`` allocatable per node):

1. brings the cluster up (a running one is taken down first: the nodes' memory is sized here),
   installs the operator with Helm, makes the namespace ``demo-large`` and the claim
   ``demo-large`` (ReadWriteMany);
2. applies ``examples/graphsage/dgljob-large.yaml``: each worker's init container generates
   its own chunks of the graph onto the claim (``make_chunked.py --worker i``, layout
   ``PerWorker``; kept there for later attempts), the three workers partition it with
   DistParMETIS (one MPI rank each), once for 3 workers and for 2 (the job is elastic, min 2,
   max 3: KaMinPar partitions each count from one load of the graph, both sets cached on the
   claim), then train GraphSAGE with a checkpoint per epoch on the claim;
3. once ``--lose-after`` epochs are checkpointed, powers off the node of one worker
   (``localcluster`` stop-node: its kubelet, containerd and containers killed): the operator
   sees it lost and the job shrinks to the 2 workers left (a rescale, ``NodeLost``), which
   place their cached partitions and resume from the last checkpoint; once they train, the
   node is powered on again (start-node) and the job grows back to 3 at the next epoch
   boundary, again from the cache. (A rigid job, without ``elasticPolicy``, would restart
   and wait for the node.) The summary gives each rescale's cost (decision -> training
   again) and the partitioner runs after the first attempt (0);
4. runs the same job again without the node loss (``graphsage-large-baseline``: it reuses the
   partitions too, ``sharePartitions``) and compares the accuracies;
5. prints the timeline (every phase of every pod, the node loss, the resume), a table per step
   (time, peak memory per pod against the memory plan, bytes moved) and writes an HTML report
   with the timeline and each pod's memory over time (``--report``).

Memory per pod is sampled from its memory cgroup twice a second (``rss + shmem`` of
``memory.stat``: what the pod's processes hold, DGL's shared-memory graph included, without
the page cache); the plan's figures are dglrun's (``status.memory``). Bytes moved: what the
generators wrote, what the MPI ranks sent each other per step (``distpart-stats``), what the
partition cache and checkpoints hold on the claim, and what each node's pods sent out of it per
step (its bridge's ``rx_bytes``: to the other nodes and the API server).

``--kueue`` (``make demo-large KUEUE=1``) runs Kueue's manager with the cluster (its
waitForPodsReady recovery timeout on) and the operator with ``kueue=true``; the jobs go through
the LocalQueue ``demo-large``. The elastic job's shrink and grow happen inside its one
admission: the summary names its Workloads (one), counts their evictions (0) and lists the
PodsReady conditions the operator wrote on it (``WaitForRecovery`` while it rescales,
``Recovered`` once it trains again).

``--scale`` shrinks the graph (nodes and edges, same degree shape) for a quick look; 1.0 is
products' size. Needs root and ``$DGL_PYTHON`` (``make demo-large`` provides both). The figures
are printed, not asserted.
"""

from __future__ import annotations

import argparse
import contextlib
import glob
import html
import re
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.support.cluster import KUBECONFIG, install
from bench.support.console import sayer
from bench.support.manifests import (
    example_job,
    kueue_queues,
    launcher_args,
    main_container,
    set_flag,
)
from bench.support.measure import CGROUP_ROOT, MiB
from bench.support.progress import epochs_done, trains
from dgl_operator.report.page import svg_memory, svg_timeline
from dgl_operator.report.readings import (
    Bar,
    DglrunLog,
    LogLine,
    Mark,
    PartitionProfile,
    Series,
    profile,
    timestamp,
)
from launcher.report.eta import TRAIN
from localcluster.cluster import ClusterError
from localcluster.kubectl import Kubectl
from localcluster.node import DEFAULT_DIR, node_names, running, start_node, stop_node
from localcluster.node import main as node_main
from podcontract import STATUS_PROGRESS
from podcontract.progress import read as read_progress
from podcontract.quantity import parse_quantity

NS = "demo-large"
QUOTA = {"cpu": "3", "memory": "64Gi"}  # its ClusterQueue's (KUEUE=1)
CLAIM = "demo-large"
QUEUE = "demo-large"  # (--kueue: its ClusterQueue and LocalQueue)
MANIFEST = "dgljob-large.yaml"  # (examples/graphsage/)
NODES = 3
PRODUCTS_NODES = 2_449_029
PRODUCTS_EDGES = 61_859_140  # undirected
GiB = 1 << 30


say = sayer("demo-large")


# -- the job ---------------------------------------------------------------------------------


def job_manifest(
    name: str, scale: float, epochs: int, worker_memory: int, seed: int = 0
) -> dict[str, Any]:
    """examples/graphsage/dgljob-large.yaml with this run's name, graph size, epochs and
    Worker memory (the limit; the request leaves the node room for the launcher)."""
    job = example_job(MANIFEST, name)
    set_flag(launcher_args(job), "--num-epochs", str(epochs))
    init = job["spec"]["dglReplicaSpecs"]["Worker"]["template"]["spec"]["initContainers"][0]
    if scale != 1.0:
        nodes, edges = round(PRODUCTS_NODES * scale), round(PRODUCTS_EDGES * scale)
        init["args"][0] += f" --nodes {nodes} --edges {edges}"
    if seed:
        init["args"][0] += f" --seed {seed}"
    main = main_container(job, "Worker")
    main["resources"]["limits"]["memory"] = f"{worker_memory // MiB}Mi"
    main["resources"]["requests"]["memory"] = f"{(worker_memory - 512 * MiB) // MiB}Mi"
    return job


# -- what is sampled while a job runs ---------------------------------------------------------


def _cgroup_dir(uid: str) -> Path | None:
    for path in glob.glob(str(CGROUP_ROOT / "**" / f"pod{uid}"), recursive=True):
        return Path(path)
    return None


def pod_memory(cgroup: Path) -> int | None:
    """rss + shmem of the pod's cgroup (v1 memory.stat, its whole hierarchy), bytes."""
    try:
        stat = dict(line.split() for line in (cgroup / "memory.stat").read_text().splitlines())
        return int(stat["total_rss"]) + int(stat.get("total_shmem", 0))
    except (OSError, KeyError, ValueError):
        return None


def bridge_bytes(k: int) -> int:
    """Bytes node k's pods sent out of the node (its bridge's receive counter: to other nodes
    and the host; a byte between two nodes is counted once, where it left)."""
    try:
        return int(Path(f"/sys/class/net/dglk{k}/statistics/rx_bytes").read_text())
    except (OSError, ValueError):
        return 0


@dataclass
class Event:
    t: float
    who: str  # a pod, "job", or "node/<name>"
    what: str


@dataclass
class Rescale:
    """One rescale of the elastic job: why, from and to how many workers, when the operator
    decided it and when the new attempt's trainers ran (its cost: the difference)."""

    reason: str
    workers_from: int
    decided: float
    workers_to: int = 0
    training: float | None = None

    @property
    def seconds(self) -> float | None:
        return None if self.training is None else self.training - self.decided

    def describe(self) -> str:
        cost = "-" if self.seconds is None else f"{self.seconds:.0f}s"
        return (
            f"{self.reason}: {self.workers_from} -> {self.workers_to or '?'} workers, "
            f"decision -> training again {cost}"
        )


@dataclass
class Run:
    """One job's record: events, each pod's memory over time, the nodes' traffic."""

    name: str
    started: float
    events: list[Event] = field(default_factory=list)
    memory: dict[str, list[tuple[float, int]]] = field(default_factory=dict)  # pod -> samples
    pod_node: dict[str, str] = field(default_factory=dict)
    traffic: list[tuple[float, list[int]]] = field(default_factory=list)  # (t, bytes per node)
    status: dict[str, Any] = field(default_factory=dict)
    last_seen: dict[str, float] = field(default_factory=dict)  # pod -> when last listed
    # dglrun's memory plan per step, its largest measured peak over every attempt (an attempt
    # that reuses the partitions measures no partition step)
    plan: dict[str, dict[str, Any]] = field(default_factory=dict)
    generated: dict[str, str] = field(default_factory=dict)  # pod -> its generator's summary
    lost: str = ""
    log: str = ""
    # every rescale: (reason, workers from, to, when decided, when training again)
    rescales: list[Rescale] = field(default_factory=list)
    # every attempt's partition phase as dglrun reported it: True (placed from the cache) or
    # False (partitioned), in attempt order
    partitioned: list[bool] = field(default_factory=list)
    # --kueue: the job's Workloads by name, and each one's conditions as last seen
    workloads: dict[str, dict[str, str]] = field(default_factory=dict)
    evictions: int = 0

    def now(self) -> float:
        return time.monotonic() - self.started

    def add(self, who: str, what: str, t: float | None = None) -> None:
        at = self.now() if t is None else t
        self.events.append(Event(at, who, what))
        say(f"  {at:7.1f}s  {who:<34} {what}")


class Observer(threading.Thread):
    """Polls the job and its pods every 2 s, samples every pod's memory twice a second, and
    records what changed as events of ``run``."""

    def __init__(self, kube: Kubectl, run: Run, ns: str = NS, kueue: bool = False) -> None:
        super().__init__(daemon=True)
        self.kube, self.rec, self.ns, self.kueue = kube, run, ns, kueue
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self._seen: dict[str, str] = {}
        self._cgroups: dict[str, Path] = {}  # pod name -> its cgroup (this attempt's uid)
        self._wall0 = time.time() - run.now()  # wall time of run.started

    def _job(self) -> None:
        doc = self.kube.json("-n", self.ns, "get", "dgljob", self.rec.name)
        status = doc.get("status") or {}
        with self.lock:
            self.rec.status = status
            for step, v in (status.get("memory") or {}).items():
                had = self.rec.plan.setdefault(step, {})
                peak = max(had.get("peakMiB") or 0, v.get("peakMiB") or 0)
                had.update(v, **({"peakMiB": peak} if peak else {}))
        for key in ("phase", "progress", "restartCount"):
            value = str(status.get(key, ""))
            if value and self._seen.get(f"job/{key}") != value:
                self._seen[f"job/{key}"] = value
                self.rec.add("job", f"{key} {value}")
        self._elastic(status)

    def _workloads(self) -> None:
        """The job's Kueue Workloads: each change of their Admitted, PodsReady and Evicted
        conditions as an event, evictions counted."""
        doc = self.kube.json(
            "-n", self.ns, "get", "workloads.kueue.x-k8s.io", "-l",
            f"dgl.qihoo.net/job-name={self.rec.name}",
        )  # fmt: skip
        for wl in doc.get("items") or []:
            name = wl["metadata"]["name"]
            seen = self.rec.workloads.setdefault(name, {})
            if not seen:
                self.rec.add(f"workload/{name}", "created")
            for cond in (wl.get("status") or {}).get("conditions") or []:
                kind = cond.get("type", "")
                if kind not in ("Admitted", "PodsReady", "Evicted"):
                    continue
                value = f"{cond.get('status')} {cond.get('reason', '')}"
                if seen.get(kind) == value:
                    continue
                seen[kind] = value
                if kind == "Evicted" and cond.get("status") == "True":
                    self.rec.evictions += 1
                self.rec.add(f"workload/{name}", f"{kind} {value}")

    def _elastic(self, status: dict[str, Any]) -> None:
        """Rescales (decided, then training again) and each attempt's partition work."""
        el = status.get("elastic") or {}
        last = el.get("lastRescale") or {}
        count = int(el.get("rescales") or 0)
        with self.lock:
            if count > len(self.rec.rescales) and last:
                r = Rescale(str(last.get("reason")), int(last.get("from") or 0), self.rec.now())
                self.rec.rescales.append(r)
                self.rec.add("job", f"rescale decided: {r.reason}, from {r.workers_from} workers")
            open_ = self.rec.rescales[-1] if self.rec.rescales else None
            if open_ is not None and open_.training is None and trains(status):
                open_.training, open_.workers_to = self.rec.now(), int(el.get("workers") or 0)
                self.rec.add("job", f"training again: {open_.describe()}")
        parts = status.get("partitions") or {}
        attempt = int(status.get("restartCount") or 0) + count
        if parts and self._seen.get("partitions") != str(attempt):
            self._seen["partitions"] = str(attempt)
            reused = bool(parts.get("reused"))
            self.rec.partitioned.append(reused)
            what = "placed from the cache (nothing partitioned)" if reused else "partitioned"
            self.rec.add("job", f"attempt {attempt}: partitions {what}")

    def _pods(self) -> None:
        doc = self.kube.json(
            "-n", self.ns, "get", "pods", "-l", f"dgl.qihoo.net/job-name={self.rec.name}"
        )
        for pod in doc.get("items") or []:
            name, uid = pod["metadata"]["name"], pod["metadata"]["uid"]
            node = pod["spec"].get("nodeName") or ""
            key = f"{name}/{uid[:8]}"
            self.rec.last_seen[key] = self.rec.now()
            if node and self.rec.pod_node.get(key) != node:
                self.rec.pod_node[key] = node
                self.rec.add(key, f"on {node}")
            if key not in self._cgroups and node:
                cg = _cgroup_dir(uid)
                if cg is not None:
                    self._cgroups[key] = cg
            st = pod.get("status") or {}
            for kind in ("initContainerStatuses", "containerStatuses"):
                for cs in st.get(kind) or []:
                    for what, info in (cs.get("state") or {}).items():
                        self._container(key, cs["name"], what, info)

    def _container(self, key: str, name: str, what: str, info: dict[str, Any]) -> None:
        """A container's running and terminated states as events at the kubelet's times."""
        if what == "waiting":
            return
        steps = [("running", "running", info.get("startedAt"))]
        if what == "terminated":
            why, code = info.get("reason", ""), info.get("exitCode")
            steps.append(("terminated", f"terminated ({why}, exit {code})", info.get("finishedAt")))
        for state, detail, stamp in steps:
            mark = f"{key}/{name}/{state}"
            if mark in self._seen:
                continue
            self._seen[mark] = "1"
            at = timestamp(stamp)
            self.rec.add(key, f"{name} {detail}", at - self._wall0 if at else None)
            if name == "generate" and state == "terminated":  # its figures, while it exists
                pod = key.split("/")[0]
                log = self.kube.run("-n", self.ns, "logs", pod, "-c", name, check=False)
                self.rec.generated[key] = log.strip().splitlines()[-1] if log.strip() else ""

    def sample(self) -> None:
        t = self.rec.now()
        with self.lock:
            for key, cg in list(self._cgroups.items()):
                used = pod_memory(cg)
                if used is not None:
                    self.rec.memory.setdefault(key, []).append((t, used))
            self.rec.traffic.append((t, [bridge_bytes(k) for k in range(1, NODES + 1)]))

    def run(self) -> None:
        last = 0.0
        while not self.stop.is_set():
            self.sample()
            if time.monotonic() - last >= 2.0:
                last = time.monotonic()
                with contextlib.suppress(RuntimeError, ValueError):
                    self._job()
                    self._pods()
                    if self.kueue:
                        self._workloads()
            self.stop.wait(0.5)


# -- the cluster --------------------------------------------------------------------------------


def cluster_up(node_memory: str, reuse: bool, kueue: bool) -> Kubectl:
    if reuse and running(DEFAULT_DIR) and len(node_names(DEFAULT_DIR)) == NODES:
        say("reusing the running 3-node cluster (--reuse-cluster)")
    else:
        if running(DEFAULT_DIR):
            say("taking down the running cluster (the nodes' memory is sized for this demo)")
            node_main(["down"])
        say(f"bringing up {NODES} nodes, 1 CPU and {node_memory} allocatable each")
        argv = ["up", "--nodes", str(NODES), "--node-cpu", "1", "--node-memory", node_memory]
        if node_main([*argv, *(["--kueue"] if kueue else [])]):
            raise SystemExit("demo-large: the cluster did not come up (see above)")
    install({"kueue": "true"} if kueue else None)
    kube = Kubectl(KUBECONFIG)
    kube.run("create", "namespace", NS, check=False)
    if kueue:
        queues(kube)
    claim = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": CLAIM, "namespace": NS},
        "spec": {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "40Gi"}}},
    }
    kube.apply(claim)
    return kube


def queues(kube: Kubectl) -> None:
    """A ClusterQueue ``demo-large`` whose quota fits one job (the cluster's 3 CPUs and its
    memory) and the LocalQueue ``demo-large`` in NS."""
    for obj in kueue_queues(NS, QUEUE, QUEUE, QUOTA):
        kube.apply(obj)


def claim_dir(kube: Kubectl) -> Path | None:
    """The claim's folder on this machine (its hostPath PV), once bound."""
    with contextlib.suppress(RuntimeError, ValueError):
        pv = kube.json("-n", NS, "get", "pvc", CLAIM).get("spec", {}).get("volumeName")
        if pv:
            path = kube.json("get", "pv", pv)["spec"]["hostPath"]["path"]
            return Path(path)
    return None


def du(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.exists() else 0


# -- one job ----------------------------------------------------------------------------------


def node_of(run: Run, pod_prefix: str) -> str:
    """The node of the newest pod whose name starts with ``pod_prefix``."""
    keys = [k for k in run.pod_node if k.startswith(pod_prefix + "/")]
    return run.pod_node[keys[-1]] if keys else ""


def run_job(
    kube: Kubectl, job: dict[str, Any], lose_after: int | None, timeout: float, kueue: bool
) -> Run:
    name = job["metadata"]["name"]
    if kueue:
        job["metadata"].setdefault("labels", {})["kueue.x-k8s.io/queue-name"] = QUEUE
    kube.run("-n", NS, "delete", "dgljob", name, "--ignore-not-found", "--wait=true")
    selector = f"dgl.qihoo.net/job-name={name}"
    for _ in range(120):  # an earlier run's pods go with it (the garbage collector)
        if not kube.json("-n", NS, "get", "pods", "-l", selector).get("items"):
            break
        time.sleep(1)
    run = Run(name, time.monotonic())
    obs = Observer(kube, run, kueue=kueue)
    kube.apply(job)
    run.add("job", "applied")
    obs.start()
    victim = ""
    try:
        while run.now() < timeout:
            time.sleep(1)
            with obs.lock:
                status = dict(run.status)
            phase = status.get("phase")
            if phase in ("Completed", "Failed"):
                break
            if lose_after is not None and not victim and epochs_done(status) >= lose_after:
                victim = lose_a_node(kube, run)
            if victim and not run.lost and back_without_it(run, status):
                run.lost = victim
                run.add("job", "going on without the node; powering the node on again")
                start_node(DEFAULT_DIR, victim)
                run.add(f"node/{victim}", "powered on again: Ready")
        else:
            raise SystemExit(f"demo-large: {name} did not finish within {timeout:.0f}s")
    finally:
        obs.stop.set()
        obs.join(5)
    run.log = kube.run("-n", NS, "logs", f"{name}-launcher", "-c", "dgl-graphsage", check=False)
    return run


def back_without_it(run: Run, status: dict[str, Any]) -> bool:
    """The job went on without the lost node: an elastic job trains on the workers left (its
    shrink); a rigid one was restarted (it waits for the node)."""
    if status.get("elastic") is None:
        return int(status.get("restartCount") or 0) >= 1
    shrink = run.rescales[-1] if run.rescales else None
    return shrink is not None and shrink.training is not None


def lose_a_node(kube: Kubectl, run: Run) -> str:
    """Power off the node of a worker that holds neither the launcher nor the operator."""
    spared = {node_of(run, f"{run.name}-launcher")}
    op = kube.json("-n", "dgl-system", "get", "pods")
    spared |= {p["spec"].get("nodeName", "") for p in op.get("items") or []}
    for i in (2, 1, 0):
        node = node_of(run, f"{run.name}-worker-{i}")
        if node and node not in spared:
            break
    else:
        node = node_of(run, f"{run.name}-worker-2")
    stop_node(DEFAULT_DIR, node)
    run.add(f"node/{node}", f"powered off after epoch {epochs_done(run.status)} (worker {i})")
    return node


# -- what the runs say ------------------------------------------------------------------------


def kueue_summary(run: Run) -> str:
    """The job's Workloads, their evictions, and the PodsReady reasons written on them in
    order."""
    ready = [
        e.what.removeprefix("PodsReady ")
        for e in run.events
        if e.who.startswith("workload/") and e.what.startswith("PodsReady ")
    ]
    return (
        f"{run.name} under Kueue: Workloads {', '.join(run.workloads) or '-'}; evictions "
        f"{run.evictions}; PodsReady {' -> '.join(ready) or '-'}"
    )


def accuracy(run: Run) -> float | None:
    m = re.search(r"test accuracy ([\d.]+)", run.log)
    return float(m.group(1)) if m else None


def run_logs(claim: Path | None, run: Run) -> str:
    """Every attempt's dglrun log, kept on the claim in the run's folder (``status.results``:
    the launcher pod of a lost attempt is gone), or the last launcher's."""
    results = str(run.status.get("results") or "")
    if claim is not None and ":" in results:
        folder = claim / results.split(":", 1)[1].strip("/")
        files = sorted((folder.parent / "logs").glob("*.log"))
        text = "\n".join(f.read_text(errors="replace") for f in files)
        if text:
            return text
    return run.log


def partition_profile(logs: str) -> PartitionProfile:
    """What the MPI ranks said of the partition in dglrun's log (dglctl report's reading)."""
    return profile([DglrunLog("launcher", [LogLine(0.0, line) for line in logs.splitlines()])])


def job_windows(run: Run) -> list[tuple[str, float, float]]:
    """(what, start, end) of each step the job's progress reported: partition, configure, every
    training epoch, done."""
    events = sorted(run.events, key=lambda e: e.t)
    end = events[-1].t if events else 0.0
    progress = [
        (e.t, e.what[len("progress ") :])
        for e in events
        if e.who == "job" and e.what.startswith("progress ")
    ]
    # a restart or a rescale clears the progress: the wait until the new attempt reports is a
    # step too
    first = progress[0][0] if progress else end
    progress += [
        (e.t, f"new attempt ({e.what[len('phase ') :]})")
        for e in events
        if e.who == "job"
        and e.t > first
        and e.what in ("phase Restarting", "phase Pending", "phase Rescaling")
    ]
    progress.sort()
    out = []
    for (t0, what), (t1, _) in zip(progress, [*progress[1:], (end, "")], strict=True):
        out.append((step_label(what), t0, t1))
    return out


def step_label(progress: str) -> str:
    """A step's name from dglrun's progress text as the timeline recorded it (read by
    podcontract.progress, as a status with that text alone): '5/5 train: epoch 1/3' (one epoch
    done) is 'train epoch 2/3'; once every epoch is done, 'evaluate'; '3/5 dispatch: 10/20 MB'
    is '3/5 dispatch'."""
    d = read_progress({STATUS_PROGRESS: progress}).detail
    if d is None or d.step_name != TRAIN:
        return progress.split(":")[0]
    if d.epochs and d.epochs_done >= d.epochs:
        return "evaluate"
    return f"train epoch {d.epochs_done + 1}" + (f"/{d.epochs}" if d.epochs else "")


def phase_bars(run: Run) -> list[tuple[str, str, float, float]]:
    """(row, what, start, end) for the timeline: one row per pod and attempt (its init
    container's generation, then the job's steps while its main container ran), the job's own
    steps, and the node's outage."""
    events = sorted(run.events, key=lambda e: e.t)
    end = events[-1].t if events else 0.0
    windows = job_windows(run)
    pods = list(dict.fromkeys(e.who for e in events if e.who.startswith(run.name + "-")))
    attempts: dict[str, int] = {}
    bars: list[tuple[str, str, float, float]] = []
    for key in pods:
        name = key.split("/")[0][len(run.name) + 1 :]
        attempts[name] = attempts.get(name, 0) + 1
        row = f"{name} #{attempts[name]} ({run.pod_node.get(key, '?')})"
        times = {e.what.split(" (")[0]: e.t for e in events if e.who == key}
        gone = run.last_seen.get(key, end)
        if "generate running" in times:
            bars.append(
                (row, "generate", times["generate running"], times.get("generate terminated", gone))
            )
        if "dgl-graphsage running" not in times:
            continue
        m0 = times["dgl-graphsage running"]
        m1 = times.get("dgl-graphsage terminated", gone)
        for what, w0, w1 in windows:
            lo, hi = max(m0, w0), min(m1, w1)
            if hi > lo:  # (a pod of the new attempt waits for it: it is starting)
                bars.append((row, "starting" if what.startswith("new attempt") else what, lo, hi))
    bars += [("job", what, t0, t1) for what, t0, t1 in windows]
    off = [e.t for e in events if e.what.startswith("powered off")]
    on = [e.t for e in events if e.what.startswith("powered on")]
    if off:
        bars.append((f"node {run.lost}", "powered off", off[0], on[0] if on else end))
    return bars


def peaks(run: Run) -> dict[str, int]:
    return {pod: max(v for _, v in s) for pod, s in run.memory.items() if s}


def traffic_between(run: Run, t0: float, t1: float) -> int:
    inside = [v for t, v in run.traffic if t0 <= t <= t1]
    if len(inside) < 2:
        return 0
    return sum(b - a for a, b in zip(inside[0], inside[-1], strict=True))


# -- the report -------------------------------------------------------------------------------


def timeline_svg(run: Run) -> str:
    """The run's timeline, drawn as dglctl report draws a job's (its node's outage and the
    restarts as marks)."""
    bars = [Bar(*b) for b in phase_bars(run)]
    marks = [
        Mark(e.t, f"{e.who} {e.what}")
        for e in run.events
        if e.who.startswith("node/") or "restartCount" in e.what
    ]
    return svg_timeline(bars, marks)


def memory_svg(run: Run, plan: dict[str, float], limit: float) -> str:
    """Each pod's sampled memory (MiB), drawn as dglctl report draws dglrun's samples."""
    series = [Series(pod, [(t, v / MiB) for t, v in s]) for pod, s in run.memory.items()]
    return svg_memory(series, plan, limit)


def write_report(path: Path, runs: list[Run], tables: str, summary: list[str]) -> None:
    main = runs[0]
    mem = main.plan
    plan = {
        f"plan: {k}": float(v.get("estimateMiB") or 0)
        for k, v in mem.items()
        if v.get("estimateMiB")
    }
    limit = max([float(v.get("limitMiB") or 0) for v in mem.values()] or [0.0])
    body = [
        "<!doctype html><html><head><meta charset='utf-8'><title>dgl-operator demo-large</title>",
        "<style>body{font-family:sans-serif;max-width:1040px;margin:2em auto}"
        "pre{background:#f6f6f6;padding:1em;overflow-x:auto}</style></head><body>",
        "<h1>demo-large: a products-scale graph, three nodes, one lost</h1>",
        "<ul>" + "".join(f"<li>{html.escape(s)}</li>" for s in summary) + "</ul>",
    ]
    for run in runs:
        body.append(f"<h2>Timeline: {html.escape(run.name)}</h2>")
        body.append(timeline_svg(run))
    body.append(f"<h2>Memory per pod: {html.escape(main.name)}</h2>")
    body.append(
        "<p>rss + shmem of each pod's memory cgroup, sampled twice a second; dashed: "
        "dglrun's plan (estimated before anything ran) and the Worker's limit.</p>"
    )
    body.append(memory_svg(main, plan, limit))
    body.append("<h2>Figures</h2><pre>" + html.escape(tables) + "</pre>")
    body.append("<h2>Events</h2><pre>")
    for run in runs:
        body.extend(
            html.escape(f"{run.name} {e.t:8.1f}s  {e.who:<34} {e.what}") for e in run.events
        )
    body.append("</pre></body></html>")
    path.write_text("\n".join(body))


def timeline_text(run: Run) -> str:
    """The timeline as text: one line per step of each pod and attempt, the job's own steps
    and the node's outage, in time order."""
    bars = sorted(phase_bars(run), key=lambda b: (b[2], b[0]))
    out = [f"timeline of {run.name} (seconds from applied):"]
    out += [
        f"  {t0:7.1f} {t1:7.1f} {t1 - t0:7.1f}s  {row:<30} {what}" for row, what, t0, t1 in bars
    ]
    return "\n".join(out)


def tables(run: Run, logs: str, claim: Path | None, elapsed: dict[str, tuple[float, int]]) -> str:
    out: list[str] = []
    prof = partition_profile(logs)
    if prof.peak:
        out.append(f"DistParMETIS on the 3 workers: edge cut {prof.cut}")
        out.append("| step | time (s) | peak per rank (MiB) | sent to other ranks (MiB) |")
        out.append("| --- | --- | --- | --- |")
        for step, peak in prof.peak.items():
            secs = prof.seconds.get(step)
            ranks = " / ".join(f"{x:.0f}" for x in peak)
            sent = " / ".join(f"{x:.0f}" for x in prof.sent[step])
            out.append(f"| {step} | {'-' if secs is None else f'{secs:.1f}'} | {ranks} | {sent} |")
        if "total" in prof.seconds:
            out.append(f"| total | {prof.seconds['total']:.1f} | | |")
    mem = run.plan
    out.append("")
    out.append("| step (dglrun's plan) | estimate (MiB) | measured peak (MiB) | limit (MiB) |")
    out.append("| --- | --- | --- | --- |")
    ranks_peak = max((max(v) for v in prof.peak.values()), default=None)
    for step, v in mem.items():
        cells = [v.get(k, "-") for k in ("estimateMiB", "peakMiB", "limitMiB")]
        if step == "partition" and cells[1] == "-" and ranks_peak is not None:
            cells[1] = f"{ranks_peak:.0f} (the largest rank's, from its log)"
        out.append(f"| {step} | " + " | ".join(str(c) for c in cells) + " |")
    out.append("")
    out.append("| pod (attempt) | node | peak rss+shmem (MiB) |")
    out.append("| --- | --- | --- |")
    for pod, peak_b in sorted(peaks(run).items()):
        out.append(f"| {pod} | {run.pod_node.get(pod, '')} | {peak_b / MiB:.0f} |")
    out.append("")
    out.append("| where the time went | seconds | sent out of the nodes (MiB) |")
    out.append("| --- | --- | --- |")
    for what, (secs, moved) in elapsed.items():
        out.append(f"| {what} | {secs:.0f} | {moved / MiB:.0f} |")
    if claim is not None:
        out.append("")
        out.append(
            f"on the claim: partitions {du(claim / 'partitions') / MiB:.0f} MiB, "
            f"runs (checkpoints, models, logs) {du(claim / 'runs') / MiB:.0f} MiB"
        )
    if run.generated:
        out.append("")
        out.append("generators (each worker's init container, its own chunks):")
        out.extend(f"  {pod}: {line}" for pod, line in sorted(run.generated.items()))
    return "\n".join(out)


def where_time_went(run: Run) -> dict[str, tuple[float, int]]:
    """Seconds per step of the job (the epochs' training summed), from applied to done, and
    the bytes the nodes' pods sent out of their nodes meanwhile."""
    out: dict[str, tuple[float, int]] = {}
    windows = job_windows(run)
    first = min((t0 for _, t0, _ in windows), default=0.0)
    out["until the first step (pods made, chunks generated, ranks started)"] = (
        first,
        traffic_between(run, 0.0, first),
    )
    for what, t0, t1 in windows:
        key = "train (every epoch)" if what.startswith("train") else what
        secs, moved = out.get(key, (0.0, 0))
        out[key] = (secs + t1 - t0, moved + traffic_between(run, t0, t1))
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--scale", type=float, default=1.0, help="graph size against products'")
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--lose-after", type=int, default=2, help="epochs checkpointed before the loss")
    p.add_argument("--node-memory", default="7Gi", help="allocatable memory of each node")
    p.add_argument("--report", type=Path, default=Path("demo-large.html"))
    p.add_argument("--no-baseline", action="store_true", help="skip the run without node loss")
    p.add_argument("--keep-cluster", action="store_true", help="leave the cluster running")
    p.add_argument(
        "--reuse-cluster", action="store_true", help="use a running 3-node cluster as it is"
    )
    p.add_argument("--timeout", type=float, default=3600)
    p.add_argument("--kueue", action="store_true", help="run the jobs under Kueue")
    a = p.parse_args(argv)
    if not 0 < a.scale <= 1.0:
        p.error("--scale: above 0, at most 1")
    if not 1 <= a.lose_after < a.epochs:
        p.error("--lose-after: at least 1 and fewer than --epochs")
    try:
        node_bytes = int(parse_quantity(a.node_memory))
    except ValueError as e:
        p.error(f"--node-memory: {e}")
    worker_memory = node_bytes - 256 * MiB
    started = time.monotonic()
    try:
        kube = cluster_up(a.node_memory, a.reuse_cluster, a.kueue)
    except ClusterError as e:
        say(f"the cluster did not come up: {e}")
        return 1
    up = time.monotonic() - started
    claim = None
    try:
        say(f"cluster and operator ready in {up:.0f}s; the job (graph scale {a.scale})")
        lost = run_job(
            kube,
            job_manifest("graphsage-large", a.scale, a.epochs, worker_memory),
            a.lose_after,
            a.timeout,
            a.kueue,
        )
        claim = claim_dir(kube)
        runs = [lost]
        if not a.no_baseline:
            say("the same job without a node loss (it reuses the cached partitions)")
            runs.append(
                run_job(
                    kube,
                    job_manifest("graphsage-large-baseline", a.scale, a.epochs, worker_memory),
                    None,
                    a.timeout,
                    a.kueue,
                )
            )
        logs = run_logs(claim, lost)
        elapsed = {"cluster up + operator": (up, 0), **where_time_went(lost)}
        figures = "\n\n".join(
            [timeline_text(r) for r in runs] + [tables(lost, logs, claim, elapsed)]
        )
        accs = [accuracy(r) for r in runs]
        summary = [
            f"{r.name}: {r.status.get('phase')} in {r.events[-1].t:.0f}s, restarts "
            f"{r.status.get('restartCount', 0)}, rescales "
            f"{(r.status.get('elastic') or {}).get('rescales', 0)}, test accuracy {acc}, "
            "partitions "
            f"{'reused' if (r.status.get('partitions') or {}).get('reused') else 'computed'}, "
            f"resumed from {(r.status.get('resume') or {}).get('checkpoint', '-')}"
            for r, acc in zip(runs, accs, strict=True)
        ]
        for r in lost.rescales:
            summary.append(f"{lost.name}: rescale {r.describe()}")
        redone = lost.partitioned[1:].count(False)
        summary.append(
            f"{lost.name}: {len(lost.partitioned)} attempts; partitioner runs after the first "
            f"attempt: {redone}"
        )
        if len(accs) == 2 and accs[0] is not None and accs[1] is not None:
            diff = accs[0] - accs[1]
            within = "within" if abs(diff) <= 0.01 else "NOT within"
            summary.append(
                f"accuracy with the node loss minus without: {diff:+.4f} ({within} 1 point)"
            )
        if a.kueue:
            summary.append(kueue_summary(lost))
        summary.append(f"whole demo: {time.monotonic() - started:.0f}s")
        print(figures)
        for line in summary:
            say(line)
        write_report(a.report, runs, figures, summary)
        say(f"report: {a.report.resolve()}")
        ok = all(r.status.get("phase") == "Completed" for r in runs)
        return 0 if ok else 1
    finally:
        if not a.keep_cluster:
            node_main(["down"])


if __name__ == "__main__":
    sys.exit(main())
