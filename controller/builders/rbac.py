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


def role(job: DGLJob, name: str, pods: list[str]) -> Obj:
    """Least privilege for a pod that runs the user's image and command: read, list and watch
    the job's own ``pods`` by name (a field selector on metadata.name, as watcher-loop does),
    read the job's status (an elastic job's grow and members), and write dglrun's report
    (podcontract/report.py). Never the DGLJob itself (the operator alone writes its status),
    never Events (the report asks for them), never exec (dglrun reaches the workers through
    their agents), nothing of another job."""
    rules: list[Obj] = []
    if pods:  # (empty resourceNames would mean every pod)
        rules.append(_on(["pods"], pods, ["get", "list", "watch"]))
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
    and, in the modes that have one, the partitioner (it serves the parts over HTTP, reading
    no pod; a KubectlCp manifest is served as HTTP)."""
    # made once for the job's life: every worker any attempt may have, not this one's
    workers = job.every_worker_name()
    waits = [*workers, job.partitioner_name] if job.spec.mode.partitioner else workers
    roles = [role(job, job.launcher_name, waits)]
    if job.spec.mode.partitioner:
        roles.append(role(job, job.partitioner_name, []))
    out: list[Obj] = []
    for r in roles:
        name = r["metadata"]["name"]
        out += [service_account(job, name), r, role_binding(job, name)]
    return out
