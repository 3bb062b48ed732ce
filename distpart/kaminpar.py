"""Partition with KaMinPar (PyPI ``kaminpar``: shared-memory, multithreaded) on one rank.

KaMinPar's Python wheel builds a graph only from a file (METIS text or ParHIP binary), so
rank 0 writes the whole symmetric adjacency as a ParHIP file (:func:`write_parhip`), every
rank's rows in turn, streamed in blocks (rank 0 never holds another rank's rows whole), then
loads it, partitions it into each count and sends every rank the parts of its nodes. The
ranks other than 0 wait without spinning (Open MPI's blocking calls poll a core).

Why one rank: at ogbn-products scale (2.4M nodes, 124M directed edges) the structure is 0.5 GB
as 32-bit ids, and KaMinPar partitions it into 3 parts in seconds with about 16 to 20 bytes
a directed edge (its 64-bit build), where PT-Scotch takes minutes with about 90 to 150 bytes
a directed edge of every rank's share (see :mod:`distpart.parmetis` and bench/distpart_bench.py).
Nothing is ever gathered on a rank but the structure and one weight per node.

The file (header: version flags, nodes, directed edges; then each node's first edge as a byte
offset, its neighbours as 32-bit ids and its weight as a 64-bit one) is the format of
KaMinPar's ``kaminpar-io/parhip_parser.cc``. It goes into ``$DISTPART_SCRATCH`` (else the
temporary folder: ``$TMPDIR``, else /tmp) of rank 0 and is removed as soon as it is loaded.
(Not ``$TMPDIR`` alone: Open MPI keeps its session files there, and a full one stops mpirun.)
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from distpart.parmetis import ParmetisError, usable_cpus
from distpart.types import Array

IMBALANCE = 0.03  # each part's weight at most 3% above the average (KaMinPar's default)
# KaMinPar's preset: Jet refinement. On make_dataset.py's 500k-node graph (8 classes) into 3
# parts its cut was 15.5% in 4.6 s, as good as "strong" (20 s), where "default" cut 20.2% (1.8 s)
# and PT-Scotch's 64 fine parts grouped 16.3%; on the products-shaped graph every preset cut
# the same, "jet" in the time of "default" (0.3 of products: 4.6 s, 18.8%)
CONTEXT = "jet"
BLOCK = 1 << 24  # neighbour ids sent to rank 0 per message
IDLE_POLL = 0.05  # seconds between a waiting rank's checks
HEADER = 3  # uint64 words: version, nodes, directed edges
# ParHIP's version word: a bit *set* means "absent" or "32-bit" (parhip_parser.cc)
NO_EDGE_WEIGHTS, NO_NODE_WEIGHTS, EDGE_ID_32, NODE_ID_32, NODE_WEIGHT_32, EDGE_WEIGHT_32 = (
    1 << b for b in range(6)
)
UINT32_LIMIT = 2**32
SCRATCH_ENV = "DISTPART_SCRATCH"  # where rank 0 writes the graph file (default: tempfile's)


def available() -> str | None:
    """Why KaMinPar cannot run here (None: it can)."""
    try:
        import kaminpar  # noqa: F401
    except ImportError as e:
        return (
            f"KaMinPar is not installed in this image ({e}): install PyPI's kaminpar "
            "(requirements-dgl.txt), or choose --partitioner ptscotch"
        )
    return None


def version_word(node_id_bits: int) -> int:
    """The header's flags: no edge weights, 64-bit node weights and edge offsets."""
    flags = NO_EDGE_WEIGHTS | EDGE_WEIGHT_32
    return flags | (NODE_ID_32 if node_id_bits == 32 else 0)


def node_ids(num_nodes: int) -> type[np.unsignedinteger[Any]]:
    """The file's node id type: 32-bit when every id fits."""
    return np.uint32 if num_nodes < UINT32_LIMIT else np.uint64


