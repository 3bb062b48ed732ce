"""What a lost worker costs, with and without ``spec.storage``, through the cluster: the same
GraphSAGE DGLJob run uninterrupted, then twice with worker 1 deleted once half the epochs are
done (``backoffLimit: 1``): without storage (the restart partitions again and trains from
epoch 0) and with it (the restart reuses the cached partitions and resumes from the last
checkpoint). Figures are printed, not asserted.

    python -m bench.restart_bench [--nodes 300000] [--avg-degree 20] [--feat-dim 100]
                                  [--epochs 6] [--batch-size 256]

The graph (make_dataset.py --binary) is written once under
~/.cache/dgl-operator/bench/restart/ and mounted into the pods by hostPath; the storage is a
claim made from a template (this machine's cluster binds it to localcluster/volumes.py's
volumes). The figures per run: the whole job's wall time (the DGLJob's startTime to
completionTime, restart included), the partition phase of each attempt (dglrun's ``[1/5]
partition done in``), the epochs trained in all, and the test accuracy.

Needs root (the single-node cluster of make demo) and $DGL_PYTHON (``make bench`` sets both).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from pathlib import Path
from typing import Any

from bench.support.cluster import cluster
from bench.support.console import sayer
from bench.support.figures import record
from bench.support.graphs import give_to_pods, prepare_graph
from bench.support.manifests import EVAL_FAN_OUT, NS, job_manifest, launcher_args, set_flag
from bench.support.progress import epochs_done
from localcluster import volumes
from localcluster.cluster import CACHE
from localcluster.kubectl import Kubectl
from localcluster.node import DEFAULT_DIR

say = sayer("restart_bench")


def manifest(data: Path, a: argparse.Namespace, name: str, storage: bool) -> dict[str, Any]:
    m = job_manifest("DGL-API", data, a.epochs)
    m["metadata"]["name"] = name
    spec = m["spec"]
    spec["runPolicy"] = {"backoffLimit": 1}
    args = launcher_args(m)
    set_flag(args, "--batch-size", str(a.batch_size))
    args.remove(f"--train-args=--eval_fan_out {EVAL_FAN_OUT}")
    args.append(f"--train-args=--eval_fan_out {EVAL_FAN_OUT} --eval_every 0")
    if storage:
        spec["storage"] = {
            "claimTemplate": {
                "spec": {
                    "accessModes": ["ReadWriteOnce"],
                    "resources": {"requests": {"storage": "10Gi"}},
                }
            },
            "claimPolicy": "Delete",
        }
    return m


PARTITIONED = r"\[1/5\] partition done in ([\d.]+)s"


def partitioner_log(kube: Kubectl, job: str) -> str:
    return kube.run("logs", f"{job}-partitioner", "-n", NS, "-c", "dgl-graphsage", check=False)


def run(kube: Kubectl, m: dict[str, Any], lose_worker_after: int | None) -> dict[str, Any]:
    name = m["metadata"]["name"]
    kube.run("-n", NS, "delete", "dgljob", name, "--ignore-not-found", "--wait=true")
    deadline = time.monotonic() + 600  # the previous job's pods hold their memory
    while kube.json("get", "pods", "-n", NS)["items"] and time.monotonic() < deadline:
        time.sleep(2)
    kube.apply(m)
    lost = False
    status: dict[str, Any] = {}
    logs: list[str] = []
    while True:
        status = kube.json("get", "dgljob", name, "-n", NS).get("status") or {}
        if status.get("phase") in ("Completed", "Failed"):
            break
        if lose_worker_after is not None and not lost and epochs_done(status) >= lose_worker_after:
            # the attempt's logs, before its pods go
            logs.append(partitioner_log(kube, name))
            kube.run("-n", NS, "delete", "pod", f"{name}-worker-1", "--wait=false")
            lost = True
        time.sleep(1)
    if status.get("phase") != "Completed":
        raise RuntimeError(f"{name} ended {status.get('phase')}: {status.get('conditions')}")
    launcher = kube.run("logs", f"{name}-launcher", "-n", NS, "-c", "dgl-graphsage")
    logs.append(partitioner_log(kube, name))
    parts = [float(x) for log in logs for x in re.findall(PARTITIONED, log)]
    acc = re.search(r"test accuracy ([\d.]+)", launcher)
    started = time.mktime(time.strptime(status["startTime"], "%Y-%m-%dT%H:%M:%SZ"))
    done = time.mktime(time.strptime(status["completionTime"], "%Y-%m-%dT%H:%M:%SZ"))
    trained = len(re.findall(r"\[rank 0\] epoch \d+ loss", launcher))
    kube.run("-n", NS, "delete", "dgljob", name, "--wait=false")
    return {
        "name": name,
        "seconds": done - started,
        "partition_seconds": parts,
        "restarts": status.get("restartCount", 0),
        "resumed_at": (status.get("resume") or {}).get("epoch"),
        "reused": (status.get("partitions") or {}).get("reused"),
        "last_attempt_epochs": trained,
        "accuracy": float(acc.group(1)) if acc else float("nan"),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--nodes", type=int, default=300_000)
    p.add_argument("--avg-degree", type=float, default=20.0)
    p.add_argument("--feat-dim", type=int, default=100)
    p.add_argument("--epochs", type=int, default=6)
    p.add_argument("--batch-size", type=int, default=256)
    a = p.parse_args(argv)
    py = os.environ.get("DGL_PYTHON")
    if os.geteuid() != 0 or not py:
        say("skipped: needs root (the local cluster) and $DGL_PYTHON (make bench sets it)")
        return 0
    key = f"n{a.nodes}-d{a.avg_degree:g}-f{a.feat_dim}"
    data = prepare_graph(
        py,
        CACHE / "bench" / "restart" / key,
        ["--binary", "--num-nodes", str(a.nodes), "--avg-degree", str(a.avg_degree),
         "--feat-dim", str(a.feat_dim), "--train-frac", "0.1", "--val-frac", "0.05"],
        say,
    )  # fmt: skip
    give_to_pods(data)  # (ogb writes processed/ beside the raw files)
    kube = cluster()
    if kube is None:
        return 1
    volumes.ensure(kube, DEFAULT_DIR / "volumes")
    half = max(1, a.epochs // 2)
    lost_after = f"worker lost after {half} epochs"
    rows = [
        ("uninterrupted, with storage", run(kube, manifest(data, a, "whole", True), None)),
        (f"{lost_after}, no storage", run(kube, manifest(data, a, "plain", False), half)),
        (f"{lost_after}, with storage", run(kube, manifest(data, a, "kept", True), half)),
    ]
    say(
        f"graph: {a.nodes:,} nodes, ~{int(a.nodes * a.avg_degree):,} directed edges, "
        f"{a.feat_dim} features; 2 workers; GraphSAGE {a.epochs} epochs of batch {a.batch_size}"
    )
    print(
        "| run | whole job | partition phase per attempt | epochs trained by the last attempt "
        "| resumed at | test accuracy |"
    )
    print("| --- | --- | --- | --- | --- | --- |")
    base = rows[0][1]
    for label, r in rows:
        parts = " + ".join(f"{s:.0f} s" for s in r["partition_seconds"]) or "-"
        if r["reused"]:
            parts += " (reused)"
        resumed = "-" if r["resumed_at"] is None else r["resumed_at"]
        print(
            f"| {label} | {r['seconds']:.0f} s ({r['seconds'] / base['seconds']:.2f}x) | {parts} "
            f"| {r['last_attempt_epochs']} | {resumed} | {r['accuracy']:.4f} |"
        )
    plain, kept = rows[1][1], rows[2][1]
    for label, r in rows[1:]:
        record("restart_bench", f"{label}: whole job", r["seconds"], "s", base["seconds"],
               "uninterrupted")  # fmt: skip
    record("restart_bench", "worker lost, with storage: whole job", kept["seconds"], "s",
           plain["seconds"], "without storage")  # fmt: skip
    lost = plain["seconds"] - base["seconds"]
    saved = plain["seconds"] - kept["seconds"]
    cost = kept["seconds"] - base["seconds"]
    say(
        f"a lost worker cost {lost:.0f} s without storage and {cost:.0f} s with it ({saved:.0f} s "
        f"saved; the restarted job took {kept['seconds'] / plain['seconds']:.2f}x the time)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
