"""What every MPI rank of ``python -m distpart partition`` is asked to do: :class:`PartitionJob`.

dglrun builds it (as part of its partition request, launcher.partition.request) and starts
the ranks with :meth:`PartitionJob.argv`; each rank reads it back from that command line
(:func:`add_arguments`, :meth:`PartitionJob.from_args`). The command line is written and
read here alone, so the two sides cannot disagree on a flag. Standard library only: dglrun
imports it too.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

from podcontract import CHUNKED_LAYOUTS, SHARED

KAMINPAR = "kaminpar"  # PyPI's KaMinPar, on rank 0 (distpart.kaminpar): the default
PTSCOTCH = "ptscotch"  # PT-Scotch's distributed partitioner, across the ranks
PARTITIONERS = (KAMINPAR, PTSCOTCH)


@dataclass(frozen=True)
class PartitionJob:
    """The partitions asked for: ``num_parts`` parts of the graph ``graph_name`` (the
    partition JSON's name), balanced as the flags say, with each part's node features as
    .npy too (``feature_files``, out-of-core workers). The ParMETIS modes read the chunked
    graph ``chunked`` (a folder or its metadata.json, as the ranks see it; None in DGL-API,
    whose entry point reads the graph itself) in ``layout``, and write into ``outs``: one
    folder for every rank, or one per rank (set when the ranks are placed).

    ``counts``: other numbers of parts written by the same run (an elastic job's counts in
    ``[minReplicas, maxReplicas]``): the graph is partitioned once, into fine parts that are
    grouped into each count, and count ``c``'s parts go to :func:`count_dir` of each folder."""

    graph_name: str
    num_parts: int
    chunked: str | None = None
    layout: str = SHARED
    outs: tuple[str, ...] = ()
    balance_train: bool = False
    balance_edges: bool = False
    feature_files: bool = False
    seed: int = 0  # ParMETIS' seed (dglrun leaves it at 0)
    counts: tuple[int, ...] = ()  # other counts written too (each into count_dir)
    partitioner: str = KAMINPAR  # one of PARTITIONERS ($DGL_PARMETIS_LIB overrides it)

    def out_dir(self, rank: int, count: int | None = None) -> Path:
        """Where rank ``rank`` writes (the parts of ``count``, one of ``counts``: beside)."""
        out = Path(self.outs[rank] if len(self.outs) > 1 else self.outs[0])
        return out if count is None or count == self.num_parts else count_dir(out, count)

    def every_count(self) -> tuple[int, ...]:
        """``num_parts``, then the other counts (each once)."""
        return (self.num_parts, *sorted(set(self.counts) - {self.num_parts}))

    def argv(self) -> list[str]:
        """The ranks' arguments (after ``python -m distpart partition``); ``chunked`` and
        ``outs`` must be set."""
        assert self.chunked is not None and self.outs, "the ParMETIS modes' job"
        argv = [
            "--chunked", self.chunked,
            "--layout", self.layout,
            "--graph-name", self.graph_name,
            "--num-parts", str(self.num_parts),
            "--out", *self.outs,
        ]  # fmt: skip
        if self.balance_train:
            argv.append("--balance-train")
        if self.balance_edges:
            argv.append("--balance-edges")
        if self.feature_files:
            argv.append("--feature-files")
        if self.seed:
            argv += ["--seed", str(self.seed)]
        argv += ["--partitioner", self.partitioner]
        others = self.every_count()[1:]
        if others:
            argv += ["--counts", *map(str, others)]
        return argv

    @classmethod
    def from_args(cls, a: argparse.Namespace) -> PartitionJob:
        """The job from the arguments :func:`add_arguments` parsed."""
        return cls(
            graph_name=a.graph_name,
            num_parts=a.num_parts,
            chunked=a.chunked,
            layout=a.layout,
            outs=tuple(a.out),
            balance_train=a.balance_train,
            balance_edges=a.balance_edges,
            feature_files=a.feature_files,
            seed=a.seed,
            counts=tuple(a.counts),
            partitioner=a.partitioner,
        )


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The flags :meth:`PartitionJob.argv` writes, on the ranks' parser."""
    p.add_argument("--chunked", required=True, help="the chunked graph (folder or metadata.json)")
    p.add_argument("--layout", choices=CHUNKED_LAYOUTS, default=SHARED)
    p.add_argument("--graph-name", required=True, help="name of the partition JSON")
    p.add_argument("--num-parts", type=int, required=True)
    p.add_argument("--out", required=True, nargs="+", help="output folder(s): one, or one per rank")
    p.add_argument("--balance-train", action="store_true")
    p.add_argument("--balance-edges", action="store_true")
    p.add_argument(
        "--feature-files",
        action="store_true",
        help="also write each part's node features as .npy (out-of-core workers)",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--partitioner",
        choices=PARTITIONERS,
        default=KAMINPAR,
        help="KaMinPar on rank 0 (the default), or PT-Scotch across the ranks "
        "($DGL_PARMETIS_LIB, when set, names a ParMETIS that is used instead)",
    )
    p.add_argument(
        "--counts",
        type=int,
        nargs="+",
        default=[],
        help="other numbers of parts to write from the same partitioning (each into <out>@<n>)",
    )


def count_dir(out: Path, count: int) -> Path:
    """Where the parts of another ``count`` go, beside the folder ``out``: ``<out>@<count>``
    (a cache's staging folder keeps its prefix: nobody takes it for an entry)."""
    return out.with_name(f"{out.name}@{count}")
