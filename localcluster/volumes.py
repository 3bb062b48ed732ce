"""Storage for the single-node cluster: a StorageClass and a pool of static hostPath volumes.

A DGLJob's ``spec.storage`` claim (a claimName the user made, or one the operator makes from
``claimTemplate``) binds to one of these PersistentVolumes through the API server's normal
path: the PV binder matches class, size and access mode, the scheduler waits for the binding
(``WaitForFirstConsumer``), the kubelet mounts the folder. Why static volumes and not a
provisioner:

* kube-controller-manager's own hostPath provisioner (``--enable-hostpath-provisioner``) makes
  root-owned 0750 folders, and hostPath ignores ``fsGroup``: the images' non-root user
  (65532) could not write them;
* a local-path provisioner runs a helper pod per volume from an image of its own, which this
  Docker-free setup would have to build;
* the operator only ever makes claims: how a volume comes to satisfy them is the cluster's.

:func:`ensure` keeps ``pool`` volumes ``Available`` (class :data:`STORAGE_CLASS`, reclaim
policy Retain): it makes the missing ones and recycles the ``Released`` ones (a claim that was
deleted: its PV is deleted, its folder emptied, and a fresh PV made), as a local provisioner
with a Delete policy would.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

STORAGE_CLASS = "dgl-local"
POOL = 8
SIZE = "50Gi"
OWNER = 65532  # the images' user: its folders are its own (hostPath knows no fsGroup)
PREFIX = "dgl-local-"

Kubectl = Callable[[list[str], str | None], str]  # (args, stdin) -> stdout: localcluster.kubectl


def storage_class() -> dict[str, Any]:
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {
            "name": STORAGE_CLASS,
            "annotations": {"storageclass.kubernetes.io/is-default-class": "true"},
        },
        "provisioner": "kubernetes.io/no-provisioner",
        "volumeBindingMode": "WaitForFirstConsumer",
        "reclaimPolicy": "Retain",
    }


def volume(name: str, folder: Path) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name, "labels": {"dgl.qihoo.net/local-volume": "true"}},
        "spec": {
            "capacity": {"storage": SIZE},
            "accessModes": ["ReadWriteOnce", "ReadWriteMany"],
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": STORAGE_CLASS,
            "hostPath": {"path": str(folder), "type": "Directory"},
        },
    }


def _fresh_folder(folder: Path) -> None:
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    folder.chmod(0o775)
    with contextlib.suppress(PermissionError):  # (the cluster runs as root; a test may not)
        os.chown(folder, OWNER, OWNER)


def ensure(run: Kubectl, root: Path, pool: int = POOL) -> dict[str, str]:
    """The StorageClass and ``pool`` volumes under ``root``; returns ``name -> phase``."""
    run(["apply", "-f", "-"], json.dumps(storage_class()))
    doc = json.loads(
        run(["get", "pv", "-l", "dgl.qihoo.net/local-volume=true", "-o", "json"], None)
    )
    phases = {
        pv["metadata"]["name"]: (pv.get("status") or {}).get("phase", "Pending")
        for pv in doc.get("items", [])
    }
    for name, phase in sorted(phases.items()):
        if phase in ("Released", "Failed"):
            run(["delete", "pv", name, "--wait=true"], None)
            del phases[name]
    for i in range(pool):
        name = f"{PREFIX}{i}"
        if name in phases:
            continue
        folder = root / name
        _fresh_folder(folder)
        run(["create", "-f", "-"], json.dumps(volume(name, folder)))
        phases[name] = "Available"
    return phases
