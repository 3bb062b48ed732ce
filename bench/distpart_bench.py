"""DistParMETIS's partitioners side by side: time, memory per rank and cut, and how they grow.

    python -m bench.distpart_bench [--nodes 2000000] [--avg-degree 20] [--feat-dim 100]
                                   [--ranks 2,3] [--partitioners kaminpar,ptscotch]
                                   [--limit-ranks 3] [--limit-fraction 0.5]
    python -m bench.distpart_bench --products [--scale 1.0] [--ranks 2,3]

Default: for each K in ``--ranks``, on one graph (make_dataset.py --binary, chunked once under
~/.cache/dgl-operator/bench/large/):

* ``P = 1``: the DGL-API partition entry point (examples/graphsage/load_and_partition_graph.py:
  ogb's loader, then ``dgl.distributed.partition_graph`` with METIS into K parts), one
  process; its peak resident set (``wait4``): the reference cut;
* ``P = K``, each partitioner of ``--partitioners``: ``mpirun -np K python -m distpart
  partition`` into K parts, each rank standing for one worker pod (here they are K processes
  on this machine: the bench runs where the cluster is not needed); each rank's peak and its
  per-step profile from partition_stats.json.

It prints, per K: the per-rank peak, its ratio to the single-process peak, the bound
``1.2 x single / P + fixed`` (``fixed``: torch and DGL imported, measured here), the time and
the edge cut next to METIS's.

``--limit-ranks P``: the proof at the limit. The P ranks (the default partitioner) run again,
each in its own memory cgroup (v1, like a pod's) limited to ``--limit-fraction`` of the
single-process peak, which that process could not have run in; the bench reports each
cgroup's peak and OOM count, and checks the partitions it wrote hold every node and edge once.

``--products`` (issue 44): KaMinPar and PT-Scotch in the same run, with demo-large's balance
flags, on 500k nodes / 10M edges, 2M / 40M (make_dataset.py) and a graph shaped like
ogbn-products (make_chunked.py at ``--scale``), at P = 2 and 3. Printed: the curve (the whole
partition step's seconds, the partitioner's, the per-rank peak and the cut of each run), the
per-edge slopes of a least-squares line through the sizes, and at products scale the ratios
of KaMinPar to PT-Scotch against the issue's targets (>= 3x faster, peak and cut no higher).
Every run's partitions are checked to hold every node and edge once. The figures also go to
~/.cache/dgl-operator/bench/distpart-products.json.

Figures are printed, not asserted. Needs root for the cgroups, mpirun and $DGL_PYTHON
(``make bench`` sets them).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

from bench.support.console import sayer
from bench.support.figures import record
from bench.support.graphs import dgl_env, prepare_graph, products_graph, rank_argv
from bench.support.measure import (
    CGROUP_ROOT,
    MiB,
    group_peak,
    memory_cgroups,
    oom_kills,
    run_measured,
)
from bench.support.paths import EXAMPLE, REPO
from chunkedgraph.job import KAMINPAR, PARTITIONERS, PTSCOTCH
from localcluster.cluster import CACHE

GRAPH = "graphsage"

# The parts' own edges whose source is another part's node (the cut, counted as DGL does:
# once per directed edge), and every node and edge once: the same check for both writers.
CUT_SCRIPT = r"""
import json, sys, dgl, torch
config = json.load(open(sys.argv[1]))
base = __import__("pathlib").Path(sys.argv[1]).parent
cut = nodes = edges = 0
for p in range(config["num_parts"]):
    g = dgl.load_graphs(str(base / config[f"part-{p}"]["part_graph"]))[0][0]
    inner = g.ndata["inner_node"].bool()
    own = g.edata["inner_edge"].bool()
    src, _ = g.edges()
    cut += int((own & ~inner[src]).sum())
    nodes += int(inner.sum())
    edges += int(own.sum())
