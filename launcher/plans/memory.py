"""The memory plan: before anything is partitioned, how much memory each step will need.

A distributed GNN job fails late and expensively when a step does not fit its pod: the
kernel kills the partitioner after an hour of METIS, or the DGL servers once the partitions
were shipped. dglrun therefore estimates each step's peak resident memory from the graph's
sizes and the job's shape, and checks it against the pods' memory limit at once:

* ``partition``: where the graph is partitioned. ``DGL-API``: one process (the partition entry
  point) in the partitioner pod; ``ParMETIS``: ``ranks`` MPI ranks, together, in the
  partitioner pod; ``DistParMETIS``: one rank in each worker pod.
* ``train``: each worker pod, holding ``servers`` DGL servers (each keeps its partition: the
  edges into its nodes, the 1-hop halo and the inner nodes' data) and ``trainers`` trainers.
  Out of core (``--out-of-core``, :mod:`outofcore`) the node data stays on the worker's disk,
  memory-mapped: the pod needs what the kernel cannot drop (the servers' shared-memory
  structure, the processes' own memory, each trainer's sampling working set:
  :func:`working_set`), the pages of the libraries it runs, and the page cache it is given
  for the features, ``--page-cache-fraction`` of them. That fraction is what the estimate
  shows; the step fits down to no page cache at all (every feature read from disk, slower),
  which is the smallest memory limit the plan names. This part of the model counts what the
  pod's memory cgroup counts, each shared page once (:data:`OUT_OF_CORE_COSTS`).

A step that will not fit fails the job at once with one line naming the step, the estimate,
the limit and what to change (:class:`PlanError`, its text starts with podcontract's
``MEMORY_PLAN_PREFIX``, which the operator turns into the condition reason
``MemoryPlanExceeded``). The estimates are printed and
reported next to the peaks measured afterwards (``status.memory``), so the model can be checked.

The model is linear in the graph's sizes, with coefficients (:data:`COSTS`) measured on this
project's synthetic graphs with DGL 2.1 (``bench/large_graph_bench.py`` prints the check):
``peak = base + per_edge * edges + per_node * nodes + data_copies * nodes * node_bytes``,
spread over the processes that share the graph. Graphs whose partitions cut few edges need
less for ``train`` than estimated: the halo is taken as large as a random graph's.

Standard library only (dglrun's layer).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path

import chunkedgraph
from chunkedgraph import ChunkedError, ChunkedGraph
from chunkedgraph.job import KAMINPAR, PTSCOTCH
from launcher.errors import LauncherError
from podcontract import (
    BUFFER_PARTITIONS,
    DGL_API,
    DIST_PARMETIS,
    MEMORY_PLAN_PREFIX,
    ORDER_BUFFER,
    PARMETIS,
    buffer_holding,
)
from podcontract.quantity import parse_quantity
from podcontract.settings import OUT_OF_CORE_ORDER, PAGE_CACHE_FRACTION

MiB = 1 << 20
GiB = 1 << 30
WARN_FRACTION = 0.8  # an estimate above this share of the limit is worth a warning
LIMIT_FIELD = "spec.dglReplicaSpecs.Worker.template.spec.containers[0].resources.limits.memory"


class PlanError(LauncherError, ValueError):
    """A step will not fit, or the graph's sizes cannot be read."""


@dataclass(frozen=True)
class GraphSize:
    nodes: int
    edges: int  # directed edges, as the DGL graph holds them
    node_bytes: int  # node data bytes per node (features, labels, masks)
    edge_bytes: int = 0  # edge data bytes per edge
    source: str = ""  # where the sizes come from, for messages

    def describe(self) -> str:
        return f"{self.nodes:,} nodes, {self.edges:,} edges, {self.node_bytes} B of data per node"


@dataclass(frozen=True)
class Cost:
    """One process's peak: ``base`` MiB plus bytes per edge, per node and copies of the
    node data, for the share of the graph it holds."""

    base_mib: float
    per_edge: float
    per_node: float
    data_copies: float

    def bytes(self, nodes: float, edges: float, node_bytes: float, edge_bytes: float) -> float:
        share = self.per_edge * edges + self.per_node * nodes
        data = self.data_copies * (nodes * node_bytes + edges * edge_bytes)
        return self.base_mib * MiB + share + data


