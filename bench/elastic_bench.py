"""ElasticDL's three experiments, on this machine's 3-node cluster (issue 29).

The room is an extended resource the bench gives each node (``dgl.bench/slot``), which every
pod of the Worker template (each worker, and the partitioner) asks one of: the cluster's size
is the bench's to set, whatever the machine's cores. The job is the GraphSAGE example with
spec.storage (checkpoints), 3 workers at most.

1. **squeeze**: 6 slots (2 per node), each a quarter core (a CPU limit); two jobs that each
   want 4 at their start (the partitioner and 3 workers), submitted 30 s apart. Rigid (gang
   scheduling, Coscheduling) and elastic (minReplicas 1, maxReplicas 3). Printed: each job's
   wait to training, its run time, the makespan, the mean share of the slots allocated over
   it, each job's accuracy.
2. **preemption**: 4 slots; an elastic job (max 3, 3x the epochs) runs while a
   higher-priority Deployment of 1-slot replicas scales 0 -> 2 -> 0. Printed: the job's
   worker count over time, its rescales and restarts, its accuracy.
3. **convergence**: the same elastic job (2x the epochs) with 0, 1 and 3 rescales (the room
   changed at epoch boundaries' pace): accuracy of each.
4. **rescale** (issue 43): examples/graphsage/dgljob-elastic-distparmetis.yaml (DistParMETIS,
   chunks PerWorker, min 2, max 3), 1 slot per node: a node powered off after epoch 2 (the job
   shrinks to 2), then on again (it grows to 3); the same job rigid, a node powered off after
   epoch 2 and on again once the restart is decided. Printed side by side: decision -> training
   again for the shrink, the grow and the rigid restart, their ratio to the restart, and the
   partition work each attempt did.

    python -m bench.elastic_bench [--experiments squeeze,preemption,convergence,rescale]
                                  [--epochs 10]

Needs root and no cluster already running from ~/.cache/dgl-operator/node (``make
cluster-down`` first). Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from bench.support.cluster import KUBECONFIG, install
from bench.support.console import sayer
from bench.support.figures import record
from bench.support.manifests import example_job, launcher_args, main_container, set_flag
from bench.support.progress import epochs_done, trains
from localcluster import volumes
from localcluster.kubectl import Kubectl
from localcluster.node import DEFAULT_DIR, IMAGE_TAG, running, start_node, stop_node
from localcluster.node import main as node_main

SLOT = "dgl.bench/slot"
HIGH = "bench-high"
KUBE = Kubectl(KUBECONFIG)
WORKERS = 3
TRAINER_BATCH = 32  # rigid: each of the 3 trainers; elastic: the global batch is 3x it
# squeeze: each slot is also a quarter core (6 slots: 1.5 of the machine's 2 cores), so that
# two jobs side by side do not slow each other down: room the rigid job-b leaves idle is
# real capacity, as on ElasticDL's cluster, not cores both jobs would share anyway
SLOT_CPU = "250m"

say = sayer("elastic_bench")


def nodes() -> list[str]:
    return sorted(n["metadata"]["name"] for n in KUBE.json("get", "nodes")["items"])


def set_slots(per_node: list[int]) -> None:
    """Each node's slots (in nodes() order)."""
    path = SLOT.replace("/", "~1")
    for name, count in zip(nodes(), per_node, strict=True):
        ops = [{"op": "add", "path": f"/status/{f}/{path}", "value": str(count)}
               for f in ("capacity", "allocatable")]  # fmt: skip
        KUBE.run("patch", "node", name, "--subresource=status", "--type=json",
                 "-p", json.dumps(ops))  # fmt: skip


