"""Out-of-core workers against in-memory ones, on graphs whose node features are about 2 GiB
per worker, under shrinking worker memory limits: the issue's three ratios, where each
epoch's time goes, and what each of outofcore's reading-ahead techniques earns.

    python -m bench.out_of_core_bench [--graphs products,uniform] [--nodes 1000000]
                                      [--feat-dim 1024] [--avg-degree 10] [--epochs 3]
                                      [--fractions 0.5,0.25] [--no-techniques] [--readahead]

The graphs (:data:`GRAPHS`, each made once under ~/.cache/dgl-operator/bench/ooc/, with the
same nodes, features, mean degree and split): ``products``, examples/graphsage/make_chunked.py's
(heavy-tailed degrees and communities, as real graphs have: a few rows are pulled by most
minibatches), then ``uniform``, make_dataset.py --binary's (every edge's ends drawn uniformly),
for comparison. For each, the disk's sequential rate is measured first (its node data read in
16 MiB pieces from a dropped page cache), and every run is printed against it. 2
workers (dglrun's local transport: one network + mount namespace each, as pods), partitioned
with ParMETIS's PT-Scotch (whose parts are the same run after run, so that both kinds train
on the same parts; KaMinPar's threads make its parts differ) once per kind (in memory; out of
core: with the .npy feature files) and reused from the storage's partition cache after that.
Each worker's DGL server and trainer run in a memory cgroup of the worker's own (v1, as a
pod's: page cache counts), through bench/ooc_worker.py, which also drops the worker's
partition from the page cache before the server starts (and the bench drops the whole page
cache before each run, so that one run's reads do not press on the next's memory), records
each process's bytes read from disk (``wait4``'s ru_inblock) and runs it under
bench/ooc_profile.py (where its time goes, and the rows each epoch pulled).

Runs, all on the same graph and seed (the example samples ``--sample_ahead 2`` in all):

* ``in memory``: no out-of-core, a limit large enough for everything (the baseline);
* ``out of core, no limit``: the same large limit; every 0.2 s the bench samples each
  worker's cgroup: the peak of its anonymous and shared memory (``rss + shmem``: the graph's
  structure, the processes, the minibatches) plus :data:`FILE_PAGES` for the code and graph
  files' pages is the floor, what a worker needs besides its features' page cache (the peak
  of its usage less its feature files' cached pages, ``mincore``, is printed too: reads in
  flight make it an overestimate);
* ``out of core, f x``: for each fraction f, the limit is that floor plus f x the worker's
  node features: room for only that share of them as page cache;
* ``buffer, f x``: the same limits in buffer order (``--out-of-core-order Buffer``,
  outofcore.buffer: MariusGNN's, minibatches sampled inside a buffer of whole partitions
  read in sequence, ``--page-cache-fraction`` f: the buffer the limit's share holds); its
  target is an accuracy within a point of the in-memory run's, not the same losses;
* each technique's share, the run without it (``--no-techniques`` skips them): no limit
  without the servers' warming (``DGL_OUT_OF_CORE_WARM=0``), and each fraction without
  sampling ahead (``--sample_ahead 0``: each minibatch's rows are then asked for as it is
  sampled, just before its pull; the samples differ from the baseline's, see
  outofcore.patch);
* with ``--readahead``, once more at 0.5 x with the kernel's read-around for page faults.

Printed, per graph: per run the limit, epoch time (the mean over epochs, the first's cold reads
included) and the slowdown against the in-memory run, each epoch's time, each worker's cgroup
peak (page cache included) and anonymous peak, bytes read from disk per epoch (both workers'
servers and trainers, start-up included) and against the features an epoch touched (the
rows it pulled, the union over trainers) and the seconds those bytes take at the disk's
sequential rate, test accuracy; the share of the pulls that the hottest 1%, 10% and 25% of
the rows took (the node features'); the servers' warming lines and, in buffer order,
the trainers' (the buffer's size, its states, extra minibatches, reads); where an
epoch's time goes, per run; the memory plan's estimate against each run's peak; the issue's
targets, met or not. Figures are printed, not asserted. Needs root (namespaces, cgroups),
mpirun and $DGL_PYTHON (``make bench`` sets them).
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import itertools
import json
import mmap
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from bench.support.console import sayer
from bench.support.figures import record
from bench.support.graphs import dgl_env, heavy_tailed_graph, prepare_graph
from bench.support.measure import CGROUP_ROOT, MiB, group_peak, memory_cgroups
from bench.support.paths import EXAMPLE, REPO
from launcher.plans import memory as memplan
from localcluster.cluster import CACHE
from outofcore.patch import DEFAULT_READS, READS, READS_ENV, WARM_ENV
from podcontract import BUFFER_PARTITIONS, ORDER_BUFFER
from podcontract.settings import OUT_OF_CORE_ORDER

GRAPH = "graphsage"
WORKERS = 2
WORKER = Path(__file__).with_name("ooc_worker.py")
FILE_PAGES = 256 * MiB  # a worker's libraries' and graph files' pages (torch's, DGL's, ...)

say = sayer("")
_RUN_NUMBERS = itertools.count()


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
    chunked: Path,
    work: Path,
    ooc: bool,
    limit: int,
    label: str,
    extra: dict[str, str] | None = None,
    train_args: str = "",
    fraction: float | None = None,
) -> dict[str, Any]:
    """One dglrun, each worker in a memory cgroup of ``limit`` bytes; out of core with
    ``--page-cache-fraction`` ``fraction`` (else ``--plan-fraction``)."""
    # (each run of the process its own name: the storage keeps a run's checkpoints and
    # results, and a run of the same name would resume from another graph's)
    tag = f"ooc-bench-{os.getpid()}-{next(_RUN_NUMBERS)}"
    ws, records = work / f"run-{tag}", work / f"records-{tag}"
    records.mkdir(parents=True)
    python = work / "python"  # dglrun's --python: the worker wrapper under the DGL python
    python.write_text(f'#!/bin/sh\nexec {py} {WORKER} "$@"\n')
    python.chmod(0o755)
    root = CGROUP_ROOT / tag
    drop_page_cache()  # every run from the same page cache: what the run before read is gone
    with memory_cgroups(root, [f"worker-{i}" for i in range(WORKERS)], limit) as groups:
        argv = [
            sys.executable, "-m", "launcher.cli", "-g", GRAPH,
            "--num-partitions", str(WORKERS), "--partition-mode", "ParMETIS",
            "--chunked-graph", str(chunked), "--balance-train", "--balance-edges",
            "--partitioner", "ptscotch",
            "--train-entry-point", str(EXAMPLE / "train_dist.py"),
            "--num-epochs", str(a.epochs), "--batch-size", str(a.batch_size),
            "--train-args",
            f"--fan_out {a.fan_out} --eval_fan_out {a.fan_out} --eval_every 0 {train_args}",
            "--transport", "local", "--workspace", str(ws), "--python", str(python),
            "--storage", str(a.storage), "--share-partitions", "--run-name", tag,
            "--local-shm-size", str(a.shm_bytes),
        ]  # fmt: skip
        if ooc:
            share = a.plan_fraction if fraction is None else fraction
            argv += ["--out-of-core", "--page-cache-fraction", str(share)]
        env = dgl_env(
            PYTHONPATH=str(REPO), OOC_BENCH_CGROUPS=str(root), OOC_BENCH_RECORDS=str(records)
        )
        env.update(extra or {})
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
    metrics = json.loads((a.storage / "runs" / tag / "output" / "metrics.json").read_text())
    out["epochs_s"] = metrics["epoch_seconds"]
    out["epochs"] = len(metrics["epoch_seconds"])
    out["epoch_s"] = sum(metrics["epoch_seconds"]) / len(metrics["epoch_seconds"])
    out["accuracy"] = metrics["test_accuracy"]
    docs = [json.loads(p.read_text()) for p in records.glob("*.json") if p.name[:8] != "profile-"]
    profiles = [json.loads(p.read_text()) for p in records.glob("profile-*.json")]
    out["profile"] = breakdown(profiles)
    out["touched_bytes"] = touched(records, profiles)
    out["hot"] = hot_shares(records, profiles)
    out["read_bytes"] = sum(d["read_bytes"] for d in docs)
    out["rss_mib"] = {f"{d['host']}/{d['role']}": round(d["peak_rss_mib"]) for d in docs}
    for line in stdout.splitlines():
        if any(said in line for said in SAID):
            say(f"{label}: {line.strip()}")
    say(
        f"{label}: epoch {out['epoch_s']:.1f}s, peaks {[round(p) for p in out['peaks_mib']]} "
        f"MiB, read {out['read_bytes'] / MiB:.0f} MiB, accuracy {out['accuracy']:.4f}, "
        f"wall {wall:.0f}s"
    )
    shutil.rmtree(ws, ignore_errors=True)
    return out


def breakdown(profiles: list[dict[str, Any]]) -> dict[str, float]:
    """Seconds per epoch, the mean over the trainers (bench/ooc_profile.py's records): the
    epoch and its parts, and the servers' time answering the other machines' requests."""
    trainers = [p for p in profiles if p["role"] == "client" and p["epochs"]]
    servers = [p for p in profiles if p["role"] == "server"]
    out: dict[str, float] = {}
    if not trainers:
        return out
    epochs = len(trainers[0]["epochs"])
    for p in trainers:
        for e in p["epochs"]:
            for k, v in e.items():
                out[k] = out.get(k, 0.0) + v / (len(trainers) * epochs)
    for p in servers:
        for kind, s in p["served"].items():
            for k in ("seconds", "faults"):
                key = f"served.{kind}.{k}"
                out[key] = out.get(key, 0.0) + s[k] / (len(servers) * epochs)
    return out


def drop_page_cache() -> None:
    os.sync()
    Path("/proc/sys/vm/drop_caches").write_text("1\n")


def row_sizes(profiles: list[dict[str, Any]]) -> dict[str, int]:
    """Each data name's row size in bytes, as the trainers' profiles recorded it."""
    sizes: dict[str, int] = {}
    for p in profiles:
        sizes.update(p.get("row_bytes", {}))
    return sizes


def touched(records: Path, profiles: list[dict[str, Any]]) -> float:
    """The bytes of rows an epoch pulled, the mean over epochs: the union over the trainers
    of each epoch's rows (bench/ooc_profile.py's masks), times each data name's row size."""
    import numpy as np

    row_bytes = row_sizes(profiles)
    union: dict[str, Any] = {}
    for path in records.glob("touched-*.npz"):
        with np.load(path) as masks:
            for key in masks.files:
                union[key] = masks[key] if key not in union else union[key] | masks[key]
    epochs = {key.split("/", 1)[0] for key in union}
    total = sum(
        int(np.unpackbits(m).sum()) * row_bytes[key.split("/", 1)[1]] for key, m in union.items()
    )
    return total / max(len(epochs), 1)