# Measured with DGL 2.1, torch 2.2 on make_dataset.py graphs of 100k and 300k nodes (degree 20,
# 100 features; dglrun --transport local, peak resident set of each process), checked against
# bench/large_graph_bench.py's bigger graph; the distpart rank's on 500k nodes / 10M edges / 64
# features and 2M / 40M / 100 (bench/distpart_bench.py). Per process, for the share of the
# graph it holds.
COSTS: dict[str, Cost] = {
    # load (ogb) + dgl.distributed.partition_graph (METIS, reshuffle, save): the whole graph
    "dgl-partition": Cost(base_mib=650, per_edge=190.0, per_node=0.0, data_copies=3.0),
    # a distpart rank (DistParMETIS: one per worker pod; ParMETIS: ranks in the partitioner
    # pod) peaks in one of two steps (its log and partition_stats.json profile every step):
    # ParMETIS itself, for the rank's share of the edges (PT-Scotch's 32-bit build, ~90-150 B
    # per edge of the share, and the distributed adjacency and edge list; no node data yet) ...
    "parmetis-rank": Cost(base_mib=60, per_edge=118.0, per_node=0.0, data_copies=0.0),
    # ... or, with KaMinPar (the default), in the steps every rank does on its share (the
    # adjacency, renumbering, shipping), or, rank 0, in KaMinPar: the edges it read (16 B
    # each) and KaMinPar's own copy of the whole structure
    "kaminpar-rank": Cost(base_mib=60, per_edge=90.0, per_node=0.0, data_copies=0.0),
    "kaminpar-first": Cost(base_mib=150, per_edge=16.0, per_node=0.0, data_copies=0.0),
    "kaminpar-graph": Cost(base_mib=0, per_edge=20.0, per_node=0.0, data_copies=0.0),
    # ... or writing one part: torch + DGL imported (~460 MiB), the part's edges (int64 ids,
    # local ids made in place) and its nodes' data, received once and saved
    "distpart-write": Cost(base_mib=470, per_edge=45.0, per_node=0.0, data_copies=1.75),
    # a DGL server: its partition (the edges into its nodes; its nodes and the 1-hop halo)
    # and its own nodes' data
    "server": Cost(base_mib=490, per_edge=30.0, per_node=112.0, data_copies=0.75),
    # a trainer: torch, DGL, the model, its sampled blocks, and the pages of the server's
    # shared-memory partition it touched (counted again: the pod's peak is at most the sum)
    "trainer": Cost(base_mib=690, per_edge=37.5, per_node=150.0, data_copies=1.125),
}
# (server and trainer: the size-dependent parts are a least-squares fit of the 100k-, 300k-
# and 2M-node graphs' measured peaks, 2 workers; the 2M graph's halo is smaller than the
# random-graph worst case the partition sizes assume)

# Out of core, what the pod's memory cgroup holds that the kernel cannot drop (anonymous and
# shared memory: ``rss + shmem``), per process, without the node data; measured by
# bench/out_of_core_bench.py (its "measured floor") on its products-shaped graphs of 300k, 1M
# and 2M nodes (degree 10, 128 and 1024 features, 2 workers, batch 1000, fan-out 10,10).
# A least-squares fit of the four graphs' floors (each within 3%; the per-edge and per-node
# split is COSTS["server"]'s, which these graphs of one degree cannot tell apart).
# Unlike COSTS (each process's resident set), a page is counted once: the servers' structure
# is shared memory that the trainers map, and the libraries' pages are file pages
# (:data:`LIBRARY_PAGES`, once per pod).
OUT_OF_CORE_COSTS: dict[str, Cost] = {
    # the partition's structure in shared memory, and the process (python, torch, DGL)
    "server": Cost(base_mib=277, per_edge=22.5, per_node=84.0, data_copies=0.0),
    # the process, the model, and its own copies of structure while it samples
    "trainer": Cost(base_mib=277, per_edge=10.0, per_node=37.5, data_copies=0.0),
}
LIBRARY_PAGES = 256 * MiB  # torch's, DGL's and python's code, mapped from the image


@dataclass(frozen=True, kw_only=True)
class Processes:
    """DGL's processes on each worker: what the memory plan counts and phase 5 starts
    (launcher.training.train). dglrun's options are this group (launcher.options)."""

    servers: int  # DGL servers per worker
    trainers: int  # trainers per worker
    samplers: int = 0  # sampler processes per trainer


@dataclass(frozen=True)
class OutOfCore:
    """Node features memory-mapped from the workers' disk (``outofcore``), and the share of
    them the memory plan counts as page cache. dglrun's options are this group."""

    enabled: bool = False
    page_cache_fraction: float = PAGE_CACHE_FRACTION.when_unset
    order: str = OUT_OF_CORE_ORDER.when_unset  # Exact | Buffer (outofcore.buffer)


