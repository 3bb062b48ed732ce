"""``ParMETIS_V3_PartKway`` through ctypes, on the ranks' communicator.

The library is PT-Scotch's implementation of the ParMETIS v3 API from Debian
(``libptscotch-7.0``; its 64-bit-index build in ``/usr/lib/<arch>/scotch-int64``), or the
library ``$DGL_PARMETIS_LIB`` names: a real ParMETIS built with 64-bit ``idx_t`` and 32-bit
``real_t`` has the same ABI. PT-Scotch's ParMETIS wrapper sits next to Scotch libraries of both
index widths with the same sonames, so the 64-bit Scotch libraries are loaded first (globally):
the wrapper then binds to them, not to the 32-bit ones on the default search path.

PT-Scotch implements one balance constraint (``ncon`` 1) and does not fill ``edgecut``; the
pipeline passes one vertex weight and counts the cut itself.

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
"""

from __future__ import annotations

import ctypes
import glob
import os
from pathlib import Path
from typing import Any

import numpy as np

from distpart.types import Array

LIB_ENV = "DGL_PARMETIS_LIB"
SCOTCH_GLOB = "/usr/lib/*/scotch-int64"
SCOTCH_LIBS = (
    "libscotcherr-7.0.so",
    "libscotch-7.0.so",
    "libptscotcherr-7.0.so",
    "libptscotch-7.0.so",
)
WRAPPER = "libptscotchparmetisv3-7.0.so"
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

_lib: Any = None


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


def scotch_threads() -> int:
    """PT-Scotch's threads for this rank: its share of the CPUs it may use, at least 1."""
    cpus: float = len(os.sched_getaffinity(0))
    quota = _cpu_quota()
    if quota is not None:
        cpus = min(cpus, quota)
    try:
        local = max(1, int(os.environ.get(LOCAL_RANKS_ENV, "1")))
    except ValueError:
        local = 1
    return max(1, int(cpus // local))


def library() -> Any:
    """The ParMETIS library (loaded once)."""
    global _lib
    if _lib is not None:
        return _lib
    os.environ.setdefault(THREADS_ENV, str(scotch_threads()))
    explicit = os.environ.get(LIB_ENV)
    if explicit:
        try:
            _lib = ctypes.CDLL(explicit)
        except OSError as e:
            raise ParmetisError(f"${LIB_ENV}={explicit}: cannot load it: {e}") from e
        return _lib
    dirs = sorted(glob.glob(SCOTCH_GLOB))
    if not dirs:
        raise ParmetisError(
            "no ParMETIS library: install Debian's libptscotch-7.0 (PT-Scotch's ParMETIS API, "
            f"64-bit indices in {SCOTCH_GLOB}) or set ${LIB_ENV} to a ParMETIS with 64-bit idx_t"
        )
    d = Path(dirs[0])
    try:
        for name in SCOTCH_LIBS:
            if (d / name).exists():
                ctypes.CDLL(str(d / name), mode=ctypes.RTLD_GLOBAL)
        _lib = ctypes.CDLL(str(d / WRAPPER))
    except OSError as e:
        raise ParmetisError(f"cannot load PT-Scotch's ParMETIS library from {d}: {e}") from e
    return _lib


def _ptr(a: Array) -> ctypes.c_void_p:
    return ctypes.c_void_p(a.ctypes.data)


def fine_parts(nparts: int, num_vertices: int) -> int:
    """How many parts to ask the library for, to be grouped into ``nparts`` (see above)."""
    if os.environ.get(LIB_ENV) or nparts & (nparts - 1) == 0:
        return nparts
    fine = 1 << (FINE_PARTS_PER_PART * nparts - 1).bit_length()
    value = os.environ.get(MIN_VERTICES_ENV) or str(MIN_VERTICES_PER_FINE_PART)
    if not value.isdigit():
        raise ParmetisError(f"${MIN_VERTICES_ENV}={value!r}: not a whole number of vertices")
    least = int(value)
    return fine if num_vertices >= least * fine else nparts


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
    from mpi4py import MPI

    local = len(xadj) - 1
    if nparts == 1:
        return np.zeros(local, dtype=np.int64)
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
    out = part[:local]
    if len(out) and (out.min() < 0 or out.max() >= nparts):
        raise ParmetisError(f"ParMETIS_V3_PartKway returned parts outside 0..{nparts - 1}")
    return out
