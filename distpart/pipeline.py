"""One MPI rank's part of partitioning a chunked graph into DGL partitions.

With ``P`` ranks and ``K`` parts, rank ``r``:

1. **reads its share** (:func:`chunkedgraph.shares`): the nodes ``vtxdist[r]..vtxdist[r+1]``
   it owns, and a slice of the edge list;
2. **builds its rows of the symmetric adjacency** ParMETIS wants (every edge ``u-v``, both
   directions, sent to the owners of ``u`` and ``v``; self-loops and duplicates dropped) and
   one vertex weight per node: 1, plus the in-degree with ``balance_edges``, and training
   nodes count twice with ``balance_train`` (PT-Scotch balances one constraint);
3. **assigns parts**: by default with KaMinPar on rank 0 (:mod:`distpart.kaminpar`: the
   ranks' rows of the adjacency streamed to it, every count partitioned from one load of the
   graph, the parts sent back); with ``--partitioner ptscotch``, ``ParMETIS_V3_PartKway``
   across all ranks (for a ``K`` that is not a power of two, PT-Scotch's fine parts grouped
   into ``K``: :func:`distpart.parmetis.group_parts`; for the other counts of ``job.counts``
   too, one partitioning into fine parts grouped into each count);
4. **renumbers** as ``partition_graph`` does: part ``k``'s nodes get the contiguous ids
   ``node_map[k]`` (ordered by owning rank, then original id), and an edge belongs to its
   destination's part, whose edges get the ids ``edge_map[k]`` the same way;
5. **ships** to the rank writing part ``k`` (rank ``k % P``) its nodes with their features and
   original ids, its edges (with their features), and, as DGL's one-hop halo has them, the
   out-edges of its nodes that belong to other parts;
6. **writes** each part it owns (:mod:`distpart.write`) and the partition JSON.

Steps 4 to 6 run once per count, the job's first (the other counts' into ``<out>@<count>``,
each reading its share of the edges again rather than keeping it: a rank holds one count's
work at a time).

Nothing but the structure (for KaMinPar) is ever gathered on one rank: each rank holds its
share, then one part at a time.
Steps 5 and 6 go in rounds (round ``r``: rank ``w`` receives and writes part ``r * P + w``),
every received row goes straight to its place in the part (edge id - first edge id, node
id - first node id), and the writer makes ids local in place; the lookups of step 4 and the
node rows of step 5 are exchanged in blocks, so no exchange buffer is the size of the share.
Each step's peak memory (:mod:`distpart.memory`) goes to the log and ``partition_stats.json``:
a rank peaks in the partitioner (PT-Scotch: ~155 B per edge of its share; KaMinPar: rank 0, its
share and the whole structure) or in the writer (torch and DGL imported, and one part).
"""

from __future__ import annotations

import dataclasses
import json
import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from chunkedgraph import ChunkedError, ChunkedGraph, shares
from chunkedgraph.job import KAMINPAR, PartitionJob
from distpart import kaminpar, mpi
from distpart.memory import Profile
from distpart.parmetis import (
    common_fine_parts,
    fine_parts,
    group_parts,
    part_kway,
    partitioner_used,
)
from distpart.read import read_rows
from distpart.types import Array
from distpart.write import PartRows, import_dgl, write_part

PART_METHOD = "parmetis"
LOOKUP_BLOCK = 1 << 21  # edges' endpoints looked up at their owners per exchange
NODE_BLOCK = 1 << 17  # a rank's nodes (and their data rows) shipped per exchange
STATS_FILE = "partition_stats.json"
REPLICATE_MIB = 512  # a value a node of the whole graph, on every rank, up to this size
REPLICATE_ENV = "DISTPART_REPLICATE_MAX_MIB"  # overrides it (0: always exchange)
OWNER_COMPARISONS = 6  # up to this many ranks, owner() compares rather than searches


@dataclass
class Edges:
    """A rank's share of the edges after renumbering (one row per edge it read)."""

    nsrc: Array  # new ids of the endpoints
    ndst: Array
    eid: Array  # new edge id
    spart: Array  # parts of the endpoints (int32)
    dpart: Array
    cut: Array  # spart != dpart
    start: Array  # edge id ranges of the parts (edge_map), every rank's same


