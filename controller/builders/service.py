"""``<job>-worker``: the workers' headless Service, and the DGL ports it and the workers name."""

from __future__ import annotations

import podcontract as pc
from controller.api import WORKER, DGLJob
from controller.builders.meta import JOB_NAME_LABEL, REPLICA_TYPE_LABEL, _meta
from kubeclient import Obj


def _dgl_ports() -> list[Obj]:
    return [
        {
            "name": "dglserver" if k == 0 else f"dglserver-{k}",
            "containerPort": pc.DGL_PORT + k,
            "protocol": "TCP",
        }
        for k in range(pc.DGL_PORT_COUNT)
    ]


def worker_service_name(job: DGLJob) -> str:
    return f"{job.name}-worker"


def worker_service(job: DGLJob) -> Obj:
    """``<job>-worker``: one headless Service for all of the job's workers (not one per
    worker, as the original had: a job's objects, its EndpointSlices and its API requests no
    longer grow with its workers). With each worker's ``subdomain`` set to it, worker i is
    ``<job>-worker-i.<job>-worker`` in the cluster's DNS, ready or not."""
    name = worker_service_name(job)
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _meta(job, name, {REPLICA_TYPE_LABEL: WORKER}),
        "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": True,
            "selector": {JOB_NAME_LABEL: job.name, REPLICA_TYPE_LABEL: WORKER},
            "ports": [
                {"name": p["name"], "port": p["containerPort"], "protocol": "TCP"}
                for p in _dgl_ports()
            ],
        },
    }
