"""Peaks the benchmarks measure: a process's own (``wait4``), a pod's memory cgroup (v1) while
its job runs, and memory cgroups of the benchmark's own that processes run in under a limit."""

from __future__ import annotations

import contextlib
import glob
import os
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from bench.support.manifests import NS
from localcluster.kubectl import Kubectl

MiB = 1 << 20
CGROUP_ROOT = Path("/sys/fs/cgroup/memory")  # cgroup v1's memory hierarchy


def run_measured(argv: list[str], env: dict[str, str]) -> tuple[float, float, str]:
    """Run ``argv``; its peak resident set (MiB, of the process itself), seconds and output."""
    started = time.monotonic()
    with tempfile.TemporaryFile("w+") as log:
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        log.seek(0)
        out = log.read()
    if proc.returncode:
        raise SystemExit(f"{argv[:3]} exited with {proc.returncode}:\n{out[-3000:]}")
    return usage.ru_maxrss / 1024, time.monotonic() - started, out


# -- a pod's memory cgroup --------------------------------------------------------------------


def _pod_cgroup(uid: str, name: str) -> str | None:
    """A file of the pod's memory cgroup (v1), while the pod exists."""
    for path in glob.glob(f"{CGROUP_ROOT}/kubepods*/**/pod{uid}/{name}", recursive=True):
        try:
            return Path(path).read_text()
        except OSError:
            continue
    return None


def cgroup_peak(uid: str) -> int | None:
    """The pod's ``memory.max_usage_in_bytes`` (page cache included); None when it is gone."""
    text = _pod_cgroup(uid, "memory.max_usage_in_bytes")
    return int(text) if text and text.strip().isdigit() else None


def oom_kills(oom_control: str) -> int | None:
    """The processes the kernel killed at a cgroup's memory limit: ``oom_kill`` of v1's
    ``memory.oom_control`` text; None when the kernel lacks the counter."""
    for line in oom_control.splitlines():
        if line.startswith("oom_kill "):
            return int(line.split()[1])
    return None


def cgroup_oom_kills(uid: str) -> int | None:
    """:func:`oom_kills` of the pod's memory cgroup; None when the cgroup is gone."""
    return oom_kills(_pod_cgroup(uid, "memory.oom_control") or "")


class MemorySampler(threading.Thread):
    """The partitioning pods' cgroup peaks, while the job partitions: the partitioner's (DGL-API,
    ParMETIS), or both workers' until the job leaves its partition phase (DistParMETIS)."""

    def __init__(self, kube: Kubectl, job: str, mode: str) -> None:
        super().__init__(daemon=True)
        self.kube, self.job, self.mode = kube, job, mode
        self.peaks: dict[str, int] = {}
        self.stop = threading.Event()

    def partitioning_pods(self) -> dict[str, str]:
        pods = self.kube.json("get", "pods", "-n", NS, "-l", f"dgl.qihoo.net/job-name={self.job}")
        want = (
            {f"{self.job}-worker-0", f"{self.job}-worker-1"}
            if self.mode == "DistParMETIS"
            else {f"{self.job}-partitioner"}
        )
        return {
            p["metadata"]["name"]: p["metadata"]["uid"]
            for p in pods["items"]
            if p["metadata"]["name"] in want
        }

    def still_partitioning(self) -> bool:
        if self.mode != "DistParMETIS":
            return True  # the partitioner pod's cgroup ends with it
        status = self.kube.json("get", "dgljob", self.job, "-n", NS).get("status") or {}
        return status.get("phase") in (None, "Pending", "Partitioning")

    def run(self) -> None:
        while not self.stop.wait(0.2):
            try:
                if not self.still_partitioning():
                    return
                for name, uid in self.partitioning_pods().items():
                    peak = cgroup_peak(uid)
                    if peak is not None:
                        self.peaks[name] = max(self.peaks.get(name, 0), peak)
            except (RuntimeError, ValueError, subprocess.TimeoutExpired):
                continue


# -- memory cgroups of the benchmark's own ----------------------------------------------------


@contextlib.contextmanager
def memory_cgroups(root: Path, names: list[str], limit: int) -> Iterator[list[Path]]:
    """``root``/<name> for each of ``names``: memory cgroups (v1, like a pod's: page cache
    counts) of ``limit`` bytes each, swap included (no swapping around the limit); removed
    with ``root`` at the end, once the processes put in them have ended."""
    groups = [root / name for name in names]
    try:
        for group in groups:
            group.mkdir(parents=True)
            (group / "memory.limit_in_bytes").write_text(str(limit))
            swap = group / "memory.memsw.limit_in_bytes"
            if swap.exists():
                swap.write_text(str(limit))
        yield groups
    finally:
        for group in [*groups, root]:
            with contextlib.suppress(OSError):  # (a group never made)
                group.rmdir()


def group_peak(group: Path) -> int:
    """The cgroup's ``memory.max_usage_in_bytes``: its peak, page cache included."""
    return int((group / "memory.max_usage_in_bytes").read_text())