@dataclass
class Stats:
    seconds: dict[str, float] = field(default_factory=dict)
    nodes_per_part: list[int] = field(default_factory=list)
    edges_per_part: list[int] = field(default_factory=list)
    edge_cut: int = 0
    peak_rss_mb: list[float] = field(default_factory=list)
    hosts: list[str] = field(default_factory=list)
    # step -> every rank's peak resident set within that step (MiB), and at its end
    step_peak_mb: dict[str, list[float]] = field(default_factory=dict)
    step_end_mb: dict[str, list[float]] = field(default_factory=dict)
    start_mb: list[float] = field(default_factory=list)
    per_step: bool = True
    # step -> every rank's bytes sent to the other ranks within that step
    step_sent_bytes: dict[str, list[int]] = field(default_factory=dict)
    fine_parts: int | None = None  # the fine parts every count was grouped from (several)
    partitioner: str = ""  # what partitioned (distpart.parmetis.partitioner_used)
    # every count written (the job's first): its edge cut and parts' nodes and edges
    counts: dict[int, dict[str, Any]] = field(default_factory=dict)

    def as_json(self, job: PartitionJob, graph: ChunkedGraph, ranks: int) -> dict[str, Any]:
        edges = max(graph.num_edges, 1)
        return {
            "part_method": PART_METHOD,
            "partitioner": self.partitioner,
            "num_parts": job.num_parts,
            "ranks": ranks,
            "layout": job.layout,
            "num_nodes": graph.num_nodes,
            "num_edges": graph.num_edges,
            "edge_cut": self.edge_cut,
            "edge_cut_fraction": round(self.edge_cut / edges, 6),
            "nodes_per_part": self.nodes_per_part,
            "edges_per_part": self.edges_per_part,
            "seconds": {k: round(v, 3) for k, v in self.seconds.items()},
            "peak_rss_mb_per_rank": self.peak_rss_mb,
            "memory_mb_per_step": {
                "per_step": self.per_step,
                "start": self.start_mb,
                "peak": self.step_peak_mb,
                "end": self.step_end_mb,
            },
            "hosts": self.hosts,
            "sent_bytes_per_step": self.step_sent_bytes,
            "fine_parts": self.fine_parts,
            "counts": {
                str(c): {**d, "edge_cut_fraction": round(d["edge_cut"] / edges, 6)}
                for c, d in self.counts.items()
            },
        }


def replicate_limit() -> int:
    """The most bytes of one value a node of the whole graph a rank may hold to save an
    exchange (:meth:`Rank.renumber`, :meth:`Rank.in_degrees`): ``REPLICATE_MIB``, or
    ``$DISTPART_REPLICATE_MAX_MIB``."""
    value = os.environ.get(REPLICATE_ENV) or str(REPLICATE_MIB)
    if not value.isdigit():
        raise ValueError(f"${REPLICATE_ENV}={value!r}: not a whole number of MiB")
    return int(value) << 20