def buffer_capacity(fraction: float, partitions: int = BUFFER_PARTITIONS) -> int:
    """Buffer order's buffer, in physical partitions, within the page cache the plan counts
    (``fraction`` of the worker's node data): :func:`podcontract.buffer_holding`."""
    return buffer_holding(int(fraction * partitions + 1e-9), partitions)


@dataclass(frozen=True)
class Shape:
    """The job's shape, as dglrun runs it."""

    mode: str  # DGL-API | ParMETIS | DistParMETIS
    workers: int
    parts: int
    ranks: int  # MPI ranks of ParMETIS in the partitioner pod (DistParMETIS: = workers)
    processes: Processes
    out_of_core: OutOfCore = OutOfCore()
    batch_size: int = 1000  # seeds per minibatch (out of core: the sampling working set)
    partitioner: str = KAMINPAR  # the ParMETIS modes' (chunkedgraph.job.PARTITIONERS)


# Out of core, the nodes a minibatch gathers per seed: GraphSAGE's 2 layers with the example's
# fan-out 10,10 (1 + 10 + 100), and the bytes a trainer holds per such node per byte of node
# data: measured (bench/out_of_core_bench.py, the same graph with 128 and 1024 features: the
# floor grew by 0.39 GiB for 3584 more bytes per node) at one copy. The rows read ahead for
# the next minibatch are page cache: the page cache fraction's, not the smallest limit's.
NODES_PER_SEED = 111
# Buffer order, per edge of a worker's partition: its edge mask (a float32 in the servers'
# shared memory), the trainers' edge ids sorted by key (an int64) and what DGL's sampling with
# a prob holds, measured: the worker's anonymous memory peak 0.21 GiB above Exact order's at
# 3M edges a partition (bench/out_of_core_bench.py --avg-degree 30 --fractions 0.5).
BUFFER_EDGE_BYTES = 76
WORKING_COPIES = 1.0


@dataclass(frozen=True)
class Step:
    name: str  # "partition" or "train"
    where: str  # the pod(s), for messages: "the partitioner pod", "each worker pod"
    what: str  # the processes, for messages
    estimate: int  # bytes, for one pod
    limit: int | None  # bytes; None: no limit known
    smallest: int | None = None  # out of core: the least it runs in (no page cache)
    detail: str = ""  # out of core: what the estimate is made of, for messages

    @property
    def need(self) -> int:
        """What must fit the limit: the estimate, or out of core the smallest it runs in."""
        return self.estimate if self.smallest is None else self.smallest

    @property
    def fits(self) -> bool:
        return self.limit is None or self.need <= self.limit

    def as_status(self) -> dict[str, float]:
        out: dict[str, float] = {"estimateMiB": round(self.estimate / MiB)}
        if self.limit is not None:
            out["limitMiB"] = round(self.limit / MiB)
        return out


def partition_step(g: GraphSize, shape: Shape, limit: int | None) -> Step:
    if shape.mode == DGL_API:
        est = COSTS["dgl-partition"].bytes(g.nodes, g.edges, g.node_bytes, g.edge_bytes)
        what = "the partition entry point"
        return Step("partition", "the partitioner pod", what, int(est), limit)
    ranks = max(1, shape.ranks if shape.mode == PARMETIS else shape.workers)
    parts = max(1, shape.parts)
    # a rank writes one part at a time (ranks < parts: in rounds)
    write = COSTS["distpart-write"].bytes(
        g.nodes / parts, g.edges / parts, g.node_bytes, g.edge_bytes
    )
    if shape.partitioner == KAMINPAR:
        share = COSTS["kaminpar-rank"].bytes(g.nodes / ranks, g.edges / ranks, 0, 0)
        first = COSTS["kaminpar-first"].bytes(g.nodes / ranks, g.edges / ranks, 0, 0)
        first += COSTS["kaminpar-graph"].bytes(g.nodes, g.edges, 0, 0)
        one = max(first, share, write)
        every = (ranks - 1) * max(share, write) + one
    else:
        one = max(COSTS["parmetis-rank"].bytes(g.nodes / ranks, g.edges / ranks, 0, 0), write)
        every = one * ranks
    if shape.mode == PARMETIS:
        return Step(
            "partition", "the partitioner pod", f"{ranks} ParMETIS ranks", int(every), limit
        )
    # (KaMinPar: rank 0's pod, the largest; every worker has the same limit)
    return Step("partition", "each worker pod", "one DistParMETIS rank", int(one), limit)