HOT = (0.01, 0.10, 0.25)  # the hottest shares of rows whose share of the pulls is printed


def hot_shares(records: Path, profiles: list[dict[str, Any]]) -> tuple[str, list[float]] | None:
    """The node features' data name (the largest rows pulled) and the share of all its pulls,
    over the trainers and epochs (bench/ooc_profile.py's counts), that went to the hottest
    :data:`HOT` of its rows; None without counts."""
    import numpy as np

    row_bytes = row_sizes(profiles)
    if not row_bytes:
        return None
    name = max(row_bytes, key=lambda n: row_bytes[n])
    total: Any = None
    for path in records.glob("pulls-*.npz"):
        with np.load(path) as counts:
            if name in counts.files:
                c = counts[name].astype(np.int64)
                total = c if total is None else total + c
    if total is None or not total.sum():
        return None
    cum = np.cumsum(np.sort(total)[::-1])
    return name, [float(cum[max(1, round(f * len(cum))) - 1] / cum[-1]) for f in HOT]


def sequential_rate(folder: Path, most: int = 2 << 30) -> float:
    """Bytes per second the disk gives reading ``folder``'s .npy files (the largest first, up
    to ``most`` bytes) in 16 MiB reads from a dropped page cache: what an epoch's reads would
    take were they sequential."""
    files = sorted(folder.rglob("*.npy"), key=lambda f: f.stat().st_size, reverse=True)
    drop_page_cache()
    buf = bytearray(16 * MiB)
    done, started = 0, time.monotonic()
    for f in files:
        with open(f, "rb", buffering=0) as fh:
            while done < most:
                n = fh.readinto(buf)
                if not n:
                    break
                done += n
        if done >= most:
            break
    return done / max(time.monotonic() - started, 1e-9)


