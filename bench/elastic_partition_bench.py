"""One partitioning for every count of an elastic job, against a partition per count (issue 43).

    python -m bench.elastic_partition_bench [--scale 1.0] [--ranks 3] [--counts 2,3]

On a graph shaped like ogbn-products (examples/graphsage/make_chunked.py, ``--scale`` of its
nodes and edges; generated once under ~/.cache/dgl-operator/bench/elastic-partition/), with
demo-large's balance flags and PT-Scotch (``--partitioner ptscotch``: KaMinPar, the default,
partitions each count directly), ``--ranks`` MPI ranks of distpart on this machine (each
standing for a worker pod):

* **elastic**: one run for every count (``--num-parts <largest> --counts <the others>``): one
  PT-Scotch partitioning into fine parts, grouped into each count, every count's parts written;
* **direct**: one run per count, as a job of that many workers partitions today (PT-Scotch
  into that many parts; into 64 fine parts grouped, for a count that is not a power of two).

Printed per count: the edge cut of each (and their ratio: the issue asks within 10 %), the
balance of the grouped parts (the largest part's nodes and edges over the mean: at most 1.1),
and the seconds of the one elastic run against the direct runs together. Figures are printed,
not asserted. Needs mpirun and ``$DGL_PYTHON`` (``make bench`` sets them).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

from bench.support.console import sayer
from bench.support.figures import record
from bench.support.graphs import dgl_env, products_graph, rank_argv
from bench.support.measure import run_measured
from bench.support.paths import REPO
from chunkedgraph.job import PTSCOTCH
from localcluster.cluster import CACHE

FLAGS = ("--balance-train", "--balance-edges", "--partitioner", PTSCOTCH)

say = sayer("elastic_partition_bench")


def partition(py: str, graph: Path, ranks: int, work: Path, *args: str) -> dict[str, Any]:
    """One distpart run of ``ranks`` ranks: its partition_stats.json and wall seconds."""
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    argv = rank_argv(py, ranks, [], "--chunked", str(graph), "--graph-name", "graphsage",
                     "--out", str(work), *FLAGS, *args)  # fmt: skip
    _, seconds, _ = run_measured(argv, dgl_env(PYTHONPATH=str(REPO)))
    stats: dict[str, Any] = json.loads((work / "partition_stats.json").read_text())
    stats["wall_seconds"] = seconds
    for other in work.parent.glob(f"{work.name}@*"):
        shutil.rmtree(other, ignore_errors=True)
    shutil.rmtree(work, ignore_errors=True)
    return stats


def balance(sizes: list[int]) -> float:
    return max(sizes) / (sum(sizes) / len(sizes))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--scale", type=float, default=1.0, help="of products' nodes and edges")
    p.add_argument("--ranks", type=int, default=3, help="MPI ranks (the first attempt's workers)")
    p.add_argument("--counts", default="2,3", help="the elastic job's worker counts")
    a = p.parse_args(argv)
    counts = sorted({int(c) for c in a.counts.split(",")}, reverse=True)
    py = os.environ.get("DGL_PYTHON", sys.executable)
    graph = products_graph(py, a.scale, say)
    work = CACHE / "bench" / "elastic-partition-work" / "out"
    say(f"elastic: one run of {a.ranks} ranks for the counts {counts} ...")
    rest = [str(c) for c in counts[1:]]
    elastic = partition(py, graph, a.ranks, work, "--num-parts", str(counts[0]),
                        *(["--counts", *rest] if rest else []))  # fmt: skip
    direct = {}
    for c in counts:
        say(f"direct: {c} parts, one run of {a.ranks} ranks ...")
        direct[c] = partition(py, graph, a.ranks, work, "--num-parts", str(c))
    edges = elastic["num_edges"]
    say(
        f"graph: {elastic['num_nodes']:,} nodes, {edges:,} directed edges; {a.ranks} ranks; "
        f"{elastic['fine_parts']} fine parts"
    )
    print("| count | edge cut, grouped | edge cut, direct | grouped / direct "
          "| balance (nodes, edges) |")  # fmt: skip
    print("| --- | --- | --- | --- | --- |")
    for c in counts:
        mine = elastic["counts"][str(c)]
        theirs = direct[c]["edge_cut"]
        record("elastic_partition_bench", f"{c} parts: edge cut, grouped", mine["edge_cut"], "",
               theirs, "partitioned directly")  # fmt: skip
        print(
            f"| {c} | {mine['edge_cut']:,} ({100 * mine['edge_cut_fraction']:.2f}%) | "
            f"{theirs:,} ({100 * direct[c]['edge_cut_fraction']:.2f}%) | "
            f"{mine['edge_cut'] / theirs:.3f} | {balance(mine['nodes_per_part']):.3f}, "
            f"{balance(mine['edges_per_part']):.3f} |"
        )
    apart = sum(d["wall_seconds"] for d in direct.values())
    record("elastic_partition_bench", "one elastic run for every count", elastic["wall_seconds"],
           "s", apart, "a run per count")  # fmt: skip
    each = ", ".join(f"{c}: {d['wall_seconds']:.0f}s" for c, d in direct.items())
    print(
        f"\ntime: one elastic run {elastic['wall_seconds']:.0f}s (its steps "
        f"{json.dumps(elastic['seconds'])}) against {apart:.0f}s for a run per count "
        f"({each}); peak per "
        f"rank {max(elastic['peak_rss_mb_per_rank']):.0f} MiB against "
        f"{max(max(d['peak_rss_mb_per_rank']) for d in direct.values()):.0f} MiB"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