def train_step(g: GraphSize, shape: Shape, limit: int | None) -> Step:
    parts = max(1, shape.parts)
    # a partition holds the edges into its nodes; its nodes are its own plus the halo, at
    # most every other node and at most one per edge (a random graph's worst case); the node
    # data is its own nodes'
    inner = g.nodes / parts
    nodes = inner + min(g.nodes - inner, g.edges / parts)
    edges = g.edges / parts

    def one(cost: Cost) -> float:
        structure = cost.bytes(nodes, edges, 0, 0)
        return structure + cost.data_copies * (inner * g.node_bytes + edges * g.edge_bytes)

    p = shape.processes
    what = f"{p.servers} DGL server(s) and {p.trainers} trainer(s)"
    if shape.out_of_core.enabled:
        return _out_of_core_step(g, shape, limit, nodes, edges, inner, what)
    est = p.servers * one(COSTS["server"]) + p.trainers * one(COSTS["trainer"])
    return Step("train", "each worker pod", what, int(est), limit)


def working_set(g: GraphSize, shape: Shape, nodes: float) -> float:
    """Out of core: a trainer's minibatch rows in memory at once (at most its partition's)."""
    return min(nodes, shape.batch_size * NODES_PER_SEED) * g.node_bytes * WORKING_COPIES


def _out_of_core_step(
    g: GraphSize,
    shape: Shape,
    limit: int | None,
    nodes: float,
    edges: float,
    inner: float,
    what: str,
) -> Step:
    server, trainer = OUT_OF_CORE_COSTS["server"], OUT_OF_CORE_COSTS["trainer"]
    p, fraction = shape.processes, shape.out_of_core.page_cache_fraction
    structure = p.servers * server.bytes(nodes, edges, 0, 0) + p.trainers * (
        trainer.bytes(nodes, edges, 0, 0)
    )
    # edge data stays in shared memory, as in memory (once: the trainers map the servers')
    structure += p.servers * edges * g.edge_bytes + LIBRARY_PAGES
    buffered = shape.out_of_core.order == ORDER_BUFFER
    if buffered:  # buffer order's edge mask and the trainers' view of it, per edge
        structure += edges * BUFFER_EDGE_BYTES
    working = p.trainers * working_set(g, shape, nodes)
    features = inner * g.node_bytes
    cache = fraction * features
    detail = (
        f"structure {gib(structure)} + sampling working set {gib(working)} + page cache "
        f"{fraction:g} x {gib(features)} of node data"
    )
    if buffered:
        detail += (
            f"; buffer order: {buffer_capacity(fraction)} of {BUFFER_PARTITIONS} partitions "
            "of it in memory at a time, one more read ahead"
        )
    return Step(
        "train",
        "each worker pod",
        f"{what}, out of core",
        int(structure + working + cache),
        limit,
        smallest=int(structure + working),
        detail=detail,
    )


def plan(g: GraphSize, shape: Shape, limit: int | None) -> list[Step]:
    return [partition_step(g, shape, limit), train_step(g, shape, limit)]


def gib(n: float) -> str:
    return f"{n / GiB:.1f} GiB"


MAX_WORKERS = 256  # where the search for "how many workers" gives up


def _first_workers(shape: Shape, start: int, ok: Callable[[Shape], bool]) -> int | None:
    """The fewest workers from ``start`` (one partition each) whose shape is ``ok``."""
    for workers in range(start, MAX_WORKERS + 1):
        if ok(replace(shape, workers=workers, parts=workers)):
            return workers
    return None


def _workers_needed(g: GraphSize, shape: Shape, limit: int, step: str) -> int | None:
    """The fewest workers (one partition each) at which ``step`` fits ``limit``."""
    estimate = partition_step if step == "partition" else train_step
    return _first_workers(shape, shape.workers + 1, lambda s: estimate(g, s, limit).fits)


def fewest_workers(g: GraphSize, shape: Shape, limit: int) -> int | None:
    """The fewest workers (one partition each) at which every step of a DistParMETIS job on
    this graph fits ``limit`` per pod (None: not even MAX_WORKERS)."""
    spread = replace(shape, mode=DIST_PARMETIS)
    return _first_workers(spread, 1, lambda s: all(step.fits for step in plan(g, s, limit)))