def write_parhip(
    comm: Any, out: BinaryIO | None, num_nodes: int, xadj: Array, adjncy: Array, vwgt: Array
) -> None:
    """Every rank's rows of the symmetric adjacency (``xadj``/``adjncy``, global ids) and
    weights, written by rank 0 into ``out`` (None elsewhere) in ParHIP's binary format.
    Collective."""
    from mpi4py import MPI

    rank, size = comm.Get_rank(), comm.Get_size()
    edges = int(comm.allreduce(len(adjncy), op=MPI.SUM))
    ids = node_ids(num_nodes)
    degrees = _gather(comm, np.diff(xadj).astype(np.int64))
    weights = _gather(comm, np.asarray(vwgt, dtype=np.int64))
    if rank == 0:
        assert out is not None and degrees is not None
        np.array(
            [version_word(32 if ids is np.uint32 else 64), num_nodes, edges], dtype=np.uint64
        ).tofile(out)
        first = (HEADER + num_nodes + 1) * 8  # byte offset of the first neighbour
        offsets = np.empty(num_nodes + 1, dtype=np.uint64)
        offsets[0] = 0
        np.cumsum(degrees, out=offsets[1:])
        del degrees
        offsets *= np.dtype(ids).itemsize
        offsets += first
        offsets.tofile(out)
        del offsets
    for sender in range(size):  # rank by rank, in blocks: rank 0 holds one block at a time
        if rank == sender:
            for a in range(0, len(adjncy), BLOCK):
                block = np.ascontiguousarray(adjncy[a : a + BLOCK], dtype=ids)
                if rank == 0:
                    assert out is not None
                    block.tofile(out)
                else:
                    comm.send(len(block), dest=0, tag=1)
                    comm.Send(block, dest=0, tag=2)
            if rank != 0:
                comm.send(0, dest=0, tag=1)
        elif rank == 0:
            assert out is not None
            while (n := comm.recv(source=sender, tag=1)) > 0:
                block = np.empty(n, dtype=ids)
                comm.Recv(block, source=sender, tag=2)
                block.tofile(out)
    if rank == 0:
        assert out is not None and weights is not None
        weights.tofile(out)


def parhip_bytes(num_nodes: int, edges: int) -> int:
    """The size of the ParHIP file :func:`write_parhip` writes."""
    return (
        (HEADER + num_nodes + 1) * 8
        + edges * np.dtype(node_ids(num_nodes)).itemsize
        + num_nodes * 8
    )


def _scratch_file(size: int) -> tuple[Path | None, BinaryIO | None, str | None]:
    """A new file for the graph in ``$DISTPART_SCRATCH`` (else the temporary folder), with
    room for ``size`` bytes: (its path, open for writing; None) or (None, None, the error)."""
    where = os.environ.get(SCRATCH_ENV) or None
    folder = where or tempfile.gettempdir()
    advice = f"set ${SCRATCH_ENV} to a folder with room for it (4 bytes a directed edge)"
    try:
        free = shutil.disk_usage(folder).free
        if free < size:
            return (
                None,
                None,
                (
                    f"{folder}: no room for the graph KaMinPar reads: it takes "
                    f"{size / 2**20:.1f} MiB, {free / 2**20:.1f} MiB are free; {advice}"
                ),
            )
        fd, name = tempfile.mkstemp(prefix="distpart-", suffix=".parhip", dir=folder)
    except OSError as e:
        return None, None, f"{folder}: cannot write the graph KaMinPar reads there ({e}); {advice}"
    return Path(name), os.fdopen(fd, "wb"), None


def _gather(comm: Any, local: Array) -> Array | None:
    """Every rank's ``local`` (int64) concatenated on rank 0, in rank order."""
    counts = np.array(comm.gather(len(local), root=0) or [], dtype=np.int64)
    if comm.Get_rank() != 0:
        comm.Gatherv(local, None, root=0)
        return None
    out = np.empty(int(counts.sum()), dtype=np.int64)
    comm.Gatherv(local, (out, counts.tolist()), root=0)
    return out