def job(ns: str, name: str, epochs: int, elastic: bool, cpu: str | None = None) -> dict[str, Any]:
    """The GraphSAGE storage example, 3 workers of one slot each (``cpu``: also a CPU limit
    per Worker-template pod, so that a slot is a share of this machine's cores)."""
    doc = example_job("dgljob-storage.yaml", name, ns)
    spec = doc["spec"]
    spec["runPolicy"] = {"backoffLimit": 2}
    args = launcher_args(doc)
    set_flag(args, "--num-epochs", str(epochs))
    set_flag(args, "--num-partitions", str(WORKERS))
    batch = TRAINER_BATCH * WORKERS if elastic else TRAINER_BATCH
    set_flag(args, "--batch-size", str(batch))
    worker = spec["dglReplicaSpecs"]["Worker"]
    worker["replicas"] = WORKERS
    want = {SLOT: "1", **({"cpu": cpu} if cpu else {})}
    main_container(doc, "Worker")["resources"] = {"requests": dict(want), "limits": dict(want)}
    worker["template"]["spec"]["terminationGracePeriodSeconds"] = 2
    if elastic:
        spec["elasticPolicy"] = {"minReplicas": 1, "maxReplicas": WORKERS, "settleSeconds": 10,
                                 "cooldownSeconds": 10}  # fmt: skip
    return doc


@dataclass
class Sample:
    t: float
    slots: int  # allocated to Running pods
    jobs: dict[str, dict[str, Any]]  # name -> status


@dataclass
class Watch:
    """Samples of the cluster every 2 s, from a thread."""

    namespaces: list[str]
    samples: list[Sample] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)
    t0: float = field(default_factory=time.monotonic)

    def start(self) -> Watch:
        threading.Thread(target=self._loop, daemon=True).start()
        return self

    def _loop(self) -> None:
        while not self.stop.wait(2.0):
            try:
                pods = KUBE.json("get", "pods", "-A")["items"]
                jobs = KUBE.json("get", "dgljobs", "-A")["items"]
            except (RuntimeError, ValueError, subprocess.SubprocessError):
                continue
            slots = 0
            for p in pods:
                if p["status"].get("phase") != "Running":
                    continue
                for c in p["spec"]["containers"]:
                    slots += int(((c.get("resources") or {}).get("requests") or {}).get(SLOT, 0))
            st = {j["metadata"]["name"]: j.get("status") or {} for j in jobs}
            self.samples.append(Sample(time.monotonic() - self.t0, slots, st))


def finished(status: dict[str, Any]) -> str | None:
    for c in status.get("conditions") or []:
        if c["type"] in ("Succeeded", "Failed") and c["status"] == "True":
            return str(c["type"])
    return None


def wait(what: str, pred: Any, timeout: float = 1800) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(2)
    raise RuntimeError(f"timed out waiting for {what}")


def status(ns: str, name: str) -> dict[str, Any]:
    st: dict[str, Any] = KUBE.json("get", "dgljob", name, "-n", ns).get("status") or {}
    return st


def accuracy(ns: str, name: str) -> float | None:
    log = KUBE.run("logs", f"{name}-launcher", "-n", ns, check=False)
    for line in log.splitlines():
        if line.startswith("dglrun: done") and "test accuracy" in line:
            return float(line.split("test accuracy ")[1].split(",")[0])
    return None


def namespace(name: str) -> str:
    KUBE.run("create", "namespace", name)
    volumes.ensure(KUBE, DEFAULT_DIR / "volumes")
    return name


def drop(ns: str) -> None:
    KUBE.run("delete", "namespace", ns, "--wait=true", "--timeout=300s", check=False)


@dataclass
class Run:
    name: str
    submitted: float
    training: float | None = None  # first sample in phase Training
    done: float | None = None
    outcome: str = ""
    accuracy: float | None = None
    workers: list[tuple[float, int]] = field(default_factory=list)  # (t, elastic workers)


def follow(w: Watch, runs: dict[str, Run]) -> None:
    for s in w.samples:
        for name, r in runs.items():
            st = s.jobs.get(name) or {}
            if r.training is None and st.get("phase") == "Training":
                r.training = s.t
            if r.done is None and finished(st):
                r.done, r.outcome = s.t, str(finished(st))
            el = st.get("elastic")  # (a rigid job: its active workers)
            worker = (st.get("replicaStatuses") or {}).get("Worker") or {}
            count = int((el or {}).get("workers") or 0) if el else int(worker.get("active") or 0)
            if st.get("phase") == "Training" and (not r.workers or r.workers[-1][1] != count):
                r.workers.append((s.t, count))


