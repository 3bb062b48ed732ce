"""A DGLJob as typed Python: dataclasses mirroring the CRD (``qihoo.net/v1alpha1``), the
common fields named, anything else passed through ``extra`` as the CRD spells it; and
:func:`manifest`, which turns what :meth:`DGLJobClient.create` accepts (a YAML path, a dict, a
:class:`DGLJob`) into the one JSON object the API server takes.

    job = DGLJob(
        name="my-gnn",
        launcher=Container(image="dgloperator/graphsage:v0.1.0", command=["dglrun"],
                           args=["--graph-name", "graphsage", ...]),
        worker=Container(image="dgloperator/graphsage:v0.1.0"),
        workers=2,
        storage=Storage(claim_name="my-results"),
        run_policy=RunPolicy(backoff_limit=2),
    )

Nothing is validated here but the shape: the API server checks the rest (the CRD's schema and
rules, ``fieldValidation=Strict``), so its errors are the same whichever way a job arrives.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dgl_operator.client.errors import ManifestError

GROUP = "qihoo.net"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
KIND = "DGLJob"


def _merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    """``extra`` over ``base``, recursively for dicts (a named field and its passed-through
    neighbours may share a parent)."""
    out = dict(base)
    for k, v in extra.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = _merge(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out


@dataclass
class Container:
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
        return _merge(out, self.extra)


@dataclass
class Storage:
    """``spec.storage``: exactly one of ``claim_name`` and ``claim_template``."""

    claim_name: str | None = None
    claim_template: dict[str, Any] | None = None
    path: str | None = None
    share_partitions: bool | None = None
    claim_policy: str | None = None  # Retain | Delete (claimTemplate only)

    def to_dict(self) -> dict[str, Any]:
        pairs = {
            "claimName": self.claim_name,
            "claimTemplate": copy.deepcopy(self.claim_template),
            "path": self.path,
            "sharePartitions": self.share_partitions,
            "claimPolicy": self.claim_policy,
        }
        return {k: v for k, v in pairs.items() if v is not None}


@dataclass
class RunPolicy:
    """``spec.runPolicy``; ``extra``: schedulingPolicy and anything else."""

    backoff_limit: int | None = None
    active_deadline_seconds: int | None = None
    ttl_seconds_after_finished: int | None = None
    suspend: bool | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        pairs = {
            "backoffLimit": self.backoff_limit,
            "activeDeadlineSeconds": self.active_deadline_seconds,
            "ttlSecondsAfterFinished": self.ttl_seconds_after_finished,
            "suspend": self.suspend,
        }
        return _merge({k: v for k, v in pairs.items() if v is not None}, self.extra)


@dataclass
class DGLJob:
    """A DGLJob. ``launcher``/``worker``: the main container of each replica type (the worker's
    defaults to the launcher's image with no command); ``pod``: pod-spec fields both templates
    share (securityContext, nodeSelector, volumes, ...); ``extra``: any other ``spec`` field
    (chunkedGraph, elasticPolicy, ...), as the CRD spells it."""

    name: str
    launcher: Container
    worker: Container | None = None
    workers: int = 1
    namespace: str | None = None
    partition_mode: str | None = None  # DGL-API (default) | ParMETIS | DistParMETIS | Skip
    storage: Storage | None = None
    run_policy: RunPolicy | None = None
    labels: dict[str, str] = field(default_factory=dict)
    pod: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        meta: dict[str, Any] = {"name": self.name}
        if self.namespace:
            meta["namespace"] = self.namespace
        if self.labels:
            meta["labels"] = dict(self.labels)

        def template(c: Container) -> dict[str, Any]:
            return {"template": {"spec": _merge({"containers": [c.to_dict()]}, self.pod)}}

        spec: dict[str, Any] = {
            "dglReplicaSpecs": {"Launcher": {"replicas": 1, **template(self.launcher)}}
        }
        if self.partition_mode:
            spec["partitionMode"] = self.partition_mode
        if self.partition_mode != "Skip":
            worker = self.worker or Container(image=self.launcher.image, name=self.launcher.name)
            spec["dglReplicaSpecs"]["Worker"] = {"replicas": self.workers, **template(worker)}
        if self.storage is not None:
            spec["storage"] = self.storage.to_dict()
        if self.run_policy is not None:
            spec["runPolicy"] = self.run_policy.to_dict()
        spec = _merge(spec, self.extra)
        return {"apiVersion": API_VERSION, "kind": KIND, "metadata": meta, "spec": spec}


def load_file(path: Path) -> dict[str, Any]:
    """The one DGLJob in a YAML file (other documents, e.g. a Namespace, are an error: this
    client makes DGLJobs only)."""
    import yaml

    try:
        text = path.read_text()
    except OSError as e:
        raise ManifestError(f"{path}: cannot read the manifest: {e.strerror or e}") from e
    try:
        docs = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        raise ManifestError(f"{path}: not valid YAML{where}: {getattr(e, 'problem', e)}") from e
    jobs = [d for d in docs if isinstance(d, dict) and d.get("kind") == KIND]
    others = [
        d.get("kind") if isinstance(d, dict) else type(d).__name__ for d in docs if d not in jobs
    ]
    if len(jobs) != 1 or others:
        found = ", ".join(str(k) for k in others) or "no document"
        raise ManifestError(
            f"{path}: expected exactly one {KIND} document, found {len(jobs)}"
            + (f" and {found}" if others else "")
        )
    return jobs[0]


def manifest(job: str | Path | dict[str, Any] | DGLJob) -> dict[str, Any]:
    """The DGLJob object for ``job``: loaded from a YAML path, copied from a dict, or built
    from a :class:`DGLJob`. Checks only what the client needs: kind, apiVersion, a name."""
    if isinstance(job, DGLJob):
        obj, source = job.to_dict(), f"DGLJob {job.name!r}"
    elif isinstance(job, (str, Path)):
        obj, source = load_file(Path(job)), str(job)
    elif isinstance(job, dict):
        obj, source = copy.deepcopy(job), "the job"
    else:
        raise ManifestError(
            f"create() takes a YAML path, a dict or a DGLJob, not {type(job).__name__}"
        )
    obj.setdefault("apiVersion", API_VERSION)
    obj.setdefault("kind", KIND)
    if obj["kind"] != KIND:
        raise ManifestError(f"{source}: kind is {obj['kind']!r}, not {KIND}")
    if obj["apiVersion"] != API_VERSION:
        raise ManifestError(f"{source}: apiVersion is {obj['apiVersion']!r}, not {API_VERSION}")
    meta = obj.get("metadata")
    if not isinstance(meta, dict) or not meta.get("name"):
        raise ManifestError(f"{source}: metadata.name is required")
    return obj
