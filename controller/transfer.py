"""The name of a job's transfer token Secret (partitionTransfer HTTP), and why it is random.

The operator creates the Secret and may never read one (it has ``create`` on secrets, nothing
else). A fixed name (``<job>-transfer``, the operators before) can be taken first by anyone
who may create Secrets in the namespace, with a token they know; the operator's create then
fails with AlreadyExists and it could not tell that Secret from its own. So a job's Secret is
named ``<job>-transfer-<8 random hex>`` when first made, a name nobody can take before it is
made: the Secret exists before any pod or status names it. The name is kept in
``status.transferSecret``; until that status is written, the job's pods carry it (annotation
:data:`ANNOTATION`), so a restart of the operator finds the same name, and the Secret its
AlreadyExists reports then is the one it made. A job whose pods an operator before this one
made (no annotation) keeps ``<job>-transfer``.
"""

from __future__ import annotations

import dataclasses
import secrets
from collections.abc import Iterable

from controller.api import DGLJob
from controller.builders import TRANSFER_SECRET_ANNOTATION as ANNOTATION
from kubeclient import Obj

STATUS = "transferSecret"


def known(job: DGLJob, pods: Iterable[Obj]) -> DGLJob:
    """``job`` with the Secret name it has: status.transferSecret, else the one its pods
    mount (pods made before the status was written), else none yet ("")."""
    if not job.spec.pulls_partitions:
        return job
    name = str(job.status.get(STATUS) or "") or _mounted(job, pods)
    return dataclasses.replace(job, transfer_secret=name) if name else job


def chosen(job: DGLJob) -> DGLJob:
    """``job`` with a new random Secret name, if it has none yet."""
    if not job.spec.pulls_partitions or job.transfer_secret:
        return job
    return dataclasses.replace(job, transfer_secret=f"{job.name}-transfer-{secrets.token_hex(4)}")


def _mounted(job: DGLJob, pods: Iterable[Obj]) -> str:
    """The name the job's pods mount ("" when it has none)."""
    names = [((p.get("metadata") or {}).get("annotations") or {}).get(ANNOTATION) for p in pods]
    for name in names:
        if name:
            return str(name)
    return f"{job.name}-transfer" if names else ""  # (pods of an operator before)
