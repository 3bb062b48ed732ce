"""One MPI rank's part of partitioning a chunked graph into DGL partitions.

With ``P`` ranks and ``K`` parts, rank ``r``:

1. **reads its share** (:func:`chunkedgraph.shares`): the nodes ``vtxdist[r]..vtxdist[r+1]``
   it owns, and a slice of the edge list;
2. **builds its rows of the symmetric adjacency** ParMETIS wants (every edge ``u-v``, both
   directions, sent to the owners of ``u`` and ``v``; self-loops and duplicates dropped) and
   one vertex weight per node: 1, plus the in-degree with ``balance_edges``, and training
   nodes count twice with ``balance_train`` (PT-Scotch balances one constraint);
3. **assigns parts** with ``ParMETIS_V3_PartKway`` across all ranks;
4. **renumbers** as ``partition_graph`` does: part ``k``'s nodes get the contiguous ids
   ``node_map[k]`` (ordered by owning rank, then original id), and an edge belongs to its
   destination's part, whose edges get the ids ``edge_map[k]`` the same way;
5. **ships** to the rank writing part ``k`` (rank ``k % P``) its nodes with their features and
   original ids, its edges (with their features), and, as DGL's one-hop halo has them, the
   out-edges of its nodes that belong to other parts;
6. **writes** each part it owns (:mod:`distpart.write`) and the partition JSON.

Nothing is ever gathered on one rank: each rank holds its share, then its parts.
"""

from __future__ import annotations

import json
import os
import resource
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from chunkedgraph import ChunkedError, ChunkedGraph, shares
from distpart import mpi
from distpart.parmetis import part_kway
from distpart.read import read_rows
from distpart.types import Array
from distpart.write import INNER, PART, write_part

PART_METHOD = "parmetis"
STATS_FILE = "partition_stats.json"


@dataclass(frozen=True)
class Job:
    graph: ChunkedGraph
    layout: str
    graph_name: str
    num_parts: int
    outs: tuple[str, ...]  # one output folder for every rank, or one per rank
    balance_train: bool = False
    balance_edges: bool = False
    seed: int = 0

    def out_dir(self, rank: int) -> Path:
        return Path(self.outs[rank] if len(self.outs) > 1 else self.outs[0])


@dataclass
class Stats:
    seconds: dict[str, float] = field(default_factory=dict)
    nodes_per_part: list[int] = field(default_factory=list)
    edges_per_part: list[int] = field(default_factory=list)
    edge_cut: int = 0
    peak_rss_mb: list[float] = field(default_factory=list)
    hosts: list[str] = field(default_factory=list)

    def as_json(self, job: Job, ranks: int) -> dict[str, Any]:
        edges = max(job.graph.num_edges, 1)
        return {
            "part_method": PART_METHOD,
            "num_parts": job.num_parts,
            "ranks": ranks,
            "layout": job.layout,
            "num_nodes": job.graph.num_nodes,
            "num_edges": job.graph.num_edges,
            "edge_cut": self.edge_cut,
            "edge_cut_fraction": round(self.edge_cut / edges, 6),
            "nodes_per_part": self.nodes_per_part,
            "edges_per_part": self.edges_per_part,
            "seconds": {k: round(v, 3) for k, v in self.seconds.items()},
            "peak_rss_mb_per_rank": self.peak_rss_mb,
            "hosts": self.hosts,
        }


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _group_positions(keys: Array, groups: int) -> Array:
    """Each element's position among the elements with the same key, in array order."""
    order = np.argsort(keys, kind="stable")
    counts = np.bincount(keys, minlength=groups)
    starts = np.zeros(groups, dtype=np.int64)
    np.cumsum(counts[:-1], out=starts[1:])
    pos = np.empty(len(keys), dtype=np.int64)
    pos[order] = np.arange(len(keys), dtype=np.int64) - starts[keys[order]]
    return pos


def _contiguous_ids(comm: Any, keys: Array, groups: int) -> tuple[Array, Array]:
    """Ids contiguous per key over all ranks (key k's ids ``start[k]..start[k+1]``, ordered by
    rank, then position on the rank): returns (``start``, this rank's ids)."""
    counts = mpi.allgather_counts(comm, np.bincount(keys, minlength=groups))
    sizes = counts.sum(axis=0)
    start = np.zeros(groups + 1, dtype=np.int64)
    np.cumsum(sizes, out=start[1:])
    before = np.cumsum(counts, axis=0) - counts  # rows of earlier ranks, per key
    base = start[:-1] + before[comm.Get_rank()]
    return start, base[keys] + _group_positions(keys, groups)


