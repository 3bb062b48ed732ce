"""What every MPI rank of ``python -m distpart partition`` is asked to do: :class:`PartitionJob`.

dglrun builds it (as part of its partition request, launcher.partition.request) and starts
the ranks with :meth:`PartitionJob.argv`; each rank reads it back from that command line
(:func:`add_arguments`, :meth:`PartitionJob.from_args`). The command line is written and
read here alone (from the fields' declarations, podprogram.flagfields), so the two sides
cannot disagree on a flag. Standard library only: dglrun imports it too.
"""

from __future__ import annotations

import argparse
import dataclasses
from dataclasses import dataclass
from pathlib import Path

from podcontract import CHUNKED_LAYOUTS, SHARED
from podprogram.flagfields import add_flags, flag, to_argv, values

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
    grouped into each count, and count ``c``'s parts go to :func:`count_dir` of each folder.

    Each field is the ranks' flag of the same name (its metadata): :meth:`argv` writes them,
    :func:`add_arguments` and :meth:`from_args` read them back."""

    graph_name: str = flag("--graph-name", required=True, help="name of the partition JSON")
    num_parts: int = flag("--num-parts", type=int, required=True)
    chunked: str | None = flag(
        "--chunked", default=None, required=True, help="the chunked graph (folder or metadata.json)"
    )
    layout: str = flag("--layout", default=SHARED, choices=CHUNKED_LAYOUTS)
    outs: tuple[str, ...] = flag(
        "--out",
        default=(),
        required=True,
        nargs="+",
        convert=tuple,
        help="output folder(s): one, or one per rank",
    )
    balance_train: bool = flag("--balance-train", default=False, action="store_true")
    balance_edges: bool = flag("--balance-edges", default=False, action="store_true")
    feature_files: bool = flag(
        "--feature-files",
        default=False,
        action="store_true",
        help="also write each part's node features as .npy (out-of-core workers)",
    )
    # ParMETIS' seed (dglrun leaves it at 0, and does not write it then)
    seed: int = flag("--seed", type=int, default=0, skip_default=True)
    # one of PARTITIONERS ($DGL_PARMETIS_LIB overrides it)
    partitioner: str = flag(
        "--partitioner",
        default=KAMINPAR,
        choices=PARTITIONERS,
        help="KaMinPar on rank 0 (the default), or PT-Scotch across the ranks "
        "($DGL_PARMETIS_LIB, when set, names a ParMETIS that is used instead)",
    )
    # other counts written too (each into count_dir)
    counts: tuple[int, ...] = flag(
        "--counts",
        default=(),
        type=int,
        nargs="+",
        convert=tuple,
        help="other numbers of parts to write from the same partitioning (each into <out>@<n>)",
    )

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
        return to_argv(dataclasses.replace(self, counts=self.every_count()[1:]))

    @classmethod
    def from_args(cls, a: argparse.Namespace) -> PartitionJob:
        """The job from the arguments :func:`add_arguments` parsed."""
        return cls(**values(cls, a))


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The flags :meth:`PartitionJob.argv` writes, on the ranks' parser."""
    add_flags(p, PartitionJob)


def count_dir(out: Path, count: int) -> Path:
    """Where the parts of another ``count`` go, beside the folder ``out``: ``<out>@<count>``
    (a cache's staging folder keeps its prefix: nobody takes it for an entry)."""
    return out.with_name(f"{out.name}@{count}")