def print_hot(rows: list[dict[str, Any]]) -> None:
    say("")
    say(
        "pulls of the hottest rows (the node features', over the trainers and epochs): the "
        f"share of all pulls that went to the hottest {', '.join(f'{h:.0%}' for h in HOT)}"
    )
    for r in rows:
        if r.get("hot"):
            name, shares = r["hot"]
            cells = ", ".join(f"{s:.1%}" for s in shares)
            say(f"  {r['label']:<28} {cells} ({name})")


BREAKDOWN = (  # (heading, the profile's key): seconds (faults: a count) per epoch
    ("sampling", "sampling"),
    ("  ahead", "patch.ahead_seconds"),
    ("pulls", "features"),
    ("pull faults", "faults"),
    ("compute", "compute"),
    ("srv pulls", "served.PullRequest.seconds"),
    ("srv faults", "served.PullRequest.faults"),
    ("srv sampling", "served.SamplingRequest.seconds"),
)


def print_breakdown(rows: list[dict[str, Any]]) -> None:
    say("")
    say(
        "where an epoch's time goes (seconds per epoch, the mean over trainers and epochs; "
        "faults: major page faults per epoch; srv: a server answering the other machine)"
    )
    say(f"{'run':<28} {'epoch':>6} " + " ".join(f"{h:>12}" for h, _ in BREAKDOWN))
    for r in rows:
        prof = r.get("profile") or {}
        if not prof:
            continue
        cells = []
        for _, key in BREAKDOWN:
            v = prof.get(key)
            cells.append("-" if v is None else f"{v:.0f}" if "faults" in key else f"{v:.2f}")
        say(f"{r['label']:<28} {prof['wall']:>6.2f} " + " ".join(f"{c:>12}" for c in cells))


