"""How far the ETAs were from what happened: ``status.progressDetail`` read while real jobs run,
against when their steps really ended.

For each graph size, one ParMETIS job (KaMinPar, 2 workers, the example's GraphSAGE) runs on
the single-node cluster of ``make demo``. Twice a second the bench reads the job's status and
keeps every new ``progressDetail`` with the time it first saw it (dglrun publishes at each
change and every 15 s while an estimate moves, so a reading is at most ~0.5 s old). Once the
job has ended, each step's real span is known: from the first reading in it to the first
reading after it (the next step, or ``done``). For every reading made once the step was 10%
done (of its real span), the span it predicted is ``elapsed + stepRemainingSeconds``; the
error is that against the real span. It prints, per size and step (partition, train): the
time plan's first estimate (partition), the readings counted, the largest and the median
error. Goal: within +/-30% once the step is 10% done. Figures are printed, not asserted.

    python -m bench.eta_bench [--sizes 200000,800000,2000000] [--avg-degree 20] [--epochs 5]

Needs root (the cluster) and the DGL environment ($DGL_PYTHON, set by ``make bench``).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from dataclasses import dataclass
from typing import Any

from bench.support.cluster import cluster
from bench.support.console import sayer
from bench.support.figures import record
from bench.support.graphs import give_to_pods, prepare_graph
from bench.support.manifests import NS, job_manifest
from localcluster.cluster import CACHE
from localcluster.kubectl import Kubectl
from podcontract import STATUS_PROGRESS, STATUS_PROGRESS_DETAIL
from podcontract.progress import STEP_NAME, STEP_REMAINING

say = sayer("eta_bench")
STEPS = ("partition", "train")
DONE_SHARE = 0.1  # readings count once the step is this far (of its real span)
TARGET = 0.30


@dataclass(frozen=True)
class Reading:
    t: float  # when the bench first saw it (monotonic)
    text: str  # status.progress
    detail: dict[str, Any]


def watch(kube: Kubectl, name: str, timeout: float = 7200) -> tuple[list[Reading], dict[str, Any]]:
    """Every new (progress, progressDetail) until the job ends; and its last status."""
    readings: list[Reading] = []
    last: tuple[str, str] | None = None
    started = time.monotonic()
    status: dict[str, Any] = {}
    while time.monotonic() - started < timeout:
        status = kube.json("get", "dgljob", name, "-n", NS).get("status") or {}
        text = str(status.get(STATUS_PROGRESS) or "")
        detail = dict(status.get(STATUS_PROGRESS_DETAIL) or {})
        key = (text, repr(sorted(detail.items())))
        if key != last:
            last = key
            readings.append(Reading(time.monotonic(), text, detail))
        if status.get("phase") in ("Completed", "Failed"):
            break
        time.sleep(0.5)
    return readings, status


def spans(readings: list[Reading]) -> dict[str, tuple[float, float]]:
    """Each step's (start, end): its first reading, the first reading after it."""
    out: dict[str, tuple[float, float]] = {}
    for i, r in enumerate(readings):
        step = r.detail.get(STEP_NAME)
        if step in STEPS and step not in out:
            end = next(
                (s.t for s in readings[i + 1 :] if s.detail.get(STEP_NAME) != step or s.text
                 == "done"), None,
            )  # fmt: skip
            if end is not None:
                out[step] = (r.t, end)
    return out


def errors(readings: list[Reading], step: str, span: tuple[float, float]) -> list[float]:
    start, end = span
    real = end - start
    out = []
    for r in readings:
        left = r.detail.get(STEP_REMAINING)
        if r.detail.get(STEP_NAME) != step or left is None or not start <= r.t < end:
            continue
        if r.t - start < DONE_SHARE * real or r.text == "done":
            continue
        out.append((r.t - start + float(left)) / real - 1)
    return out


def first_estimate(readings: list[Reading], step: str) -> float | None:
    for r in readings:
        if r.detail.get(STEP_NAME) == step and r.detail.get(STEP_REMAINING) is not None:
            return float(r.detail[STEP_REMAINING])
    return None


def run_size(kube: Kubectl, py: str, nodes: int, a: argparse.Namespace) -> list[list[str]]:
    data = prepare_graph(
        py,
        CACHE / "bench" / "eta" / f"n{nodes}-d{a.avg_degree:g}-f{a.feat_dim}",
        ["--num-nodes", str(nodes), "--avg-degree", str(a.avg_degree),
         "--feat-dim", str(a.feat_dim)],
        say,
    )  # fmt: skip
    give_to_pods(data)
    manifest = job_manifest("ParMETIS", data, a.epochs)
    name = manifest["metadata"]["name"] = f"eta-{nodes}"
    kube.run("-n", NS, "delete", "dgljob", name, "--ignore-not-found", "--wait=true")
    kube.apply(manifest)
    readings, status = watch(kube, name)
    kube.run("-n", NS, "delete", "dgljob", name, "--wait=false")
    if status.get("phase") != "Completed":
        raise RuntimeError(f"{name}: the job ended {status.get('phase')}")
    rows = []
    for step, (start, end) in spans(readings).items():
        errs = errors(readings, step, (start, end))
        first = first_estimate(readings, step)
        worst = max(errs, key=abs) if errs else float("nan")
        rows.append([
            f"{nodes:,}", step, f"{end - start:.1f}",
            "-" if first is None else f"{first:.0f}", str(len(errs)),
            f"{worst:+.0%}", f"{statistics.median(errs):+.0%}" if errs else "-",
            "yes" if errs and abs(worst) <= TARGET else "no",
        ])  # fmt: skip
        say(f"{nodes:,} nodes: {step} {end - start:.1f}s, {len(errs)} readings, worst {worst:+.0%}")
        if errs:
            record(
                "eta_bench", f"{nodes:,} nodes, {step}: worst ETA error", abs(worst) * 100, "%",
                TARGET * 100, "the goal",
            )  # fmt: skip
        say("  readings (time into the step: remaining predicted / real): " + ", ".join(
            f"{r.t - start:.0f}s: {r.detail[STEP_REMAINING]}/{end - r.t:.0f}"
            for r in readings
            if r.detail.get(STEP_NAME) == step and r.detail.get(STEP_REMAINING) is not None
            and start <= r.t < end
        ))  # fmt: skip
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default="200000,800000,2000000", help="nodes of each graph")
    p.add_argument("--avg-degree", type=float, default=20.0)
    p.add_argument("--feat-dim", type=int, default=64)
    p.add_argument("--epochs", type=int, default=5)
    a = p.parse_args(argv)
    py = os.environ.get("DGL_PYTHON", sys.executable)
    kube = cluster()
    if kube is None:
        print("eta_bench: the cluster did not come up")
        return 1
    rows = [["nodes", "step", "real s", "first ETA s", "readings >=10%", "worst", "median",
             "within 30%"]]  # fmt: skip
    for nodes in (int(n) for n in a.sizes.split(",")):
        rows += run_size(kube, py, nodes, a)
    print("\n## ETA error: the span each reading predicted against the real one")
    print("| " + " | ".join(rows[0]) + " |")
    print("|" + " --- |" * len(rows[0]))
    for r in rows[1:]:
        print("| " + " | ".join(r) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
