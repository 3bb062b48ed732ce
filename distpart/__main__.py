"""``python -m distpart partition ...``: what dglrun starts on every MPI rank.

    mpirun -np P python -m distpart partition --chunked DIR --graph-name G --num-parts K \\
        --out OUT [OUT ...] [--layout Shared|PerWorker] [--balance-train] [--balance-edges]
        [--feature-files]

``--out``: one folder that every rank writes into, or one per rank (rank ``i`` writes into the
``i``-th: DistParMETIS on the local transport, where every worker's disk is a folder here).

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
from podcontract import CHUNKED_LAYOUTS, SHARED


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m distpart", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    q = sub.add_parser("partition", help="one MPI rank of the ParMETIS partitioning")
    q.add_argument("--chunked", required=True, help="the chunked graph (folder or metadata.json)")
    q.add_argument("--layout", choices=CHUNKED_LAYOUTS, default=SHARED)
    q.add_argument("--graph-name", required=True, help="name of the partition JSON")
    q.add_argument("--num-parts", type=int, required=True)
    q.add_argument("--out", required=True, nargs="+", help="output folder(s): one, or one per rank")
    q.add_argument("--balance-train", action="store_true")
    q.add_argument("--balance-edges", action="store_true")
    q.add_argument(
        "--feature-files",
        action="store_true",
        help="also write each part's node features as .npy (out-of-core workers)",
    )
    q.add_argument("--seed", type=int, default=0)
    a = p.parse_args(argv)
    if a.num_parts < 1:
        p.error("--num-parts must be at least 1")
    return a


def main(argv: Sequence[str] | None = None) -> int:
    a = parse_args(argv)
    os.environ.setdefault("OUTDATED_IGNORE", "1")
    os.environ.setdefault("DGLBACKEND", "pytorch")
    from mpi4py import MPI

    from distpart.parmetis import ParmetisError
    from distpart.pipeline import Job, Rank

    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    where = f"rank {rank} on {socket.gethostname()}"
    try:
        job = Job(
            graph=load(a.chunked),
            layout=a.layout,
            graph_name=a.graph_name,
            num_parts=a.num_parts,
            outs=tuple(a.out),
            balance_train=a.balance_train,
            balance_edges=a.balance_edges,
            seed=a.seed,
            feature_files=a.feature_files,
        )
        if len(a.out) not in (1, comm.Get_size()):
            raise ChunkedError(f"--out: give one folder, or one per rank ({comm.Get_size()})")
        if a.layout != SHARED and a.num_parts != comm.Get_size():
            raise ChunkedError(
                f"layout {a.layout}: every worker writes its own part, so --num-parts "
                f"({a.num_parts}) must equal the number of ranks ({comm.Get_size()})"
            )
        Rank(comm, job, lambda s: print(s, flush=True)).run()
    except (ChunkedError, ParmetisError, ValueError, OSError) as e:
        print(f"distpart: {where}: error: {e}", flush=True)
        comm.Abort(1)
    except BaseException:
        print(f"distpart: {where}: unexpected error:", flush=True)
        traceback.print_exc()
        sys.stdout.flush()
        comm.Abort(1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
