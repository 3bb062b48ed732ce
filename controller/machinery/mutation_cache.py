"""Our own recent write of an object, until the informer cache shows it (client-go's
MutationCache, one object at a time).

Right after a write, the cache still holds the older copy; acting on it would re-apply the
same change and fail with a conflict. Reads go through :meth:`OwnWrite.newest`, which prefers
what we wrote while its (integer) resourceVersion is ahead of the cached one. The sync keeps
one per job and per ConfigMap in the job's memo (controller/memo.py), which the work queue
never hands to two workers at once.
"""

from __future__ import annotations

from controller.machinery import objects as ob
from kubeclient import Obj


def _rv(obj: Obj) -> int:
    try:
        return int(ob.meta(obj).get("resourceVersion") or 0)
    except ValueError:
        return 0


class OwnWrite:
    """Our last write of one object (None: nothing to prefer to the cache)."""

    def __init__(self) -> None:
        self.written: Obj | None = None

    def remember(self, obj: Obj) -> None:
        self.written = obj

    def newest(self, cached: Obj | None) -> Obj | None:
        """``cached``, unless our own write of the same object is newer."""
        mine = self.written
        if cached is None or mine is None:
            return cached
        if ob.uid(mine) == ob.uid(cached) and _rv(mine) > _rv(cached):
            return mine
        self.written = None
        return cached