print(json.dumps({"cut": cut, "nodes": nodes, "edges": edges}))
"""


say = sayer("distpart_bench")


def fixed_cost(py: str) -> float:
    code = (
        "import re, torch, dgl; "
        "print(re.search(r'VmRSS:\\s+(\\d+)', open('/proc/self/status').read()).group(1))"
    )
    out = subprocess.run([py, "-c", code], capture_output=True, text=True, env=dgl_env())
    return int(out.stdout.split()[-1]) / 1024


def check_parts(py: str, config: Path) -> dict[str, int]:
    out = subprocess.run(
        [py, "-c", CUT_SCRIPT, str(config)], capture_output=True, text=True, env=dgl_env(),
        check=True,
    )  # fmt: skip
    got: dict[str, int] = json.loads(out.stdout.strip().splitlines()[-1])
    return got


def single_process(py: str, data: Path, parts: int, work: Path) -> dict[str, Any]:
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    peak, seconds, _ = run_measured(
        [py, str(EXAMPLE / "load_and_partition_graph.py"), "--graph_name", GRAPH,
         "--workspace", str(work), "--rel_data_path", "parts", "--num_parts", str(parts),
         "--dataset_root", str(data / "raw_data")],
        dgl_env(),
    )  # fmt: skip
    parts_check = check_parts(py, work / "parts" / f"{GRAPH}.json")
    shutil.rmtree(work, ignore_errors=True)
    return {"peak_mib": peak, "seconds": seconds, **parts_check}


def distributed(
    py: str,
    chunked: Path,
    ranks: int,
    work: Path,
    partitioner: str = KAMINPAR,
    wrap: list[str] | None = None,
    flags: tuple[str, ...] = (),
) -> dict[str, Any]:
    """One distpart run of ``ranks`` ranks into as many parts: its partition_stats.json, wall
    seconds, memory log lines and the check of what it wrote."""
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    argv = rank_argv(
        py, ranks, wrap or [], "--chunked", str(chunked), "--graph-name", GRAPH,
        "--num-parts", str(ranks), "--out", str(work), "--partitioner", partitioner, *flags,
    )  # fmt: skip
    _, seconds, out = run_measured(argv, dgl_env(PYTHONPATH=str(REPO)))
    stats: dict[str, Any] = json.loads((work / "partition_stats.json").read_text())
    stats["wall_seconds"] = seconds
    stats["log"] = [ln for ln in out.splitlines() if ln.startswith("[distpart] memory")]
    stats["check"] = check_parts(py, work / f"{GRAPH}.json")
    shutil.rmtree(work, ignore_errors=True)
    if stats["check"] != {
        "cut": stats["edge_cut"],
        "nodes": stats["num_nodes"],
        "edges": stats["num_edges"],
    }:
        raise SystemExit(
            f"distpart_bench: {partitioner}, P = {ranks}: the partitions hold {stats['check']}, "
            f"not the graph's {stats['num_nodes']} nodes and {stats['num_edges']} edges once"
        )
    return stats


# -- the proof at the limit: each rank in a memory cgroup of its own --------------------------

RANK_WRAPPER = r"""#!/bin/sh
# One distpart rank inside the memory cgroup of its rank number (made by the bench).
echo $$ > "{root}/rank-$OMPI_COMM_WORLD_RANK/cgroup.procs" || exit 97
exec "$@"
"""


def limited(py: str, data: Path, ranks: int, limit: int, work: Path) -> dict[str, Any]:
    if not CGROUP_ROOT.is_dir() or os.geteuid() != 0:
        raise SystemExit(f"distpart_bench: --limit-ranks needs root and {CGROUP_ROOT}")
    root = CGROUP_ROOT / f"distpart-bench-{os.getpid()}"
    wrapper = work.parent / "rank-in-cgroup.sh"
    with memory_cgroups(root, [f"rank-{r}" for r in range(ranks)], limit) as groups:
        wrapper.parent.mkdir(parents=True, exist_ok=True)
        wrapper.write_text(RANK_WRAPPER.format(root=root))
        wrapper.chmod(0o755)
        stats = distributed(py, data / "chunked", ranks, work, wrap=[str(wrapper)])
        stats["cgroups"] = [
            {
                "peak_mib": group_peak(group) / MiB,
                # a kernel without the counter: 0 (the rank's exit status tells)
                "oom_kills": oom_kills((group / "memory.oom_control").read_text()) or 0,
            }
            for group in groups
        ]
        return stats


# -- report -----------------------------------------------------------------------------------


def gib(mib: float) -> str:
    return f"{mib / 1024:.2f}"


def large_graph(py: str, nodes: int, degree: float, feat_dim: int, train: float) -> Path:
    """make_dataset.py's graph of this shape, chunked, made once: its folder."""
    key = f"n{nodes}-d{degree:g}-f{feat_dim}-t{train:g}"
    return prepare_graph(
        py,
        CACHE / "bench" / "large" / key,
        ["--binary", "--num-nodes", str(nodes), "--avg-degree", str(degree),
         "--feat-dim", str(feat_dim), "--train-frac", str(train), "--val-frac", "0.05"],
        say,
    )  # fmt: skip