# -- 1. squeeze -----------------------------------------------------------------------------


def squeeze(epochs: int) -> dict[str, Any]:
    return {mode: squeeze_one(mode, epochs) for mode in ("rigid", "elastic")}


def squeeze_one(mode: str, epochs: int) -> dict[str, Any]:
    set_slots([2, 2, 2])
    ns = namespace(f"squeeze-{mode}")
    w = Watch([ns]).start()
    runs: dict[str, Run] = {}
    for i, name in enumerate(("job-a", "job-b")):
        if i:
            time.sleep(30)
        KUBE.apply(job(ns, name, epochs, elastic=mode == "elastic", cpu=SLOT_CPU))
        runs[name] = Run(name, time.monotonic() - w.t0)
    wait(f"{mode}: both jobs done", lambda: all(finished(status(ns, n)) for n in runs))
    time.sleep(3)
    w.stop.set()
    follow(w, runs)
    for name, r in runs.items():
        r.accuracy = accuracy(ns, name)
    end = max(r.done or 0.0 for r in runs.values())
    inside = [s for s in w.samples if s.t <= end]
    share = sum(s.slots for s in inside) / (6 * len(inside)) if inside else 0.0
    for name, r in runs.items():
        say(f"squeeze {mode} {name}: wait to training {fmt(r.training, r.submitted)}, "
            f"run {fmt(r.done, r.training)}, {r.outcome}, accuracy {r.accuracy}, "
            f"workers over time {r.workers}")  # fmt: skip
    say(f"squeeze {mode}: makespan {end:.0f}s, mean share of the slots {share:.0%}")
    drop(ns)
    return {"runs": runs, "makespan": end, "share": share}


def fmt(end: float | None, start: float | None) -> str:
    return "-" if end is None or start is None else f"{end - start:.0f}s"


# -- 2. preemption --------------------------------------------------------------------------


def service(ns: str, replicas: int) -> dict[str, Any]:
    want = {SLOT: "1"}
    container = {"name": "c", "image": f"dgloperator/pause:{IMAGE_TAG}",
                 "resources": {"requests": want, "limits": want}}  # fmt: skip
    labels = {"app": "service"}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "service", "namespace": ns},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "priorityClassName": HIGH,
                    "containers": [container],
                    "terminationGracePeriodSeconds": 1,
                },
            },
        },
    }


def high_priority() -> None:
    KUBE.apply({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                "metadata": {"name": HIGH}, "value": 1000000})  # fmt: skip


def preemption(epochs: int) -> dict[str, Any]:
    """The job trains 3x ``epochs``: long enough to shrink, wait, and grow back."""
    set_slots([2, 1, 1])
    high_priority()
    ns = namespace("preemption")
    w = Watch([ns]).start()
    KUBE.apply(service(ns, 0))
    KUBE.apply(job(ns, "low", 3 * epochs, elastic=True))
    run = Run("low", time.monotonic() - w.t0)

    def workers() -> int:
        return int((status(ns, "low").get("elastic") or {}).get("workers") or 0)

    wait("3 workers training", lambda: workers() == 3 and epochs_done(status(ns, "low")) >= 1)
    up_at = time.monotonic() - w.t0
    KUBE.run("scale", "deployment", "service", "-n", ns, "--replicas=2")

    def rescales() -> int:
        return int((status(ns, "low").get("elastic") or {}).get("rescales") or 0)

    wait("the shrink", lambda: rescales() >= 1 and status(ns, "low").get("phase") == "Training")
    time.sleep(15)
    down_at = time.monotonic() - w.t0
    KUBE.run("scale", "deployment", "service", "-n", ns, "--replicas=0")

    def done() -> bool:
        return finished(status(ns, "low")) is not None

    wait("the grow back", lambda: rescales() >= 2 or done())
    wait("the job done", done)
    time.sleep(3)
    w.stop.set()
    follow(w, {"low": run})
    st = status(ns, "low")
    run.accuracy = accuracy(ns, "low")
    el = st.get("elastic") or {}
    say(f"preemption: service 0->2 at {up_at:.0f}s, 2->0 at {down_at:.0f}s")
    say(f"preemption: workers over time {run.workers}")
    say(f"preemption: {run.outcome}, rescales {el.get('rescales')} "
        f"({el.get('rescaleSeconds')}s rescaling), restartCount {st.get('restartCount')}, "
        f"accuracy {run.accuracy}")  # fmt: skip
    drop(ns)
    return {"run": run, "status": st}


