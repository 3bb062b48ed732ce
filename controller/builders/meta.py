"""What every child of a DGLJob is made of: its metadata (the job's name label, the owner
reference, the replica labels and annotations), and the few edits of pods and containers the
builders share (env, mounts, volumes; the operator's own containers' restricted context)."""

from __future__ import annotations

import copy
from collections.abc import Mapping

from controller.api import API_VERSION, KIND, DGLJob
from dgljob.names import JOB_NAME_LABEL as JOB_NAME_LABEL  # (re-exported: the children use it)
from kubeclient import Obj

# Labels and annotations (the first three are the original operator's; the job-name label is
# dgljob.names.JOB_NAME_LABEL).
REPLICA_NAME_LABEL = "dgl-replica-name"
REPLICA_TYPE_LABEL = "dgl-replica-type"
REPLICA_ANNOTATION = "dgl-replica"
ATTEMPT_ANNOTATION = "dgl.qihoo.net/restart-attempt"

KUBE_VOLUME = "kube-volume"
CONFIG_VOLUME = "config-volume"
DATASET_VOLUME = "dataset-volume"
SHM_VOLUME = "shm-volume"

MODE_EXEC = 0o555  # 365
MODE_READ = 0o444  # 292


def owner_reference(job: DGLJob) -> Obj:
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "name": job.name,
        "uid": job.uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def _meta(job: DGLJob, name: str, labels: Mapping[str, str] | None = None) -> Obj:
    """A child's metadata: ``labels`` (a template's), with the operator's own winning (a
    template that names another job cannot put its pods in that job's Service)."""
    return {
        "name": name,
        "namespace": job.namespace,
        "labels": {**(labels or {}), JOB_NAME_LABEL: job.name},
        "ownerReferences": [owner_reference(job)],
    }


def _env(name: str, value: str) -> Obj:
    return {"name": name, "value": value}


def _set_env(container: Obj, *pairs: tuple[str, str]) -> None:
    """Set env vars on a container, replacing same-named entries the user gave."""
    env = [e for e in container.get("env") or [] if e.get("name") not in {n for n, _ in pairs}]
    container["env"] = env + [_env(n, v) for n, v in pairs]


def _add_mounts(container: Obj, *mounts: tuple[str, str]) -> None:
    existing = container.get("volumeMounts") or []
    taken = {m.get("mountPath") for m in existing}
    container["volumeMounts"] = existing + [
        {"name": n, "mountPath": p} for n, p in mounts if p not in taken
    ]


def _add_volumes(spec: Obj, *volumes: Obj) -> None:
    existing = spec.get("volumes") or []
    taken = {v.get("name") for v in existing}
    spec["volumes"] = existing + [v for v in volumes if v["name"] not in taken]


def _main(pod: Obj) -> Obj:
    container: Obj = pod["spec"]["containers"][0]
    return container


# The operator's own containers (its init containers, the probe's) run in the users'
# namespaces whatever their templates say: Pod Security "restricted" admits them (non-root as
# the images' nonroot user, no privilege escalation, no capabilities, RuntimeDefault seccomp),
# and so does a ResourceQuota that requires requests and limits (a Python program that
# watches a few pods or copies kubectl: tens of MiB).
NONROOT_UID = 65532  # the images' user (images/Dockerfile)


OWN_SECURITY_CONTEXT: Obj = {
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
    "runAsNonRoot": True,
    "runAsUser": NONROOT_UID,
    "runAsGroup": NONROOT_UID,
    "seccompProfile": {"type": "RuntimeDefault"},
}


OWN_RESOURCES: Obj = {
    "requests": {"cpu": "50m", "memory": "64Mi"},
    "limits": {"cpu": "1", "memory": "256Mi"},
}


def _own(container: Obj) -> Obj:
    """One of the operator's own containers, with its restricted context and resources."""
    return {
        **container,
        "securityContext": copy.deepcopy(OWN_SECURITY_CONTEXT),
        "resources": copy.deepcopy(OWN_RESOURCES),
    }
