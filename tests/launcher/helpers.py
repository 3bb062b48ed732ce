"""What the launcher's tests share: the fake workload scripts (fixtures/), ``dglrun`` as a
subprocess of this checkout, the host's network namespaces and links (what a test must not
leave behind), and memory cgroups of their own for the out-of-memory tests."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from tests.support.paths import REPO
from tests.support.prerequisites import require

FIXTURES = Path(__file__).parent / "fixtures"


def netns_names() -> set[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return {line.split()[0] for line in out.splitlines() if line.strip()}


def links() -> set[str]:
    out = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    return {line.split(":")[1].strip().split("@")[0] for line in out.splitlines()}


def dglrun(
    *args: str, env: dict[str, str] | None = None, timeout: float = 120, cgroup: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """dglrun with ``args``; in the memory cgroup ``cgroup`` if given."""
    argv = [sys.executable, "-m", "launcher.cli", *args]
    return subprocess.run(
        argv if cgroup is None else in_cgroup(cgroup, argv),
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})},
        cwd=REPO,
    )


@contextlib.contextmanager
def memory_cgroup(limit_mib: int) -> Iterator[Path]:
    """A memory cgroup of ``limit_mib`` under this process's own (root; cgroup v1, or v2 with
    the memory controller delegated): write a pid to ``<it>/cgroup.procs`` to put it in.
    Whatever still runs in it at the end is killed, and the cgroup removed."""
    from launcher.workers import oom

    require(os.geteuid() == 0, "a memory cgroup of its own needs root")
    found = oom._memory_cgroup(oom.CGROUP, oom.PROC_CGROUP)
    require(found is not None, "no memory cgroup (neither v1 nor v2 counters) on this machine")
    assert found is not None
    parent, (_, limit_file) = found
    group = parent / f"dgl-test-{os.getpid()}-{time.monotonic_ns()}"
    try:
        group.mkdir()
        (group / limit_file).write_text(str(limit_mib << 20))
    except OSError as e:
        require(False, f"cannot make a memory cgroup under {parent}: {e}")
    try:
        yield group
    finally:
        for _ in range(100):
            pids = (group / "cgroup.procs").read_text().split()
            if not pids:
                break
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(pid), signal.SIGKILL)
            time.sleep(0.05)
        group.rmdir()


def in_cgroup(group: Path, argv: list[str]) -> list[str]:
    """``argv`` started inside the memory cgroup ``group``."""
    return ["sh", "-c", f'echo $$ > {group}/cgroup.procs && exec "$@"', "sh", *argv]


def fake_partition(workspace: Path, parts: int = 2) -> Path:
    """fixtures/fake_partition.py's graph ``g`` in ``parts`` parts under workspace/dataset."""
    subprocess.run(
        [
            sys.executable,
            str(FIXTURES / "fake_partition.py"),
            "--graph_name",
            "g",
            "--workspace",
            str(workspace),
            "--rel_data_path",
            "dataset",
            "--num_parts",
            str(parts),
        ],
        check=True,
        capture_output=True,
    )
    return workspace / "dataset"
