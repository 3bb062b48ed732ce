"""What spreading a DGLJob over nodes costs at start-up: the example GraphSAGE DGLJob (a
launcher and 2 workers, examples/graphsage/dgljob.yaml) applied to this machine's cluster of
1 node, then of 3 nodes (localcluster/node.py ``up --nodes 3``: 1 CPU and 6Gi allocatable
each), timing from ``kubectl apply`` until the launcher and every worker are Running at once.
Each cluster is brought up, the operator installed by Helm, the job timed, and the cluster
torn down. Figures are printed, not asserted.

    python -m bench.nodes_bench [--nodes 1,3] [--timeout 600]

Needs root and no cluster already running from ~/.cache/dgl-operator/node (``make
cluster-down`` first): both clusters own 10.88.0.1.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from bench.support.cluster import KUBECONFIG, install
from bench.support.console import sayer
from bench.support.figures import record
from bench.support.manifests import example_job
from localcluster.kubectl import Kubectl
from localcluster.node import DEFAULT_DIR, running
from localcluster.node import main as node_main

NS = "nodes-bench"
JOB = "bench"
JOB_LABEL = "dgl.qihoo.net/job-name"  # (dgljob/names.py JOB_NAME_LABEL)
TYPE_LABEL = "dgl-replica-type"

say = sayer("nodes_bench")


def expected_pods(job: dict[str, Any]) -> int:
    specs = job["spec"]["dglReplicaSpecs"]
    return sum(int(specs[t].get("replicas", 1)) for t in ("Launcher", "Worker"))


def time_to_running(kube: Kubectl, timeout: float) -> dict[str, Any]:
    """Apply the job; seconds until its launcher and workers are all Running, and where."""
    job = example_job("dgljob.yaml", JOB, NS)
    want = expected_pods(job)
    kube.run("create", "namespace", NS)
    started = time.monotonic()
    kube.apply(job)
    deadline = started + timeout
    while time.monotonic() < deadline:
        items = kube.json("get", "pods", "-n", NS, "-l", f"{JOB_LABEL}={JOB}")["items"]
        running_pods = {
            p["metadata"]["name"]: p["spec"].get("nodeName", "")
            for p in items
            if p["metadata"].get("labels", {}).get(TYPE_LABEL, "").lower() in ("launcher", "worker")
            and p["status"].get("phase") == "Running"
        }
        if len(running_pods) >= want:
            return {"seconds": time.monotonic() - started, "placement": running_pods}
        time.sleep(0.5)
    raise RuntimeError(f"the job's {want} pods were not all Running within {timeout:.0f}s")


def one(nodes: int, timeout: float) -> dict[str, Any]:
    say(f"bringing up {nodes} node(s)")
    started = time.monotonic()
    if node_main(["up", "--nodes", str(nodes)]) != 0:
        raise RuntimeError(f"the {nodes}-node cluster did not come up")
    up = time.monotonic() - started
    try:
        install()
        result = time_to_running(Kubectl(KUBECONFIG), timeout)
        result["up"] = up
        say(
            f"{nodes} node(s): up in {up:.0f}s; the job's pods all Running "
            f"{result['seconds']:.1f}s after apply, on {sorted(set(result['placement'].values()))}"
        )
        return result
    finally:
        node_main(["down"])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="bench/nodes_bench.py")
    p.add_argument("--nodes", default="1,3", help="cluster sizes to compare (default 1,3)")
    p.add_argument("--timeout", type=float, default=600)
    a = p.parse_args(argv)
    if running(DEFAULT_DIR):
        say(f"a cluster runs from {DEFAULT_DIR}: run `make cluster-down` first")
        return 1
    sizes = [int(n) for n in a.nodes.split(",")]
    results = {n: one(n, a.timeout) for n in sizes}
    say("apply -> launcher and workers Running:")
    for n, r in results.items():
        say(f"  {n} node(s): {r['seconds']:6.1f}s  (cluster up in {r['up']:.0f}s)")
    if len(sizes) >= 2:
        first, last = results[sizes[0]]["seconds"], results[sizes[-1]]["seconds"]
        record("nodes_bench", f"apply -> pods Running, {sizes[-1]} nodes", last, "s", first,
               f"{sizes[0]} node(s)")  # fmt: skip
        say(f"  ratio {sizes[-1]} / {sizes[0]} node(s): {last / first:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
