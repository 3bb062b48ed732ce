"""The partition's time plan: before phase 1, how long partitioning will take; while it runs,
how much of it is done.

**Before.** Like the memory plan (:mod:`launcher.plans.memory`), a model of the graph's size,
``seconds = scale * edges ** power``, fitted by least squares (of the logarithms: the
partitioners are not linear over 10M-124M edges) to measured whole partition
steps (dglrun's ``[1/5] partition done in``), one fit per partitioner and rank count:
:data:`MEASURED` holds the measurements, so a new one is one more row. dglrun prints the
estimate beside the memory plan (``partition: ~2m50s for 2,449,029 nodes / 123,718,280 edges
on 3 ranks (kaminpar)``) and it is the partition step's first ETA.

**While.** distpart starts with a ``[distpart] <n> nodes, <m> edges from ...`` line and ends
each of its steps with a ``[distpart] memory <step>: ...`` line. :data:`STEP_SECONDS` gives each
step's measured share of the run, so the share done when a step ends gives the pace:
``total = (distpart's start) + (elapsed since it) / share_done``. That corrects the model for the
machine the job really runs on (the fits were measured on 2 cores; a cluster's nodes may be
slower or faster). DGL-API's partition entry point prints nothing comparable: its ETA is the
model's throughout.

Standard library only (dglrun's layer).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from chunkedgraph.job import KAMINPAR, PTSCOTCH
from launcher.plans.memory import GraphSize, Shape
from podcontract import DGL_API, PARMETIS
from podcontract.progress import human

DGL_METIS = "metis"  # DGL-API's partition entry point: DGL's METIS in one process

# (partitioner, ranks) -> [(directed edges, seconds of the whole partition step)], measured on
# this project's synthetic graphs (avg degree 20) and ogbn-products' size, 2 cores:
# distpart's from issue 44's bench/distpart_bench.py runs, and KaMinPar on 2 ranks also in the
# partitioner pod of the one-node cluster (bench/eta_bench.py: 4M, 16M and 40M edges);
# DGL-API's from examples/graphsage/load_and_partition_graph.py (2 parts, imports included).
MEASURED: dict[tuple[str, int], list[tuple[int, float]]] = {
    (KAMINPAR, 2): [
        (4_000_000, 8.2),
        (10_000_000, 10.0),
        (16_000_000, 15.4),
        (40_000_000, 29.0),
        (40_000_000, 30.2),
        (123_718_280, 51.0),
    ],
    (KAMINPAR, 3): [(10_000_000, 12.0), (40_000_000, 42.0), (123_718_280, 57.0)],
    (PTSCOTCH, 2): [(10_000_000, 11.0), (40_000_000, 36.0), (123_718_280, 262.0)],
    (PTSCOTCH, 3): [(10_000_000, 20.0), (40_000_000, 94.0), (123_718_280, 166.0)],
    (DGL_METIS, 1): [(2_000_000, 5.1), (8_000_000, 12.1)],
}
FLOOR_SECONDS = 5.0  # no estimate below this (processes start, files are read)

# distpart's steps: their seconds in one run (distpart's own partition_stats.json), at the
# sizes measured (directed edges): a run's shares are those of the nearest size. KaMinPar, 2
# ranks on 2 cores: the bench/eta_bench.py graphs of 800k and 2M nodes; 3 ranks: ogbn-products'
# size (issue 44's bench/distpart_bench.py). PT-Scotch: products' size, 3 ranks.
_PRODUCTS = {"read": 3.1, "adjacency": 5.1, "renumber": 8.4, "shuffle": 8.5, "write": 13.2}
STEP_SECONDS: dict[str, list[tuple[int, dict[str, float]]]] = {
    KAMINPAR: [
        (16_000_000, {"read": 0.9, "adjacency": 1.6, "parmetis": 6.5, "renumber": 2.0,
                      "shuffle": 1.0, "write": 2.5}),
        (40_000_000, {"read": 2.1, "adjacency": 4.5, "parmetis": 16.5, "renumber": 2.3,
                      "shuffle": 2.5, "write": 3.3}),
        (123_718_280, {**_PRODUCTS, "parmetis": 16.8}),
    ],
    PTSCOTCH: [(123_718_280, {**_PRODUCTS, "parmetis": 120.3})],
}  # fmt: skip
STEP_LINE = re.compile(r"\[distpart\] memory (\w+):")
START_LINE = re.compile(r"\[distpart\] \d+ nodes, \d+ edges from")  # its ranks are up
MAX_SHARE = 0.95  # every step seen, the run not over: still some left (the other counts)


@dataclass(frozen=True)
class Fit:
    scale: float  # seconds for one edge ...
    power: float  # ... times edges to this power

    def seconds(self, edges: int) -> float:
        grown: float = float(max(edges, 1)) ** self.power
        return max(FLOOR_SECONDS, self.scale * grown)


def fit(points: list[tuple[int, float]]) -> Fit:
    """Least squares of ``log seconds = log scale + power * log edges`` (proportional through
    one point when there is one)."""
    xs = [math.log(max(e, 1)) for e, _ in points]
    ys = [math.log(s) for _, s in points]
    n = len(points)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    power = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx if sxx else 1.0
    return Fit(math.exp(my - power * mx), power)


FITS = {key: fit(points) for key, points in MEASURED.items()}


@dataclass(frozen=True)
class Estimate:
    seconds: float
    partitioner: str
    ranks: int
    size: GraphSize

    def line(self) -> str:
        where = "one process" if self.ranks == 1 else f"{self.ranks} ranks"
        return (
            f"partition: ~{human(self.seconds)} for {self.size.nodes:,} nodes / "
            f"{self.size.edges:,} edges on {where} ({self.partitioner}; the time model's "
            "estimate, corrected by the steps' pace as they end)"
        )


def estimate(size: GraphSize, shape: Shape) -> Estimate:
    """The partition step's seconds for this graph and job shape."""
    if shape.mode == DGL_API:
        key = (DGL_METIS, 1)
    else:
        ranks = shape.ranks if shape.mode == PARMETIS else shape.workers
        measured = sorted(r for p, r in FITS if p == shape.partitioner)
        # the nearest rank count measured (none measured for this partitioner: KaMinPar's)
        part = shape.partitioner if measured else KAMINPAR
        counts = measured or sorted(r for p, r in FITS if p == KAMINPAR)
        key = (part, min(counts, key=lambda r: (abs(r - max(1, ranks)), r)))
    seconds = FITS[key].seconds(size.edges)
    return Estimate(seconds, key[0], key[1], size)


def step_ended(text: str) -> str | None:
    """The distpart step a line says has ended, or None."""
    m = STEP_LINE.search(text)
    return m.group(1) if m else None


def started(text: str) -> bool:
    """Does the line say distpart's ranks are up (its first line)?"""
    return START_LINE.search(text) is not None


def share_done(partitioner: str, edges: int, ended: set[str]) -> float:
    """The share of distpart's run done once the steps ``ended`` have (0 when none), by the
    steps' seconds measured at the size nearest ``edges``."""
    runs = STEP_SECONDS.get(partitioner) or STEP_SECONDS[KAMINPAR]
    _, seconds = min(runs, key=lambda run: abs(math.log(max(edges, 1) / run[0])))
    done = sum(v for k, v in seconds.items() if k in ended) / sum(seconds.values())
    return min(done, MAX_SHARE)
