"""A new DGLJob from typed values, as a user writes one (the client's ``new_job``):

    job = new_job(
        "my-gnn",
        launcher=MainContainer(image="dgloperator/graphsage:v0.1.0", command=["dglrun"],
                               args=["--graph-name", "graphsage", ...]),
        workers=2,
        storage=StorageSpec(claim_name="my-results"),
        run_policy=RunPolicy(backoff_limit=2),
    )

The common fields are named and typed (the spec parts are :mod:`dgljob.model`'s); any other
``spec`` field passes through ``extra`` as the CRD spells it. The object is built, then
parsed by :func:`dgljob.parse.parse_job`: what comes back is the typed :class:`DGLJob` the
operator will read, and a field it would refuse is named here, before the API server.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from dgljob.model import (
    ChunkedGraphSpec,
    DGLJob,
    ElasticPolicy,
    OutOfCoreSpec,
    RunPolicy,
    StorageSpec,
)
from dgljob.modes import SKIP
from dgljob.names import API_VERSION, KIND, LAUNCHER, WORKER
from dgljob.parse import parse_job


def merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    """``extra`` over ``base``, recursively for dicts (a named field and its passed-through
    neighbours may share a parent)."""
    out = dict(base)
    for k, v in extra.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = merge(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out


@dataclass(frozen=True)
class MainContainer:
    """A pod's main container; ``extra``: any other container field (volumeMounts, ...)."""

    image: str
    name: str = "dgl"
    command: list[str] | None = None
    args: list[Any] | None = None  # (numbers become strings)
    env: dict[str, str] = field(default_factory=dict)
    resources: dict[str, Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "image": self.image}
        if self.command is not None:
            out["command"] = [str(a) for a in self.command]
        if self.args is not None:
            out["args"] = [str(a) for a in self.args]  # (the CRD wants strings: "2", not 2)
        if self.env:
            out["env"] = [{"name": k, "value": str(v)} for k, v in self.env.items()]
        if self.resources is not None:
            out["resources"] = copy.deepcopy(self.resources)
        return merge(out, self.extra)


def new_job(
    name: str,
    *,
    launcher: MainContainer,
    worker: MainContainer | None = None,
    workers: int = 1,
    namespace: str = "",
    partition_mode: str | None = None,
    storage: StorageSpec | None = None,
    run_policy: RunPolicy | None = None,
    chunked_graph: ChunkedGraphSpec | None = None,
    elastic_policy: ElasticPolicy | None = None,
    out_of_core: OutOfCoreSpec | None = None,
    labels: dict[str, str] | None = None,
    pod: dict[str, Any] | None = None,
    extra: dict[str, Any] | None = None,
) -> DGLJob:
    """The job: ``launcher``/``worker`` are the main container of each replica type (the
    worker's defaults to the launcher's image with no command; no workers in Skip mode);
    ``pod``: pod-spec fields both templates share (securityContext, nodeSelector, volumes,
    ...); ``extra``: any other ``spec`` field. Raises :class:`dgljob.parse.SpecError` naming
    the field the operator would refuse."""
    meta: dict[str, Any] = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    if labels:
        meta["labels"] = dict(labels)

    def replicas(count: int, c: MainContainer) -> dict[str, Any]:
        spec = merge({"containers": [c.to_dict()]}, pod or {})
        return {"replicas": count, "template": {"spec": spec}}

    spec: dict[str, Any] = {"dglReplicaSpecs": {LAUNCHER: replicas(1, launcher)}}
    if partition_mode:
        spec["partitionMode"] = partition_mode
    if partition_mode != SKIP:
        main = worker or MainContainer(image=launcher.image, name=launcher.name)
        spec["dglReplicaSpecs"][WORKER] = replicas(workers, main)
    parts = {
        "storage": storage,
        "runPolicy": run_policy,
        "chunkedGraph": chunked_graph,
        "elasticPolicy": elastic_policy,
        "outOfCore": out_of_core,
    }
    for key, part in parts.items():
        if part is not None:
            spec[key] = part.to_dict()
    spec = merge(spec, extra or {})
    return parse_job({"apiVersion": API_VERSION, "kind": KIND, "metadata": meta, "spec": spec})