class Rank:
    def __init__(self, comm: Any, job: Job, say: Callable[[str], None] = print) -> None:
        self.comm = comm
        self.job = job
        self.rank = comm.Get_rank()
        self.size = comm.Get_size()
        self._say = say
        self.stats = Stats()
        self.shares = shares(job.graph, self.size, job.layout)
        self.vtxdist = np.array(
            [s.nodes[0] for s in self.shares] + [job.graph.num_nodes], dtype=np.int64
        )
        self.lo, self.hi = self.shares[self.rank].nodes

    # -- helpers --------------------------------------------------------------------------

    def say(self, text: str) -> None:
        if self.rank == 0:
            self._say(f"[distpart] {text}")

    def owner(self, ids: Array) -> Array:
        return np.searchsorted(self.vtxdist, ids, side="right") - 1

    def writer(self, parts: Array) -> Array:
        out: Array = parts % self.size
        return out

    def my_parts(self) -> list[int]:
        return [k for k in range(self.job.num_parts) if k % self.size == self.rank]

    def _timed(self, name: str, started: float) -> float:
        self.comm.Barrier()
        now = time.perf_counter()
        self.stats.seconds[name] = now - started
        return now

    # -- steps ----------------------------------------------------------------------------

    def read_edges(self) -> tuple[Array, Array, Array]:
        spec = self.job.graph.edges
        elo, ehi = self.shares[self.rank].edges
        pairs = read_rows(spec, elo, ehi)
        n = self.job.graph.num_nodes
        bad = np.flatnonzero((pairs < 0).any(1) | (pairs >= n).any(1))
        if len(bad):
            row = elo + int(bad[0])
            chunk, path, first, _ = spec.pieces(row, row + 1)[0]
            raise ChunkedError(
                f"{path}: {spec.what} chunk {chunk}, row {first}: node id "
                f"{pairs[bad[0]].tolist()} outside 0..{n - 1}"
            )
        return pairs[:, 0].copy(), pairs[:, 1].copy(), np.arange(elo, ehi, dtype=np.int64)

    def adjacency(self, src: Array, dst: Array) -> tuple[Array, Array]:
        """This rank's rows of the symmetric adjacency without self-loops or duplicates."""
        n = np.int64(self.job.graph.num_nodes)
        keep = src != dst
        a = np.concatenate([src[keep], dst[keep]])
        b = np.concatenate([dst[keep], src[keep]])
        pairs = np.unique(a * n + b)  # local duplicates go before the exchange
        a, b = np.divmod(pairs, n)
        ra, rb = mpi.exchange(self.comm, self.owner(a), a, b)
        pairs = np.unique((ra - self.lo) * n + rb)
        rows, adjncy = np.divmod(pairs, n)
        xadj = np.zeros(self.hi - self.lo + 1, dtype=np.int64)
        np.cumsum(np.bincount(rows, minlength=self.hi - self.lo), out=xadj[1:])
        return xadj, adjncy

    def weights(self, dst: Array) -> Array:
        local = self.hi - self.lo
        vwgt = np.ones(local, dtype=np.int64)
        if self.job.balance_edges:
            (got,) = mpi.exchange(self.comm, self.owner(dst), dst)
            vwgt += np.bincount(got - self.lo, minlength=local)
        if self.job.balance_train:
            spec = self.job.graph.node_data.get("train_mask")
            if spec is None:
                raise ChunkedError(
                    f"{self.job.graph.metadata}: --balance-train needs node data 'train_mask'"
                )
            train = read_rows(spec, self.lo, self.hi).astype(bool).reshape(local)
            vwgt += np.where(train, vwgt, 0)  # a training node weighs twice
        return vwgt

    def agreed(self, rows: Array) -> Array:
        """``rows`` in the dtype every rank can hold (csv slices may parse differently)."""
        dtypes = self.comm.allgather(rows.dtype.str)
        return rows.astype(np.result_type(*[np.dtype(d) for d in dtypes]), copy=False)

    def lookup(self, ids: Array, table: Array) -> Array:
        """``table`` (this rank's rows, indexed by node id - lo) at the owners of ``ids``."""
        plan = mpi.route(self.comm, self.owner(ids))
        asked = mpi.send(self.comm, plan, ids)
        return mpi.reply(self.comm, plan, table[asked - self.lo])

    def run(self) -> Stats:
        job, comm = self.job, self.comm
        k = job.num_parts
        self.stats.hosts = comm.allgather(socket.gethostname())
        started = t = time.perf_counter()
        self.say(
            f"{job.graph.num_nodes} nodes, {job.graph.num_edges} edges from "
            f"{job.graph.metadata} ({job.layout} layout) into {k} parts on {self.size} ranks "
            f"({', '.join(self.stats.hosts)})"
        )
        src, dst, orig_eid = self.read_edges()
        t = self._timed("read", t)

        xadj, adjncy = self.adjacency(src, dst)
        vwgt = self.weights(dst)
        t = self._timed("adjacency", t)
        part = part_kway(comm, self.vtxdist, xadj, adjncy, vwgt, k, job.seed)
        del xadj, adjncy, vwgt
        t = self._timed("parmetis", t)

        node_start, new_nid = _contiguous_ids(comm, part, k)
        sizes = np.diff(node_start).tolist()
        if min(sizes) == 0:
            raise ValueError(
                f"ParMETIS left part {sizes.index(0)} of {k} empty (parts' nodes: {sizes}); "
                "the graph is too small or too disconnected for this many partitions"
            )
        self.stats.nodes_per_part = [int(x) for x in sizes]
        # where each edge's endpoints went
        ends, inverse = np.unique(np.concatenate([src, dst]), return_inverse=True)
        located = self.lookup(ends, np.stack([part, new_nid], axis=1))
        m = len(src)
        spart, dpart = located[inverse[:m], 0], located[inverse[m:], 0]
        nsrc, ndst = located[inverse[:m], 1], located[inverse[m:], 1]
        del ends, inverse, located, src, dst
        edge_start, new_eid = _contiguous_ids(comm, dpart, k)
        self.stats.edges_per_part = [int(x) for x in np.diff(edge_start)]
        cut = spart != dpart
        self.stats.edge_cut = int(mpi.allreduce_sum(comm, np.array([cut.sum()]))[0])
        t = self._timed("renumber", t)

        # what the writers receive
        records = np.stack([nsrc, ndst, new_eid, orig_eid, np.ones(m, np.int64), dpart], axis=1)
        inner_plan = mpi.route(comm, self.writer(dpart))
        inner = mpi.send(comm, inner_plan, records)
        out_records = records[cut]
        out_records[:, INNER] = 0
        out_records[:, PART] = spart[cut]
        (outer,) = mpi.exchange(comm, self.writer(spart[cut]), out_records)
        edges = np.concatenate([inner, outer])
        del records, out_records, outer
        elo, ehi = self.shares[self.rank].edges
        edge_feats = {
            name: mpi.send(comm, inner_plan, self.agreed(read_rows(spec, elo, ehi)))
            for name, spec in job.graph.edge_data.items()
        }
        node_plan = mpi.route(comm, self.writer(part))
        node_ids = mpi.send(comm, node_plan, new_nid)
        orig_nid = mpi.send(comm, node_plan, np.arange(self.lo, self.hi, dtype=np.int64))
        node_feats = {
            name: mpi.send(comm, node_plan, self.agreed(read_rows(spec, self.lo, self.hi)))
            for name, spec in job.graph.node_data.items()
        }
        t = self._timed("shuffle", t)

        out = job.out_dir(self.rank)
        for p in self.my_parts():
            nodes = np.flatnonzero((node_ids >= node_start[p]) & (node_ids < node_start[p + 1]))
            mine = edges[:, PART] == p
            write_part(
                out,
                p,
                graph=job.graph,
                node_range=(int(node_start[p]), int(node_start[p + 1])),
                node_start=node_start,
                node_ids=node_ids[nodes],
                orig_nids=orig_nid[nodes],
                node_feats={name: rows[nodes] for name, rows in node_feats.items()},
                edges=edges[mine],
                edge_feats={
                    name: rows[edges[: len(inner), PART] == p] for name, rows in edge_feats.items()
                },
                edge_range=(int(edge_start[p]), int(edge_start[p + 1])),
            )
        if self.rank == 0 or self.my_parts():
            write_config(out, job, node_start, edge_start)
        t = self._timed("write", t)
        self.stats.seconds["total"] = t - started
        self.stats.peak_rss_mb = [round(x, 1) for x in comm.allgather(_peak_rss_mb())]
        if self.rank == 0:
            doc = self.stats.as_json(job, self.size)
            (out / STATS_FILE).write_text(json.dumps(doc, indent=2) + "\n")
            self._say(f"distpart-stats {json.dumps(doc, separators=(',', ':'))}")
        return self.stats


