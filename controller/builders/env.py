"""The environment the operator sets in the pods that run dglrun (the pod contract's names,
podcontract): the job's identity and files, and each setting of the spec dglrun reads."""

from __future__ import annotations

import podcontract as pc
from controller.api import TRANSFER_HTTP, TRANSFER_KUBECTL, DGLJob
from controller.features.storage import storage_folder
from kubeclient import Obj
from podcontract.quantity import format_bytes, parse_quantity

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
        (pc.KUBEXEC_PATH_ENV, pc.KUBEXEC_PATH),
        (pc.HOSTFILE_PATH_ENV, pc.HOSTFILE_PATH),
        (pc.KUBECTL_PATH_ENV, pc.KUBECTL_PATH),
        (pc.OPERATOR_ENV, pc.OPERATOR_ENV_ON),
        # dglrun reports its progress into this DGLJob's status.progress, and Events
        (pc.JOB_NAME_ENV, job.name),
        (pc.JOB_UID_ENV, job.uid),
        (pc.JOB_NAMESPACE_ENV, job.namespace),
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
        (pc.OUT_OF_CORE_ENV, pc.OUT_OF_CORE_ON),
        (pc.PAGE_CACHE_FRACTION_ENV, f"{ooc.page_cache_fraction:g}"),
    )


def _elastic_env(job: DGLJob) -> tuple[tuple[str, str], ...]:
    """An elastic job's rule, and its attempt's count once the members are chosen (the
    partitioner, made before, reads it from the job's status)."""
    policy = job.spec.elastic
    if policy is None:
        return ()
    rule = (
        (pc.ELASTIC_ENV, pc.ELASTIC_ON),
        (pc.PARTITION_COUNTS_ENV, f"{policy.min_replicas}-{policy.ceiling}"),
    )
    if job.spec.members is None:
        return rule
    return (*rule, (pc.NUM_PARTITIONS_ENV, str(len(job.spec.members))))


def _memory_env(job: DGLJob) -> tuple[tuple[str, str], ...]:
    """The Worker template's memory limit (the partitioner runs on that template too), which
    dglrun's memory plan checks every step against before partitioning."""
    if job.spec.worker is None:
        return ()
    containers = (job.spec.worker.template.get("spec") or {}).get("containers") or [{}]
    limit = memory_limit(containers[0])
    return () if limit is None else ((pc.WORKER_MEMORY_LIMIT_ENV, str(limit)),)


def _mode_env(job: DGLJob) -> tuple[tuple[str, str], ...]:
    """The ParMETIS modes' settings, as dglrun's defaults (none in DGL-API: its pods are the
    original operator's)."""
    cg = job.spec.chunked_graph
    if cg is None:
        return ()
    return (
        (pc.PARTITION_MODE_ENV, job.spec.partition_mode),
        (pc.CHUNKED_GRAPH_ENV, cg.path),
        (pc.CHUNKED_LAYOUT_ENV, cg.layout),
    )


def _storage_env(job: DGLJob) -> tuple[tuple[str, str], ...]:
    st = job.spec.storage
    if st is None:
        return ()
    env: tuple[tuple[str, str], ...] = (
        (pc.STORAGE_ENV, storage_folder(job)),
        (pc.RUN_NAME_ENV, job.run_name),
    )
    if st.share_partitions:
        env += ((pc.SHARE_PARTITIONS_ENV, pc.SHARE_PARTITIONS_ON),)
    if st.cache_limit is not None:
        env += ((pc.CACHE_LIMIT_ENV, st.cache_limit),)
    return env


def _transfer_env(job: DGLJob) -> tuple[tuple[str, str], ...]:
    """dglrun's --partition-transfer; over HTTP, where to find the partitioner's IP."""
    if not job.spec.mode.partitioner:
        return ()
    env: tuple[tuple[str, str], ...] = (
        (pc.PARTITION_TRANSFER_ENV, DGLRUN_TRANSFER[job.spec.partition_transfer]),
    )
    if job.spec.pulls_partitions:
        env += ((pc.PARTFILE_PATH_ENV, pc.PARTFILE_PATH),)
    return env


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
