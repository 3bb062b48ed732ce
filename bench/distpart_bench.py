"""DistParMETIS's memory per rank against the single-process partition, on one large graph.

    python -m bench.distpart_bench [--nodes 2000000] [--avg-degree 20] [--feat-dim 100]
                                   [--ranks 2,3] [--limit-ranks 3] [--limit-fraction 0.5]

For each K in ``--ranks``, on the same graph (make_dataset.py --binary, chunked once under
~/.cache/dgl-operator/bench/large/):

* ``P = 1``: the DGL-API partition entry point (examples/graphsage/load_and_partition_graph.py:
  ogb's loader, then ``dgl.distributed.partition_graph`` with METIS into K parts), one
  process; its peak resident set (``wait4``);
* ``P = K``: ``mpirun -np K python -m distpart partition`` into K parts, each rank standing for
  one worker pod (here they are K processes on this machine: the bench runs where the cluster
  is not needed); each rank's peak and its per-step profile from partition_stats.json.

It prints, per K: the per-rank peak, its ratio to the single-process peak, the issue's bound
``1.2 x single / P + fixed`` (``fixed``: torch and DGL imported, measured here), the time and
the edge cut next to METIS's. Figures are printed, not asserted.

``--limit-ranks P``: the proof at the limit. The P ranks run again, each in its own memory
cgroup (v1, like a pod's) limited to ``--limit-fraction`` of the single-process peak, which
that process could not have run in; the bench reports each cgroup's peak and OOM count, and
checks the partitions it wrote hold every node and edge once.

Needs root for the cgroups, mpirun and $DGL_PYTHON (``make bench`` sets them).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from bench.support.console import sayer
from bench.support.graphs import dgl_env, prepare_graph, rank_argv
from bench.support.measure import (
    CGROUP_ROOT,
    MiB,
    group_peak,
    memory_cgroups,
    oom_kills,
    run_measured,
)
from bench.support.paths import EXAMPLE, REPO
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
    py: str, data: Path, ranks: int, work: Path, wrap: list[str] | None = None
) -> dict[str, Any]:
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    argv = rank_argv(
        py, ranks, wrap or [], "--chunked", str(data / "chunked"), "--graph-name", GRAPH,
        "--num-parts", str(ranks), "--out", str(work),
    )  # fmt: skip
    _, seconds, out = run_measured(argv, dgl_env(PYTHONPATH=str(REPO)))
    stats: dict[str, Any] = json.loads((work / "partition_stats.json").read_text())
    stats["wall_seconds"] = seconds
    stats["log"] = [ln for ln in out.splitlines() if ln.startswith("[distpart] memory")]
    stats["check"] = check_parts(py, work / f"{GRAPH}.json")
    shutil.rmtree(work, ignore_errors=True)
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
        stats = distributed(py, data, ranks, work, [str(wrapper)])
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


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--nodes", type=int, default=2_000_000)
    p.add_argument("--avg-degree", type=float, default=20)
    p.add_argument("--feat-dim", type=int, default=100)
    p.add_argument("--train-frac", type=float, default=0.1)
    p.add_argument("--ranks", default="2,3", help="P values (also the number of parts)")
    p.add_argument("--limit-ranks", type=int, default=3, help="0: no proof at the limit")
    p.add_argument("--limit-fraction", type=float, default=0.5)
    a = p.parse_args()
    py = os.environ.get("DGL_PYTHON", sys.executable)
    key = f"n{a.nodes}-d{a.avg_degree:g}-f{a.feat_dim}-t{a.train_frac:g}"
    data = prepare_graph(
        py,
        CACHE / "bench" / "large" / key,
        ["--binary", "--num-nodes", str(a.nodes), "--avg-degree", str(a.avg_degree),
         "--feat-dim", str(a.feat_dim), "--train-frac", str(a.train_frac), "--val-frac", "0.05"],
        say,
    )  # fmt: skip
    work = CACHE / "bench" / "distpart-work"
    fixed = fixed_cost(py)
    say(f"fixed cost of a rank that writes (torch + DGL imported): {fixed:.0f} MiB")
    rows = []
    for k in [int(x) for x in a.ranks.split(",")]:
        say(f"K = {k}: the single-process partition (DGL-API, METIS) ...")
        single = single_process(py, data, k, work)
        say(f"  peak {single['peak_mib']:.0f} MiB in {single['seconds']:.0f}s, cut {single['cut']}")
        say(f"K = {k}: DistParMETIS on {k} ranks ...")
        dist = distributed(py, data, k, work)
        for line in dist["log"]:
            say(f"  {line}")
        rows.append((k, single, dist))
    edges = rows[0][2]["num_edges"]
    say(f"graph: {a.nodes:,} nodes, {edges:,} edges, {a.feat_dim} features")
    print(
        "| P | partitioner | per-pod peak (GiB) | ratio to single | bound 1.2 x single/P + fixed "
        "| time (s) | edge cut | cut vs METIS |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for k, single, dist in rows:
        base = single["peak_mib"]
        print(
            f"| 1 | DGL-API, {k} parts | {gib(base)} | 1.00 | - | {single['seconds']:.0f} | "
            f"{single['cut']} ({100 * single['cut'] / edges:.2f}%) | 1.00 |"
        )
        peak = max(dist["peak_rss_mb_per_rank"])
        bound = 1.2 * base / k + fixed
        ok = "within" if peak <= bound else "ABOVE"
        print(
            f"| {k} | DistParMETIS, {k} ranks | {gib(peak)} | {peak / base:.2f} | "
            f"{gib(bound)} ({ok}) | {dist['wall_seconds']:.0f} | {dist['edge_cut']} "
            f"({100 * dist['edge_cut_fraction']:.2f}%) | {dist['edge_cut'] / single['cut']:.2f} |"
        )
    print()
    for k, _, dist in rows:
        prof = dist["memory_mb_per_step"]
        print(f"per-step peaks, P = {k} (MiB per rank; seconds):")
        for step, peaks in prof["peak"].items():
            print(
                f"  {step:>10}: {' / '.join(f'{x:.0f}' for x in peaks)}  ({dist['seconds'][step]}s)"
            )
        if dist["check"] != {"cut": dist["edge_cut"], "nodes": a.nodes, "edges": edges}:
            raise SystemExit(f"distpart_bench: P = {k}: the partitions hold {dist['check']}")
    if a.limit_ranks:
        single = next((s for k, s, _ in rows if k == a.limit_ranks), rows[0][1])
        limit = int(a.limit_fraction * single["peak_mib"] * MiB)
        say(
            f"proof at the limit: {a.limit_ranks} ranks, each in a memory cgroup of "
            f"{gib(limit / MiB)} GiB ({a.limit_fraction:.0%} of the single-process peak, "
            f"{gib(single['peak_mib'])} GiB) ..."
        )
        got = limited(py, data, a.limit_ranks, limit, work)
        ok = got["check"]["nodes"] == a.nodes and got["check"]["edges"] == edges
        for r, cg in enumerate(got["cgroups"]):
            say(
                f"  rank {r}: cgroup peak {gib(cg['peak_mib'])} GiB of {gib(limit / MiB)} GiB, "
                f"process peak {gib(got['peak_rss_mb_per_rank'][r])} GiB, "
                f"OOM kills {cg['oom_kills']}"
            )
        say(
            f"  partitioned in {got['wall_seconds']:.0f}s: {got['check']['nodes']:,} nodes and "
            f"{got['check']['edges']:,} edges in {a.limit_ranks} parts "
            f"({'every one once' if ok else 'MISSING ROWS'}), cut {got['edge_cut']}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
