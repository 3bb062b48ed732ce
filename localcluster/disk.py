"""The disk a local cluster runs on: enough of it free before the cluster starts, and a node's
disk pressure named as soon as it shows.

A node's kubelet evicts every pod once its filesystem has less than :data:`EVICTION_SHARE` of
its size free (node.py's ``evictionHard`` ``nodefs.available``), and refuses new pods for as
long as the pressure lasts (five minutes at least). A test session started on a nearly full disk
then fails test after test, each at its own timeout: a stop's CI once ran out of its 90 minutes
that way, behind 37 GiB of bench graphs. So ``up`` refuses at once (:func:`require_free`),
saying what is free, what is needed and which folders of the cache are largest, and the e2e
sessions stop at the first node with a pressure condition (:func:`pressures`).
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from localcluster.cluster import CACHE, ClusterError

GiB = 1 << 30
EVICTION_SHARE = 0.01  # each node's kubelet's evictionHard nodefs/imagefs thresholds (node.py)
# What a `make test` run writes at its peak (images rebuilt after a change, graphs, partitions,
# checkpoints, pod logs, pytest's folders), with room to spare: the free space fell by 11.8 GiB
# at most in a whole run here (2026-12-08, a new venv and the images rebuilt included)
SESSION_NEED = 16 * GiB
PRESSURES = ("DiskPressure", "MemoryPressure", "PIDPressure")


def size_of(path: Path) -> int:
    """Bytes of the files under ``path`` (links not followed)."""
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            with contextlib.suppress(OSError):  # (gone since the walk listed it)
                total += os.lstat(os.path.join(root, name)).st_size
    return total


def largest(under: Path, count: int = 3) -> list[tuple[Path, int]]:
    """The ``count`` largest folders (or files) directly under ``under``, largest first."""
    sizes = [(p, size_of(p) if p.is_dir() else p.lstat().st_size) for p in under.glob("*")]
    return sorted(sizes, key=lambda s: -s[1])[:count]


def shortfall(free: int, total: int, need: int) -> int:
    """Bytes missing for ``need`` on a filesystem of ``total`` bytes with ``free`` free, the
    kubelet's eviction threshold kept clear (0 when there is enough)."""
    return max(0, need + int(total * EVICTION_SHARE) - free)


def require_free(path: Path, need: int = SESSION_NEED, cache: Path = CACHE) -> None:
    """Raise :class:`ClusterError` when the filesystem of ``path`` cannot hold ``need`` more
    bytes above the kubelet's eviction threshold; the message names the cache's largest
    folders (the bench's graphs are made again when they are gone)."""
    path.mkdir(parents=True, exist_ok=True)
    usage = shutil.disk_usage(path)
    missing = shortfall(usage.free, usage.total, need)
    if not missing:
        return
    big = ", ".join(f"{p} {n / GiB:.1f} GiB" for p, n in largest(cache)) if cache.is_dir() else ""
    raise ClusterError(
        f"{path}: {usage.free / GiB:.1f} GiB free of {usage.total / GiB:.0f} GiB; a test "
        f"session needs {need / GiB:.0f} GiB above the kubelet's eviction threshold "
        f"({EVICTION_SHARE:.0%} of the disk, {usage.total * EVICTION_SHARE / GiB:.1f} GiB): "
        f"free {missing / GiB:.1f} GiB more" + (f" (largest under {cache}: {big})" if big else "")
    )


def pressures(nodes: Iterable[dict[str, Any]]) -> list[str]:
    """``<node>: <condition>: <message>`` for each node's pressure condition that is True."""
    return [
        f"{n['metadata']['name']}: {c['type']}: {c.get('message', '')}"
        for n in nodes
        for c in n.get("status", {}).get("conditions") or []
        if c.get("type") in PRESSURES and c.get("status") == "True"
    ]