# -- 3. convergence -------------------------------------------------------------------------


def convergence(epochs: int) -> dict[int, float | None]:
    high_priority()
    return {planned: converge_one(planned, epochs) for planned in (0, 1, 3)}


def converge_one(planned: int, epochs: int) -> float | None:
    """The job (2x ``epochs``, as many whatever the rescales) with ``planned`` rescales: 1 worker
    grown to 3 at epoch 2 (room for the standbys); with 3, shrunk an epoch after that grow (a
    higher-priority Deployment takes 4 of the 6 slots: room for 1 worker) and grown again once
    the shrunk attempt trained an epoch. Each step waits for the one before it to have trained
    (or the job to end)."""
    set_slots([2, 2, 2] if planned == 0 else [2, 0, 0])
    ns = namespace(f"converge-{planned}")
    w = Watch([ns]).start()
    KUBE.apply(job(ns, "c", 2 * epochs, elastic=True))
    run = Run("c", time.monotonic() - w.t0)

    def reached(what: str, pred: Any) -> None:
        def check() -> bool:
            st = status(ns, "c")
            return bool(pred(st) or finished(st))

        wait(what, check)

    def rescaled(st: dict[str, Any]) -> int:
        return int((st.get("elastic") or {}).get("rescales") or 0)

    def training(st: dict[str, Any], after: int) -> bool:
        return rescaled(st) >= after and st.get("phase") == "Training" and epochs_done(st) > 0

    if planned >= 1:
        reached("epoch 2", lambda st: epochs_done(st) >= 2)
        set_slots([2, 2, 2])
        reached("the grow trains", lambda st: training(st, 1))
    if planned >= 3:
        grown = epochs_done(status(ns, "c"))
        reached(f"epoch {grown + 1}", lambda st: epochs_done(st) >= grown + 1)
        KUBE.apply(service(ns, 4))
        reached("the shrink trains", lambda st: training(st, 2))
        KUBE.run("scale", "deployment", "service", "-n", ns, "--replicas=0")
        reached("the grow back", lambda st: rescaled(st) >= 3)
    wait("the job done", lambda: finished(status(ns, "c")) is not None)
    time.sleep(3)
    w.stop.set()
    follow(w, {"c": run})
    st = status(ns, "c")
    acc = accuracy(ns, "c")
    say(f"convergence: {rescaled(st)} rescales (planned {planned}), restartCount "
        f"{st.get('restartCount')}, {run.outcome}, workers over time {run.workers}, "
        f"accuracy {acc}")  # fmt: skip
    drop(ns)
    return acc


# -- 4. rescale cost ------------------------------------------------------------------------


def dist_job(ns: str, name: str, epochs: int, elastic: bool) -> dict[str, Any]:
    """examples/graphsage/dgljob-elastic-distparmetis.yaml (DistParMETIS, chunks PerWorker,
    min 2, max 3), each worker one slot; ``elastic`` False: the same job rigid (3 workers,
    backoffLimit 2, the same batch per trainer)."""
    doc = example_job("dgljob-elastic-distparmetis.yaml", name, ns)
    spec = doc["spec"]
    args = launcher_args(doc)
    set_flag(args, "--num-epochs", str(epochs))
    if not elastic:
        del spec["elasticPolicy"]
        spec["runPolicy"] = {"backoffLimit": 2}
        set_flag(args, "--batch-size", "128")  # (the elastic job's global 384 over 3 trainers)
    want = {SLOT: "1"}
    main_container(doc, "Worker")["resources"] = {"requests": dict(want), "limits": dict(want)}
    return doc


