"""Writing the status again after a conflict: our changes re-applied to another writer's newer
status, and whether that status moved on since our copy."""

from __future__ import annotations

import copy

from kubeclient import Obj
from podcontract import DGLRUN_STATUS_FIELDS


def rebase_status(base: Obj, ours: Obj, theirs: Obj) -> Obj:
    """Our changes (``base`` -> ``ours``) applied on top of someone else's newer ``theirs``.

    Fields we did not touch keep their value; conditions merge by type."""
    out = copy.deepcopy(theirs)
    for key in set(base) | set(ours):
        if key == "conditions" or base.get(key) == ours.get(key):
            continue
        if key in ours:
            out[key] = copy.deepcopy(ours[key])
        else:
            out.pop(key, None)
    before = {c.get("type"): c for c in base.get("conditions") or []}
    after = {c.get("type"): c for c in ours.get("conditions") or []}
    merged = [dict(c) for c in out.get("conditions") or []]
    index = {c.get("type"): i for i, c in enumerate(merged)}
    for ctype, cond in after.items():
        if before.get(ctype) == cond:
            continue
        if ctype in index:
            merged[index[ctype]] = dict(cond)
        else:
            merged.append(dict(cond))
    if merged or "conditions" in out:
        out["conditions"] = merged
    return out


def transitioned_since(base: Obj, latest: Obj) -> bool:
    """Did someone other than dglrun change the status since ``base`` (that is, a sync of ours
    whose write this copy predates)? A decision made on ``base`` is then stale."""

    def ours(status: Obj) -> Obj:
        out = without_volatile(status)
        for key in DGLRUN_STATUS_FIELDS:
            out.pop(key, None)
        return out

    return ours(base) != ours(latest)


def without_volatile(status: Obj) -> Obj:
    """Status minus timestamps that change on every write (to compare meaningfully)."""
    out = copy.deepcopy(status)
    for c in out.get("conditions") or []:
        c.pop("lastUpdateTime", None)
    return out
