"""Processes the kernel killed for memory, told apart from other deaths.

When a container goes over its memory limit, the kernel's OOM killer picks the biggest
process *in that container* (a DGL server, a trainer, the partition entry point), not the
container's first process: the pod stays Running, the kubelet reports nothing, and all dglrun
sees is a child that ended by SIGKILL. What tells the two apart is the container's memory
cgroup, which counts the processes the OOM killer took in it (``oom_kill N``, Linux 4.13+):

* cgroup v2: ``memory.events`` in the process's cgroup; its limit in ``memory.max``;
* cgroup v1: ``memory.oom_control`` in its memory cgroup; ``memory.limit_in_bytes``.

:class:`Watch` reads the count before a process starts; a process that then ended by SIGKILL
while the count rose was killed for memory. Whoever waits for it says so in one line
(:func:`line`, parsed back by :func:`parse_line`) naming the pod (its hostname) and the
container's limit, and dglrun ends with a message starting podcontract's ``OOM_PREFIX``,
which the operator turns into the Failed reason ``OOMKilled``.

Standard library only (dglrun's layer, also run on the workers by ``launcher.workers.remote``).
"""

from __future__ import annotations

import re
import signal
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from podcontract import (
    OOM_PREFIX,  # a termination message naming a process killed for memory
    logline,
)

CGROUP = Path("/sys/fs/cgroup")
PROC_CGROUP = Path("/proc/self/cgroup")
V2 = ("memory.events", "memory.max")  # (counter file, limit file)
V1 = ("memory.oom_control", "memory.limit_in_bytes")
UNLIMITED = 1 << 60  # cgroup v1 writes "no limit" as a page-rounded 2**63 - 1
_LINE = "launcher.remote: killed for memory in pod {pod} (container memory limit {limit})"
_LINE_RE = re.compile(
    r"^launcher\.remote: killed for memory in pod (\S+) \(container memory limit ([^)]*)\)$"
)


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None


def _memory_cgroup(root: Path, proc: Path) -> tuple[Path, tuple[str, str]] | None:
    """This process's memory cgroup folder and its file names. In a container the cgroup
    filesystem shows the container's own cgroup at its root; elsewhere (a test, dglrun's
    local transport) the folder is the path /proc/self/cgroup names under it."""
    v1 = v2 = "/"
    for ln in (_read(proc) or "").splitlines():
        hierarchy, controllers, path = [*ln.split(":", 2), "", ""][:3]
        if hierarchy == "0":
            v2 = path
        elif "memory" in controllers.split(","):
            v1 = path
    for folder, files in (
        (root / v2.lstrip("/"), V2),
        (root, V2),
        (root / "memory" / v1.lstrip("/"), V1),
        (root / "memory", V1),
    ):
        if (folder / files[0]).is_file():
            return folder, files
    return None


def kills(root: Path = CGROUP, proc: Path = PROC_CGROUP) -> int | None:
    """How many processes the OOM killer took in this process's memory cgroup, or None
    where no counter can be read (no memory cgroup, or a kernel older than 4.13)."""
    found = _memory_cgroup(root, proc)
    if found is None:
        return None
    folder, (counter, _) = found
    for ln in (_read(folder / counter) or "").splitlines():
        key, _, value = ln.partition(" ")
        if key == "oom_kill" and value.strip().isdigit():
            return int(value)
    return None


def limit(root: Path = CGROUP, proc: Path = PROC_CGROUP) -> int | None:
    """This process's memory cgroup limit in bytes, None without one."""
    found = _memory_cgroup(root, proc)
    if found is None:
        return None
    folder, (_, name) = found
    text = (_read(folder / name) or "").strip()
    return int(text) if text.isdigit() and int(text) < UNLIMITED else None


def held(root: Path = CGROUP, proc: Path = PROC_CGROUP) -> int | None:
    """Bytes the processes of this process's memory cgroup hold: anonymous memory and shared
    memory (DGL's shared-memory graph), not the page cache (``memory.stat``: v2's ``anon +
    shmem``, v1's ``total_rss + total_shmem``); None without a memory cgroup."""
    found = _memory_cgroup(root, proc)
    if found is None:
        return None
    folder, files = found
    stat = dict(
        ln.split(" ", 1) for ln in (_read(folder / "memory.stat") or "").splitlines() if " " in ln
    )
    keys = ("anon", "shmem") if files == V2 else ("total_rss", "total_shmem")
    try:
        return sum(int(stat.get(k, "0")) for k in keys) if keys[0] in stat else None
    except ValueError:
        return None


def sample_memory(emit: Callable[[str], None]) -> threading.Event:
    """Give ``emit`` a :data:`podcontract.logline.MEMORY_LINE` of :func:`held` every
    :func:`~podcontract.logline.sample_seconds` from a thread of its own, until the event
    returned is set. Nothing where samples are off or no memory cgroup can be read."""
    stop = threading.Event()
    every = logline.sample_seconds()
    if not every or held() is None:
        return stop

    def sample() -> None:
        while not stop.wait(every):
            used = held()
            if used is not None:
                emit(logline.MEMORY_LINE.format(mib=used / (1 << 20)))

    threading.Thread(target=sample, name="memory-sample", daemon=True).start()
    return stop


def describe_limit(n: int | None) -> str:
    if n is None:
        return "none"
    return f"{n / (1 << 30):.2f} GiB" if n >= 1 << 30 else f"{n / (1 << 20):.0f} MiB"


def pod_name() -> str:
    """The pod this process runs in: its hostname (a pod's hostname is its name)."""
    return socket.gethostname()


@dataclass(frozen=True)
class Killed:
    """A process killed for memory: the pod it ran in, the container's limit (text)."""

    pod: str
    limit: str

    def describe(self, what: str) -> str:
        return (
            f"{OOM_PREFIX}{what} in pod {self.pod} was killed for memory "
            f"(over its container's memory limit, {self.limit})"
        )


def here(root: Path = CGROUP, proc: Path = PROC_CGROUP) -> Killed:
    """A process of this container killed for memory."""
    return Killed(pod_name(), describe_limit(limit(root, proc)))


def line(root: Path = CGROUP, proc: Path = PROC_CGROUP) -> str:
    """What a process's waiter prints when the process was killed for memory."""
    k = here(root, proc)
    return _LINE.format(pod=k.pod, limit=k.limit)


def parse_line(text: str) -> Killed | None:
    m = _LINE_RE.match(text.strip())
    return Killed(m.group(1), m.group(2)) if m else None


def _sigkilled(code: int) -> bool:
    """A Popen return code (negative signal) or a shell's exit status (128 + signal)."""
    return code in (-signal.SIGKILL, 128 + signal.SIGKILL)


class Watch:
    """The OOM-kill count before a process starts; :meth:`killed` asks, once it ended with
    ``code``, whether the kernel killed it for memory."""

    def __init__(self, root: Path = CGROUP, proc: Path = PROC_CGROUP) -> None:
        self.root, self.proc = root, proc
        self.before = kills(root, proc)

    def killed(self, code: int) -> bool:
        if not _sigkilled(code) or self.before is None:
            return False
        after = kills(self.root, self.proc)
        return after is not None and after > self.before
