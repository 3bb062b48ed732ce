"""Partition a distributed graph through ctypes, on the ranks' communicator: PT-Scotch's own
API, or ``ParMETIS_V3_PartKway`` of the library ``$DGL_PARMETIS_LIB`` names (a real ParMETIS
built with 64-bit ``idx_t`` and 32-bit ``real_t``).

PT-Scotch is Debian's ``libptscotch-7.0``, which ships it built with 32-bit indices
(``/usr/lib/<arch>/scotch-int32``) and 64-bit ones (``scotch-int64``). Its memory is arrays of
``SCOTCH_Num``: the graph's ghost numbering, then each level of the multilevel coarsening of
the first bipartition, which on this kind of graph (random edges, average degree 20 to 50) keeps
most of the edges level after level (an edge array, its ghost numbering and its weights, each
one ``SCOTCH_Num`` per directed edge). So the index width sets the peak: 3 ranks, 300k nodes,
15M directed edges, 64 parts, each rank's peak above what it held before the call: 64-bit
build 200 B per directed edge of its share (through the ParMETIS wrapper or the API alike), 32-bit
87 B (including the 32-bit copy of ``adjncy``), for the same cut and time. Nothing else changed
it: PT-Scotch's strategy flags, no folding with duplication (``fold=n``), the coarsening ratio,
4 to 64 parts, no vertex weights; a larger coarsening threshold raises it (the coarse graph is
centralized). The pipeline's partition step on 3 ranks (bench/distpart_bench.py's graphs): 500k
nodes, 10M directed edges: 936 MiB per rank with the 64-bit build, 552 MiB with the 32-bit
one, cut 16.3% and 16.4%; 2M nodes, 40M edges: 3.56 GB, 2.0 GiB (cut 16.4%).

The 32-bit build is used when the graph's vertices, directed edges and total vertex weight all
fit (below 2^31), which every rank decides alike; else the 64-bit one. Both have the same
sonames, so a process loads one of them (the first call decides; the 64-bit one fits any graph).
The libraries are loaded by path, the error library first and globally, so that PT-Scotch binds
to the loaded width and not to the one on the default search path. The strategy is the one
PT-Scotch's ParMETIS wrapper uses (``SCOTCH_stratDgraphMapBuild``, default flags, 5 % imbalance).

PT-Scotch 7 also starts threads in every rank, as many as the machine has cores unless
``$SCOTCH_PTHREAD_NUMBER`` says otherwise. A rank in a pod would start one per core of the
node whatever the pod's CPU limit, and ranks sharing a pod would each start them all: unless
the variable is set, it is set to the rank's share of the CPUs it may use (the CPU quota of
its cgroup, else its affinity, divided by the ranks on its host). On 2 cores with 2 ranks, one
thread each partitions a 500k-node graph in 6 s instead of 13 s, at the same memory.

PT-Scotch is slow when the number of parts is not a power of two: its recursive bipartitioning
then starts with an uneven split (1 : 2 for 3 parts), which took 69 s on a 500k-node graph
where 2 parts took 6 s and 4 parts 9 s (2 ranks), and more than an hour on a 2M-node graph. For
such a ``k`` (on a graph of at least ``MIN_VERTICES_PER_FINE_PART`` vertices per fine part) the
pipeline asks for the power of two ``K >= FINE_PARTS_PER_PART * k`` instead (:func:`fine_parts`)
and groups the K fine parts into k (:func:`group_parts`: balanced within 3%, few edges between
groups, found on the K x K quotient graph). On the 500k graph: 14 s, cut 16.4% against 15.5%
for PT-Scotch's direct 3 parts and 19.6% for METIS's. A ParMETIS named by
``$DGL_PARMETIS_LIB`` partitions into ``k`` directly.

An elastic job asks for every count of ``[minReplicas, maxReplicas]`` at once: one
partitioning into :func:`common_fine_parts` fine parts, grouped into each count, so that a
later attempt with another count finds its partitions made (no partitioner runs again).
"""

from __future__ import annotations

import ctypes
import glob
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from distpart.types import Array

