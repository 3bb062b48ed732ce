"""The environment the operator sets in the pods that run dglrun (the pod contract's names,
podcontract): the job's identity and files, and each setting of the spec dglrun reads; each
feature's own settings come from its registry entry (controller/features/registry.py)."""

from __future__ import annotations

import podcontract as pc
from controller.api import LAUNCHER, DGLJob
from controller.features import registry
from kubeclient import Obj
from podcontract import settings as dglrun
from podcontract.quantity import format_bytes, parse_quantity


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


def operator_env(job: DGLJob, role: str, *own: tuple[str, str]) -> tuple[tuple[str, str], ...]:
    """The env of ``role``'s pod (a replica type: the partitioner, the launcher) when it runs
    dglrun for the operator: the paths and the job, the Worker template's memory limit, the
    features' env of the job, the out-of-core settings, ``own`` (the pod's own: its phase, its
    files), the partition mode's settings, then the features' env of the partitions' delivery
    (controller/features/registry.py: :class:`JobEnv`, :class:`DeliveryEnv`)."""
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
        *registry.job_env(job, role),
        *_out_of_core_env(job),
        *own,
        *_mode_env(job),
        *registry.delivery_env(job, role),
    )


def workload_env(job: DGLJob) -> tuple[tuple[str, str], ...]:
    """The env of a launcher that trains alone (partitionMode Skip): its phase, then the
    features' env (the storage's: there are no partitions to deliver)."""
    return (
        dglrun.PHASE.pair(pc.PHASE_LAUNCHER_WORKLOAD),
        *registry.job_env(job, LAUNCHER),
        *registry.delivery_env(job, LAUNCHER),
    )


def _out_of_core_env(job: DGLJob) -> tuple[tuple[str, str], ...]:
    """spec.outOfCore as dglrun's --out-of-core, --page-cache-fraction and --out-of-core-order."""
    ooc = job.spec.out_of_core
    if ooc is None:
        return ()
    return (
        dglrun.OUT_OF_CORE.pair(True),
        dglrun.PAGE_CACHE_FRACTION.pair(ooc.page_cache_fraction),
        dglrun.OUT_OF_CORE_ORDER.pair(ooc.order),
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


def _cpu_limit_env(container: Obj) -> Obj:
    """The container's CPU limit in whole cores, through the downward API (the node's
    allocatable CPUs when it has no limit)."""
    return dglrun.CPU_LIMIT.value_from(
        {
            "resourceFieldRef": {
                "containerName": container["name"],
                "resource": "limits.cpu",
                "divisor": "1",
            }
        }
    )
