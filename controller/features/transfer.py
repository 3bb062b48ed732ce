"""The job's token, and the partition transfer over HTTP (``spec.partitionTransfer: HTTP``).

The token is a Secret the operator makes once, before any pod (:func:`transfer_secret`), for
every job with workers, mounted in the workers and the launcher, and in the partitioner when
the workers pull their parts from it (:func:`_mount_token`). Each worker's agent asks it of
every request (dglrun runs the workers' processes through them, workeragent/), and so does
the partitioner's server over HTTP. dglrun's env for the transfer (always HTTP: a KubectlCp
manifest is served so) is its entry's (:data:`TRANSFER`).

Its Secret's name, and why it is random.

The operator creates the Secret and may never read one (it has ``create`` on secrets, nothing
else). A fixed name (``<job>-transfer``, the operators before) can be taken first by anyone
who may create Secrets in the namespace, with a token they know; the operator's create then
fails with AlreadyExists and it could not tell that Secret from its own. So a job's Secret is
named ``<job>-transfer-<8 random hex>`` when first made, a name nobody can take before it is
made: the Secret exists before any pod or status names it. The name is kept in
``status.transferSecret``; until that status is written, the job's pods carry it
(annotation :data:`TRANSFER_SECRET_ANNOTATION`), so a restart of the operator finds the same
name, and the Secret its AlreadyExists reports then is the one it made. A job whose pods an
operator before this one made (no annotation) keeps ``<job>-transfer``.
"""

from __future__ import annotations

import base64
import dataclasses
import secrets
from collections.abc import Iterable

import podcontract as pc
from controller.api import TRANSFER_HTTP, TRANSFER_KUBECTL, DGLJob
from controller.builders.meta import MODE_READ, _add_mounts, _add_volumes, _main, _meta
from controller.builders.options import BuildOptions
from kubeclient import Obj
from podcontract import settings as dglrun
from podcontract.settings import env_pairs

STATUS = "transferSecret"
NAME = "transfer"
TRANSFER_VOLUME = "transfer-token"
# on every pod that mounts the transfer token: its Secret's name (see above)
TRANSFER_SECRET_ANNOTATION = "dgl.qihoo.net/transfer-secret"
# spec.partitionTransfer as dglrun's --partition-transfer (the pod contract's names)
DGLRUN_TRANSFER = {TRANSFER_HTTP: pc.TRANSFER_HTTP, TRANSFER_KUBECTL: pc.TRANSFER_KUBECTL}


def transfer_secret_name(job: DGLJob) -> str:
    """The token Secret's name: the one :func:`chosen` chose for the job, or the
    name of the operators before it (``<job>-transfer``) for a job they made."""
    return job.transfer_secret or f"{job.name}-transfer"


def transfer_secret(job: DGLJob, token: str) -> Obj:
    """The token the partitioner's server asks of every request."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": _meta(job, transfer_secret_name(job)),
        "type": "Opaque",
        "data": {pc.TRANSFER_TOKEN_KEY: base64.b64encode(token.encode()).decode()},
    }


def has_token(job: DGLJob) -> bool:
    """Whether the job has a token Secret: every job with workers (their agents ask it of
    dglrun, launcher/workers/agent.py), and with it the partition transfer over HTTP."""
    return job.spec.mode.workers


def _mount_token(job: DGLJob, pod: Obj) -> None:
    """The job's token at pc.TRANSFER_DIR/token."""
    if not has_token(job):
        return
    annotations = pod["metadata"].setdefault("annotations", {})
    annotations[TRANSFER_SECRET_ANNOTATION] = transfer_secret_name(job)
    _add_mounts(_main(pod), (TRANSFER_VOLUME, pc.TRANSFER_DIR))
    volume = {
        "name": TRANSFER_VOLUME,
        "secret": {
            "secretName": transfer_secret_name(job),
            "items": [
                {"key": pc.TRANSFER_TOKEN_KEY, "path": pc.TRANSFER_TOKEN_KEY, "mode": MODE_READ}
            ],
        },
    }
    _add_volumes(pod["spec"], volume)


def known(job: DGLJob, pods: Iterable[Obj]) -> DGLJob:
    """``job`` with the Secret name it has: status.transferSecret, else the one its pods
    mount (pods made before the status was written), else none yet ("")."""
    if not has_token(job):
        return job
    name = str(job.status.get(STATUS) or "") or _mounted(job, pods)
    return dataclasses.replace(job, transfer_secret=name) if name else job


def chosen(job: DGLJob) -> DGLJob:
    """``job`` with a new random Secret name, if it has none yet."""
    if not has_token(job) or job.transfer_secret:
        return job
    return dataclasses.replace(job, transfer_secret=f"{job.name}-transfer-{secrets.token_hex(4)}")


def _mounted(job: DGLJob, pods: Iterable[Obj]) -> str:
    """The name the job's pods mount ("" when it has none)."""
    key = TRANSFER_SECRET_ANNOTATION
    names = [((p.get("metadata") or {}).get("annotations") or {}).get(key) for p in pods]
    for name in names:
        if name:
            return str(name)
    return f"{job.name}-transfer" if names else ""  # (pods of an operator before)


class Transfer:
    """The feature's entry (controller/features/registry.py): the token Secret, made once
    after the job's accounts; an attempt's Secret name, found again; dglrun's settings of the
    transfer."""

    name = NAME
    before_rbac = False

    def children(self, job: DGLJob, opts: BuildOptions, token: str) -> list[Obj]:
        if not has_token(job):
            return []
        return [transfer_secret(job, token or secrets.token_hex(32))]

    def for_attempt(self, job: DGLJob, status: Obj, pods: Iterable[Obj]) -> DGLJob:
        return known(job, pods)

    def delivery_env(self, job: DGLJob, role: str) -> tuple[tuple[str, str], ...]:
        """dglrun's --partition-transfer; over HTTP, where to find the partitioner's IP (none
        without a partitioner: nothing to deliver)."""
        if not job.spec.mode.partitioner:
            return ()
        return env_pairs(
            dglrun.PARTITION_TRANSFER.pair(DGLRUN_TRANSFER[job.spec.partition_transfer]),
            dglrun.PARTFILE_PATH.pair(pc.PARTFILE_PATH) if job.spec.pulls_partitions else None,
        )


TRANSFER = Transfer()
