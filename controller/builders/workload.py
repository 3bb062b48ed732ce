"""A queued job's Workload (``--kueue``, controller/features/kueue.py): the podSets Kueue
counts quota for and admits, made from the pods the operator would make (``desired()``), and
the hash of what of them Kueue sees. Made once: its podSets are immutable."""

from __future__ import annotations

import dataclasses
import hashlib
import json

from controller.api import DGLJob
from controller.builders import JOB_NAME_LABEL, BuildOptions, owner_reference
from controller.builders.desired import desired
from controller.features import registry
from controller.features.kueue import (
    JOB_UID_LABEL,
    POD_SETS_HASH_ANNOTATION,
    queue_name,
)
from kubeclient import WORKLOADS, Obj


def workload_name(job: DGLJob, sets_hash: str) -> str:
    """``dgljob-<name>-<5 hex of the uid>-<5 hex of the podSets' hash>``, at most 253
    characters: one per job object (as Kueue names the Workloads of the kinds it knows), and a
    new name when the job's pod templates change. A replacement must not reuse the name of the
    Workload it replaces: Kueue 0.17's scheduler skips a Workload whose name it still holds as
    admitted in its cache ("already accounted in cache"), and one created within milliseconds
    of the old one's deletion was never admitted (tests/apiserver/test_kueue.py saw it)."""
    digest = hashlib.sha256(job.uid.encode()).hexdigest()[:5]
    return f"dgljob-{job.name[: 253 - 19]}-{digest}-{sets_hash[:5]}"


def _template(pod: Obj) -> Obj:
    meta = pod["metadata"]
    return {
        "metadata": {
            "labels": dict(meta.get("labels") or {}),
            "annotations": dict(meta.get("annotations") or {}),
        },
        "spec": pod["spec"],
    }


def pod_sets(job: DGLJob, opts: BuildOptions) -> list[Obj]:
    """The job's pods as Kueue's podSets: the first attempt's pods, as the operator makes
    them (the job's own podSet info only: no placement)."""
    want = desired(dataclasses.replace(job, spec=dataclasses.replace(job.spec, placement={})), opts)
    sets: list[Obj] = []
    if want.partitioner is not None:
        sets.append({"name": "partitioner", "count": 1, "template": _template(want.partitioner)})
    if want.workers:
        template = _template(want.workers[0])
        sets.append({"name": "worker", "count": job.spec.workers, "template": template})
    sets.append({"name": "launcher", "count": 1, "template": _template(want.launcher)})
    return registry.mutate_pod_sets(job, sets)  # (the features' changes, e.g. a minCount)


def pod_sets_hash(sets: list[Obj]) -> str:
    """What Kueue's quota and placement see of podSets: each one's count and minCount, and
    its pods' containers' resources, node selector, tolerations, affinity and priority class
    (not what the operator adds that counts for nothing there, so an upgraded operator
    changes no job's hash). A short SHA-256."""
    seen = []
    for ps in sets:
        spec = ps["template"]["spec"]
        containers = [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]
        seen.append(
            {
                "name": ps["name"],
                "count": ps["count"],
                "minCount": ps.get("minCount"),
                "resources": [[c.get("name"), c.get("resources")] for c in containers],
                **{k: spec.get(k) for k in PLACEMENT_FIELDS},
            }
        )
    return hashlib.sha256(json.dumps(seen, sort_keys=True).encode()).hexdigest()[:16]


PLACEMENT_FIELDS = ("nodeSelector", "tolerations", "affinity", "priorityClassName")


def workload(
    job: DGLJob, opts: BuildOptions, priority: int | None = None, queue: str | None = None
) -> Obj:
    """The Workload of a job queued in ``queue`` (None: its label's; ``priority``: the value
    of the job's priority class), with the hash of the podSets it was made of."""
    queue = queue or queue_name(job.raw)
    assert queue is not None, "only a queued job has a Workload"
    sets = pod_sets(job, opts)
    sets_hash = pod_sets_hash(sets)
    spec: Obj = {"queueName": queue, "podSets": sets, "active": True}
    priority_class = job.spec.run_policy.scheduling_policy.priority_class
    if priority_class:
        spec["priorityClassRef"] = {
            "group": "scheduling.k8s.io",
            "kind": "PriorityClass",
            "name": priority_class,
        }
    if priority is not None:
        spec["priority"] = priority
    return {
        "apiVersion": WORKLOADS.api_version,
        "kind": WORKLOADS.kind,
        "metadata": {
            "name": workload_name(job, sets_hash),
            "namespace": job.namespace,
            "labels": {JOB_NAME_LABEL: job.name, JOB_UID_LABEL: job.uid},
            "annotations": {POD_SETS_HASH_ANNOTATION: sets_hash},
            "ownerReferences": [owner_reference(job)],
        },
        "spec": spec,
    }
