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
    self-loops); ``vwgt``: one weight per local vertex."""
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