def compare(a: argparse.Namespace, py: str) -> int:
    """The default bench: the single process against DistParMETIS with each partitioner."""
    data = large_graph(py, a.nodes, a.avg_degree, a.feat_dim, a.train_frac)
    work = CACHE / "bench" / "distpart-work"
    fixed = fixed_cost(py)
    say(f"fixed cost of a rank that writes (torch + DGL imported): {fixed:.0f} MiB")
    partitioners = a.partitioners.split(",")
    rows = []
    for k in [int(x) for x in a.ranks.split(",")]:
        say(f"K = {k}: the single-process partition (DGL-API, METIS) ...")
        single = single_process(py, data, k, work)
        say(f"  peak {single['peak_mib']:.0f} MiB in {single['seconds']:.0f}s, cut {single['cut']}")
        for name in partitioners:
            say(f"K = {k}: DistParMETIS on {k} ranks, {name} ...")
            dist = distributed(py, data / "chunked", k, work, name)
            for line in dist["log"]:
                say(f"  {line}")
            rows.append((k, name, single, dist))
    edges = rows[0][3]["num_edges"]
    say(f"graph: {a.nodes:,} nodes, {edges:,} edges, {a.feat_dim} features")
    print(
        "| P | partitioner | per-pod peak (GiB) | ratio to single | bound 1.2 x single/P + fixed "
        "| time (s) | edge cut | cut vs METIS |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for k, name, single, dist in rows:
        base = single["peak_mib"]
        if name == partitioners[0]:
            print(
                f"| 1 | DGL-API (METIS), {k} parts | {gib(base)} | 1.00 | - | "
                f"{single['seconds']:.0f} | {single['cut']} ({100 * single['cut'] / edges:.2f}%) "
                "| 1.00 |"
            )
        peak = max(dist["peak_rss_mb_per_rank"])
        bound = 1.2 * base / k + fixed
        record("distpart_bench", f"P={k} {name}: per-rank peak", peak, "MiB", base,
               "single-process METIS")  # fmt: skip
        record("distpart_bench", f"P={k} {name}: edge cut", dist["edge_cut"], "",
               single["cut"], "single-process METIS")  # fmt: skip
        ok = "within" if peak <= bound else "ABOVE"
        print(
            f"| {k} | DistParMETIS ({name}), {k} ranks | {gib(peak)} | {peak / base:.2f} | "
            f"{gib(bound)} ({ok}) | {dist['wall_seconds']:.0f} | {dist['edge_cut']} "
            f"({100 * dist['edge_cut_fraction']:.2f}%) | {dist['edge_cut'] / single['cut']:.2f} |"
        )
    print()
    for k, name, _, dist in rows:
        print(f"per-step peaks, P = {k}, {name} (MiB per rank; seconds):")
        print(steps_table(dist))
    if a.limit_ranks:
        single = next((s for k, _, s, _ in rows if k == a.limit_ranks), rows[0][2])
        limit = int(a.limit_fraction * single["peak_mib"] * MiB)
        say(
            f"proof at the limit: {a.limit_ranks} ranks, each in a memory cgroup of "
            f"{gib(limit / MiB)} GiB ({a.limit_fraction:.0%} of the single-process peak, "
            f"{gib(single['peak_mib'])} GiB) ..."
        )
        got = limited(py, data, a.limit_ranks, limit, work)
        for r, cg in enumerate(got["cgroups"]):
            say(
                f"  rank {r}: cgroup peak {gib(cg['peak_mib'])} GiB of {gib(limit / MiB)} GiB, "
                f"process peak {gib(got['peak_rss_mb_per_rank'][r])} GiB, "
                f"OOM kills {cg['oom_kills']}"
            )
        say(
            f"  partitioned in {got['wall_seconds']:.0f}s: {got['check']['nodes']:,} nodes and "
            f"{got['check']['edges']:,} edges in {a.limit_ranks} parts (every one once), "
            f"cut {got['edge_cut']}"
        )
    return 0


def steps_table(dist: dict[str, Any]) -> str:
    """Each step's seconds and every rank's peak."""
    return "\n".join(
        f"  {step:>10}: {' / '.join(f'{x:.0f}' for x in peaks)}  ({dist['seconds'][step]}s)"
        for step, peaks in dist["memory_mb_per_step"]["peak"].items()
    )


# -- issue 44: the partitioners side by side, and the curve ------------------------------------

FLAGS = ("--balance-train", "--balance-edges")  # demo-large's (dgljob-large.yaml)
TARGET_SPEEDUP = 3.0


def slope(xs: list[float], ys: list[float]) -> tuple[float, float]:
    """The least-squares line ``y = a + b x``: (a, b)."""
    if len(set(xs)) < 2:
        return (ys[0] if ys else 0.0), 0.0
    b, a = statistics.linear_regression([float(x) for x in xs], [float(y) for y in ys])
    return a, b


def products(a: argparse.Namespace, py: str) -> int:
    """Both partitioners on the three sizes at each P; the curve, slopes and targets."""
    graphs = [
        ("500k / 10M", large_graph(py, 500_000, 20, 64, 0.1) / "chunked"),
        ("2M / 40M", large_graph(py, 2_000_000, 20, 100, 0.1) / "chunked"),
        (f"products x {a.scale:g}", products_graph(py, a.scale, say)),
    ]
    work = CACHE / "bench" / "distpart-work"
    partitioners = a.partitioners.split(",")
    runs: list[dict[str, Any]] = []
    for label, chunked in graphs:
        for k in [int(x) for x in a.ranks.split(",")]:
            for name in partitioners:
                say(f"{label}: {name}, {k} ranks ...")
                dist = distributed(py, chunked, k, work, name, flags=FLAGS)
                run = {
                    "graph": label, "ranks": k, "partitioner": name,
                    "nodes": dist["num_nodes"], "edges": dist["num_edges"],
                    "wall_seconds": round(dist["wall_seconds"], 1),
                    "seconds": dist["seconds"],
                    "peak_mib": max(dist["peak_rss_mb_per_rank"]),
                    "step_peak_mib": {
                        step: max(v) for step, v in dist["memory_mb_per_step"]["peak"].items()
                    },
                    "cut": dist["edge_cut_fraction"],
                }  # fmt: skip
                say(
                    f"  {run['wall_seconds']}s (partitioner {dist['seconds']['parmetis']}s), "
                    f"peak {run['peak_mib']:.0f} MiB per rank, cut {100 * run['cut']:.2f}%"
                )
                print(steps_table(dist), flush=True)
                runs.append(run)
    (CACHE / "bench" / "distpart-products.json").write_text(json.dumps(runs, indent=1) + "\n")
    print()
    print("| graph | nodes | directed edges | P | partitioner | partition step (s) "
          "| partitioner (s) | per-rank peak (MiB) | edge cut |")  # fmt: skip
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in runs:
        print(
            f"| {r['graph']} | {r['nodes']:,} | {r['edges']:,} | {r['ranks']} | "
            f"{r['partitioner']} | {r['wall_seconds']:.0f} | {r['seconds']['parmetis']:.1f} | "
            f"{r['peak_mib']:.0f} | {100 * r['cut']:.2f}% |"
        )
    print()
    print("per-edge slopes (least squares over the sizes): partition step = a + b x edges; "
          "per-rank peak = c + d x edges / P")  # fmt: skip
    print("| partitioner | P | a (s) | b (s per 10M edges) | c (MiB) | d (MiB per 1M edges/P) |")
    print("| --- | --- | --- | --- | --- | --- |")
    for name in partitioners:
        for k in [int(x) for x in a.ranks.split(",")]:
            mine = [r for r in runs if r["partitioner"] == name and r["ranks"] == k]
            ta, tb = slope([r["edges"] for r in mine], [r["wall_seconds"] for r in mine])
            ma, mb = slope([r["edges"] / k for r in mine], [r["peak_mib"] for r in mine])
            print(f"| {name} | {k} | {ta:.1f} | {tb * 1e7:.2f} | {ma:.0f} | {mb * 1e6:.1f} |")
    if set(partitioners) >= {KAMINPAR, PTSCOTCH}:
        print()
        label = graphs[-1][0]
        print(f"{label}, KaMinPar against PT-Scotch in this run (targets: >= "
              f"{TARGET_SPEEDUP:g}x faster, peak and cut no higher):")  # fmt: skip
        for k in [int(x) for x in a.ranks.split(",")]:
            new, old = (
                next(r for r in runs if r["graph"] == label and r["ranks"] == k
                     and r["partitioner"] == n)
                for n in (KAMINPAR, PTSCOTCH)
            )  # fmt: skip
            speed = old["wall_seconds"] / new["wall_seconds"]
            print(
                f"  P = {k}: partition step {new['wall_seconds']:.0f}s against "
                f"{old['wall_seconds']:.0f}s: {speed:.2f}x "
                f"({'met' if speed >= TARGET_SPEEDUP else 'NOT met'}); peak "
                f"{new['peak_mib']:.0f} against {old['peak_mib']:.0f} MiB: "
                f"{new['peak_mib'] / old['peak_mib']:.2f} "
                f"({'met' if new['peak_mib'] <= old['peak_mib'] else 'NOT met'}); cut "
                f"{100 * new['cut']:.2f}% against {100 * old['cut']:.2f}% "
                f"({'met' if new['cut'] <= old['cut'] else 'NOT met'}); the rest of the "
                f"pipeline {new['wall_seconds'] - new['seconds']['parmetis']:.0f}s against "
                f"{old['wall_seconds'] - old['seconds']['parmetis']:.0f}s"
            )
    return 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--nodes", type=int, default=2_000_000)
    p.add_argument("--avg-degree", type=float, default=20)
    p.add_argument("--feat-dim", type=int, default=100)
    p.add_argument("--train-frac", type=float, default=0.1)
    p.add_argument("--ranks", default="2,3", help="P values (also the number of parts)")
    p.add_argument("--partitioners", default=",".join(PARTITIONERS))
    p.add_argument("--limit-ranks", type=int, default=3, help="0: no proof at the limit")
    p.add_argument("--limit-fraction", type=float, default=0.5)
    p.add_argument("--products", action="store_true", help="the side by side run and the curve")
    p.add_argument("--scale", type=float, default=1.0, help="--products: of products' size")
    a = p.parse_args()
    unknown = set(a.partitioners.split(",")) - set(PARTITIONERS)
    if unknown:
        p.error(f"--partitioners: {', '.join(sorted(unknown))}: not one of {PARTITIONERS}")
    py = os.environ.get("DGL_PYTHON", sys.executable)
    return products(a, py) if a.products else compare(a, py)


if __name__ == "__main__":
    sys.exit(main())