def workers_line(g: GraphSize, shape: Shape, limit: int | None) -> str | None:
    """For the log: how many worker pods of this limit the graph needs with DistParMETIS."""
    if limit is None:
        return None
    fewest = fewest_workers(g, shape, limit)
    if fewest is None:
        return f"  workers: no number of workers up to {MAX_WORKERS} fits {gib(limit)} per pod"
    return (
        f"  workers: with partitionMode DistParMETIS this graph needs at least {fewest} "
        f"worker(s) of {gib(limit)} (partition and train); this job has {shape.workers}"
    )


def advice(g: GraphSize, shape: Shape, step: Step) -> str:
    """What to change so that ``step`` fits."""
    assert step.limit is not None
    raise_to = f"raise the Worker memory limit to at least {gib(step.estimate * 1.1)}"
    if step.name == "partition" and shape.mode in (DGL_API, PARMETIS):
        spread = replace(shape, mode=DIST_PARMETIS)
        dist = partition_step(g, spread, step.limit)
        more = _workers_needed(g, spread, step.limit, "partition")
        alt = (
            f"partitionMode DistParMETIS (one rank per worker pod: {gib(dist.estimate)} each"
            + ("" if dist.fits else f", which fits with {more} workers" if more else ", too much")
            + ")"
        )
        return f"use {alt}, or {raise_to}"
    more = _workers_needed(g, shape, step.limit, step.name)
    if step.name == "partition" and shape.partitioner == KAMINPAR:
        # KaMinPar holds the whole structure on the first rank: more workers may not help
        spread = replace(shape, partitioner=PTSCOTCH)
        scotch = partition_step(g, spread, step.limit)
        needs = _workers_needed(g, spread, step.limit, "partition")
        alt = (
            f"--partitioner ptscotch (spread over the ranks: {gib(scotch.estimate)} each"
            + (
                ""
                if scotch.fits
                else f", which fits with {needs} workers"
                if needs
                else ", too much"
            )
            + ")"
        )
        if more is not None:
            return f"use {more} or more workers, or {alt}, or {raise_to}"
        return f"use {alt}, or {raise_to}"
    if step.smallest is not None:
        raise_to = f"raise the Worker memory limit to at least {gib(step.smallest * 1.1)}"
    elif step.name == "train":
        raise_to += f", or {out_of_core_option(g, shape, step.limit)}"
    if more is not None:
        return f"use {more} or more workers (smaller partitions), or {raise_to}"
    return raise_to


def out_of_core_line(step: Step, shape: Shape) -> str:
    """For the log: an out-of-core step's make-up, the least memory it runs in, and what
    page cache its limit leaves."""
    assert step.smallest is not None
    line = (
        f"  out of core: {step.detail}; the smallest worker memory limit it runs in is "
        f"~{gib(step.smallest)} (no page cache: every feature read from disk)"
    )
    if step.limit is not None and step.fits and step.limit < step.estimate:
        room = (step.limit - step.smallest) / max(step.estimate - step.smallest, 1)
        fraction = shape.out_of_core.page_cache_fraction
        line += (
            f"\n  warning: the limit leaves page cache for ~{room * fraction:.2f} of the "
            f"node data, not {fraction:g}: more feature reads go to disk"
        )
    return line


def out_of_core_option(g: GraphSize, shape: Shape, limit: int | None) -> str:
    """The out-of-core option, with what it would need per worker pod."""
    fraction = shape.out_of_core.page_cache_fraction
    ooc = train_step(g, replace(shape, out_of_core=OutOfCore(True, fraction)), limit)
    assert ooc.smallest is not None
    fits = "" if ooc.fits else ", which does not fit either"
    return (
        f"keep the node features on the workers' disk with spec.outOfCore.enabled: true "
        f"(dglrun --out-of-core): from ~{gib(ooc.smallest)} per worker pod, "
        f"~{gib(ooc.estimate)} with page cache for {fraction:g} of the features{fits}"
    )


def check(g: GraphSize, shape: Shape, steps: list[Step]) -> None:
    """Raise :class:`PlanError` for the first step that does not fit."""
    for step in steps:
        if step.fits:
            continue
        assert step.limit is not None
        made = f"; {step.detail}, at least the first two" if step.detail else ""
        raise PlanError(
            f"{MEMORY_PLAN_PREFIX}the {step.name} step needs ~{gib(step.need)} in {step.where} "
            f"({step.what}, for {g.describe()}{made}), more than its memory limit of "
            f"{gib(step.limit)} ({LIMIT_FIELD}): {advice(g, shape, step)}"
        )