def config(job: Job, node_start: Array, edge_start: Array) -> dict[str, Any]:
    """The partition JSON, as ``dgl.distributed.partition_graph`` writes it."""
    g, k = job.graph, job.num_parts
    doc: dict[str, Any] = {
        "graph_name": job.graph_name,
        "num_nodes": g.num_nodes,
        "num_edges": g.num_edges,
        "part_method": PART_METHOD,
        "num_parts": k,
        "halo_hops": 1,
        "node_map": {g.ntype: [[int(node_start[p]), int(node_start[p + 1])] for p in range(k)]},
        "edge_map": {g.etype: [[int(edge_start[p]), int(edge_start[p + 1])] for p in range(k)]},
        "ntypes": {g.ntype: 0},
        "etypes": {g.etype: 0},
    }
    for p in range(k):
        doc[f"part-{p}"] = {
            "node_feats": f"part{p}/node_feat.dgl",
            "edge_feats": f"part{p}/edge_feat.dgl",
            "part_graph": f"part{p}/graph.dgl",
        }
    return doc


def write_config(out: Path, job: Job, node_start: Array, edge_start: Array) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{job.graph_name}.json"
    # per process: the ranks of one pod share its hostname (ParMETIS runs 2 in the partitioner)
    tmp = out / f".{path.name}.{socket.gethostname()}.{os.getpid()}.tmp"
    tmp.write_text(json.dumps(config(job, node_start, edge_start), indent=4) + "\n")
    tmp.replace(path)  # ranks writing the same folder replace it with the same content
    return path
