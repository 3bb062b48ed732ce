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


def role(
    job: DGLJob, name: str, pods: list[str], exec_targets: list[str], watch: bool = True
) -> Obj:
    """Least privilege for a pod that runs the user's image and command: read the job's own
    ``pods`` by name (with ``watch``, list and watch them too, by name: a field selector on
    metadata.name, as watcher-loop does), exec
    into ``exec_targets``, read the job's status (an elastic job's grow and members), and
    write dglrun's report (podcontract/report.py). Never the DGLJob itself (the operator alone
    writes its status), never Events (the report asks for them), nothing of another job."""
    rules: list[Obj] = []
    if pods:  # (empty resourceNames would mean every pod)
        rules.append(_on(["pods"], pods, ["get", "list", "watch"] if watch else ["get"]))
    if exec_targets:
        rules.append(_on(["pods/exec"], exec_targets, ["create", "get"]))
    rules.append(_on(["dgljobs/status"], [job.name], ["get"], GROUP))
    rules.append(_on(["configmaps"], [job.report_name], ["get", "patch"]))
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": _meta(job, name),
        "rules": rules,
    }


def _on(resources: list[str], names: list[str], verbs: list[str], group: str = "") -> Obj:
    return {"apiGroups": [group], "resources": resources, "resourceNames": names, "verbs": verbs}


def role_binding(job: DGLJob, name: str) -> Obj:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": _meta(job, name),
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": job.namespace}],
    }


def rbac(job: DGLJob) -> list[Obj]:
    """ServiceAccount, Role and RoleBinding for the launcher (it waits for this job's workers
    and partitioner; it runs its processes on the workers through their agents, never exec)
    and, in the modes that have one, the partitioner (with KubectlCp it execs into this job's
    launcher; over HTTP it only serves)."""
    # made once for the job's life: every worker any attempt may have, not this one's
    workers = job.every_worker_name()
    waits = [*workers, job.partitioner_name] if job.spec.mode.partitioner else workers
    roles = [role(job, job.launcher_name, waits, [])]  # (the workers' agents: no exec)
    if job.spec.mode.partitioner:
        targets = [] if job.spec.pulls_partitions else [job.launcher_name]
        roles.append(role(job, job.partitioner_name, targets, targets, watch=False))
    out: list[Obj] = []
    for r in roles:
        name = r["metadata"]["name"]
        out += [service_account(job, name), r, role_binding(job, name)]
    return out