TARGETS = (  # (run label, the most its epoch may take, as a multiple of the in-memory epoch)
    ("out of core, no limit", 1.2),
    ("out of core, 0.5 x features", 1.5),
    ("out of core, 0.25 x features", 2.0),
    ("buffer, 0.5 x features", 1.2),
    ("buffer, 0.25 x features", 1.5),
)
BUFFER = {OUT_OF_CORE_ORDER.env: ORDER_BUFFER}  # dglrun's --out-of-core-order Buffer
# the workers' lines printed with each run: the servers' warming, buffer order's buffer
SAID = ("out-of-core: warming", "out-of-core: not warming", "out-of-core: buffer order")
ACCURACY_POINTS = 0.01  # buffer order: the accuracy within a point of the in-memory run's
READ_TARGET = 1.5  # bytes read per epoch, at most, as a multiple of the features touched


def print_targets(rows: list[dict[str, Any]], kind: str) -> None:
    base = rows[0]
    say("")
    say(f"targets (against the in-memory epoch of this run, {base.get('epoch_s', 0):.2f} s):")
    for label, most in TARGETS:
        r = next((r for r in rows if r["label"] == label), None)
        if r is None or "error" in r or "epoch_s" not in base:
            say(f"  {label}: not measured")
            continue
        ratio = r["epoch_s"] / base["epoch_s"]
        read = r["read_bytes"] / r["epochs"] / max(r["touched_bytes"], 1)
        record("out_of_core_bench", f"{kind}, {label}: epoch", r["epoch_s"], "s", base["epoch_s"],
               "in memory")  # fmt: skip
        if label.startswith("buffer"):  # (other losses: within a point)
            near = abs(r["accuracy"] - base["accuracy"]) <= ACCURACY_POINTS
            accuracy = f"within a point: {'met' if near else 'NOT met'}"
        else:
            same = r["accuracy"] == base["accuracy"]
            accuracy = "the same" if same else "NOT the same"
        say(
            f"  {label}: {ratio:.2f}x the in-memory epoch (target <= {most}x: "
            f"{'met' if ratio <= most else 'NOT met'}); read {read:.2f}x the features an "
            f"epoch touched (target <= {READ_TARGET}x: "
            f"{'met' if read <= READ_TARGET else 'NOT met'}); accuracy {r['accuracy']:.4f} "
            f"({accuracy})"
        )


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
    p.add_argument("--fractions", default="0.5,0.25")
    p.add_argument(
        "--buffer-capacities",
        default="",
        help="buffer order once more at each fraction's limit with a buffer of each of these "
        f"many of the {BUFFER_PARTITIONS} partitions (e.g. 6,5: more of the limit's page cache "
        "left to the rest than podcontract.buffer_holding leaves)",
    )
    p.add_argument(
        "--graphs",
        default="products,uniform",
        help=f"the graphs benched, in order, of: {', '.join(GRAPHS)}",
    )
    p.add_argument(
        "--no-techniques",
        dest="techniques",
        action="store_false",
        help="skip the runs without each technique (no limit without warming; each fraction "
        "without sampling ahead)",
    )
    p.add_argument(
        "--readahead",
        action="store_true",
        help="once more at 0.5 x with the kernel's read-around for page faults",
    )
    p.add_argument(
        "--keep-partitions",
        action="store_true",
        help=f"keep the runs' storage ({WORK / 'storage'}: each graph's partitions, GiBs at 1M "
        "nodes) for the next bench of the same graphs; by default it goes at the end",
    )
    p.add_argument("--plan-fraction", type=float, default=0.5, help="--page-cache-fraction")
    p.add_argument("--run-timeout", type=float, default=600, help="seconds per dglrun")
    a = p.parse_args()
    if os.geteuid() != 0 or not CGROUP_ROOT.is_dir():
        raise SystemExit(f"out_of_core_bench: needs root and {CGROUP_ROOT} (cgroup v1)")
    py = os.environ.get("DGL_PYTHON", sys.executable)
    kinds = [k for k in a.graphs.split(",") if k]
    unknown = sorted(set(kinds) - set(GRAPHS))
    if unknown:
        raise SystemExit(f"out_of_core_bench: --graphs: no graph {', '.join(unknown)} "
                         f"(known: {', '.join(GRAPHS)})")  # fmt: skip
    failed = 0
    graphs = {kind: graph(py, a, kind) for kind in kinds}
    prune_storage(WORK / "storage", graphs.values())
    for kind, chunked in graphs.items():
        say("")
        say(f"== {kind}: {GRAPHS[kind]}")
        failed |= bench_graph(py, a, kind, chunked)
    if not a.keep_partitions:  # (the graphs stay: making them is the slow part)
        shutil.rmtree(WORK / "storage", ignore_errors=True)
    return failed


