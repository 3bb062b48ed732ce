"""Every child a DGLJob should have (:func:`desired`), in creation order: the children of
each kind (this package's modules) and what each feature adds (controller/features/registry.py:
its children, made once before any pod, and its change to every pod).

Not re-exported by controller/builders/__init__.py: the features' modules use the builders
(and some the job's status modules, which use the builders' names), so this module is above
them; import it as ``controller.builders.desired``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from controller.api import DGLJob
from controller.builders.configmap import config_map, report_map
from controller.builders.options import BuildOptions
from controller.builders.pods import launcher_pod, partitioner_pod, worker_pod
from controller.builders.rbac import rbac
from controller.builders.service import worker_service
from controller.features import gang, network, registry, transfer
from controller.features.storage import storage_claim
from kubeclient import Obj


@dataclass(frozen=True)
class Desired:
    """Everything a job should have, in creation order."""

    claim: Obj | None  # spec.storage.claimTemplate's
    config_map: Obj | None
    rbac: list[Obj]
    services: list[Obj]
    workers: list[Obj]
    partitioner: Obj | None
    launcher: Obj
    # each feature's children (made once, before any pod), by the feature's name
    features: Mapping[str, list[Obj]] = field(default_factory=dict)
    # the features whose children are made before the job's accounts (rbac), in order
    before_rbac: tuple[str, ...] = ()
    # dglrun's report (made once, left alone: its pods write it, the operator reads it)
    report: Obj | None = None

    @property
    def pod_group(self) -> Obj | None:
        """Gang scheduling's PodGroup (controller/features/gang.py)."""
        group = self.features.get(gang.NAME) or []
        return group[0] if group else None

    @property
    def network(self) -> list[Obj]:
        """The NetworkPolicy (controller/features/network.py)."""
        return list(self.features.get(network.NAME) or [])

    @property
    def transfer(self) -> list[Obj]:
        """partitionTransfer HTTP: the token Secret (controller/features/transfer.py)."""
        return list(self.features.get(transfer.NAME) or [])

    @property
    def once(self) -> list[Obj]:
        """The children created once and left alone, in creation order."""
        first = [c for name in self.before_rbac for c in self.features[name]]
        then = [c for name, cs in self.features.items() if name not in self.before_rbac for c in cs]
        return [*first, *self.rbac, *then]


def desired(
    job: DGLJob,
    opts: BuildOptions,
    pods: Mapping[str, Obj] | None = None,
    attempt: int = 0,
    token: str = "",
) -> Desired:
    """All children of ``job``; ``pods`` (by name) supplies the IPs for the ConfigMap;
    ``token`` the transfer Secret's (random if not given: only its creation uses it)."""
    mode = job.spec.mode
    builders = registry.builders()
    features = {f.name: f.children(job, opts, token) for f in builders}
    before = tuple(f.name for f in builders if f.before_rbac)

    def pod(built: Obj) -> Obj:
        return registry.mutate_pod(job, opts, built)

    if not mode.workers:
        launcher = pod(launcher_pod(job, opts, attempt))
        return Desired(storage_claim(job), None, [], [], [], None, launcher, features, before)
    return Desired(
        claim=storage_claim(job),
        config_map=config_map(job, pods or {}),
        rbac=rbac(job),
        services=[worker_service(job)],
        workers=[pod(worker_pod(job, i, attempt, opts)) for i in range(job.spec.workers)],
        partitioner=pod(partitioner_pod(job, opts, attempt)) if mode.partitioner else None,
        launcher=pod(launcher_pod(job, opts, attempt)),
        features=features,
        before_rbac=before,
        report=report_map(job),
    )