# -- the graph's sizes ------------------------------------------------------------------------


def parse_graph_size(text: str) -> GraphSize:
    """``nodes=N,edges=E[,node_bytes=B][,edge_bytes=B]`` (dglrun's ``--graph-size``)."""
    fields: dict[str, int] = {}
    for item in text.split(","):
        key, sep, value = item.strip().partition("=")
        if not sep or key not in ("nodes", "edges", "node_bytes", "edge_bytes"):
            raise PlanError(
                f"--graph-size {text!r}: expected nodes=N,edges=E[,node_bytes=B][,edge_bytes=B]"
            )
        try:
            fields[key] = int(value)
        except ValueError:
            raise PlanError(f"--graph-size: {key}={value!r} is not an integer") from None
        if fields[key] < 0:
            raise PlanError(f"--graph-size: {key} must not be negative")
    if "nodes" not in fields or "edges" not in fields:
        raise PlanError(f"--graph-size {text!r}: nodes= and edges= are required")
    return GraphSize(
        fields["nodes"],
        fields["edges"],
        fields.get("node_bytes", 0),
        fields.get("edge_bytes", 0),
        "--graph-size",
    )


def chunked_graph_size(path: str | Path) -> GraphSize:
    """The sizes of a chunked graph, from its metadata and the first chunk of each column."""
    try:
        graph = chunkedgraph.load(path)
    except ChunkedError as e:
        raise PlanError(str(e)) from e
    return graph_size(graph)


@dataclass(frozen=True)
class PlanInput:
    """What dglrun makes its memory plan from, built once from its flags: the job's shape,
    the worker pods' limit, and where the graph's sizes come from (a chunked graph's files,
    or the sizes as given)."""

    shape: Shape
    limit: int | None  # bytes; None: no limit known
    chunked_graph: str | None = None  # the ParMETIS modes: the sizes are read from it
    graph_size: GraphSize | None = None  # DGL-API: --graph-size, if given

    def size(self) -> GraphSize | None:
        """The graph's sizes as this dglrun sees them (None: unknown; PlanError: a bad
        chunked graph)."""
        if self.chunked_graph:
            return chunked_graph_size(self.chunked_graph)
        return self.graph_size


def graph_size(graph: ChunkedGraph) -> GraphSize:
    """The sizes of a loaded chunked graph (its data's row sizes from the first chunks)."""
    try:
        node_bytes, edge_bytes = chunkedgraph.data_bytes(graph)
    except ChunkedError as e:
        raise PlanError(str(e)) from e
    return GraphSize(graph.num_nodes, graph.num_edges, node_bytes, edge_bytes, str(graph.metadata))


def parse_bytes(text: str) -> int:
    """A Kubernetes memory quantity ("8Gi", "512M", "1073741824") in bytes: the project's one
    quantity parser (podcontract.quantity), refused with a PlanError unless positive."""
    try:
        value = parse_quantity(text)
    except ValueError as e:
        why = str(e).rpartition(" (")[2].rstrip(")")  # the parser's reason, without its prefix
        raise PlanError(
            f"memory limit {text!r} is not a quantity such as 8Gi or 512Mi ({why})"
        ) from None
    if value <= 0:
        raise PlanError(f"memory limit {text!r} must be positive")
    return int(value)


def table(steps: list[Step], peaks: Mapping[str, float]) -> str:
    """Estimate, measured peak (MiB) and limit of each step, one line each, for the log."""
    lines = []
    for s in steps:
        peak = peaks.get(s.name)
        measured = f"{gib(peak * MiB)} measured" if peak else "not measured"
        ratio = f" ({s.estimate / (peak * MiB):.2f}x)" if peak else ""
        limit = f" of {gib(s.limit)}" if s.limit else ""
        lines.append(
            f"  memory: {s.name} ({s.what}, {s.where}): ~{gib(s.estimate)} estimated{ratio}, "
            f"{measured}{limit}"
        )
    return "\n".join(lines)


def status(steps: list[Step], peaks: Mapping[str, float]) -> dict[str, dict[str, float]]:
    """``status.memory``: each planned step's estimate and limit, and each measured peak
    (also of a step this process did not plan: the launcher of a job whose partitioner
    pod planned it)."""
    out = {s.name: s.as_status() for s in steps}
    for name, peak in peaks.items():
        if peak:
            out.setdefault(name, {})["peakMiB"] = round(peak)
    return out
