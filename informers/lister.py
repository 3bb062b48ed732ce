"""Read-only typed-edge access to an informer's cache (client-go listers)."""

from __future__ import annotations

import builtins

from informers.store import CONTROLLER_UID_INDEX, NAMESPACE_INDEX, ThreadSafeStore
from kubeclient import Obj


def labels_match(selector: dict[str, str], obj: Obj) -> bool:
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return all(labels.get(k) == v for k, v in selector.items())


class Lister:
    def __init__(self, store: ThreadSafeStore) -> None:
        self.store = store

    def get(self, namespace: str, name: str) -> Obj | None:
        return self.store.get(f"{namespace}/{name}" if namespace else name)

    def list(
        self, namespace: str | None = None, selector: dict[str, str] | None = None
    ) -> list[Obj]:
        objs = self.store.by_index(NAMESPACE_INDEX, namespace) if namespace else self.store.list()
        if selector:
            objs = [o for o in objs if labels_match(selector, o)]
        return objs

    def controlled_by(self, uid: str) -> builtins.list[Obj]:
        """Objects whose controller ownerReference points at ``uid`` (needs that indexer)."""
        return self.store.by_index(CONTROLLER_UID_INDEX, uid)
