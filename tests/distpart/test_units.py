"""distpart's pieces that need no MPI: the per-step memory profile, the collective block
slices and PT-Scotch's thread count."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from distpart import memory, mpi, parmetis


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