def page_cache_fraction_for(capacity: int) -> float:
    """The smallest ``--page-cache-fraction`` for which dglrun sizes buffer order's buffer at
    ``capacity`` partitions (launcher.plans.memory.buffer_capacity: the rule is said there)."""
    for held in range(1, BUFFER_PARTITIONS + 1):
        if memplan.buffer_capacity(held / BUFFER_PARTITIONS) == capacity:
            return held / BUFFER_PARTITIONS
    raise SystemExit(
        f"out_of_core_bench: --buffer-capacities: no page cache fraction gives a buffer of "
        f"{capacity} of {BUFFER_PARTITIONS} partitions"
    )


def prune_storage(storage: Path, graphs: Iterable[Path]) -> None:
    """Remove the storages of the graphs this run does not bench: each graph's runs have one
    (``storage/<graph folder>``), whose partition cache holds GiBs (their partitions for every
    option the runs used, in memory and out of core), and a bench of other sizes before would
    otherwise fill the disk."""
    keep = {g.parent.name for g in graphs}
    for old in storage.glob("*") if storage.is_dir() else ():
        if old.name not in keep:
            shutil.rmtree(old) if old.is_dir() else old.unlink()


OOC = CACHE / "bench" / "ooc"  # the graphs, one folder each, and the runs' work folder
WORK = OOC / "work"

