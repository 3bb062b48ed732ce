"""The partition step's one input: :class:`PartitionRequest`.

launcher.phases builds it once from dglrun's flags (``partition_request``); the partition step
(the DGL-API entry point in launcher.phases, the ParMETIS modes in
:mod:`launcher.partition.parmetis_modes`) and the partition cache (launcher.storage) take it
whole, and distpart's MPI ranks the part of it that crosses to them: its
:class:`~chunkedgraph.job.PartitionJob`, written on their command line and read back there.
Nothing copies its fields into a value of its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from chunkedgraph.job import PartitionJob


@dataclass(frozen=True)
class EntryPoint:
    """DGL-API: the user's partition entry point and what it is given besides the job."""

    script: str | None  # --partition-entry-point (None: the partitions exist already)
    args: tuple[str, ...] = ()  # --partition-args
    dataset_url: str | None = None  # --dataset-url
    inputs: tuple[str, ...] = ()  # --partition-inputs: what it reads (the cache key hashes them)


@dataclass(frozen=True)
class Ranks:
    """The ParMETIS modes' MPI ranks: how mpirun starts them."""

    mpirun: str = "mpirun"
    args: tuple[str, ...] = ()  # --mpirun-args
    count: int | None = (
        None  # --num-ranks (ParMETIS: None is one per CPU; DistParMETIS: one per worker)
    )


@dataclass(frozen=True)
class PartitionRequest:
    """What the partition phase is asked for, and with what: the ``job`` (the partitions:
    graph name, count, balance, feature files; the chunked graph in the ParMETIS modes), made
    in ``mode`` by the ``entry`` point (DGL-API) or the ``ranks`` (ParMETIS modes), run by
    ``python`` within ``timeout`` seconds (0: none), into ``workspace``; the partition config
    is ``config_path`` when given, else ``<graph name>.json``."""

    mode: str  # --partition-mode
    job: PartitionJob
    python: str  # the entry point's and the ranks' interpreter
    workspace: Path
    entry: EntryPoint = EntryPoint(None)
    ranks: Ranks = Ranks()
    timeout: float = 0.0  # --partition-timeout
    config_path: str | None = None  # --partition-config-path
