"""The launcher's and the partitioner's ServiceAccount, Role and RoleBinding."""

from __future__ import annotations

from controller.api import GROUP, DGLJob
from controller.builders.meta import _meta
from kubeclient import Obj


def service_account(job: DGLJob, name: str) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": _meta(job, name),
    }


def role(job: DGLJob, name: str, exec_targets: list[str]) -> Obj:
    rules: list[Obj] = [
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]},
    ]
    if exec_targets:  # (empty resourceNames would mean every pod)
        rules.append(
            {
                "apiGroups": [""],
                "resources": ["pods/exec"],
                "resourceNames": exec_targets,
                "verbs": ["create", "get"],
            }
        )
    # dglrun's progress (`kubectl patch --subresource=status`, which reads the object first),
    # on this job only; and its Events (partitions reused, a checkpoint resumed from)
    rules.append(
        {
            "apiGroups": [GROUP],
            "resources": ["dgljobs/status"],
            "resourceNames": [job.name],
            "verbs": ["get", "patch"],
        }
    )
    rules.append({"apiGroups": [""], "resources": ["events"], "verbs": ["create"]})
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": _meta(job, name),
        "rules": rules,
    }


def role_binding(job: DGLJob, name: str) -> Obj:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": _meta(job, name),
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": job.namespace}],
    }


def rbac(job: DGLJob) -> list[Obj]:
    """ServiceAccount, Role and RoleBinding for the launcher (exec into this job's workers:
    dglrun's commands, and in DistParMETIS mpirun's daemons through kubexec.sh) and, in the
    modes that have one, the partitioner (exec into this job's launcher with KubectlCp)."""
    # made once for the job's life: every worker any attempt may have, not this one's
    accounts = [(job.launcher_name, job.every_worker_name())]
    if job.spec.mode.partitioner:
        # over HTTP the partitioner only serves: it execs into nothing
        targets = [] if job.spec.pulls_partitions else [job.launcher_name]
        accounts.append((job.partitioner_name, targets))
    out: list[Obj] = []
    for name, targets in accounts:
        out += [service_account(job, name), role(job, name, targets), role_binding(job, name)]
    return out