PARMETIS = "parmetis"  # the ParMETIS $DGL_PARMETIS_LIB names
LIB_ENV = "DGL_PARMETIS_LIB"
SCOTCH_GLOB = "/usr/lib/*/scotch-int{bits}"  # Debian's PT-Scotch, 32- or 64-bit SCOTCH_Num
SCOTCH_LIBS = ("libptscotcherr-7.0.so", "libptscotch-7.0.so")  # loaded in this order
INT32_LIMIT = 2**31 - 1  # the 32-bit build: vertices, edges and total vertex weight below it
SCOTCH_STRATDEFAULT = 0  # scotch.h
METIS_OK = 1
IMBALANCE = 1.05  # ParMETIS' usual ubvec: 5 % above the average part weight
FINE_PARTS_PER_PART = 16  # PT-Scotch, k not a power of two: at least this many fine parts per part
MIN_VERTICES_PER_FINE_PART = 1000  # below it (small graphs, fast anyway): k parts directly
MIN_VERTICES_ENV = "DISTPART_FINE_PART_MIN_VERTICES"  # overrides it (the tests' small graphs)


class ParmetisError(RuntimeError):
    pass


THREADS_ENV = "SCOTCH_PTHREAD_NUMBER"
LOCAL_RANKS_ENV = "OMPI_COMM_WORLD_LOCAL_SIZE"  # Open MPI: ranks on this host
CGROUP_CPU = (
    Path("/sys/fs/cgroup/cpu.max"),  # v2: "<quota> <period>" or "max <period>"
    Path("/sys/fs/cgroup/cpu/cpu.cfs_quota_us"),  # v1, with cpu.cfs_period_us beside it
)

_lib: Any = None  # $DGL_PARMETIS_LIB
_scotch: tuple[int, Any] | None = None  # (bits, PT-Scotch's library)


def _cpu_quota() -> float | None:
    """The CPUs this process's cgroup may use (its CFS quota), None when unlimited."""
    v2, v1 = CGROUP_CPU
    try:
        if v2.exists():
            quota, period = v2.read_text().split()[:2]
            return None if quota == "max" else int(quota) / int(period)
        if v1.exists():
            us = int(v1.read_text())
            per = int((v1.parent / "cpu.cfs_period_us").read_text())
            return None if us <= 0 else us / per
    except (OSError, ValueError):
        return None
    return None


def usable_cpus() -> int:
    """The CPUs this process may use: its cgroup's quota, else its affinity (at least 1)."""
    cpus: float = len(os.sched_getaffinity(0))
    quota = _cpu_quota()
    if quota is not None:
        cpus = min(cpus, quota)
    return max(1, int(cpus))