def _group_positions(keys: Array, groups: int) -> Array:
    """Each element's position among the elements with the same key, in array order."""
    order = np.argsort(mpi.narrow(keys, groups), kind="stable")
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
    """One rank's work: ``job`` (dglrun's, as the command line said) over ``graph``, the
    chunked graph it names."""

    def __init__(
        self, comm: Any, job: PartitionJob, graph: ChunkedGraph, say: Callable[[str], None] = print
    ) -> None:
        self.comm = comm
        self.job = job
        self.graph = graph
        self.rank = comm.Get_rank()
        self.size = comm.Get_size()
        self._say = say
        self.stats = Stats()
        self.memory = Profile()
        self._sent = mpi.SENT.bytes  # the meter's reading when the current step began
        self.shares = shares(graph, self.size, job.layout)
        self.vtxdist = np.array(
            [s.nodes[0] for s in self.shares] + [graph.num_nodes], dtype=np.int64
        )
        self.lo, self.hi = self.shares[self.rank].nodes

    # -- helpers --------------------------------------------------------------------------

    def say(self, text: str) -> None:
        if self.rank == 0:
            self._say(f"[distpart] {text}")

    def owner(self, ids: Array) -> Array:
        """The rank owning each of ``ids``. For a few ranks, one vectorized comparison per
        rank boundary (3 ranks, 41M ids: 0.38 s against 1.06 s for a binary search of each)."""
        if self.size > OWNER_COMPARISONS:
            return np.searchsorted(self.vtxdist, ids, side="right") - 1
        out = np.zeros(len(ids), dtype=np.int64)
        for bound in self.vtxdist[1:-1]:
            out += ids >= bound
        return out

    def writer(self, parts: Array) -> Array:
        out: Array = parts % self.size
        return out

    def my_parts(self, count: int) -> list[int]:
        return [k for k in range(count) if k % self.size == self.rank]

    def _timed(self, name: str, started: float) -> float:
        """End step ``name``: its time, every rank's peak memory and bytes sent within it."""
        self.memory.end(name)
        self.comm.Barrier()
        now = time.perf_counter()
        self.stats.seconds[name] = self.stats.seconds.get(name, 0.0) + now - started
        peaks = self.comm.allgather((self.memory.steps[name], self.memory.after[name]))
        self.stats.step_peak_mb[name] = [p for p, _ in peaks]
        self.stats.step_end_mb[name] = [e for _, e in peaks]
        sent = self.comm.allgather(mpi.SENT.bytes - self._sent)
        self._sent = mpi.SENT.bytes
        had = self.stats.step_sent_bytes.get(name, [0] * len(sent))  # (shuffle: every round)
        self.stats.step_sent_bytes[name] = [a + b for a, b in zip(had, sent, strict=True)]
        self.say(
            f"memory {name}: peak {' / '.join(f'{p:.0f}' for p, _ in peaks)} MiB, "
            f"after {' / '.join(f'{e:.0f}' for _, e in peaks)} MiB (ranks 0..{self.size - 1}); "
            f"sent {' / '.join(f'{b / 2**20:.0f}' for b in sent)} MiB to the other ranks"
        )
        self.memory.begin()
        return now

    # -- steps ----------------------------------------------------------------------------

    def read_edges(self) -> tuple[Array, Array]:
        spec = self.graph.edges
        elo, ehi = self.shares[self.rank].edges
        pairs = read_rows(spec, elo, ehi)
        n = self.graph.num_nodes
        bad = np.flatnonzero((pairs < 0).any(1) | (pairs >= n).any(1))
        if len(bad):
            row = elo + int(bad[0])
            chunk, path, first, _ = spec.pieces(row, row + 1)[0]
            raise ChunkedError(
                f"{path}: {spec.what} chunk {chunk}, row {first}: node id "
                f"{pairs[bad[0]].tolist()} outside 0..{n - 1}"
            )
        return pairs[:, 0].copy(), pairs[:, 1].copy()

    def adjacency(self, src: Array, dst: Array) -> tuple[Array, Array]:
        """This rank's rows of the symmetric adjacency without self-loops or duplicates."""
        n = np.int64(self.graph.num_nodes)
        keep = src != dst
        m = int(np.count_nonzero(keep))
        # each edge both ways as one key, row * n + column (one array: half the copies and
        # half the bytes sent of a pair of arrays)
        pairs = np.empty(2 * m, dtype=np.int64)
        pairs[:m] = src[keep] * n + dst[keep]
        pairs[m:] = dst[keep] * n + src[keep]
        del keep
        pairs = np.unique(pairs)  # local duplicates go before the exchange
        plan = mpi.route(self.comm, self.owner(pairs // n))
        got = mpi.send(self.comm, plan, pairs)
        del pairs, plan
        got -= self.lo * n  # the row made local
        pairs = np.unique(got)
        del got
        rows, adjncy = np.divmod(pairs, n)
        xadj = np.zeros(self.hi - self.lo + 1, dtype=np.int64)
        np.cumsum(np.bincount(rows, minlength=self.hi - self.lo), out=xadj[1:])
        return xadj, adjncy

    def weights(self, dst: Array) -> Array:
        local = self.hi - self.lo
        vwgt = np.ones(local, dtype=np.int64)
        if self.job.balance_edges:
            vwgt += self.in_degrees(dst)
        if self.job.balance_train:
            spec = self.graph.node_data.get("train_mask")
            if spec is None:
                raise ChunkedError(
                    f"{self.graph.metadata}: --balance-train needs node data 'train_mask'"
                )
            train = read_rows(spec, self.lo, self.hi).astype(bool).reshape(local)
            vwgt += np.where(train, vwgt, 0)  # a training node weighs twice
        return vwgt

    def in_degrees(self, dst: Array) -> Array:
        """The in-degree of each of this rank's nodes, from every rank's edges: summed over
        the ranks for every node at once when that fits (:func:`replicate_limit`), else each
        edge's destination sent to its owner."""
        local = self.hi - self.lo
        n = self.graph.num_nodes
        if n * 8 > replicate_limit():
            (got,) = mpi.exchange(self.comm, self.owner(dst), dst)
            out: Array = np.bincount(got - self.lo, minlength=local)
            return out
        from mpi4py import MPI

        mine = np.empty(local, dtype=np.int64)
        counts = np.bincount(dst, minlength=n).astype(np.int64, copy=False)
        sizes = np.diff(self.vtxdist).tolist()
        self.comm.Reduce_scatter(counts, mine, recvcounts=sizes, op=MPI.SUM)
        mpi.SENT.bytes += (n - local) * 8
        return mine

    def agreed(self, rows: Array) -> Array:
        """``rows`` in the dtype every rank can hold (csv slices may parse differently)."""
        dtypes = self.comm.allgather(rows.dtype.str)
        return rows.astype(np.result_type(*[np.dtype(d) for d in dtypes]), copy=False)

    def quotient(
        self, part: Array, fine: int, xadj: Array, adjncy: Array, vwgt: Array
    ) -> tuple[Array, Array]:
        """The fine parts' total weights and the edges between each two of them (neighbours'
        parts asked of their owners a block at a time): what :func:`group_parts` groups."""
        comm = self.comm
        weights = comm.allreduce(np.bincount(part, weights=vwgt, minlength=fine))
        cross = np.zeros(fine * fine, dtype=np.int64)
        for a, b in mpi.blocks(comm, len(adjncy), LOOKUP_BLOCK):
            theirs = self.lookup(adjncy[a:b], part)
            row = np.searchsorted(xadj, np.arange(a, b), side="right") - 1
            cross += np.bincount(part[row] * fine + theirs, minlength=fine * fine)
        return weights, comm.allreduce(cross).reshape(fine, fine)

    def assign(self, counts: tuple[int, ...], rows: list[Array]) -> dict[int, Array]:
        """Each count's part of every node of this rank, from ``rows``: this rank's ``[xadj,
        adjncy, vwgt]`` (which KaMinPar empties once it has them). KaMinPar: each count
        directly (:mod:`distpart.kaminpar`). PT-Scotch or ParMETIS, several counts: one
        partitioning into fine parts, grouped into each (:func:`common_fine_parts`); one
        count, or a graph too small for fine parts: each count on its own (PT-Scotch's fine
        parts grouped for a count that is not a power of two, :func:`fine_parts`)."""
        comm, n, seed = self.comm, self.graph.num_nodes, self.job.seed
        partitioner = comm.bcast(partitioner_used(self.job.partitioner), root=0)
        self.stats.partitioner = partitioner
        if partitioner == KAMINPAR:
            if len(counts) > 1:
                self.say(
                    f"KaMinPar: the counts {', '.join(map(str, counts))}, each from one load "
                    "of the graph"
                )
            return kaminpar.partition(comm, self.vtxdist, rows, counts, seed, self.say)
        xadj, adjncy, vwgt = rows
        if len(counts) > 1:
            fine = comm.bcast(common_fine_parts(counts, n), root=0)  # rank 0's env decides
            if fine is not None:
                self.say(
                    f"one partitioning for the counts {', '.join(map(str, counts))}: {fine} "
                    "fine parts, grouped into each"
                )
                self.stats.fine_parts = fine
                part = part_kway(comm, self.vtxdist, xadj, adjncy, vwgt, fine, seed)
                weights, cross = self.quotient(part, fine, xadj, adjncy, vwgt)
                return {c: group_parts(weights, cross, c)[part] for c in counts}
        out: dict[int, Array] = {}
        for k in counts:
            fine = comm.bcast(fine_parts(k, n), root=0)
            if fine != k:
                self.say(
                    f"PT-Scotch: {fine} parts, grouped into {k} (it is slow for a number of "
                    "parts that is not a power of two)"
                )
            part = part_kway(comm, self.vtxdist, xadj, adjncy, vwgt, fine, seed)
            if fine != k:
                weights, cross = self.quotient(part, fine, xadj, adjncy, vwgt)
                part = group_parts(weights, cross, k)[part]
            out[k] = part
        return out

    def lookup(self, ids: Array, table: Array) -> Array:
        """``table`` (this rank's rows, indexed by node id - lo) at the owners of ``ids``."""
        plan = mpi.route(self.comm, self.owner(ids))
        asked = mpi.send(self.comm, plan, ids)
        return mpi.reply(self.comm, plan, table[asked - self.lo])

    def locate(self, ids: Array, part: Array, new_nid: Array) -> tuple[Array, Array]:
        """The part and new id of each of ``ids``, asked of their owners a block at a time
        (the exchange buffers stay the size of a block, not of the rank's edges)."""
        table = np.stack([part, new_nid], axis=1)
        parts = np.empty(len(ids), dtype=np.int32)
        nids = np.empty(len(ids), dtype=np.int64)
        for a, b in mpi.blocks(self.comm, len(ids), LOOKUP_BLOCK):
            got = self.lookup(ids[a:b], table)
            parts[a:b] = got[:, 0]
            nids[a:b] = got[:, 1]
        return parts, nids

    def replicated(self, local: Array, dtype: Any) -> Array | None:
        """Every rank's ``local`` (one value a node), gathered on every rank, when a value a
        node of the whole graph fits :func:`replicate_limit`; else None."""
        n = self.graph.num_nodes
        if n * np.dtype(dtype).itemsize > replicate_limit():
            return None
        out = np.empty(n, dtype=dtype)
        sizes = np.diff(self.vtxdist).tolist()
        self.comm.Allgatherv(np.ascontiguousarray(local, dtype=dtype), (out, sizes))
        mpi.SENT.bytes += len(local) * out.itemsize * (self.size - 1)
        return out

    def renumber(self, src: Array, dst: Array, part: Array, new_nid: Array, k: int) -> Edges:
        """Each edge's endpoints' parts and new ids: from every node's, gathered on every
        rank when they fit (:func:`replicate_limit`; products: 29 MB), else asked of their
        owners a block at a time (:meth:`locate`)."""
        parts, nids = self.replicated(part, np.int32), self.replicated(new_nid, np.int64)
        if parts is not None and nids is not None:
            spart, nsrc, dpart, ndst = parts[src], nids[src], parts[dst], nids[dst]
            del parts, nids, src, dst
        else:
            del parts, nids
            spart, nsrc = self.locate(src, part, new_nid)
            del src
            dpart, ndst = self.locate(dst, part, new_nid)
            del dst
        edge_start, eid = _contiguous_ids(self.comm, dpart, k)
        return Edges(nsrc, ndst, eid, spart, dpart, spart != dpart, edge_start)

    def ship(
        self, r: int, part: Array, new_nid: Array, e: Edges, node_start: Array
    ) -> PartRows | None:
        """Round ``r``: rank ``w`` receives everything of part ``r * P + w`` (if there is
        such a part), in the part's order; the other ranks' parts are other rounds."""
        comm, P = self.comm, self.size
        p = r * P + self.rank
        mine = p < len(node_start) - 1
        start, end = (int(node_start[p]), int(node_start[p + 1])) if mine else (0, 0)
        lo, hi = (int(e.start[p]), int(e.start[p + 1])) if mine else (0, 0)
        elo, ehi = self.shares[self.rank].edges

        # the out-edges of the part's nodes to other parts (DGL's one-hop halo), in id order
        sel = np.flatnonzero(e.cut & (e.spart // P == r))
        plan = mpi.route_rows(comm, sel, e.spart[sel] % P)
        del sel
        out_eid = mpi.send(comm, plan, e.eid)
        by_id = np.argsort(out_eid, kind="stable")
        out_src = mpi.send(comm, plan, e.nsrc)[by_id]
        out_dst = mpi.send(comm, plan, e.ndst)[by_id]
        out_eid = out_eid[by_id]
        del by_id, plan

        # its own edges, each put at its place (edge id - lo) as it arrives
        sel = np.flatnonzero(e.dpart // P == r)
        plan = mpi.route_rows(comm, sel, e.dpart[sel] % P)
        del sel
        at = mpi.send(comm, plan, e.eid) - lo
        own = hi - lo
        missing = f"part {p}: received {len(at)} of its {own} edges"
        if len(at) != own:
            raise ValueError(missing)
        _Placed(own).add(at, missing).check(missing)
        total = own + len(out_eid)
        src = np.empty(total, dtype=np.int64)
        src[at] = mpi.send(comm, plan, e.nsrc)
        src[own:] = out_src
        dst = np.empty(total, dtype=np.int64)
        dst[at] = mpi.send(comm, plan, e.ndst)
        dst[own:] = out_dst
        eids = np.empty(total, dtype=np.int64)
        eids[:own] = np.arange(lo, hi, dtype=np.int64)
        eids[own:] = out_eid
        del out_src, out_dst, out_eid
        orig_eids = np.empty(own, dtype=np.int64)
        orig_eids[at] = mpi.send_ordered(comm, plan, plan.order + elo)
        edge_feats = {}
        for name, spec in self.graph.edge_data.items():
            got = mpi.send(comm, plan, self.agreed(read_rows(spec, elo, ehi)))
            edge_feats[name] = np.empty((own, *got.shape[1:]), dtype=got.dtype)
            edge_feats[name][at] = got
        del at, plan

        # its nodes, their ids and data: a block of the owners' rows at a time
        n = end - start
        orig_nids = np.empty(n, dtype=np.int64)
        placed = _Placed(n)
        node_feats: dict[str, Array] = {}
        for a, b in mpi.blocks(comm, self.hi - self.lo, NODE_BLOCK):
            sel = np.flatnonzero(part[a:b] // P == r)
            plan = mpi.route_rows(comm, sel, part[a:b][sel] % P)
            at = mpi.send(comm, plan, new_nid[a:b]) - start
            placed.add(at, f"part {p}: received a node of another part")
            orig_nids[at] = mpi.send_ordered(comm, plan, plan.order + (self.lo + a))
            for name, spec in self.graph.node_data.items():
                got = mpi.send(comm, plan, self.agreed(read_rows(spec, self.lo + a, self.lo + b)))
                if name not in node_feats:
                    node_feats[name] = np.empty((n, *got.shape[1:]), dtype=got.dtype)
                node_feats[name][at] = got
        placed.check(f"part {p}: received {placed.count()} of its {n} nodes")
        if not mine:
            return None
        return PartRows(
            part=p,
            node_range=(start, end),
            edge_range=(lo, hi),
            orig_nids=orig_nids,
            node_feats=node_feats,
            src=src,
            dst=dst,
            eids=eids,
            orig_eids=orig_eids,
            edge_feats=edge_feats,
        )

    def run(self) -> Stats:
        job, graph, comm = self.job, self.graph, self.comm
        counts = job.every_count()
        self.stats.hosts = comm.allgather(socket.gethostname())
        self.stats.start_mb = [round(x, 1) for x in comm.allgather(self.memory.start_mib)]
        self.memory.begin()
        started = t = time.perf_counter()
        self.say(
            f"{graph.num_nodes} nodes, {graph.num_edges} edges from "
            f"{graph.metadata} ({job.layout} layout) into "
            f"{' and '.join(map(str, counts))} parts on {self.size} ranks "
            f"({', '.join(self.stats.hosts)})"
        )
        src, dst = self.read_edges()
        t = self._timed("read", t)

        rows = [*self.adjacency(src, dst), self.weights(dst)]  # xadj, adjncy, vwgt
        t = self._timed("adjacency", t)
        assigned = self.assign(counts, rows)
        del rows
        t = self._timed("parmetis", t)

        read: list[tuple[Array, Array]] = [(src, dst)]
        del src, dst
        for k in counts:  # (the job's count first: the others read the edges again)
            if not read:
                read.append(self.read_edges())
                t = self._timed("read", t)
            t = self.write_count(k, assigned.pop(k), read, t)
        first = self.stats.counts[job.num_parts]
        self.stats.nodes_per_part = first["nodes_per_part"]
        self.stats.edges_per_part = first["edges_per_part"]
        self.stats.edge_cut = first["edge_cut"]
        self.stats.seconds["total"] = time.perf_counter() - started
        self.stats.peak_rss_mb = [round(x, 1) for x in comm.allgather(self.memory.peak_mib)]
        self.stats.per_step = all(comm.allgather(self.memory.per_step))
        if self.rank == 0:
            doc = self.stats.as_json(job, graph, self.size)
            (job.out_dir(0) / STATS_FILE).write_text(json.dumps(doc, indent=2) + "\n")
            self._say(f"distpart-stats {json.dumps(doc, separators=(',', ':'))}")
        return self.stats

    def write_count(self, k: int, part: Array, read: list[tuple[Array, Array]], t: float) -> float:
        """Steps 4-6 for ``k`` parts (``part``: each node's), into ``job.out_dir(rank, k)``;
        the edges ``read`` holds are taken from it (freed as soon as they are renumbered)."""
        job, graph, comm = self.job, self.graph, self.comm
        node_start, new_nid = _contiguous_ids(comm, part, k)
        sizes = np.diff(node_start).tolist()
        if min(sizes) == 0:
            raise ValueError(
                f"ParMETIS left part {sizes.index(0)} of {k} empty (parts' nodes: {sizes}); "
                "the graph is too small or too disconnected for this many partitions"
            )
        src, dst = read.pop()
        edges = self.renumber(src, dst, part, new_nid, k)
        del src, dst
        cut = int(mpi.allreduce_sum(comm, np.array([int(edges.cut.sum())]))[0])
        self.stats.counts[k] = {
            "edge_cut": cut,
            "nodes_per_part": [int(x) for x in sizes],
            "edges_per_part": [int(x) for x in np.diff(edges.start)],
        }
        edge_start = edges.start
        t = self._timed("renumber", t)

        out = job.out_dir(self.rank, k)
        rounds = -(-k // self.size)
        for r in range(rounds):
            rows = self.ship(r, part, new_nid, edges, node_start)
            if r == rounds - 1:  # the share is not needed any more: free it before DGL loads
                del part, new_nid, edges
            t = self._timed("shuffle", t)
            if rows is not None:
                import_dgl()  # (from this frame, whose locals at its return hold no data)
                write_part(out, graph, node_start, rows, job.feature_files)
                del rows
            t = self._timed("write", t)
        if self.rank == 0 or self.my_parts(k):
            write_config(out, dataclasses.replace(job, num_parts=k), graph, node_start, edge_start)
        return t


class _Placed:
    """Which of a part's ``size`` rows have arrived (each at its place, ``0..size-1``)."""

    def __init__(self, size: int) -> None:
        self.seen = np.zeros(size, dtype=np.bool_)

    def add(self, at: Array, message: str) -> _Placed:
        """Mark the places ``at``; one outside the part raises ``message``."""
        if len(at) and (at.min() < 0 or at.max() >= len(self.seen)):
            raise ValueError(message)
        self.seen[at] = True
        return self

    def count(self) -> int:
        return int(self.seen.sum())

    def check(self, message: str) -> None:
        """Every place filled, else ``message``."""
        if not self.seen.all():
            raise ValueError(message)


def config(
    job: PartitionJob, g: ChunkedGraph, node_start: Array, edge_start: Array
) -> dict[str, Any]:
    """The partition JSON, as ``dgl.distributed.partition_graph`` writes it."""
    k = job.num_parts
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


def write_config(
    out: Path, job: PartitionJob, graph: ChunkedGraph, node_start: Array, edge_start: Array
) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{job.graph_name}.json"
    # per process: the ranks of one pod share its hostname (ParMETIS runs 2 in the partitioner)
    tmp = out / f".{path.name}.{socket.gethostname()}.{os.getpid()}.tmp"
    tmp.write_text(json.dumps(config(job, graph, node_start, edge_start), indent=4) + "\n")
    tmp.replace(path)  # ranks writing the same folder replace it with the same content
    return path