@dataclass
class Rescale:
    """One way back to training: when it was decided, when training ran again, and the
    partition work the new attempt did."""

    what: str
    decided: float = 0.0
    training: float = 0.0
    partitions: dict[str, Any] = field(default_factory=dict)
    partition_seconds: float | None = None

    @property
    def seconds(self) -> float:
        return self.training - self.decided

    def work(self) -> str:
        if self.partitions.get("reused"):
            return f"none: placed the cached partitions ({self.partition_seconds}s in phase 1)"
        return f"partitioned ({self.partition_seconds}s in phase 1)"


def attempt_of(st: dict[str, Any]) -> int:
    return int(st.get("restartCount") or 0) + int((st.get("elastic") or {}).get("rescales") or 0)


def operator_nodes() -> set[str]:
    items = KUBE.json("-n", "dgl-system", "get", "pods").get("items") or []
    return {p["spec"].get("nodeName", "") for p in items}


def worker_node(ns: str, name: str) -> str:
    """The node of a worker that is neither the operator's nor the launcher's (the one powered
    off: a member's node alone)."""
    spared = operator_nodes()
    items = KUBE.json("-n", ns, "get", "pods", "-l", f"dgl.qihoo.net/job-name={name}")["items"]
    spared |= {
        p["spec"].get("nodeName", "") for p in items if p["metadata"]["name"].endswith("-launcher")
    }
    nodes = sorted(
        p["spec"].get("nodeName", "") for p in items if "-worker-" in p["metadata"]["name"]
    )
    return str(next(n for n in reversed(nodes) if n and n not in spared))


def back_to_training(ns: str, name: str, what: str, attempt: int) -> Rescale:
    """Poll the job (every second) from now: the decision (its attempt becomes ``attempt``),
    then the new attempt's trainers running."""
    r = Rescale(what)
    wait(f"{what}: decided", lambda: attempt_of(status(ns, name)) >= attempt, 600)
    r.decided = time.monotonic()
    deadline = time.monotonic() + 900
    while time.monotonic() < deadline:
        st = status(ns, name)
        if trains(st) and attempt_of(st) >= attempt:
            r.training = time.monotonic()
            r.partitions = dict(st.get("partitions") or {})
            r.partition_seconds = st.get("partitionSeconds")
            return r
        if finished(st):
            raise RuntimeError(f"{what}: the job ended before training again: {st}")
        time.sleep(1)
    raise RuntimeError(f"{what}: not training again within 900s")