def _wait(comm: Any) -> None:
    """Wait for every rank without keeping a core busy."""
    req = comm.Ibarrier()
    while not req.Test():
        time.sleep(IDLE_POLL)


def partition(
    comm: Any,
    vtxdist: Array,
    rows: list[Array],
    counts: Sequence[int],
    seed: int = 0,
    say: Callable[[str], None] = print,
) -> dict[int, Array]:
    """Each count's part (0..count-1) of this rank's vertices ``vtxdist[r]..vtxdist[r+1]``.
    ``rows``: this rank's ``[xadj, adjncy, vwgt]`` (global ids, no self-loops), emptied here
    once rank 0 has them on disk. Collective: every rank calls it."""
    rank = comm.Get_rank()
    num_nodes = int(vtxdist[-1])
    edges = int(comm.allreduce(len(rows[1])))
    path: Path | None = None
    out: BinaryIO | None = None
    error = available() if rank == 0 else None
    if rank == 0 and error is None:
        path, out, error = _scratch_file(parhip_bytes(num_nodes, edges))
    error = comm.bcast(error, root=0)
    if error:
        raise ParmetisError(error)
    parts: dict[int, Array] = {}
    try:
        try:
            write_parhip(comm, out, num_nodes, *rows)
            if out is not None:
                out.close()  # (a full disk may show only here)
        except OSError as e:
            raise ParmetisError(
                f"{path}: cannot write the graph for KaMinPar ({e.strerror or e}); set "
                f"${SCRATCH_ENV} to a folder with room for it (4 bytes a directed edge)"
            ) from e
        finally:
            if out is not None and not out.closed:
                with contextlib.suppress(OSError):
                    out.close()
        rows[:] = [r[:0] for r in rows]  # what was sent is not needed again
        if rank == 0:
            assert path is not None
            error = None
            try:
                parts = _solve(path, counts, seed, say)
            except (RuntimeError, ValueError, MemoryError) as e:
                error = f"KaMinPar: {e}"
    finally:
        if path is not None:
            path.unlink(missing_ok=True)
    _wait(comm)
    error = comm.bcast(error, root=0)
    if error:
        raise ParmetisError(error)
    return {c: _scatter(comm, vtxdist, parts.get(c)) for c in counts}


def _solve(
    path: Path, counts: Sequence[int], seed: int, say: Callable[[str], None]
) -> dict[int, Array]:
    """KaMinPar's partition of the graph in ``path`` into each count (rank 0). The file is
    removed once loaded: the graph is then in KaMinPar's own arrays."""
    import kaminpar

    threads = usable_cpus()
    started = time.perf_counter()
    graph = kaminpar.load_graph(str(path), kaminpar.GraphFileFormat.PARHIP)
    path.unlink()
    say(
        f"KaMinPar: {graph.n()} nodes, {graph.m()} directed edges loaded in "
        f"{time.perf_counter() - started:.1f}s; {threads} thread(s)"
    )
    kaminpar.reseed(seed)
    solver = kaminpar.KaMinPar(threads, kaminpar.context_by_name(CONTEXT))
    out: dict[int, Array] = {}
    for count in counts:
        started = time.perf_counter()
        if count == 1:
            out[count] = np.zeros(graph.n(), dtype=np.int32)
            continue
        out[count] = np.asarray(solver.compute_partition(graph, count, IMBALANCE), dtype=np.int32)
        say(f"KaMinPar: {count} parts in {time.perf_counter() - started:.1f}s")
    return out


def _scatter(comm: Any, vtxdist: Array, whole: Array | None) -> Array:
    """Rank 0's ``whole`` (one value a node), each rank its nodes' values."""
    sizes = np.diff(vtxdist).astype(np.int64)
    mine = np.empty(int(sizes[comm.Get_rank()]), dtype=np.int32)
    comm.Scatterv((whole, sizes.tolist()) if comm.Get_rank() == 0 else None, mine, root=0)
    out: Array = mine.astype(np.int64)
    return out
