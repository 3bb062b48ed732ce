"""The DGLJob API as the controller imports it: the typed model, its parser and its names
live in :mod:`dgljob` (shared with the users' client); here they are re-exported, and
:data:`DGLJOBS` is the resource the controller lists, watches and writes."""

from __future__ import annotations

from dgljob.model import (
    ChunkedGraphSpec,
    DGLJob,
    ElasticPolicy,
    JobSpec,
    OutOfCoreSpec,
    Placement,
    ReplicaSpec,
    RunPolicy,
    SchedulingPolicy,
    StorageSpec,
)
from dgljob.modes import PARTITION_MODES, SKIP
from dgljob.names import (
    API_VERSION,
    AT_STARTUP,
    CLAIM_DELETE,
    CLAIM_POLICIES,
    CLAIM_RETAIN,
    CLEAN_ALL,
    CLEAN_NONE,
    CLEAN_POD_POLICIES,
    CLEAN_RUNNING,
    GROUP,
    KIND,
    LAUNCHER,
    LAUNCHER_CREATION_POLICIES,
    PARTITION_TRANSFERS,
    PARTITIONER,
    PLURAL,
    PROBE,
    REPLICA_TYPES,
    TRANSFER_HTTP,
    TRANSFER_KUBECTL,
    VERSION,
    WAIT_FOR_WORKERS_READY,
    WORKER,
)
from dgljob.parse import Finishing, SpecError, finishing, parse_job, parse_spec
from kubeclient import Resource

DGLJOBS = Resource(GROUP, VERSION, PLURAL, KIND)

__all__ = [
    "API_VERSION",
    "AT_STARTUP",
    "CLAIM_DELETE",
    "CLAIM_POLICIES",
    "CLAIM_RETAIN",
    "CLEAN_ALL",
    "CLEAN_NONE",
    "CLEAN_POD_POLICIES",
    "CLEAN_RUNNING",
    "DGLJOBS",
    "GROUP",
    "KIND",
    "LAUNCHER",
    "LAUNCHER_CREATION_POLICIES",
    "PARTITIONER",
    "PARTITION_MODES",
    "PARTITION_TRANSFERS",
    "PROBE",
    "REPLICA_TYPES",
    "SKIP",
    "TRANSFER_HTTP",
    "TRANSFER_KUBECTL",
    "VERSION",
    "WAIT_FOR_WORKERS_READY",
    "WORKER",
    "ChunkedGraphSpec",
    "DGLJob",
    "ElasticPolicy",
    "Finishing",
    "JobSpec",
    "OutOfCoreSpec",
    "Placement",
    "ReplicaSpec",
    "RunPolicy",
    "SchedulingPolicy",
    "SpecError",
    "StorageSpec",
    "finishing",
    "parse_job",
    "parse_spec",
]
