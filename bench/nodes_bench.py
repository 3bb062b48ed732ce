"""What spreading a DGLJob over nodes costs at start-up: the example GraphSAGE DGLJob (a
launcher and 2 workers, examples/graphsage/dgljob.yaml) applied to this machine's cluster of
1 node, then of 3 nodes (localcluster/node.py ``up --nodes 3``: 1 CPU and 6Gi allocatable
each), timing from ``kubectl apply`` until the launcher and every worker are Running at once.
Each cluster is brought up, the operator installed by Helm, the job timed, and the cluster
torn down. Figures are printed, not asserted.

    python bench/nodes_bench.py [--nodes 1,3] [--timeout 600]

Needs root and no cluster already running from ~/.cache/dgl-operator/node (``make
cluster-down`` first): both clusters own 10.88.0.1.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from localcluster.cluster import k8s_binaries  # noqa: E402
from localcluster.helm import install_operator  # noqa: E402
from localcluster.node import DEFAULT_DIR, refresh_images, running  # noqa: E402
from localcluster.node import main as node_main  # noqa: E402

NS = "nodes-bench"
JOB = "bench"
JOB_LABEL = "dgl.qihoo.net/job-name"  # (controller/builders.py)
TYPE_LABEL = "dgl-replica-type"


def say(text: str) -> None:
    print(f"nodes_bench: {text}", flush=True)


def kubectl(kubeconfig: Path, *args: str, input: str | None = None) -> str:
    argv = [str(k8s_binaries("kubectl") / "kubectl"), "--kubeconfig", str(kubeconfig), *args]
    out = subprocess.run(argv, capture_output=True, text=True, input=input, timeout=300)
    if out.returncode != 0:
        raise RuntimeError(f"kubectl {' '.join(args[:4])}: {out.stderr.strip()}")
    return out.stdout


def job_manifest() -> dict[str, Any]:
    job: dict[str, Any] = yaml.safe_load((REPO / "examples/graphsage/dgljob.yaml").read_text())
    job["metadata"].update(name=JOB, namespace=NS)
    return job


def expected_pods(job: dict[str, Any]) -> int:
    specs = job["spec"]["dglReplicaSpecs"]
    return sum(int(specs[t].get("replicas", 1)) for t in ("Launcher", "Worker"))


def time_to_running(kubeconfig: Path, timeout: float) -> dict[str, Any]:
    """Apply the job; seconds until its launcher and workers are all Running, and where."""
    job = job_manifest()
    want = expected_pods(job)
    kubectl(kubeconfig, "create", "namespace", NS)
    started = time.monotonic()
    kubectl(kubeconfig, "apply", "-f", "-", input=json.dumps(job))
    deadline = started + timeout
    while time.monotonic() < deadline:
        items = json.loads(
            kubectl(kubeconfig, "get", "pods", "-n", NS, "-l", f"{JOB_LABEL}={JOB}", "-o", "json")
        )["items"]
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
    kubeconfig = DEFAULT_DIR / "control-plane" / "admin.kubeconfig"
    try:
        install_operator(kubeconfig, refresh_images().get("dgl-operator", ""))
        result = time_to_running(kubeconfig, timeout)
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
        say(f"  ratio {sizes[-1]} / {sizes[0]} node(s): {last / first:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
