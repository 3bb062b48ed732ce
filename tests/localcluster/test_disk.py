"""localcluster/disk.py: a cluster is refused on a disk its kubelet would soon evict from, and
a node's pressure condition is named (e2e/test_helpers.py: the e2e session stops there)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from localcluster.cluster import ClusterError
from localcluster.disk import EVICTION_SHARE, GiB, largest, pressures, require_free, shortfall


def test_the_shortfall_keeps_the_eviction_threshold_clear() -> None:
    total = 100 * GiB  # the kubelet evicts below 1 GiB free
    assert shortfall(free=20 * GiB, total=total, need=12 * GiB) == 0
    assert shortfall(free=13 * GiB, total=total, need=12 * GiB) == 0
    # 12 GiB free holds the session's 12 only by eating into the threshold: refused
    assert shortfall(free=12 * GiB, total=total, need=12 * GiB) == 1 * GiB
    assert shortfall(free=8 * GiB, total=total, need=12 * GiB) == 5 * GiB


def test_a_disk_without_room_is_refused_naming_the_cache_largest_folders(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    for name, size in (("bench", 3 << 20), ("images", 2 << 20), ("k8s", 1 << 20), ("kueue", 1)):
        (cache / name).mkdir(parents=True)
        (cache / name / "blob").write_bytes(b"\0" * size)
    assert [(p.name, n) for p, n in largest(cache)] == [
        ("bench", 3 << 20), ("images", 2 << 20), ("k8s", 1 << 20)
    ]  # fmt: skip
    usage = shutil.disk_usage(tmp_path)
    too_much = usage.free  # more than is free once the threshold is kept clear
    with pytest.raises(ClusterError) as e:
        require_free(tmp_path / "node", too_much, cache)
    message = str(e.value)
    assert message.startswith(f"{tmp_path / 'node'}: ")
    assert f"eviction threshold ({EVICTION_SHARE:.0%} of the disk" in message
    assert f"largest under {cache}: {cache / 'bench'} 0.0 GiB" in message
    assert "kueue" not in message  # the three largest only
    # with room, nothing is said
    require_free(tmp_path / "node", 0, cache)


def node(name: str, **conditions: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "status": {
            "conditions": [
                {"type": t, "status": s, "message": f"{t} is {s}"} for t, s in conditions.items()
            ]
        },
    }


def test_a_pressure_condition_is_named_and_a_ready_node_passes() -> None:
    calm = node("n1", Ready="True", DiskPressure="False", MemoryPressure="False")
    full = node("n2", Ready="True", DiskPressure="True", PIDPressure="False")
    assert pressures([calm]) == []
    assert pressures([calm, full]) == ["n2: DiskPressure: DiskPressure is True"]
