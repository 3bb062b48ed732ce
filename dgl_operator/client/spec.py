"""What :meth:`DGLJobClient.create` accepts, made the one JSON object the API server takes
(:func:`manifest`): a YAML path, a dict, or a typed :class:`dgljob.model.DGLJob` (e.g. from
:func:`dgljob.build.new_job`); and the raw objects the server returns, made typed
(:func:`typed`).

Nothing of a YAML path or a dict is validated here but the shape: the API server checks the
rest (the CRD's schema and rules, ``fieldValidation=Strict``), so its errors are the same
whichever way a job arrives. What only the operator's parser refuses (a quantity's suffix,
fields that exclude each other) :meth:`DGLJobClient.create` names as :class:`InvalidJob`
before anything is stored. A typed job was checked by the operator's own parser when it was
built.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from dgl_operator.client.errors import InvalidJob, ManifestError
from dgljob.model import DGLJob
from dgljob.names import API_VERSION, KIND
from dgljob.parse import SpecError, parse_job


def typed(obj: dict[str, Any]) -> DGLJob:
    """The typed job of a raw object the API server returned (``.raw`` is that object);
    :class:`InvalidJob` for one stored before its spec's rules applied."""
    try:
        return parse_job(obj)
    except SpecError as e:
        raise InvalidJob(obj, e) from e


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
        obj, source = copy.deepcopy(job.raw), f"DGLJob {job.name!r}"
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