def scotch_threads() -> int:
    """PT-Scotch's threads for this rank: its share of the CPUs it may use, at least 1."""
    try:
        local = max(1, int(os.environ.get(LOCAL_RANKS_ENV, "1")))
    except ValueError:
        local = 1
    return max(1, usable_cpus() // local)


def partitioner_used(asked: str) -> str:
    """What partitions: the ParMETIS ``$DGL_PARMETIS_LIB`` names when it is set, else
    ``asked`` (:data:`chunkedgraph.job.KAMINPAR` or :data:`chunkedgraph.job.PTSCOTCH`)."""
    return PARMETIS if os.environ.get(LIB_ENV) else asked


def library() -> Any:
    """The ParMETIS library ``$DGL_PARMETIS_LIB`` names (loaded once)."""
    global _lib
    if _lib is not None:
        return _lib
    explicit = os.environ[LIB_ENV]
    try:
        _lib = ctypes.CDLL(explicit)
    except OSError as e:
        raise ParmetisError(f"${LIB_ENV}={explicit}: cannot load it: {e}") from e
    return _lib


def scotch_library(bits: int) -> tuple[int, Any]:
    """PT-Scotch with ``bits``-bit ``SCOTCH_Num`` (loaded once; a process keeps the width it
    loaded first, as both builds have the same sonames): (its width, the library)."""
    global _scotch
    if _scotch is not None:
        if _scotch[0] < bits:
            raise ParmetisError(
                f"PT-Scotch's {_scotch[0]}-bit build is loaded: cannot load the {bits}-bit one"
            )
        return _scotch
    os.environ.setdefault(THREADS_ENV, str(scotch_threads()))
    dirs = sorted(glob.glob(SCOTCH_GLOB.format(bits=bits)))
    if not dirs and bits == 32:
        return scotch_library(64)
    if not dirs:
        raise ParmetisError(
            "no PT-Scotch: install Debian's libptscotch-7.0 (64-bit indices in "
            f"{SCOTCH_GLOB.format(bits=64)}) or set ${LIB_ENV} to a ParMETIS with 64-bit idx_t"
        )
    d = Path(dirs[0])
    try:
        lib = [ctypes.CDLL(str(d / name), mode=ctypes.RTLD_GLOBAL) for name in SCOTCH_LIBS][-1]
    except OSError as e:
        raise ParmetisError(f"cannot load PT-Scotch from {d}: {e}") from e
    if lib.SCOTCH_numSizeof() * 8 != bits:
        raise ParmetisError(f"{d}: SCOTCH_Num has {lib.SCOTCH_numSizeof() * 8} bits, not {bits}")
    _scotch = (bits, lib)
    return _scotch


def _ptr(a: Array) -> ctypes.c_void_p:
    return ctypes.c_void_p(a.ctypes.data)


def _least_vertices() -> int:
    """The fewest vertices per fine part for grouping (``$DISTPART_FINE_PART_MIN_VERTICES``)."""
    value = os.environ.get(MIN_VERTICES_ENV) or str(MIN_VERTICES_PER_FINE_PART)
    if not value.isdigit():
        raise ParmetisError(f"${MIN_VERTICES_ENV}={value!r}: not a whole number of vertices")
    return int(value)


def fine_parts(nparts: int, num_vertices: int) -> int:
    """How many parts to ask the library for, to be grouped into ``nparts`` (see above)."""
    if os.environ.get(LIB_ENV) or nparts & (nparts - 1) == 0:
        return nparts
    fine = 1 << (FINE_PARTS_PER_PART * nparts - 1).bit_length()
    return fine if num_vertices >= _least_vertices() * fine else nparts


def common_fine_parts(counts: Sequence[int], num_vertices: int) -> int | None:
    """One partitioning for several ``counts`` (an elastic job's): the power of two
    ``K >= FINE_PARTS_PER_PART * max(counts)`` fine parts, which :func:`group_parts` groups
    into each count. None when the graph has fewer than the least vertices per fine part for
    K (a small graph: each count is then partitioned on its own, fast anyway)."""
    fine = 1 << (FINE_PARTS_PER_PART * max(counts) - 1).bit_length()
    return fine if num_vertices >= _least_vertices() * fine else None


def group_ranges(weights: Array, nparts: int) -> Array:
    """The group (0..nparts-1) of each fine part, given the fine parts' total weights: contiguous
    ranges, each ending at the fine part whose cumulative weight is nearest to its share
    ``j * total / nparts``, and none empty (the start of :func:`group_parts`)."""
    fine = len(weights)
    if fine < nparts:
        raise ValueError(f"cannot group {fine} fine parts into {nparts}")
    cum = np.cumsum(np.asarray(weights, dtype=np.float64))
    total = float(cum[-1])
    group = np.zeros(fine, dtype=np.int64)
    start = 0  # the first fine part of the current group
    for j in range(1, nparts):
        target = j * total / nparts
        # the group ends after fine part `end`: at least one part, and one left for each next group
        lo, hi = start, fine - (nparts - j) - 1
        end = min(max(int(np.searchsorted(cum, target)), lo), hi)
        if end > lo and abs(cum[end - 1] - target) <= abs(cum[end] - target):
            end -= 1
        group[end + 1 :] += 1
        start = end + 1
    return group


def group_parts(
    weights: Array, cross: Array, nparts: int, tolerance: float = 0.03, rounds: int = 10_000
) -> Array:
    """The group (0..nparts-1) of each fine part: balanced groups (each within ``tolerance`` of
    the average weight) that cut few edges. ``weights``: the fine parts' total weights;
    ``cross[p, q]``: the edges between fine parts p and q. Starts from :func:`group_ranges`,
    then applies the best move of a fine part to another group, or swap of two, while one
    lowers the cut (a local search on the small quotient graph: deterministic, so every rank
    gets the same answer)."""
    w = np.asarray(weights, dtype=np.float64)
    a = np.asarray(cross, dtype=np.float64).copy()
    np.fill_diagonal(a, 0)
    fine = len(w)
    avg = w.sum() / nparts
    cap, floor = (1 + tolerance) * avg, (1 - tolerance) * avg
    group = group_ranges(w, nparts)
    rows = np.arange(fine)
    for _ in range(rounds):
        load = np.bincount(group, weights=w, minlength=nparts)
        conn = a @ np.eye(nparts)[group]  # edges from each fine part to each group
        own = conn[rows, group]
        # moves: p to group g
        move = conn - own[:, None]
        ok = (load[None, :] + w[:, None] <= cap) & (load[group] - w >= floor)[:, None]
        ok[rows, group] = False
        move[~ok] = -np.inf
        # swaps: p and q, in different groups
        gp, gq = group[:, None], group[None, :]
        swap = conn[:, group] - own[:, None] + conn[:, group].T - own[None, :] - 2 * a
        after_p = load[gp] - w[:, None] + w[None, :]
        after_q = load[gq] - w[None, :] + w[:, None]
        ok2 = (gp != gq) & (after_p <= cap) & (after_q <= cap)
        ok2 &= (after_p >= floor) & (after_q >= floor)
        swap[~ok2] = -np.inf
        best_move, best_swap = move.max(), swap.max()
        if max(best_move, best_swap) <= 0:
            break
        if best_move >= best_swap:
            p, g = np.unravel_index(int(np.argmax(move)), move.shape)
            group[p] = g
        else:
            p, q = np.unravel_index(int(np.argmax(swap)), swap.shape)
            group[p], group[q] = group[q], group[p]
    return group


def part_kway(
    comm: Any,
    vtxdist: Array,
    xadj: Array,
    adjncy: Array,
    vwgt: Array,
    nparts: int,
    seed: int = 0,
) -> Array:
    """The part (0..nparts-1) of each of this rank's vertices ``vtxdist[r]..vtxdist[r+1]``.
    ``xadj``/``adjncy``: this rank's rows of the symmetric adjacency (global ids, no
    self-loops); ``vwgt``: one weight per local vertex. Collective: every rank calls it."""
    local = len(xadj) - 1
    if nparts == 1:
        return np.zeros(local, dtype=np.int64)
    if os.environ.get(LIB_ENV):
        out = _parmetis(comm, vtxdist, xadj, adjncy, vwgt, nparts, seed)
    else:
        out = _ptscotch(comm, vtxdist, xadj, adjncy, vwgt, nparts, seed)
    if len(out) and (out.min() < 0 or out.max() >= nparts):
        raise ParmetisError(f"the partitioner returned parts outside 0..{nparts - 1}")
    return out


def _ptscotch(
    comm: Any, vtxdist: Array, xadj: Array, adjncy: Array, vwgt: Array, nparts: int, seed: int
) -> Array:
    """PT-Scotch's ``SCOTCH_dgraphPart``, 32-bit when the graph fits (see above)."""
    from mpi4py import MPI

    local = len(xadj) - 1
    sums = np.array([len(adjncy), int(np.sum(vwgt, dtype=np.int64))], dtype=np.int64)
    edges, weight = comm.allreduce(sums)
    fits = max(int(vtxdist[-1]), int(edges), int(weight)) <= INT32_LIMIT
    bits, lib = scotch_library(32 if fits else 64)
    num = np.int32 if bits == 32 else np.int64
    c_num = ctypes.c_int32 if bits == 32 else ctypes.c_int64
    xadj = np.ascontiguousarray(xadj, dtype=num)  # copies only for the 32-bit build
    adjncy = np.ascontiguousarray(adjncy if len(adjncy) else np.zeros(1), dtype=num)
    vwgt = np.ascontiguousarray(vwgt, dtype=num)
    part = np.zeros(max(local, 1), dtype=num)
    nedges = int(xadj[local])
    # the opaque SCOTCH_Dgraph and SCOTCH_Strat, in 8-byte aligned buffers of their sizes
    graph = (ctypes.c_double * (lib.SCOTCH_dgraphSizeof() // 8 + 1))()
    strat = (ctypes.c_double * (lib.SCOTCH_stratSizeof() // 8 + 1))()
    handle = ctypes.c_void_p.from_address(MPI._addressof(comm))  # Open MPI: MPI_Comm is a pointer
    if lib.SCOTCH_dgraphInit(graph, handle) != 0:
        raise ParmetisError("SCOTCH_dgraphInit failed")
    try:
        ret = lib.SCOTCH_dgraphBuild(
            graph, c_num(0), c_num(local), c_num(local), _ptr(xadj),
            ctypes.c_void_p(xadj.ctypes.data + xadj.itemsize), _ptr(vwgt), None,
            c_num(nedges), c_num(len(adjncy)), _ptr(adjncy), None, None,
        )  # fmt: skip
        if ret != 0:
            raise ParmetisError(f"SCOTCH_dgraphBuild returned {ret}")
        lib.SCOTCH_stratInit(strat)
        try:
            ret = lib.SCOTCH_stratDgraphMapBuild(
                strat, c_num(SCOTCH_STRATDEFAULT), c_num(comm.size), c_num(nparts),
                ctypes.c_double(IMBALANCE - 1),
            )  # fmt: skip
            if ret != 0:
                raise ParmetisError(f"SCOTCH_stratDgraphMapBuild returned {ret}")
            lib.SCOTCH_randomSeed(c_num(seed))
            lib.SCOTCH_randomReset()
            ret = lib.SCOTCH_dgraphPart(graph, c_num(nparts), strat, _ptr(part))
            if ret != 0:
                raise ParmetisError(f"SCOTCH_dgraphPart returned {ret}")
        finally:
            lib.SCOTCH_stratExit(strat)
    finally:
        lib.SCOTCH_dgraphExit(graph)
    return part[:local].astype(np.int64)


def _parmetis(
    comm: Any, vtxdist: Array, xadj: Array, adjncy: Array, vwgt: Array, nparts: int, seed: int
) -> Array:
    """``ParMETIS_V3_PartKway`` of ``$DGL_PARMETIS_LIB`` (64-bit ``idx_t``)."""
    from mpi4py import MPI

    local = len(xadj) - 1
    i64 = np.int64
    vtxdist = np.ascontiguousarray(vtxdist, dtype=i64)
    xadj = np.ascontiguousarray(xadj, dtype=i64)
    # ParMETIS reads adjncy[0] even for a rank without edges
    adjncy = np.ascontiguousarray(adjncy if len(adjncy) else np.zeros(1), dtype=i64)
    vwgt = np.ascontiguousarray(vwgt, dtype=i64)
    wgtflag = np.array([2], dtype=i64)  # vertex weights only
    numflag = np.array([0], dtype=i64)
    ncon = np.array([1], dtype=i64)
    nparts_a = np.array([nparts], dtype=i64)
    tpwgts = np.full(nparts, 1.0 / nparts, dtype=np.float32)
    ubvec = np.array([IMBALANCE], dtype=np.float32)
    options = np.array([1, 0, seed], dtype=i64)  # use options: no debug output, this seed
    edgecut = np.zeros(1, dtype=i64)
    part = np.zeros(max(local, 1), dtype=i64)
    handle = ctypes.c_void_p(MPI._addressof(comm))  # an MPI_Comm* for the C API
    ret = library().ParMETIS_V3_PartKway(
        _ptr(vtxdist), _ptr(xadj), _ptr(adjncy), _ptr(vwgt), None, _ptr(wgtflag),
        _ptr(numflag), _ptr(ncon), _ptr(nparts_a), _ptr(tpwgts), _ptr(ubvec), _ptr(options),
        _ptr(edgecut), _ptr(part), handle,
    )  # fmt: skip
    if ret != METIS_OK:
        raise ParmetisError(f"ParMETIS_V3_PartKway returned {ret} (METIS_OK is {METIS_OK})")
    return part[:local]
