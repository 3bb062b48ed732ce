"""The cluster as a soak sees and strikes it: kubectl as the admin (what a user or an SRE
would type), and the host's view of the local nodes (a pod's processes are this machine's:
killing them is what a crash or the kernel does)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
from dataclasses import dataclass, field
from pathlib import Path

from localcluster.kubectl import Kubectl, Obj

OPERATOR_NAMESPACE = "dgl-system"
JOB_LABEL = "dgl.qihoo.net/job-name"
REPLICA_TYPE_LABEL = "dgl-replica-type"
ATTEMPT_ANNOTATION = "dgl.qihoo.net/restart-attempt"


@dataclass(frozen=True)
class World(Kubectl):
    """kubectl (:meth:`run`, :meth:`json`, :meth:`apply`) and the nodes' folder, ``dir``."""

    dir: Path = field(kw_only=True)  # the cluster's (localcluster.node DEFAULT_DIR)
    timeout: float = 60

    def items(self, resource: str, namespace: str | None = None, selector: str = "") -> list[Obj]:
        where = ["-n", namespace] if namespace else ["-A"]
        more = ["-l", selector] if selector else []
        found: list[Obj] = self.json("get", resource, *where, *more)["items"]
        return found

    def get(self, resource: str, namespace: str, name: str) -> Obj | None:
        out = self.run("get", resource, name, "-n", namespace, "-o", "json", "--ignore-not-found")
        return json.loads(out) if out.strip() else None

    def create_raw(self, path: str, body: Obj) -> str:
        return self.run("create", "--raw", path, "-f", "-", input=json.dumps(body))

    # -- the operator ----------------------------------------------------------------------

    def operator_pods(self) -> list[Obj]:
        return [
            p
            for p in self.items("pods", OPERATOR_NAMESPACE)
            if p["metadata"]["name"].startswith("dgl-operator")
            and not p["metadata"].get("deletionTimestamp")
        ]

    def leader(self) -> str | None:
        """The operator pod holding the leader Lease (its identity is ``<pod>_<suffix>``)."""
        for lease in self.items("leases.coordination.k8s.io", OPERATOR_NAMESPACE):
            if lease["metadata"]["name"].endswith("-leader"):
                holder = str((lease.get("spec") or {}).get("holderIdentity") or "")
                return holder.rsplit("_", 1)[0] or None
        return None


# -- a pod's processes on this machine ------------------------------------------------------


def pod_processes(uid: str) -> list[int]:
    """The PIDs of the pod's containers' processes (its memory cgroup names the pod's UID; the
    sandbox's ``pause`` is left out: killing the app is a crash, killing the sandbox is not)."""
    marks = (f"pod{uid}", f"pod{uid.replace('-', '_')}")
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cgroups = (entry / "cgroup").read_text()
            comm = (entry / "comm").read_text().strip()
        except OSError:
            continue
        if comm != "pause" and any(m in cgroups for m in marks):
            found.append(int(entry.name))
    return found


def kill_pod(uid: str) -> int:
    """SIGKILL every process of the pod's containers, as the kernel or a crash would; how many."""
    pids = pod_processes(uid)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return len(pids)


def rss_bytes(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None
