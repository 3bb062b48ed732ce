"""The storage (``spec.storage``): one claim, mounted in every pod of the job at
pc.STORAGE_DIR, where dglrun keeps the job's partitions, checkpoints and results.

Its claim is the first child made (controller/lifecycle/create.py waits for it); its mount
is in the pods' builders (controller/builders/pods.py calls :func:`_mount_storage` where the
order of the pod's mounts wants it); its entry (:data:`STORAGE`) gives dglrun's env its
settings."""

from __future__ import annotations

import copy

import podcontract as pc
from controller.api import CLAIM_DELETE, DGLJob
from controller.builders.meta import _add_mounts, _add_volumes, _main, _meta
from kubeclient import Obj
from podcontract import settings as dglrun
from podcontract.settings import env_pairs

# spec.storage: one claim, mounted in every pod of the job at pc.STORAGE_DIR
STORAGE_VOLUME = "dgl-storage"


CLAIM_POLICY_ANNOTATION = "dgl.qihoo.net/claim-policy"


def storage_claim(job: DGLJob) -> Obj | None:
    """``<job>-results`` from ``spec.storage.claimTemplate`` (None otherwise): owned by the job
    with claimPolicy Delete, else left to outlive it (labelled, so that a job of the same name
    later uses it again and nobody else's claim is ever taken)."""
    st = job.spec.storage
    if st is None or st.claim_template is None:
        return None
    name = job.claim_name
    assert name is not None
    tmeta = st.claim_template.get("metadata") or {}
    meta = _meta(job, name, tmeta.get("labels") or {})
    meta["annotations"] = {
        **(tmeta.get("annotations") or {}),
        CLAIM_POLICY_ANNOTATION: st.claim_policy,
    }
    if st.claim_policy != CLAIM_DELETE:
        del meta["ownerReferences"]
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": meta,
        "spec": copy.deepcopy(st.claim_template["spec"]),
    }


def storage_folder(job: DGLJob) -> str:
    """The folder dglrun keeps things in, as the pods see it."""
    st = job.spec.storage
    return f"{pc.STORAGE_DIR}/{st.path}" if st is not None and st.path else pc.STORAGE_DIR


def results_location(job: DGLJob) -> str | None:
    """Where the job's results are: ``<claim>:<folder in the claim>`` (``status.results``)."""
    st = job.spec.storage
    if st is None:
        return None
    inside = "/".join(x for x in (st.path, pc.STORAGE_RUNS, job.run_name, pc.RUN_OUTPUT) if x)
    return f"{job.claim_name}:/{inside}"


def _mount_storage(job: DGLJob, pod: Obj) -> None:
    """The storage's claim at pc.STORAGE_DIR in the pod's first container, and in the
    template's own init containers (e.g. one that generates a worker's chunks once onto the
    claim, and finds them there at the next attempt; call before the operator adds its own,
    which never get it)."""
    if job.claim_name is None:
        return
    for container in [_main(pod), *(pod["spec"].get("initContainers") or [])]:
        _add_mounts(container, (STORAGE_VOLUME, pc.STORAGE_DIR))
    claim = {"name": STORAGE_VOLUME, "persistentVolumeClaim": {"claimName": job.claim_name}}
    _add_volumes(pod["spec"], claim)


class StorageFeature:
    """The feature's entry (controller/features/registry.py): dglrun's settings of the
    storage, in every pod that runs it. Its claim and its mount are not an entry's (the
    registry's docstring says why)."""

    name = "storage"

    def job_env(self, job: DGLJob, role: str) -> tuple[tuple[str, str], ...]:
        """Its folder, the run's name, whether other jobs' partitions count, the cache's
        limit."""
        st = job.spec.storage
        if st is None:
            return ()
        return env_pairs(
            dglrun.STORAGE.pair(storage_folder(job)),
            dglrun.RUN_NAME.pair(job.run_name),
            dglrun.SHARE_PARTITIONS.pair(True) if st.share_partitions else None,
            None if st.cache_limit is None else dglrun.CACHE_LIMIT.pair(st.cache_limit),
        )


STORAGE = StorageFeature()