GRAPHS = {
    "products": "examples/graphsage/make_chunked.py: heavy-tailed degrees, communities",
    "uniform": "examples/graphsage/make_dataset.py: edges drawn uniformly",
}


def graph(py: str, a: argparse.Namespace, kind: str) -> Path:
    """The chunked graph of ``kind`` (:data:`GRAPHS`) at the bench's size, made once under
    the cache: its folder. Both have ``--avg-degree`` neighbours a node on average."""
    key = f"n{a.nodes}-d{a.avg_degree:g}-f{a.feat_dim}-t{a.train_frac:g}-e{a.test_frac:g}"
    if kind == "uniform":
        root = prepare_graph(
            py,
            OOC / key,
            ["--num-nodes", str(a.nodes), "--avg-degree", str(a.avg_degree), "--feat-dim",
             str(a.feat_dim), "--train-frac", str(a.train_frac), "--val-frac", str(a.test_frac),
             "--test-frac", str(a.test_frac), "--binary"],
            say,
        )  # fmt: skip
        return root / "chunked"
    return heavy_tailed_graph(
        py,
        OOC / f"products-{key}",
        ["--nodes", str(a.nodes), "--edges", str(round(a.nodes * a.avg_degree / 2)),
         "--feat-dim", str(a.feat_dim), "--train-frac", str(a.train_frac), "--val-frac",
         str(a.test_frac), "--test-frac", str(a.test_frac), "--chunks", "4"],
        say,
    )  # fmt: skip


