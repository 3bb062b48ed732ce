"""``<job>-config``: kubexec.sh, the hostfile, partfile and leadfile (the pods' IPs), and the
volume that mounts it."""

from __future__ import annotations

from collections.abc import Mapping

import podcontract as pc
from controller.api import DGLJob
from controller.builders.meta import CONFIG_VOLUME, MODE_EXEC, MODE_READ, _meta
from kubeclient import Obj

# mpirun's remote shell through the workers' agents (dglrun gives it the hostfile, the token
# and the agents' port in its env: launcher/workers/agent.py)
AGENT_RSH_SCRIPT = '#!/bin/sh\nexec python3 -P -m workeragent.rsh "$@"\n'
KUBEXEC_SCRIPT = (
    "#!/bin/sh\nset -x\nPOD_NAME=$1\nshift\n"
    f'{pc.KUBECTL_PATH} exec ${{POD_NAME}} -- /bin/sh -c "$*"\n'
)


def _config_volume(job: DGLJob, keys: tuple[tuple[str, int], ...]) -> Obj:
    return {
        "name": CONFIG_VOLUME,
        "configMap": {
            "name": job.config_name,
            "items": [{"key": k, "path": k, "mode": mode} for k, mode in keys],
        },
    }


ALL_CONFIG_KEYS = (
    (pc.KUBEXEC_KEY, MODE_EXEC),
    (pc.HOSTFILE_KEY, MODE_READ),
    (pc.PARTFILE_KEY, MODE_READ),
    (pc.LEADFILE_KEY, MODE_READ),
    (pc.AGENT_RSH_KEY, MODE_EXEC),
)


# the seed's launcher mounts no leadfile
LAUNCHER_CONFIG_KEYS = (*ALL_CONFIG_KEYS[:3], ALL_CONFIG_KEYS[4])


def _ip(pod: Obj | None) -> str:
    if not pod:
        return ""
    return str((pod.get("status") or {}).get("podIP") or "")


def hostfile(job: DGLJob, pods: Mapping[str, Obj]) -> str:
    """One line per worker of the attempt with an IP, in numeric worker order."""
    lines = []
    for name in job.training_worker_names():
        ip = _ip(pods.get(name))
        if ip:
            lines.append(f"{ip} {pc.DGL_PORT} {name} slots={job.spec.slots_per_worker}\n")
    return "".join(lines)


def _single_line(pod_name: str, pods: Mapping[str, Obj]) -> str:
    ip = _ip(pods.get(pod_name))
    return f"{ip} {pc.DGL_PORT} {pod_name}\n" if ip else ""


def config_map(job: DGLJob, pods: Mapping[str, Obj]) -> Obj:
    """``<job>-config`` with kubexec.sh (the original's; unused since the agents), hostfile,
    partfile, leadfile and agent-rsh."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": _meta(job, job.config_name, {"app": job.name}),
        "data": {
            pc.KUBEXEC_KEY: KUBEXEC_SCRIPT,
            pc.HOSTFILE_KEY: hostfile(job, pods),
            pc.PARTFILE_KEY: _single_line(job.partitioner_name, pods),
            pc.LEADFILE_KEY: _single_line(job.launcher_name, pods),
            pc.AGENT_RSH_KEY: AGENT_RSH_SCRIPT,
        },
    }


def report_map(job: DGLJob) -> Obj:
    """``<job>-report``: dglrun's report, the one object the job's pods may write
    (podcontract/report.py); made empty, then left alone (the operator reads it)."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": _meta(job, job.report_name),
        "data": {},
    }
