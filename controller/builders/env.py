"""The environment the operator sets in the pods that run dglrun (the pod contract's names,
podcontract): the job's identity and files, and each setting of the spec dglrun reads."""

from __future__ import annotations

import podcontract as pc
from controller.api import TRANSFER_HTTP, TRANSFER_KUBECTL, DGLJob
from controller.features.storage import storage_folder
from kubeclient import Obj
from podcontract import settings as dglrun
from podcontract.quantity import format_bytes, parse_quantity
from podcontract.settings import env_pairs

# The paths, env and ports of the pod contract are podcontract's; how spec fields map to them:
DGLRUN_TRANSFER = {TRANSFER_HTTP: pc.TRANSFER_HTTP, TRANSFER_KUBECTL: pc.TRANSFER_KUBECTL}


def memory_limit(container: Obj) -> int | None:
    """The container's memory limit in bytes, or None without one (or an invalid one: the
    API server rejects such a pod; do not mask its message)."""
    limit = ((container.get("resources") or {}).get("limits") or {}).get("memory")
    if limit is None:
        return None
    try:
        return int(parse_quantity(limit))
    except ValueError:
        return None


def shm_size_limit(container: Obj) -> str | None:
    """Half the container's memory limit (bytes, exact), or None without a limit."""
    total = memory_limit(container)
    return format_bytes(total // 2) if total is not None and total > 1 else None


def _operator_env(job: DGLJob, *extra: tuple[str, str]) -> tuple[tuple[str, str], ...]:
    return (
        dglrun.KUBEXEC_PATH.pair(pc.KUBEXEC_PATH),
        dglrun.HOSTFILE_PATH.pair(pc.HOSTFILE_PATH),
        dglrun.KUBECTL_PATH.pair(pc.KUBECTL_PATH),
        dglrun.OPERATOR.pair(True),
        # dglrun reports its progress into this DGLJob's status.progress, and Events
        dglrun.JOB_NAME.pair(job.name),
        dglrun.JOB_UID.pair(job.uid),
        dglrun.JOB_NAMESPACE.pair(job.namespace),
        *_memory_env(job),
        *_storage_env(job),
        *_elastic_env(job),
        *_out_of_core_env(job),
        *extra,
    )


def _out_of_core_env(job: DGLJob) -> tuple[tuple[str, str], ...]:
    """spec.outOfCore as dglrun's --out-of-core and --page-cache-fraction."""
    ooc = job.spec.out_of_core
    if ooc is None:
        return ()
    return (
        dglrun.OUT_OF_CORE.pair(True),
        dglrun.PAGE_CACHE_FRACTION.pair(ooc.page_cache_fraction),
    )


def _elastic_env(job: DGLJob) -> tuple[tuple[str, str], ...]:
    """An elastic job's rule, and its attempt's count once the members are chosen (the
    partitioner, made before, reads it from the job's status)."""
    policy = job.spec.elastic
    if policy is None:
        return ()
    members = job.spec.members
    return env_pairs(
        dglrun.ELASTIC.pair(True),
        dglrun.PARTITION_COUNTS.pair(tuple(range(policy.min_replicas, policy.ceiling + 1))),
        None if members is None else dglrun.NUM_PARTITIONS.pair(len(members)),
    )


def _memory_env(job: DGLJob) -> tuple[tuple[str, str], ...]:
    """The Worker template's memory limit (the partitioner runs on that template too), which
    dglrun's memory plan checks every step against before partitioning."""
    if job.spec.worker is None:
        return ()
    containers = (job.spec.worker.template.get("spec") or {}).get("containers") or [{}]
    limit = memory_limit(containers[0])
    return () if limit is None else (dglrun.WORKER_MEMORY_LIMIT.pair(limit),)


def _mode_env(job: DGLJob) -> tuple[tuple[str, str], ...]:
    """The ParMETIS modes' settings, as dglrun's defaults (none in DGL-API: its pods are the
    original operator's)."""
    cg = job.spec.chunked_graph
    if cg is None:
        return ()
    return (
        dglrun.PARTITION_MODE.pair(job.spec.partition_mode),
        dglrun.CHUNKED_GRAPH.pair(cg.path),
        dglrun.CHUNKED_LAYOUT.pair(cg.layout),
    )


def _storage_env(job: DGLJob) -> tuple[tuple[str, str], ...]:
    st = job.spec.storage
    if st is None:
        return ()
    return env_pairs(
        dglrun.STORAGE.pair(storage_folder(job)),
        dglrun.RUN_NAME.pair(job.run_name),
        dglrun.SHARE_PARTITIONS.pair(True) if st.share_partitions else None,
        None if st.cache_limit is None else dglrun.CACHE_LIMIT.pair(st.cache_limit),
    )


def _transfer_env(job: DGLJob) -> tuple[tuple[str, str], ...]:
    """dglrun's --partition-transfer; over HTTP, where to find the partitioner's IP."""
    if not job.spec.mode.partitioner:
        return ()
    return env_pairs(
        dglrun.PARTITION_TRANSFER.pair(DGLRUN_TRANSFER[job.spec.partition_transfer]),
        dglrun.PARTFILE_PATH.pair(pc.PARTFILE_PATH) if job.spec.pulls_partitions else None,
    )


def _cpu_limit_env(container: Obj) -> Obj:
    """The container's CPU limit in whole cores, through the downward API (the node's
    allocatable CPUs when it has no limit)."""
    return {
        "name": pc.CPU_LIMIT_ENV,
        "valueFrom": {
            "resourceFieldRef": {
                "containerName": container["name"],
                "resource": "limits.cpu",
                "divisor": "1",
            }
        },
    }
