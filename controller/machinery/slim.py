"""What the operator keeps of the objects it caches: the fields it reads, nothing else.

The informers apply these transforms before an object enters a cache, so every reader (the
sync, the event handlers, the indexers) sees the slim copy; this is the one path, and
tests/controller/test_sync_unit.py runs the sync over slim copies of every pod state it knows.

A pod as the API server returns it is mostly spec (containers, volumes, the service account
token's projected volume, tolerations, defaults): about 11 kB per pod in the cache. The sync
reads of a pod only its metadata, ``spec.nodeName``, its containers' names and its status;
of the children it creates once (RBAC, the NetworkPolicy, the workers' Service) only their
metadata. Which transform a child kind gets is its entry in controller/children.py.
The kept dicts are rebuilt with interned keys and short values (every pod's ``"metadata"``,
``"Pending"`` and namespace are then one string each, not one per pod).
"""

from __future__ import annotations

import sys
from typing import Any

from kubeclient import Obj

CHILD_METADATA = (
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "creationTimestamp",
    "deletionTimestamp",
    "labels",
    "ownerReferences",
)
"""What the operator reads of the children it only creates, checks for and deletes."""

POD_METADATA = (*CHILD_METADATA, "deletionGracePeriodSeconds", "annotations")
"""The pod metadata the operator reads (labels and annotations whole: they are ours)."""

NODE_METADATA = ("name", "uid", "resourceVersion", "deletionTimestamp")

_INTERN_MAX = 64  # strings up to this length are interned (names, phases, label values)


def compact(value: Any) -> Any:
    """``value`` rebuilt with interned keys and short strings (a JSON tree: dicts, lists,
    strings, numbers, booleans, None)."""
    if isinstance(value, dict):
        return {sys.intern(k): compact(v) for k, v in value.items()}
    if isinstance(value, list):
        return [compact(v) for v in value]
    if isinstance(value, str) and len(value) <= _INTERN_MAX:
        return sys.intern(value)
    return value


def compact_obj(obj: Obj) -> Obj:
    """An object (a JSON dict) rebuilt by :func:`compact`."""
    return {sys.intern(k): compact(v) for k, v in obj.items()}


def slim_pod(obj: Obj) -> Obj:
    """A pod with what the operator reads: metadata above, ``spec.nodeName``, the containers'
    and init containers' names, and the status."""
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    slim_spec: Obj = {}
    if spec.get("nodeName"):
        slim_spec["nodeName"] = spec["nodeName"]
    for key in ("initContainers", "containers"):
        if spec.get(key):
            slim_spec[key] = [{"name": c.get("name")} for c in spec[key]]
    out: Obj = {
        "apiVersion": obj.get("apiVersion", "v1"),
        "kind": obj.get("kind", "Pod"),
        "metadata": {k: meta[k] for k in POD_METADATA if k in meta},
        "spec": slim_spec,
    }
    if "status" in obj:
        out["status"] = obj["status"]
    return compact_obj(out)


def slim_metadata(obj: Obj) -> Obj:
    """A child the sync only looks up by name, checks the owner of and deletes (RBAC, the
    workers' Service, the NetworkPolicy, the PodGroup): its metadata above. A Role's rules or
    a Service's ports are never compared with what is wanted: these are created once."""
    meta = obj.get("metadata") or {}
    out: Obj = {
        "apiVersion": obj.get("apiVersion"),
        "kind": obj.get("kind"),
        "metadata": {k: meta[k] for k in CHILD_METADATA if k in meta},
    }
    return compact_obj(out)


def slim_node(obj: Obj) -> Obj:
    """What the operator keeps of a Node: enough to tell whether it is lost (a Node's status
    lists its images and much else, and a cluster may have thousands)."""
    meta = obj.get("metadata") or {}
    conditions = (obj.get("status") or {}).get("conditions") or []
    return {
        "apiVersion": obj.get("apiVersion", "v1"),
        "kind": obj.get("kind", "Node"),
        "metadata": {k: meta[k] for k in NODE_METADATA if k in meta},
        "spec": {"taints": (obj.get("spec") or {}).get("taints") or []},
        "status": {"conditions": [c for c in conditions if c.get("type") == "Ready"]},
    }
