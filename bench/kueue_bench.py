"""What Kueue adds to a job's start (issue 30): on this machine's single-node cluster with
Kueue's manager (``localcluster.node up --kueue``), the GraphSAGE example job (a partitioner
and 2 workers, each asking 100m CPU) is started ``--rounds`` times without the queue label and
as many times with it, alternately. Printed per round and as medians:

- without Kueue: seconds from the job's creation to all its pods running;
- with Kueue: seconds from its creation to Kueue's admission (the Workload's ``Admitted``), and
  from the admission to all its pods running, set against the run without Kueue.

Each job is deleted once its pods run (training is not what is measured).

    python -m bench.kueue_bench [--rounds 3]

Needs root and no cluster already running from ~/.cache/dgl-operator/node (``make
cluster-down`` first). Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from typing import Any

from bench.support.cluster import KUBECONFIG, install
from bench.support.console import sayer
from bench.support.figures import record
from bench.support.manifests import example_job, kueue_queues
from controller.features import kueue as kq
from localcluster.kubectl import Kubectl
from localcluster.node import DEFAULT_DIR, running
from localcluster.node import main as node_main

NS = "kueue-bench"
CPU = "100m"
KUBE = Kubectl(KUBECONFIG, timeout=120)
# the ClusterQueue's quota: it must cover every resource the jobs' pods request, the operator's
# own init containers' memory too (a resource it does not cover leaves a Workload pending:
# "resource memory unavailable in ClusterQueue")
QUOTA = {"cpu": "4", "memory": "16Gi"}

say = sayer("kueue_bench")


def job(name: str, queued: bool) -> dict[str, Any]:
    raw = example_job("dgljob.yaml", name, NS)
    if queued:
        raw["metadata"]["labels"] = {kq.QUEUE_LABEL: "lq"}
    for replica in raw["spec"]["dglReplicaSpecs"].values():
        main = replica["template"]["spec"]["containers"][0]
        main.setdefault("resources", {}).setdefault("requests", {})["cpu"] = CPU
    return raw


def queues() -> None:
    KUBE.run("create", "namespace", NS)
    for obj in kueue_queues(NS, "bench", "lq", QUOTA):
        KUBE.apply(obj)


def all_running(name: str) -> bool:
    items = KUBE.json("get", "pods", "-n", NS)["items"]
    mine = [p for p in items if p["metadata"]["name"].startswith(f"{name}-")]
    want = {f"{name}-worker-0", f"{name}-worker-1", f"{name}-partitioner"}
    running_now = {p["metadata"]["name"] for p in mine if p["status"].get("phase") == "Running"}
    return want <= running_now


def admitted(name: str) -> bool:
    items = KUBE.json("get", "workloads.kueue.x-k8s.io", "-n", NS)
    return any(
        kq.state(wl).admitted
        for wl in items["items"]
        if any(o["name"] == name for o in wl["metadata"].get("ownerReferences") or [])
    )


def run(name: str, queued: bool) -> tuple[float, float | None]:
    """(seconds from creation to all pods running, seconds from creation to admission, as
    this bench's polls see them: every 0.2 s or so, the time of a kubectl call)."""
    start = time.time()
    KUBE.apply(job(name, queued))
    admitted_at = None
    while True:
        if queued and admitted_at is None and admitted(name):
            admitted_at = time.time()
        if all_running(name):
            break
        if time.time() - start > 600:
            raise RuntimeError(f"{name}: pods not running after 600 s")
        time.sleep(0.1)
    ran = time.time() - start
    KUBE.run("delete", "dgljob", name, "-n", NS, "--wait=true")
    return ran, (admitted_at - start if admitted_at is not None else None)


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=3)
    a = p.parse_args()
    if running(DEFAULT_DIR):
        say("a cluster already runs from ~/.cache/dgl-operator/node: make cluster-down first")
        return 1
    if node_main(["up", "--kueue"]) != 0:
        return 1
    try:
        install({"kueue": "true"})
        queues()
        plain, queued_run, admission = [], [], []
        for r in range(a.rounds):
            ran, _ = run(f"plain-{r}", False)
            plain.append(ran)
            ran_q, adm = run(f"queued-{r}", True)
            assert adm is not None, "no admission seen"
            queued_run.append(ran_q - adm)
            admission.append(adm)
            say(
                f"round {r}: without Kueue creation -> pods running {ran:.1f}s; with Kueue "
                f"creation -> admitted {adm:.1f}s, admitted -> pods running {ran_q - adm:.1f}s"
            )
        mp, mq, ma = (statistics.median(x) for x in (plain, queued_run, admission))
        record("kueue_bench", "admission -> all pods running, under Kueue", mq, "s", mp,
               "creation -> all pods running, without")  # fmt: skip
        say(f"median of {a.rounds}: admission -> all pods running {mq:.1f}s under Kueue vs "
            f"creation -> all pods running {mp:.1f}s without ({mq / mp:.2f}x); Kueue's own "
            f"admission took {ma:.1f}s after creation")  # fmt: skip
    finally:
        node_main(["down"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
