"""distpart's pieces that need no MPI: the per-step memory profile, the collective block
slices and PT-Scotch's thread count."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from chunkedgraph import ChunkedError, FileSpec
from distpart import memory, mpi, parmetis
from distpart.read import read_rows


def test_each_step_reports_its_own_peak_not_the_largest_so_far() -> None:
    prof = memory.Profile()
    prof.begin()
    big = np.ones(64 << 20, dtype=np.uint8)  # 64 MiB, touched
    del big
    prof.end("big")
    prof.begin()
    small = np.ones(8 << 20, dtype=np.uint8)
    del small
    prof.end("small")
    assert prof.per_step, "/proc/self/clear_refs could not be written"
    assert prof.steps["big"] >= prof.start_mib + 60
    assert prof.steps["small"] < prof.steps["big"] - 40  # the reset worked
    assert prof.peak_mib == prof.steps["big"] and prof.worst_step() == "big"
    prof.begin()
    prof.end("big")  # a step run again keeps the largest of its runs
    assert prof.steps["big"] >= prof.start_mib + 60


def test_without_clear_refs_every_step_is_the_peak_so_far(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(memory, "CLEAR_REFS", tmp_path / "missing" / "clear_refs")
    prof = memory.Profile()
    prof.begin()
    prof.end("a")
    assert not prof.per_step and prof.steps["a"] > 0


class OneOfTwoRanks:
    """A communicator for :func:`mpi.blocks`: the other rank has ``other`` rows."""

    def __init__(self, other_blocks: int) -> None:
        self.other = other_blocks

    def allreduce(self, value: int, op: Any) -> int:
        assert op == "max"
        return max(value, self.other)


def test_blocks_are_as_many_on_every_rank(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mpi, "_max", lambda: "max")
    assert mpi.blocks(OneOfTwoRanks(1), 10, 4) == [(0, 4), (4, 8), (8, 10)]
    # the other rank has 5 blocks: this one takes part with empty slices
    assert mpi.blocks(OneOfTwoRanks(5), 10, 4) == [(0, 4), (4, 8), (8, 10), (10, 10), (10, 10)]
    assert mpi.blocks(OneOfTwoRanks(0), 0, 4) == [(0, 0)]  # one round even with no rows


@pytest.mark.parametrize(("local", "cpus", "quota", "threads"), [
    ("1", 8, None, 8),  # a rank alone: every CPU it may use
    ("2", 8, None, 4),  # ranks sharing the machine share it
    ("3", 2, None, 1),  # never fewer than one
    ("1", 8, 1.5, 1),  # a pod's CPU limit, not the node's cores
    ("junk", 4, None, 4),
])  # fmt: skip
def test_scotch_threads_are_the_ranks_share_of_its_cpus(
    monkeypatch: pytest.MonkeyPatch, local: str, cpus: int, quota: float | None, threads: int
) -> None:
    monkeypatch.setenv(parmetis.LOCAL_RANKS_ENV, local)
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: set(range(cpus)))
    monkeypatch.setattr(parmetis, "_cpu_quota", lambda: quota)
    assert parmetis.scotch_threads() == threads


def test_the_cgroup_cpu_quota_is_read_in_both_versions(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    v2, v1 = tmp_path / "cpu.max", tmp_path / "v1" / "cpu.cfs_quota_us"
    monkeypatch.setattr(parmetis, "CGROUP_CPU", (v2, v1))
    assert parmetis._cpu_quota() is None  # neither file
    v1.parent.mkdir()
    v1.write_text("150000\n")
    (v1.parent / "cpu.cfs_period_us").write_text("100000\n")
    assert parmetis._cpu_quota() == 1.5
    v1.write_text("-1\n")
    assert parmetis._cpu_quota() is None
    v2.write_text("max 100000\n")
    assert parmetis._cpu_quota() is None
    v2.write_text("200000 100000\n")
    assert parmetis._cpu_quota() == 2.0


def test_fine_parts_only_for_a_count_that_is_not_a_power_of_two(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(parmetis.LIB_ENV, raising=False)
    monkeypatch.delenv(parmetis.MIN_VERTICES_ENV, raising=False)
    assert parmetis.fine_parts(2, 10**7) == 2
    assert parmetis.fine_parts(4, 10**7) == 4
    assert parmetis.fine_parts(3, 10**7) == 64  # the power of two >= 16 x 3
    assert parmetis.fine_parts(5, 10**7) == 128
    assert parmetis.fine_parts(3, 63_999) == 3  # too few vertices for 64 fine parts of 1000
    monkeypatch.setenv(parmetis.MIN_VERTICES_ENV, "10")
    assert parmetis.fine_parts(3, 640) == 64
    monkeypatch.setenv(parmetis.MIN_VERTICES_ENV, "ten")
    with pytest.raises(parmetis.ParmetisError, match="DISTPART_FINE_PART_MIN_VERTICES='ten'"):
        parmetis.fine_parts(3, 640)
    monkeypatch.delenv(parmetis.MIN_VERTICES_ENV)
    monkeypatch.setenv(parmetis.LIB_ENV, "/opt/parmetis/libparmetis.so")
    assert parmetis.fine_parts(3, 10**7) == 3  # a real ParMETIS: k parts directly


def test_group_ranges_are_contiguous_balanced_and_never_empty() -> None:
    group = parmetis.group_ranges(np.ones(64), 3)
    assert list(np.bincount(group)) in ([21, 21, 22], [21, 22, 21], [22, 21, 21])
    assert (np.diff(group) >= 0).all()
    # one heavy fine part first: it is a group of its own, and no group is empty
    group = parmetis.group_ranges(np.array([100.0, 1, 1, 1]), 3)
    assert group[0] == 0 and (group[1:] > 0).all()
    assert sorted(set(group)) == [0, 1, 2] and (np.diff(group) >= 0).all()
    with pytest.raises(ValueError, match="cannot group 2 fine parts into 3"):
        parmetis.group_ranges(np.ones(2), 3)


def test_group_parts_reassembles_communities_split_into_fine_parts() -> None:
    # 3 communities of 8 fine parts each, dense inside, sparse between; the fine parts'
    # numbers interleave the communities, so the contiguous start cuts nearly everything
    fine, k = 24, 3
    community = np.arange(fine) % k
    rng = np.random.default_rng(0)
    noise = rng.integers(0, 3, size=(fine, fine))
    noise[community[:, None] == community[None, :]] += 100
    cross = np.triu(noise, 1) + np.triu(noise, 1).T
    weights = 1000 + rng.integers(-5, 6, size=fine)

    def cut(g: Any) -> int:
        return int(cross[g[:, None] != g[None, :]].sum())

    start = parmetis.group_ranges(weights, k)
    group = parmetis.group_parts(weights, cross, k)
    assert cut(group) < cut(start) / 10
    # every community lies in one group, and the groups are within 3% of the average
    for c in range(k):
        assert len(set(group[community == c])) == 1
    load = np.bincount(group, weights=weights)
    assert (np.abs(load / (weights.sum() / k) - 1) <= 0.03).all()


def test_a_chunk_that_holds_pickled_objects_is_refused_naming_it(tmp_path: Path) -> None:
    """A chunk file from shared storage that holds Python objects (numpy pickles them) is
    refused, naming the file: reading it would run what the pickle says."""

    class Payload:
        def __reduce__(self) -> tuple[object, tuple[str]]:
            return (os.system, (f"touch {tmp_path / 'ran'}",))

    path = tmp_path / "feat-0.npy"
    np.save(path, np.array([Payload(), Payload()], dtype=object), allow_pickle=True)
    spec = FileSpec("node_data _N/feat", "node", False, "numpy", ",", (path,), (2,))
    with pytest.raises(ChunkedError, match=r"feat-0\.npy: node_data _N/feat chunk 0: cannot"):
        read_rows(spec, 0, 2)
    assert not (tmp_path / "ran").exists()
