"""The DGLJobs a soak submits: one entry per kind, each made from a manifest of examples/ (what
users apply), queued and sized for the 3-node cluster.

Every kind's pods ask for :data:`POD_CPU` and :data:`POD_MEMORY` (Kueue counts requests: a
job without any would never be held back by the quota), run with ``backoffLimit``
:data:`BACKOFF` (a fault restarts a job rather than fail it, until it strikes that often), and
opt out of the gang with ``schedulerName: default-scheduler`` but for the ``gang`` kind (the
operator is installed with gang scheduling on). Kinds with ``storage`` keep checkpoints on a
claim of their own (``claimPolicy: Delete``: it goes with the job) and resume from them.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "graphsage"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
POD_CPU = "200m"
POD_MEMORY = "768Mi"
BACKOFF = 3
DEFAULT_SCHEDULER = "default-scheduler"

Obj = dict[str, Any]


@dataclass(frozen=True)
class Kind:
    """A kind of job: the example it starts from, what it changes, and what it promises."""

    name: str
    example: str  # examples/graphsage/<example>
    epochs: int
    gang: bool = False
    storage: bool = False  # checkpoints on a claim: an interrupted attempt resumes
    edit: Callable[[Obj], object] | None = None  # (what it returns is not used)

    def manifest(self, namespace: str, name: str, queue: str, priority: str) -> Obj:
        job: Obj = yaml.safe_load((EXAMPLES / self.example).read_text())
        job["metadata"] = {"name": name, "namespace": namespace, "labels": {QUEUE_LABEL: queue}}
        spec = job["spec"]
        run_policy = spec.setdefault("runPolicy", {})
        run_policy["backoffLimit"] = BACKOFF
        run_policy["schedulingPolicy"] = {"priorityClass": priority}
        if self.storage:
            spec["storage"] = {
                "claimPolicy": "Delete",
                "claimTemplate": {
                    "spec": {
                        "accessModes": ["ReadWriteMany"],  # (the pods span the nodes)
                        "resources": {"requests": {"storage": "1Gi"}},
                    }
                },
            }
        else:
            spec.pop("storage", None)
        for replica in spec["dglReplicaSpecs"].values():
            pod = replica["template"]["spec"]
            if not self.gang:
                pod["schedulerName"] = DEFAULT_SCHEDULER
            for container in pod["containers"]:
                container["resources"] = {
                    "requests": {"cpu": POD_CPU, "memory": POD_MEMORY},
                    "limits": {"memory": "2Gi"},
                }
        args = launcher_args(job)
        if "--num-epochs" in args:
            args[args.index("--num-epochs") + 1] = str(self.epochs)
        if self.edit is not None:
            self.edit(job)
        return job


def launcher_args(job: Obj) -> list[str]:
    container = job["spec"]["dglReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]
    args: list[str] = container["args"]
    return args


def skip_mode(job: Obj, epochs: int = 2) -> Obj:
    """``job`` in Skip mode: the launcher trains alone (train_single.py), no workers."""
    spec = job["spec"]
    spec["partitionMode"] = "Skip"
    del spec["dglReplicaSpecs"]["Worker"]
    launcher_args(job)[:] = [
        "--graph-name", "graphsage", "--train-entry-point", "code/train_single.py",
        "--num-epochs", str(epochs), "--batch-size", "256",
    ]  # fmt: skip
    return job


def _elastic(job: Obj) -> None:
    """Shorter windows than the example's, so that a rescale is seen within a soak."""
    job["spec"]["elasticPolicy"].update(settleSeconds=10, cooldownSeconds=20)


KINDS: dict[str, Kind] = {
    k.name: k
    for k in (
        Kind("rigid", "dgljob.yaml", epochs=2),
        Kind("gang", "dgljob.yaml", epochs=2, gang=True),
        Kind("storage", "dgljob-storage.yaml", epochs=6, storage=True),
        Kind("elastic", "dgljob-elastic.yaml", epochs=6, storage=True, edit=_elastic),
        Kind("skip", "dgljob.yaml", epochs=2, edit=skip_mode),
        Kind("parmetis", "dgljob-parmetis.yaml", epochs=2),
        Kind("distparmetis", "dgljob-distparmetis.yaml", epochs=2),
    )
}


def manifest(kind: str, namespace: str, name: str, queue: str, priority: str) -> Obj:
    return copy.deepcopy(KINDS[kind].manifest(namespace, name, queue, priority))
