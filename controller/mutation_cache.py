"""Our own recent writes, until the informer cache shows them (client-go MutationCache).

Right after a write, the cache still holds the older copy; acting on it would re-apply the
same change and fail with a conflict. Reads go through :meth:`newest`, which prefers what we
wrote while its (integer) resourceVersion is ahead of the cached one.
"""

from __future__ import annotations

import threading

from kubeclient import Obj


def _rv(obj: Obj) -> int:
    try:
        return int((obj.get("metadata") or {}).get("resourceVersion") or 0)
    except ValueError:
        return 0


def _uid(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("uid") or "")


class MutationCache:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._written: dict[str, Obj] = {}

    def remember(self, key: str, obj: Obj) -> None:
        with self._lock:
            self._written[key] = obj

    def forget(self, key: str) -> None:
        with self._lock:
            self._written.pop(key, None)

    def newest(self, key: str, cached: Obj | None) -> Obj | None:
        """``cached``, unless our own write of the same object is newer."""
        with self._lock:
            mine = self._written.get(key)
            if cached is None or mine is None:
                return cached
            if _uid(mine) == _uid(cached) and _rv(mine) > _rv(cached):
                return mine
            del self._written[key]
            return cached
