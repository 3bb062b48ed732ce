"""Out-of-core workers against in-memory ones, on one graph whose node features are about
2 GiB per worker, under shrinking worker memory limits.

    python -m bench.out_of_core_bench [--nodes 1000000] [--feat-dim 512] [--avg-degree 10]
                                      [--epochs 2] [--fractions 0.75,0.5,0.25]

One graph (make_dataset.py --binary, chunked once under ~/.cache/dgl-operator/bench/ooc/), 2
workers (dglrun's local transport: one network + mount namespace each, as pods), partitioned
with ParMETIS once per kind (in memory; out of core: with the .npy feature files) and reused
from the storage's partition cache after that. Each worker's DGL server and trainer run in a
memory cgroup of the worker's own (v1, as a pod's: page cache counts), through
bench/ooc_worker.py, which also drops the worker's partition from the page cache before the
server starts and records each process's bytes read from disk (``wait4``'s ru_inblock).

Runs, all on the same graph and seed:

* ``in memory``: no out-of-core, a limit large enough for everything (the baseline);
* ``out of core, no limit``: the same large limit; every 0.2 s the bench samples each
  worker's cgroup: the peak of its anonymous and shared memory (``rss + shmem``: the graph's
  structure, the processes, the minibatches) plus :data:`FILE_PAGES` for the code and graph
  files' pages is the floor, what a worker needs besides its features' page cache (the peak
  of its usage less its feature files' cached pages, ``mincore``, is printed too: prefetches
  in flight make it an overestimate);
* ``out of core, f x``: for each fraction f, the limit is that floor plus f x the worker's
  node features: room for only that share of them as page cache; page faults read their own
  page (``MADV_RANDOM``, outofcore's default), and once more at 0.5 x with the kernel's
  read-around (``readahead``), to show what the advice saves.

Printed per run: the limit, epoch time (the mean over epochs, the first's cold reads
included) and the slowdown against the in-memory run, each epoch's time, each worker's cgroup
peak (page cache included) and anonymous peak, bytes read from disk per epoch (both workers'
servers and trainers, start-up included), and test accuracy. The memory plan's out-of-core
estimate is printed next to the measured floor.
Figures are printed, not asserted. Needs root (namespaces, cgroups), mpirun and $DGL_PYTHON
(``make bench`` sets them).
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import json
import mmap
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from bench.support.console import sayer
from bench.support.graphs import dgl_env, prepare_graph
from bench.support.measure import CGROUP_ROOT, MiB, group_peak, memory_cgroups
from bench.support.paths import EXAMPLE, REPO
from launcher import memplan
from localcluster.cluster import CACHE
from outofcore.patch import DEFAULT_READS, READS, READS_ENV

GRAPH = "graphsage"
WORKERS = 2
WORKER = Path(__file__).with_name("ooc_worker.py")
FILE_PAGES = 256 * MiB  # a worker's libraries' and graph files' pages (torch's, DGL's, ...)

say = sayer("")


_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                       ctypes.c_int, ctypes.c_long]  # fmt: skip
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
_libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
PAGE = os.sysconf("SC_PAGE_SIZE")


def resident(path: Path) -> int:
    """Bytes of ``path`` in the page cache (mincore(2) over a mapping that touches nothing)."""
    size = path.stat().st_size
    if size == 0:
        return 0
    fd = os.open(path, os.O_RDONLY)
    try:
        addr = _libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        if addr in (None, ctypes.c_void_p(-1).value):
            return 0
        try:
            pages = (size + PAGE - 1) // PAGE
            vec = (ctypes.c_ubyte * pages)()
            if _libc.mincore(addr, size, vec) != 0:
                return 0
            return sum(b & 1 for b in vec) * PAGE
        finally:
            _libc.munmap(addr, size)
    finally:
        os.close(fd)


class Sampler(threading.Thread):
    """Every 0.2 s, per worker cgroup: the peak of ``rss + shmem`` (memory.stat) and the peak
    of its usage less the bytes of its feature files in the page cache (``features[i]``, once
    the partitions are there): what the worker needs besides features, libraries and the
    graph's own file pages included."""

    def __init__(self, groups: list[Path], features: list[Path]) -> None:
        super().__init__(daemon=True)
        self.groups, self.features = groups, features
        self.anon, self.rest = [0] * len(groups), [0] * len(groups)
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(0.2):
            for i, g in enumerate(self.groups):
                with contextlib.suppress(OSError, ValueError):
                    stat = dict(
                        line.split() for line in (g / "memory.stat").read_text().splitlines()
                    )
                    anon = int(stat.get("total_rss", 0)) + int(stat.get("total_shmem", 0))
                    self.anon[i] = max(self.anon[i], anon)
                    usage = int((g / "memory.usage_in_bytes").read_text())
                    files = sorted(self.features[i].glob("part*/node_feat_npy/*.npy"))
                    cached = sum(resident(f) for f in files)
                    self.rest[i] = max(self.rest[i], usage - cached)


