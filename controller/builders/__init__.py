"""The children of a DGLJob, as pure functions of the job (and observed pod IPs): one module per
kind of child, and :func:`controller.builders.desired.desired` on top.

    options     the operator's settings that shape them (BuildOptions, from its flags)
    meta        every child's metadata (labels, owner); the edits of pods the builders share
    configmap   <job>-config: kubexec.sh, hostfile, partfile, leadfile
    rbac        the launcher's and partitioner's ServiceAccount, Role, RoleBinding
    service     <job>-worker, the workers' headless Service
    env         the env of the pods that run dglrun (podcontract.settings; each feature's
                from its registry entry)
    pods        the workers, the partitioner, the launcher
    desired     all of them, with what each feature adds (controller/features/)

Each feature's own children and pod changes are in its module (controller/features/).
Every pod field the operator sets is set in exactly one builder. The formats
(ConfigMap keys, env vars, mounts, names) are those of the original Go operator, so that
manifests and images written for it keep working; their names are the pod contract's
(podcontract), which the programs in the pods read.

This package re-exports the names of its two leaves, which every child and its readers use:
the labels and annotations (meta) and the settings (options). The rest is imported from its
module: the features' modules use this package's leaves (controller/features/storage.py and
transfer.py are used by pods in turn, for their mounts), and ``env`` (which asks the features'
registry for their env), ``pods`` and ``desired`` are above the features.
"""

from __future__ import annotations

from controller.builders.meta import (
    ATTEMPT_ANNOTATION,
    JOB_NAME_LABEL,
    OWN_RESOURCES,
    OWN_SECURITY_CONTEXT,
    REPLICA_ANNOTATION,
    REPLICA_NAME_LABEL,
    REPLICA_TYPE_LABEL,
    owner_reference,
)
from controller.builders.options import (
    DEFAULT_GANG_SCHEDULER_NAME,
    GANG_NONE,
    GANG_SCHEDULER_PLUGINS,
    GANG_SCHEDULERS,
    BuildOptions,
)

__all__ = [
    "ATTEMPT_ANNOTATION",
    "DEFAULT_GANG_SCHEDULER_NAME",
    "GANG_NONE",
    "GANG_SCHEDULERS",
    "GANG_SCHEDULER_PLUGINS",
    "JOB_NAME_LABEL",
    "OWN_RESOURCES",
    "OWN_SECURITY_CONTEXT",
    "REPLICA_ANNOTATION",
    "REPLICA_NAME_LABEL",
    "REPLICA_TYPE_LABEL",
    "BuildOptions",
    "owner_reference",
]
