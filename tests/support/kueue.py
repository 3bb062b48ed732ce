"""Kueue's manager as hack/kueue.sh builds it (cached; at once when it is built already),
started against a test's API server (localcluster/kueue.py). A build that fails is a missing
prerequisite (:func:`tests.support.prerequisites.unavailable`)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from kubeclient import AlreadyExists, Resource, RestClient
from localcluster import kueue
from localcluster.cluster import ClusterError
from localcluster.kubectl import Kubectl
from tests.support.prerequisites import unavailable

CLUSTERQUEUES = Resource("kueue.x-k8s.io", "v1beta2", "clusterqueues", "ClusterQueue", False)
FLAVOR = "default-flavor"


@contextlib.contextmanager
def running_kueue(dir: Path, kubeconfig: Path) -> Iterator[None]:
    """Kueue's CRDs installed and its manager running as the admin, until the block ends."""
    try:
        kueue.folder()
    except ClusterError as e:
        unavailable(f"Kueue is not available (hack/kueue.sh): {e}")
    comp = kueue.start(dir, kubeconfig, Kubectl(kubeconfig, timeout=60))
    try:
        yield
    finally:
        kueue.stop(comp)


def cluster_queue(name: str, cpu: str, *, preemption: bool = False) -> dict[str, Any]:
    """A ClusterQueue of ``cpu`` CPUs (and memory enough) on the flavor FLAVOR, open to every
    namespace; ``preemption``: a job of higher priority preempts lower ones in it."""
    spec: dict[str, Any] = {
        "namespaceSelector": {},
        "resourceGroups": [
            {
                "coveredResources": ["cpu", "memory"],
                "flavors": [
                    {
                        "name": FLAVOR,
                        "resources": [
                            {"name": "cpu", "nominalQuota": cpu},
                            {"name": "memory", "nominalQuota": "512Gi"},
                        ],
                    }
                ],
            }
        ],
    }
    if preemption:
        spec["preemption"] = {"withinClusterQueue": "LowerPriority"}
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
            "metadata": {"name": name}, "spec": spec}  # fmt: skip


def local_queue(name: str, namespace: str, cq: str) -> dict[str, Any]:
    meta = {"name": name, "namespace": namespace}
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
            "metadata": meta, "spec": {"clusterQueue": cq}}  # fmt: skip


FLAVOR_LABELS = {"dgl.test/pool": "default"}
FLAVOR_TOLERATION = {"key": "dgl.test/pool", "operator": "Exists", "effect": "NoSchedule"}


def flavor(name: str = FLAVOR) -> dict[str, Any]:
    """A flavor whose nodes carry FLAVOR_LABELS and a taint FLAVOR_TOLERATION tolerates."""
    spec = {"nodeLabels": FLAVOR_LABELS, "tolerations": [FLAVOR_TOLERATION]}
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
            "metadata": {"name": name}, "spec": spec}  # fmt: skip


def ensure(api: RestClient, res: Resource, namespace: str | None, obj: dict[str, Any]) -> None:
    with contextlib.suppress(AlreadyExists):
        api.create(res, namespace, obj)
