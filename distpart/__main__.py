"""``python -m distpart partition ...``: what dglrun starts on every MPI rank.

    mpirun -np P python -m distpart partition --chunked DIR --graph-name G --num-parts K \\
        --out OUT [OUT ...] [--layout Shared|PerWorker] [--balance-train] [--balance-edges]
        [--feature-files] [--counts N [N ...]]

``--out``: one folder that every rank writes into, or one per rank (rank ``i`` writes into the
``i``-th: DistParMETIS on the local transport, where every worker's disk is a folder here).
``--counts``: other numbers of parts written from the same partitioning (an elastic job's),
each beside its folder, ``OUT@N``.

A user error (a bad chunk, a ParMETIS failure, a graph too small for K parts) is one line
naming the rank, its host and the cause, then ``MPI_Abort``: no rank waits forever in a
collective for a rank that stopped. Exit codes: 0 done, 1 error, 2 usage.
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
import traceback
from collections.abc import Sequence

from chunkedgraph import ChunkedError, load
from chunkedgraph.job import PartitionJob, add_arguments
from podcontract import SHARED
from podcontract.logline import say  # (every rank shares mpirun's output)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m distpart", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    add_arguments(sub.add_parser("partition", help="one MPI rank of the ParMETIS partitioning"))
    a = p.parse_args(argv)
    if a.num_parts < 1:
        p.error("--num-parts must be at least 1")
    if any(c < 1 for c in a.counts):
        p.error("--counts: every count must be at least 1")
    return a


def main(argv: Sequence[str] | None = None) -> int:
    job = PartitionJob.from_args(parse_args(argv))
    os.environ.setdefault("OUTDATED_IGNORE", "1")
    os.environ.setdefault("DGLBACKEND", "pytorch")
    from mpi4py import MPI

    from distpart.parmetis import ParmetisError
    from distpart.pipeline import Rank

    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    where = f"rank {rank} on {socket.gethostname()}"
    try:
        assert job.chunked is not None  # (--chunked is required)
        graph = load(job.chunked)
        if len(job.outs) not in (1, comm.Get_size()):
            raise ChunkedError(f"--out: give one folder, or one per rank ({comm.Get_size()})")
        if job.layout != SHARED and job.num_parts != comm.Get_size():
            raise ChunkedError(
                f"layout {job.layout}: every worker writes its own part, so --num-parts "
                f"({job.num_parts}) must equal the number of ranks ({comm.Get_size()})"
            )
        Rank(comm, job, graph, say).run()
    except (ChunkedError, ParmetisError, ValueError, OSError) as e:
        say(f"distpart: {where}: error: {e}")
        comm.Abort(1)
    except BaseException:
        say(f"distpart: {where}: unexpected error:")
        traceback.print_exc()
        sys.stdout.flush()
        comm.Abort(1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