def run(
    py: str,
    a: argparse.Namespace,
    data: Path,
    work: Path,
    ooc: bool,
    limit: int,
    label: str,
    reads: str = "",
) -> dict[str, Any]:
    """One dglrun, each worker in a memory cgroup of ``limit`` bytes."""
    tag = f"ooc-bench-{os.getpid()}-{len(list(work.glob('records-*')))}"
    ws, records = work / f"run-{tag}", work / f"records-{tag}"
    records.mkdir(parents=True)
    python = work / "python"  # dglrun's --python: the worker wrapper under the DGL python
    python.write_text(f'#!/bin/sh\nexec {py} {WORKER} "$@"\n')
    python.chmod(0o755)
    root = CGROUP_ROOT / tag
    with memory_cgroups(root, [f"worker-{i}" for i in range(WORKERS)], limit) as groups:
        argv = [
            sys.executable, "-m", "launcher.cli", "-g", GRAPH,
            "--num-partitions", str(WORKERS), "--partition-mode", "ParMETIS",
            "--chunked-graph", str(data / "chunked"), "--balance-train", "--balance-edges",
            "--train-entry-point", str(EXAMPLE / "train_dist.py"),
            "--num-epochs", str(a.epochs), "--batch-size", str(a.batch_size),
            "--train-args", f"--fan_out {a.fan_out} --eval_fan_out {a.fan_out} --eval_every 0",
            "--transport", "local", "--workspace", str(ws), "--python", str(python),
            "--storage", str(work / "storage"), "--share-partitions", "--run-name", tag,
            "--local-shm-size", str(a.shm_bytes),
        ]  # fmt: skip
        if ooc:
            argv += ["--out-of-core", "--page-cache-fraction", str(a.plan_fraction)]
        env = dgl_env(
            PYTHONPATH=str(REPO), OOC_BENCH_CGROUPS=str(root), OOC_BENCH_RECORDS=str(records)
        )
        if reads:
            env[READS_ENV] = reads
        started = time.monotonic()
        worker_dirs = [ws / "workers" / f"worker-{i}" / "dgl_workspace" / "workload"
                       for i in range(WORKERS)]  # fmt: skip
        sampler = Sampler(groups, worker_dirs)
        sampler.start()
        timed_out = False
        try:
            with subprocess.Popen(
                argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=REPO
            ) as proc:
                try:
                    stdout, _ = proc.communicate(timeout=a.run_timeout)
                except subprocess.TimeoutExpired:
                    timed_out = True  # dglrun stops its processes and namespaces on SIGTERM
                    proc.terminate()
                    stdout, _ = proc.communicate(timeout=120)
        finally:
            sampler.done.set()
            sampler.join()
        wall = time.monotonic() - started
        out: dict[str, Any] = {"label": label, "limit_mib": limit / MiB, "wall": wall}
        out["anon_mib"] = [p / MiB for p in sampler.anon]
        out["rest_mib"] = [p / MiB for p in sampler.rest]
        out["peaks_mib"] = [group_peak(g) / MiB for g in groups]
        out["oom"] = [(g / "memory.oom_control").read_text().split()[-1] for g in groups]
    if proc.returncode != 0:
        last = stdout.strip().splitlines()[-1] if stdout.strip() else "?"
        out["error"] = f"did not finish in {a.run_timeout:.0f} s" if timed_out else last
        say(f"{label}: failed: {out['error']}")
        (work / f"{tag}.log").write_text(stdout)
        return out
    metrics = json.loads((work / "storage" / "runs" / tag / "output" / "metrics.json").read_text())
    out["epochs_s"] = metrics["epoch_seconds"]
    out["epoch_s"] = sum(metrics["epoch_seconds"]) / len(metrics["epoch_seconds"])
    out["accuracy"] = metrics["test_accuracy"]
    docs = [json.loads(p.read_text()) for p in records.glob("*.json")]
    out["read_bytes"] = sum(d["read_bytes"] for d in docs)
    out["rss_mib"] = {f"{d['host']}/{d['role']}": round(d["peak_rss_mib"]) for d in docs}
    say(
        f"{label}: epoch {out['epoch_s']:.1f}s, peaks {[round(p) for p in out['peaks_mib']]} "
        f"MiB, read {out['read_bytes'] / MiB:.0f} MiB, accuracy {out['accuracy']:.4f}, "
        f"wall {wall:.0f}s"
    )
    shutil.rmtree(ws, ignore_errors=True)
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--nodes", type=int, default=1_000_000)
    p.add_argument("--feat-dim", type=int, default=1024)
    p.add_argument("--avg-degree", type=float, default=10)
    p.add_argument("--train-frac", type=float, default=0.02)
    p.add_argument("--test-frac", type=float, default=0.01)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=1000)
    p.add_argument("--fan-out", default="10,5")
    p.add_argument("--fractions", default="0.75,0.5,0.25")
    p.add_argument("--plan-fraction", type=float, default=0.5, help="--page-cache-fraction")
    p.add_argument("--run-timeout", type=float, default=600, help="seconds per dglrun")
    a = p.parse_args()
    if os.geteuid() != 0 or not CGROUP_ROOT.is_dir():
        raise SystemExit(f"out_of_core_bench: needs root and {CGROUP_ROOT} (cgroup v1)")
    py = os.environ.get("DGL_PYTHON", sys.executable)
    key = f"n{a.nodes}-d{a.avg_degree:g}-f{a.feat_dim}-t{a.train_frac:g}-e{a.test_frac:g}"
    data = prepare_graph(
        py,
        CACHE / "bench" / "ooc" / key,
        ["--num-nodes", str(a.nodes), "--avg-degree", str(a.avg_degree), "--feat-dim",
         str(a.feat_dim), "--train-frac", str(a.train_frac), "--val-frac", str(a.test_frac),
         "--test-frac", str(a.test_frac), "--binary"],
        say,
    )  # fmt: skip
    size = memplan.chunked_graph_size(data / "chunked")
    features = size.nodes / WORKERS * size.node_bytes
    shape = memplan.Shape(
        "ParMETIS", WORKERS, WORKERS, 2, 1, 1, True, a.plan_fraction, a.batch_size
    )
    step = memplan.train_step(size, shape, None)
    assert step.smallest is not None
    in_memory = memplan.train_step(size, memplan.Shape("ParMETIS", WORKERS, WORKERS, 2, 1, 1), None)
    say(
        f"graph: {size.describe()}; node data per worker {features / 2**30:.2f} GiB; plan: in "
        f"memory ~{in_memory.estimate / 2**30:.2f} GiB per worker, out of core from "
        f"~{step.smallest / 2**30:.2f} GiB ({step.detail})"
    )
    a.shm_bytes = int(2 * features + 2**31)  # in memory: DGL's servers copy the features there
    work = CACHE / "bench" / "ooc" / "work"
    for old in work.glob("*"):  # (the storage's partition cache is kept: keyed by content)
        if old.name != "storage":
            shutil.rmtree(old) if old.is_dir() else old.unlink()
    (work / "storage").mkdir(parents=True, exist_ok=True)
    big = int(max(in_memory.estimate * 2, step.smallest + 2 * features))
    rows = [run(py, a, data, work, False, big, "in memory")]
    rows.append(run(py, a, data, work, True, big, "out of core, no limit"))
    if "error" in rows[-1]:
        return 1
    floor = max(rows[-1]["anon_mib"]) * MiB + FILE_PAGES
    say(
        f"out of core, measured floor: {floor / 2**30:.2f} GiB per worker (rss + shmem "
        f"{max(rows[-1]['anon_mib']) / 1024:.2f} GiB + {FILE_PAGES / 2**30:.2f} GiB of file "
        f"pages; usage less the feature files' cached pages peaked at "
        f"{max(rows[-1]['rest_mib']) / 1024:.2f} GiB); the plan's smallest limit: "
        f"{step.smallest / 2**30:.2f} GiB"
    )
    for f in (float(x) for x in a.fractions.split(",")):
        limit = int(floor + f * features)
        rows.append(run(py, a, data, work, True, limit, f"out of core, {f:g} x features"))
    # the page-fault reads' other mode, at the issue's 0.5 x (outofcore.patch.READS_ENV)
    other = next(r for r in READS if r != DEFAULT_READS)
    label = f"out of core, 0.5 x, {other}"
    rows.append(run(py, a, data, work, True, int(floor + 0.5 * features), label, other))
    base = rows[0].get("epoch_s")
    say("")
    head = f"{'run':<28} {'limit GiB':>9} {'epoch s':>8} {'slowdown':>8} {'each epoch s':>16} "
    say(head + f"{'peak GiB (w0, w1)':>18} {'anon GiB':>9} {'read/epoch GiB':>14} {'test acc':>8}")
    for r in rows:
        if "error" in r:
            say(f"{r['label']:<28} {r['limit_mib'] / 1024:>9.2f}  failed: {r['error'][:80]}")
            continue
        slow = f"{r['epoch_s'] / base:.2f}x" if base else "-"
        peaks = ", ".join(f"{p / 1024:.2f}" for p in r["peaks_mib"])
        anon = max(r["anon_mib"]) / 1024
        say(
            f"{r['label']:<28} {r['limit_mib'] / 1024:>9.2f} {r['epoch_s']:>8.2f} {slow:>8} "
            f"{' '.join(f'{x:.1f}' for x in r['epochs_s']):>16} "
            f"{peaks:>18} {anon:>9.2f} {r['read_bytes'] / a.epochs / 2**30:>14.2f} "
            f"{r['accuracy']:>8.4f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
