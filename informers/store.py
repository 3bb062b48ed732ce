"""Thread-safe keyed store with indexers (client-go tools/cache thread_safe_store.go + index.go).

Objects are raw JSON dicts shared by every reader: treat them as read-only and copy before
changing anything.
"""

from __future__ import annotations

import builtins
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from kubeclient import Obj

IndexFunc = Callable[[Obj], list[str]]

NAMESPACE_INDEX = "namespace"
CONTROLLER_UID_INDEX = "controller-uid"


def meta_namespace_key(obj: Obj) -> str:
    """``namespace/name`` (or ``name`` for cluster-scoped objects)."""
    if isinstance(obj, DeletedFinalStateUnknown):
        return obj.key
    meta = obj.get("metadata") or {}
    ns = meta.get("namespace") or ""
    name = meta.get("name") or ""
    return f"{ns}/{name}" if ns else name


def split_key(key: str) -> tuple[str, str]:
    """Inverse of :func:`meta_namespace_key`: ``(namespace, name)``; namespace may be ''."""
    ns, sep, name = key.partition("/")
    if not sep:
        return "", ns
    if not ns or not name or "/" in name:
        raise ValueError(f"unexpected key format: {key!r}")
    return ns, name


def namespace_index(obj: Obj) -> list[str]:
    ns = (obj.get("metadata") or {}).get("namespace")
    return [ns] if ns else []


def controller_ref(obj: Obj) -> dict[str, Any] | None:
    """The ownerReference with ``controller: true``, if any."""
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("controller"):
            return dict(ref)
    return None


def controller_uid_index(obj: Obj) -> list[str]:
    ref = controller_ref(obj)
    return [str(ref["uid"])] if ref and ref.get("uid") else []


@dataclass(frozen=True)
class DeletedFinalStateUnknown:
    """Tombstone: the object was deleted while the watch was down; ``obj`` is its last state."""

    key: str
    obj: Obj


class ThreadSafeStore:
    def __init__(self, indexers: dict[str, IndexFunc] | None = None) -> None:
        self._lock = threading.RLock()
        self._items: dict[str, Obj] = {}
        self._indexers: dict[str, IndexFunc] = dict(indexers or {})
        # index name -> index value -> keys
        self._indices: dict[str, dict[str, set[str]]] = {n: {} for n in self._indexers}

    # -- writes ---------------------------------------------------------------------------

    def add_indexers(self, indexers: dict[str, IndexFunc]) -> None:
        with self._lock:
            for name, fn in indexers.items():
                if name in self._indexers:
                    if self._indexers[name] is not fn:
                        raise ValueError(f"indexer {name!r} already registered")
                    continue
                self._indexers[name] = fn
                index: dict[str, set[str]] = {}
                for key, obj in self._items.items():
                    for value in fn(obj):
                        index.setdefault(value, set()).add(key)
                self._indices[name] = index

    def put(self, key: str, obj: Obj) -> Obj | None:
        """Add or replace; returns the previous object."""
        with self._lock:
            old = self._items.get(key)
            self._items[key] = obj
            self._reindex(key, old, obj)
            return old

    def delete(self, key: str) -> Obj | None:
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self._reindex(key, old, None)
            return old

    def replace(self, items: dict[str, Obj]) -> None:
        with self._lock:
            self._items = dict(items)
            self._indices = {n: {} for n in self._indexers}
            for key, obj in self._items.items():
                self._reindex(key, None, obj)

    def _reindex(self, key: str, old: Obj | None, new: Obj | None) -> None:
        for name, fn in self._indexers.items():
            index = self._indices[name]
            old_values = set(fn(old)) if old is not None else set()
            new_values = set(fn(new)) if new is not None else set()
            for value in old_values - new_values:
                keys = index.get(value)
                if keys is not None:
                    keys.discard(key)
                    if not keys:
                        del index[value]
            for value in new_values - old_values:
                index.setdefault(value, set()).add(key)

    # -- reads ----------------------------------------------------------------------------

    def get(self, key: str) -> Obj | None:
        with self._lock:
            return self._items.get(key)

    def list(self) -> builtins.list[Obj]:
        with self._lock:
            return list(self._items.values())

    def list_keys(self) -> builtins.list[str]:
        with self._lock:
            return list(self._items)

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)

    def index_keys(self, index_name: str, value: str) -> builtins.list[str]:
        with self._lock:
            if index_name not in self._indices:
                raise KeyError(f"no indexer named {index_name!r}")
            return sorted(self._indices[index_name].get(value, ()))

    def by_index(self, index_name: str, value: str) -> builtins.list[Obj]:
        with self._lock:
            return [self._items[k] for k in self.index_keys(index_name, value)]

    def items_of(self, keys: Iterable[str]) -> builtins.list[Obj]:
        with self._lock:
            return [self._items[k] for k in keys if k in self._items]
