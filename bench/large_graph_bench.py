"""A large synthetic graph through the cluster, in every partition mode: partition time, peak
memory per pod (the memory plan's estimate next to the measured peak), bytes moved and delivery
throughput (HTTP from the partitioner vs ``kubectl cp`` through the API server, same run),
epoch time and test accuracy; with ``dgl.distributed.partition_graph`` + single-process training
on the same graph as the baseline. Figures are printed, not asserted.

    python -m bench.large_graph_bench [--nodes 2000000] [--avg-degree 20] [--feat-dim 100]
                                      [--epochs 1] [--train-frac 0.1] [--memory-limit 14Gi]
                                      [--memory-request 2Gi]
                                      [--modes DGL-API,ParMETIS,DistParMETIS] [--workers 2]
    python -m bench.large_graph_bench --proof-at-limit [--limit-fraction 0.7] [--nodes ...]

The graph (make_dataset.py --binary, with its label noise: any model's accuracy is capped at
~0.91) and its chunked copy are written once under ~/.cache/dgl-operator/bench/large/. Every
job has ``--workers`` workers (2), one partition each, and the Worker template's memory limit
``--memory-limit``: a mode whose plan does not fit is refused at once (reported as such, which
is the memory plan working). The template requests less (``--memory-request``): the
partitioner and both workers must be scheduled on this one node together. Memory figures, per pod:

* ``estimate``: dglrun's plan (``status.memory``), made before anything ran;
* ``measured``: the peak resident memory of the step's processes in that pod (dglrun's report:
  the partition entry point, the ranks, a worker's DGL server + trainer);
* ``cgroup``: the pod's ``memory.max_usage_in_bytes`` (cgroup v1, includes page cache).

``--proof-at-limit``: DistParMETIS across 3 workers whose memory limit is ``--limit-fraction``
of the baseline's single-process partition peak (measured first, in the same run), so that no
single pod of that limit could have partitioned the graph: the bench prints each worker's
cgroup peak against the limit, the kernel's OOM kills in it, and the test accuracy next to the
single-process baseline's (trained in one process on the whole graph, which fits this machine).

Delivery: HTTP is ``status.deliveryBytes / deliverySeconds`` (the workers' pulls);
``kubectl cp`` is the same job with ``partitionTransfer: KubectlCp`` (partitioner -> launcher
-> workers, both through the API server): its bytes over its deliver + dispatch phases.

Needs root (the single-node cluster of make demo) and $DGL_PYTHON (``make bench`` sets both).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.support.cluster import cluster
from bench.support.console import sayer
from bench.support.figures import record
from bench.support.graphs import dgl_env, give_to_pods, prepare_graph
from bench.support.manifests import EVAL_FAN_OUT, NS, job_manifest, launcher_args, main_container
from bench.support.measure import MemorySampler, cgroup_oom_kills, cgroup_peak, run_measured
from bench.support.paths import EXAMPLE
from localcluster.cluster import CACHE
from localcluster.kubectl import Kubectl
from podcontract.quantity import parse_quantity

MODES = ("DGL-API", "ParMETIS", "DistParMETIS")
GRAPH = "graphsage"

say = sayer("large_graph_bench")


def prepare(py: str, a: argparse.Namespace) -> Path:
    key = f"n{a.nodes}-d{a.avg_degree:g}-f{a.feat_dim}-t{a.train_frac:g}"
    return prepare_graph(
        py,
        CACHE / "bench" / "large" / key,
        ["--binary", "--num-nodes", str(a.nodes), "--avg-degree", str(a.avg_degree),
         "--feat-dim", str(a.feat_dim), "--train-frac", str(a.train_frac), "--val-frac", "0.05"],
        say,
    )  # fmt: skip


def graph_size(data: Path) -> tuple[int, int]:
    meta = json.loads((data / "chunked" / "metadata.json").read_text())
    nodes = sum(sum(c) for c in meta["num_nodes_per_chunk"])
    edges = sum(sum(c) for c in meta["num_edges_per_chunk"])
    return nodes, edges


def baseline(py: str, data: Path, a: argparse.Namespace) -> dict[str, Any]:
    """partition_graph in one process (the example's entry point), then single-process
    GraphSAGE with the jobs' settings."""
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        peak, seconds, _ = run_measured(
            [py, str(EXAMPLE / "load_and_partition_graph.py"), "--graph_name", GRAPH,
             "--workspace", tmp, "--num_parts", str(a.workers), "--balance_train",
             "--balance_edges",
             "--dataset", "ogbn-synth", "--dataset_root", str(data / "raw_data")],
            dgl_env(),
        )  # fmt: skip
        out["partition_seconds"] = seconds
        out["partition_peak_mib"] = peak  # of that process alone (wait4), not of make_dataset's
        metrics_file = Path(tmp) / "metrics.json"
        subprocess.run(
            [py, str(EXAMPLE / "train_single.py"), "--dataset_root", str(data / "raw_data"),
             "--num_epochs", str(a.epochs), "--batch_size", "256", "--eval_fan_out",
             EVAL_FAN_OUT, "--out", str(metrics_file)],
            check=True, capture_output=True, env=dgl_env(),
        )  # fmt: skip
        metrics = json.loads(metrics_file.read_text())
    out["accuracy"] = metrics["test_accuracy"]
    out["epoch_seconds"] = metrics["train_seconds"] / max(1, a.epochs)
    give_to_pods(data)  # (ogb's processed cache)
    return out


def manifest(mode: str, data: Path, a: argparse.Namespace, transfer: str) -> dict[str, Any]:
    m = job_manifest(mode, data, a.epochs, a.workers)
    suffix = "-cp" if transfer == "KubectlCp" else ""
    m["metadata"]["name"] = f"large-{mode.lower()}{suffix}"
    m["spec"]["partitionTransfer"] = transfer
    worker = main_container(m, "Worker")
    # the limit is what the plan checks and the kernel enforces; the request is lower so that
    # the partitioner and both workers (3 pods) fit this single node's memory together
    worker["resources"] = {
        "limits": {"memory": a.memory_limit},
        "requests": {"memory": a.memory_request},
    }
    if mode == "DGL-API":
        nodes, edges = graph_size(data)
        # 100 float32 features, an int64 label, 3 bool masks per node
        size = f"nodes={nodes},edges={edges},node_bytes={4 * a.feat_dim + 8 + 3}"
        launcher_args(m).extend(["--graph-size", size])
    return m


def wait_done(kube: Kubectl, name: str, limit: float = 4 * 3600) -> tuple[dict[str, Any], float]:
    started = time.monotonic()
    status: dict[str, Any] = {}
    while time.monotonic() - started < limit:
        status = kube.json("get", "dgljob", name, "-n", NS).get("status") or {}
        if status.get("phase") in ("Completed", "Failed"):
            break
        time.sleep(3)
    return status, time.monotonic() - started


def seconds_of(log: str, k: int, name: str) -> float:
    m = re.search(rf"\[{k}/5\] {name} done in ([\d.]+)s", log)
    return float(m.group(1)) if m else float("nan")


def run_job(
    kube: Kubectl, mode: str, data: Path, a: argparse.Namespace, transfer: str
) -> dict[str, Any]:
    m = manifest(mode, data, a, transfer)
    name = m["metadata"]["name"]
    kube.run("-n", NS, "delete", "dgljob", name, "--ignore-not-found", "--wait=true")
    # the previous job's pods hold their memory requests until they are gone
    deadline = time.monotonic() + 600
    while kube.json("get", "pods", "-n", NS)["items"] and time.monotonic() < deadline:
        time.sleep(2)
    sampler = MemorySampler(kube, name, mode)
    kube.apply(m)
    sampler.start()
    worker_peaks: dict[str, int] = {}
    worker_ooms: dict[str, int] = {}
    status, took = wait_done(kube, name)
    sampler.stop.set()
    sampler.join(5)
    pods = kube.json("get", "pods", "-n", NS, "-l", f"dgl.qihoo.net/job-name={name}")
    for p in pods["items"]:
        if "-worker-" in p["metadata"]["name"]:
            peak = cgroup_peak(p["metadata"]["uid"])
            if peak:
                worker_peaks[p["metadata"]["name"]] = peak
            kills = cgroup_oom_kills(p["metadata"]["uid"])
            if kills is not None:
                worker_ooms[p["metadata"]["name"]] = kills
    result: dict[str, Any] = {"mode": mode, "transfer": transfer, "job_seconds": took}
    result["memory"] = status.get("memory") or {}
    result["cgroup_partition_gib"] = max(sampler.peaks.values(), default=0) / 2**30
    result["cgroup_worker_gib"] = max(worker_peaks.values(), default=0) / 2**30
    result["workers"] = {
        pod: {"cgroup_gib": peak / 2**30, "oom_kills": worker_ooms.get(pod)}
        for pod, peak in sorted(worker_peaks.items())
    }
    if status.get("phase") != "Completed":
        conditions: list[dict[str, Any]] = status.get("conditions", [])
        cond = next((c for c in conditions if c["type"] == "Failed"), {})
        why = str(cond.get("message", "")).split("memory plan: ", 1)[-1]
        result["failed"] = f"{cond.get('reason')}: {why[:150]}..."
        kube.run("-n", NS, "delete", "dgljob", name, "--wait=false")
        return result
    launcher = kube.run("logs", f"{name}-launcher", "-n", NS, "-c", "dgl-graphsage")
    part_log = launcher
    if mode != "DistParMETIS":
        part_log = kube.run("logs", f"{name}-partitioner", "-n", NS, "-c", "dgl-graphsage")
    summary = next(ln for ln in launcher.splitlines() if ln.startswith("dglrun: done"))
    acc = re.search(r"test accuracy ([\d.]+)", summary)
    result["accuracy"] = float(acc.group(1)) if acc else float("nan")
    train = re.search(r"\[rank 0\] done: .* train_seconds ([\d.]+)", launcher)
    result["epoch_seconds"] = float(train.group(1)) / max(1, a.epochs) if train else float("nan")
    result["partition_seconds"] = status.get("partitionSeconds") or seconds_of(
        part_log, 1, "partition"
    )
    if transfer == "HTTP":
        result["bytes"] = status.get("deliveryBytes", 0)
        result["delivery_seconds"] = status.get("deliverySeconds") or float("nan")
    else:
        moved = re.search(r"dispatch ([\d.]+) MB in", summary)
        result["bytes"] = float(moved.group(1)) * 1e6 if moved else 0
        result["delivery_seconds"] = seconds_of(part_log, 2, "deliver") + seconds_of(
            launcher, 3, "dispatch"
        )
    (data / "logs").mkdir(exist_ok=True)
    (data / "logs" / f"{name}.log").write_text(part_log + "\n---\n" + launcher)
    kube.run("-n", NS, "delete", "dgljob", name, "--wait=false")
    return result


def gib(mib: float | None) -> str:
    return "-" if not mib else f"{mib / 1024:.2f}"


def print_table(
    rows: list[dict[str, Any]], base: dict[str, Any], size: str, proof: bool = False
) -> None:
    say(size)
    print(
        "| run | partition | partition pod: estimate / measured / cgroup (GiB) | worker pod: "
        "estimate / measured / cgroup (GiB) | moved | delivery | epoch | test accuracy |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    print(
        f"| baseline: partition_graph + 1 process | {base['partition_seconds']:.0f} s | "
        f"- / {gib(base['partition_peak_mib'])} / - | - | - | - | "
        f"{base['epoch_seconds']:.0f} s | {base['accuracy']:.4f} |"
    )
    for r in rows:
        mem = r["memory"]
        p, t = mem.get("partition", {}), mem.get("train", {})
        label = f"{r['mode']} ({r['transfer']})"
        if "failed" in r:
            print(f"| {label} | {r['failed']} | {gib(p.get('estimateMiB'))} / - / - | "
                  f"{gib(t.get('estimateMiB'))} / - / - | - | - | - | - |")  # fmt: skip
            continue
        if r["bytes"] and r["delivery_seconds"] == r["delivery_seconds"]:  # (not NaN)
            rate = r["bytes"] / r["delivery_seconds"] / 1e6
            moved = f"{r['bytes'] / 1e6:.0f} MB | {r['delivery_seconds']:.1f} s ({rate:.0f} MB/s)"
        else:
            moved = "0 MB | - (each worker wrote its own part)"
        bench = "large_graph_bench" + (" --proof-at-limit" if proof else "")
        record(bench, f"{label}: test accuracy", r["accuracy"], "", base["accuracy"], "1 process")
        record(
            bench, f"{label}: epoch", r["epoch_seconds"], "s", base["epoch_seconds"], "1 process"
        )
        if p.get("peakMiB") and p.get("estimateMiB"):
            record(
                bench, f"{label}: partition peak against its plan", p["peakMiB"], "MiB",
                p["estimateMiB"], "the plan's estimate",
            )  # fmt: skip
        print(
            f"| {label} | {r['partition_seconds']:.0f} s | {gib(p.get('estimateMiB'))} / "
            f"{gib(p.get('peakMiB'))} / {r['cgroup_partition_gib']:.2f} | "
            f"{gib(t.get('estimateMiB'))} / {gib(t.get('peakMiB'))} / "
            f"{r['cgroup_worker_gib']:.2f} | {moved} | {r['epoch_seconds']:.0f} s | "
            f"{r['accuracy']:.4f} ({r['accuracy'] - base['accuracy']:+.4f}) |"
        )
    http = [r for r in rows if r["transfer"] == "HTTP" and "failed" not in r]
    cp = [r for r in rows if r["transfer"] == "KubectlCp" and "failed" not in r]
    for c in cp:
        same = next((h for h in http if h["mode"] == c["mode"]), None)
        if same and same["delivery_seconds"] and c["delivery_seconds"]:
            fast = (same["bytes"] / same["delivery_seconds"]) / (c["bytes"] / c["delivery_seconds"])
            say(f"delivery throughput, {c['mode']}: HTTP {fast:.1f}x kubectl cp (same bytes)")
    for r in rows:
        for step, m in r["memory"].items():
            if m.get("estimateMiB") and m.get("peakMiB"):
                error = m["estimateMiB"] / m["peakMiB"] - 1
                say(f"estimator, {r['mode']} {step}: {100 * error:+.0f}% of the measured peak")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--nodes", type=int, default=2_000_000)
    p.add_argument("--avg-degree", type=float, default=20.0, help="directed edges per node")
    p.add_argument("--feat-dim", type=int, default=100)
    p.add_argument("--train-frac", type=float, default=0.1)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--memory-limit", default="14Gi", help="the Worker template's memory limit")
    p.add_argument("--memory-request", default="2Gi", help="the Worker template's memory request")
    p.add_argument("--modes", default=",".join(MODES))
    p.add_argument("--workers", type=int, default=2, help="Worker pods (and partitions)")
    p.add_argument(
        "--proof-at-limit",
        action="store_true",
        help="DistParMETIS on 3 workers limited below the single-process partition peak",
    )
    p.add_argument("--limit-fraction", type=float, default=0.7)
    p.add_argument(
        "--kubectl-cp-mode",
        default="DGL-API",
        help="the mode also run with partitionTransfer KubectlCp (the delivery comparison)",
    )
    a = p.parse_args(argv)
    if a.proof_at_limit:
        a.workers, a.modes, a.kubectl_cp_mode = 3, "DistParMETIS", ""
    py = os.environ.get("DGL_PYTHON")
    if os.geteuid() != 0 or not py:
        say("skipped: needs root (the local cluster) and $DGL_PYTHON (make bench sets it)")
        return 0
    data = prepare(py, a)
    nodes, edges = graph_size(data)
    size = (
        f"graph: {nodes:,} nodes, {edges:,} directed edges, {a.feat_dim} features; "
        f"{a.workers} workers; GraphSAGE {a.epochs} epoch(s) on "
        f"{a.train_frac:.0%} training nodes"
    )
    say(size)
    base = baseline(py, data, a)
    say(f"baseline: {base}")
    if a.proof_at_limit:
        limit_mib = int(a.limit_fraction * base["partition_peak_mib"])
        a.memory_limit = f"{limit_mib}Mi"
        if parse_quantity(a.memory_request) > limit_mib * 2**20:
            a.memory_request = a.memory_limit
    size += f"; Worker memory limit {a.memory_limit}"
    say(size)
    kube = cluster()
    if kube is None:
        return 1
    rows = []
    runs = [(m, "HTTP") for m in a.modes.split(",")]
    if a.kubectl_cp_mode:
        runs.append((a.kubectl_cp_mode, "KubectlCp"))
    for mode, transfer in runs:
        say(f"{mode} ({transfer}): running")
        rows.append(run_job(kube, mode, data, a, transfer))
        say(f"{mode} ({transfer}): {rows[-1]}")
    print_table(rows, base, size, a.proof_at_limit)
    if a.proof_at_limit:
        return verdict(rows[0], base, a)
    return 0


def verdict(run: dict[str, Any], base: dict[str, Any], a: argparse.Namespace) -> int:
    """The proof at the limit, in a few lines: the limit against the single-process peak, each
    worker's peak and OOM kills, the accuracy against the baseline's."""
    limit = float(parse_quantity(a.memory_limit)) / 2**30
    single = base["partition_peak_mib"] / 1024
    say(f"proof at the limit: Worker memory limit {limit:.2f} GiB = {a.limit_fraction:.0%} of "
        f"the single-process partition peak ({single:.2f} GiB), {a.workers} workers")  # fmt: skip
    if "failed" in run:
        say(f"  the job did not complete: {run['failed']}")
        return 1
    for pod, w in run["workers"].items():
        say(f"  {pod}: cgroup peak {w['cgroup_gib']:.2f} GiB of {limit:.2f} GiB, "
            f"OOM kills {w['oom_kills'] if w['oom_kills'] is not None else 'unknown'}")  # fmt: skip
    gap = run["accuracy"] - base["accuracy"]
    say(f"  test accuracy {run['accuracy']:.4f} against {base['accuracy']:.4f} in one process "
        f"({100 * gap:+.2f} points; the target is within 1)")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