def bench_graph(py: str, a: argparse.Namespace, kind: str, chunked: Path) -> int:
    """Every run on one graph, and its tables."""
    size = memplan.chunked_graph_size(chunked)
    features = size.nodes / WORKERS * size.node_bytes
    one_each = memplan.Processes(servers=1, trainers=1)
    shape = memplan.Shape(
        "ParMETIS",
        WORKERS,
        WORKERS,
        2,
        one_each,
        memplan.OutOfCore(True, a.plan_fraction),
        a.batch_size,
    )
    step = memplan.train_step(size, shape, None)
    assert step.smallest is not None
    in_memory = memplan.train_step(
        size, memplan.Shape("ParMETIS", WORKERS, WORKERS, 2, one_each), None
    )
    say(
        f"graph: {size.describe()}; node data per worker {features / 2**30:.2f} GiB; plan: in "
        f"memory ~{in_memory.estimate / 2**30:.2f} GiB per worker, out of core from "
        f"~{step.smallest / 2**30:.2f} GiB ({step.detail})"
    )
    rate = sequential_rate(chunked / "node_data")
    say(f"disk: {rate / MiB:.0f} MiB/s reading the graph's node data in 16 MiB reads (sequential)")
    a.shm_bytes = int(2 * features + 2**31)  # in memory: DGL's servers copy the features there
    work = WORK
    for old in work.glob("*"):  # (the storages' partition caches are kept: keyed by content)
        if old.name != "storage":
            shutil.rmtree(old) if old.is_dir() else old.unlink()
    a.storage = work / "storage" / chunked.parent.name
    a.storage.mkdir(parents=True, exist_ok=True)
    big = int(max(in_memory.estimate * 2, step.smallest + 2 * features))
    rows = [run(py, a, chunked, work, False, big, "in memory")]
    rows.append(run(py, a, chunked, work, True, big, "out of core, no limit"))
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
    for f in (float(x) for x in a.fractions.split(",") if x):
        limit = int(floor + f * features)
        rows.append(run(py, a, chunked, work, True, limit, f"out of core, {f:g} x features"))
    for f in (float(x) for x in a.fractions.split(",") if x):  # MariusGNN's order
        limit = int(floor + f * features)
        label = f"buffer, {f:g} x features"  # (its buffer: the share the limit has room for)
        rows.append(run(py, a, chunked, work, True, limit, label, BUFFER, fraction=f))
        for c in (int(x) for x in a.buffer_capacities.split(",") if x):
            label = f"buffer, {f:g} x, buffer {c}"
            held = page_cache_fraction_for(c)
            rows.append(run(py, a, chunked, work, True, limit, label, BUFFER, fraction=held))
    if a.readahead:  # the page-fault reads' other mode (outofcore.patch.READS_ENV)
        other = next(r for r in READS if r != DEFAULT_READS)
        label = f"out of core, 0.5 x, {other}"
        limit = int(floor + 0.5 * features)
        rows.append(run(py, a, chunked, work, True, limit, label, {READS_ENV: other}))
    if a.techniques:  # each technique's share: the run without it
        label = "out of core, no limit, no warm"
        rows.append(run(py, a, chunked, work, True, big, label, {WARM_ENV: "0"}))
        for f in (float(x) for x in a.fractions.split(",") if x):
            label = f"out of core, {f:g} x, no ahead"
            limit = int(floor + f * features)
            rows.append(run(py, a, chunked, work, True, limit, label, None, "--sample_ahead 0"))
    base = rows[0].get("epoch_s")
    say("")
    head = f"{'run':<28} {'limit GiB':>9} {'epoch s':>8} {'slowdown':>8} {'each epoch s':>16} "
    say(
        head + f"{'peak GiB (w0, w1)':>18} {'anon GiB':>9} {'read/epoch GiB':>14} "
        f"{'read/touched':>12} {'seq read s':>10} {'test acc':>8}"
    )
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
            f"{r['read_bytes'] / a.epochs / max(r['touched_bytes'], 1):>11.2f}x "
            f"{r['read_bytes'] / a.epochs / rate:>10.2f} {r['accuracy']:>8.4f}"
        )
    say(
        "(seq read s: an epoch's reads at the disk's sequential rate, the floor of its time "
        "were its bytes read in large pieces)"
    )
    print_hot(rows)
    print_breakdown(rows)
    say("")
    say("memory plan against the measured peak per worker (the estimate at the run's page cache")
    say("share: 1 with no limit, where the server warms every feature; the fraction's else):")
    for r in rows:
        if "error" in r:
            continue
        if r["label"] == "in memory":
            plan = in_memory.estimate
        else:
            share = 1.0 if "no limit" in r["label"] else float(r["label"].split(", ")[1].split()[0])
            ooc_shape = memplan.Shape(
                "ParMETIS",
                WORKERS,
                WORKERS,
                2,
                memplan.Processes(servers=1, trainers=1),
                memplan.OutOfCore(True, share),
                a.batch_size,
            )
            plan = memplan.train_step(size, ooc_shape, None).estimate
        peak = max(r["peaks_mib"]) * MiB
        say(
            f"  {r['label']:<28} plan {plan / 2**30:.2f} GiB, measured {peak / 2**30:.2f} GiB "
            f"({plan / peak:.2f}x)"
        )
    print_targets(rows, kind)
    return 0


if __name__ == "__main__":
    sys.exit(main())
