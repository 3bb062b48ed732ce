"""What each ``spec.partitionMode`` means for the job's pods: one entry per mode.

The parser, the builders, the status and the sync ask the job's :class:`PartitionMode` rather than
comparing mode names, so a new mode is one more entry here.

=============  =======  ===========  =============  ======================================
mode           workers  partitioner  chunked graph  where the graph is partitioned
=============  =======  ===========  =============  ======================================
DGL-API        yes      yes          no             the partitioner pod: the user's partition
                                                    entry point (``partition_graph``)
ParMETIS       yes      yes          Shared         the partitioner pod: MPI ranks of
                                                    ``distpart`` (ParMETIS API), then
                                                    delivered like DGL-API's
DistParMETIS   yes      no           Shared or      the workers: the launcher's dglrun runs
                                     PerWorker      one MPI rank on each (the workers'
                                                    agents as MPI's remote shell); each
                                                    writes its own part on its own disk
Skip           no       no           no             nowhere: the launcher trains alone
=============  =======  ===========  =============  ======================================
"""

from __future__ import annotations

from dataclasses import dataclass

from podcontract import DGL_API, DIST_PARMETIS, PARMETIS, PER_WORKER, SHARED

# (the other modes' and spec.chunkedGraph.layout's names are dglrun's too: podcontract's)
SKIP = "Skip"


@dataclass(frozen=True)
class PartitionMode:
    name: str
    workers: bool  # Worker pods, their Services and the hostfile
    partitioner: bool  # a Partitioner pod partitions, then delivers to the launcher
    layouts: tuple[str, ...] = ()  # spec.chunkedGraph layouts it takes; () = no chunked graph
    partitions_in_launcher: bool = False  # the launcher's dglrun partitions (on the workers)

    @property
    def chunked_graph(self) -> bool:
        """Whether the mode reads a chunked graph (``spec.chunkedGraph`` is required)."""
        return bool(self.layouts)


MODES: dict[str, PartitionMode] = {
    DGL_API: PartitionMode(DGL_API, workers=True, partitioner=True),
    SKIP: PartitionMode(SKIP, workers=False, partitioner=False),
    PARMETIS: PartitionMode(PARMETIS, workers=True, partitioner=True, layouts=(SHARED,)),
    DIST_PARMETIS: PartitionMode(
        DIST_PARMETIS,
        workers=True,
        partitioner=False,
        layouts=(SHARED, PER_WORKER),
        partitions_in_launcher=True,
    ),
}
PARTITION_MODES = tuple(MODES)