def rescale_cost(epochs: int) -> dict[str, Any]:
    """The elastic job loses a node after epoch 2 (a shrink to 2 workers), gets it back (a grow
    to 3); the same job rigid loses a node after epoch 2 (a restart, which waits for it: the
    node is powered on as soon as the restart is decided, the rigid job's best case)."""
    set_slots([1, 1, 1])
    out: dict[str, Any] = {}
    ns = namespace("rescale")
    try:
        KUBE.apply(dist_job(ns, "el", 2 * epochs, elastic=True))
        wait("el: 2 epochs on 3 workers", lambda: epochs_done(status(ns, "el")) >= 2, 1200)
        first = status(ns, "el")
        out["first"] = (first.get("partitions"), first.get("partitionSeconds"))
        victim = worker_node(ns, "el")
        stop_node(DEFAULT_DIR, victim)
        out["shrink"] = back_to_training(ns, "el", "elastic shrink (3 -> 2, NodeLost)", 1)
        start_node(DEFAULT_DIR, victim)
        out["grow"] = back_to_training(ns, "el", "elastic grow (2 -> 3)", 2)
        wait("el: done", lambda: finished(status(ns, "el")) is not None, 1800)
        out["elastic"] = (status(ns, "el").get("elastic"), accuracy(ns, "el"))
        KUBE.apply(dist_job(ns, "rigid", 2 * epochs, elastic=False))
        wait("rigid: 2 epochs", lambda: epochs_done(status(ns, "rigid")) >= 2, 1200)
        victim = worker_node(ns, "rigid")
        stop_node(DEFAULT_DIR, victim)
        wait("rigid: restart decided", lambda: attempt_of(status(ns, "rigid")) >= 1, 600)
        start_node(DEFAULT_DIR, victim)
        out["rigid"] = back_to_training(ns, "rigid", "rigid restart (3 -> 3)", 1)
        wait("rigid: done", lambda: finished(status(ns, "rigid")) is not None, 1800)
        out["rigid_accuracy"] = accuracy(ns, "rigid")
    finally:
        drop(ns)
    for key in ("shrink", "grow", "rigid"):
        r = out[key]
        say(f"rescale: {r.what}: decision -> training again {r.seconds:.0f}s; partition "
            f"work: {r.work()}")  # fmt: skip
    say(f"rescale: the first attempt's partitioning: {out['first']}")
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="bench/elastic_bench.py")
    p.add_argument("--experiments", default="squeeze,preemption,convergence,rescale")
    p.add_argument("--epochs", type=int, default=10)
    a = p.parse_args(argv)
    if running(DEFAULT_DIR):
        say(f"a cluster runs from {DEFAULT_DIR}: run `make cluster-down` first")
        return 1
    if node_main(["up", "--nodes", "3", "--scheduler-plugins"]) != 0:
        say("the 3-node cluster did not come up")
        return 1
    try:
        install({"gangScheduling": "scheduler-plugins"})
        chosen = a.experiments.split(",")
        results: dict[str, Any] = {}
        if "squeeze" in chosen:
            results["squeeze"] = squeeze(a.epochs)
        if "preemption" in chosen:
            results["preemption"] = preemption(a.epochs)
        if "convergence" in chosen:
            results["convergence"] = convergence(a.epochs)
        if "rescale" in chosen:
            results["rescale"] = rescale_cost(a.epochs)
        summary(results)
    finally:
        node_main(["down"])
    return 0


def summary(results: dict[str, Any]) -> None:
    sq = results.get("squeeze")
    if sq:
        rigid, elastic = sq["rigid"], sq["elastic"]
        say("| squeeze | job-b wait to training | makespan | mean slot share | accuracy a / b |")
        say("| --- | --- | --- | --- | --- |")
        for mode in ("rigid", "elastic"):
            r = sq[mode]
            b = r["runs"]["job-b"]
            accs = " / ".join(str(x.accuracy) for x in r["runs"].values())
            say(f"| {mode} | {fmt(b.training, b.submitted)} | {r['makespan']:.0f}s | "
                f"{r['share']:.0%} | {accs} |")  # fmt: skip
        say(f"makespan elastic / rigid: {elastic['makespan'] / rigid['makespan']:.2f}")
        record("elastic_bench", "squeeze: makespan, elastic", elastic["makespan"], "s",
               rigid["makespan"], "rigid")  # fmt: skip
    rc = results.get("rescale")
    if rc:
        rigid = rc["rigid"].seconds
        say("| back to training | decision -> training again | / rigid restart | partition work |")
        say("| --- | --- | --- | --- |")
        for key in ("shrink", "grow", "rigid"):
            r = rc[key]
            say(f"| {r.what} | {r.seconds:.0f}s | {r.seconds / rigid:.2f} | {r.work()} |")
            if key != "rigid":
                record("elastic_bench", f"{r.what}: decision -> training again", r.seconds, "s",
                       rigid, "rigid restart")  # fmt: skip
    conv = results.get("convergence")
    if conv:
        say("convergence: " + ", ".join(f"{k} rescales: {v}" for k, v in conv.items()))


if __name__ == "__main__":
    sys.exit(main())
