"""controller/features/registry.py: every feature reaches the builders and the steps through its
entry, and a new feature is one more entry (its children made, its pods changed, its view of
the attempt taken, its attempts counted, its end of an attempt done)."""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass, field, replace
from typing import Any

import pytest

import controller.features
from controller.api import DGLJob, parse_job
from controller.builders import BuildOptions
from controller.builders.desired import desired
from controller.builders.workload import pod_sets
from controller.children import CHILDREN
from controller.features import registry
from kubeclient import CONFIGMAPS, NETWORKPOLICIES, PODGROUPS, WORKLOADS, Obj

INTERFACES = (
    registry.ChildKinds,
    registry.ChildrenBuilder,
    registry.PodMutator,
    registry.PodSetsMutator,
    registry.AttemptView,
    registry.AttemptCounter,
    registry.AttemptEnd,
    registry.TrainingStart,
    registry.JobEnv,
    registry.DeliveryEnv,
)


def test_each_feature_module_has_one_entry_that_implements_an_interface() -> None:
    names = {m.name for m in pkgutil.iter_modules(controller.features.__path__)}
    modules = names - {"registry"}
    entries = {type(f).__module__.rsplit(".", 1)[-1]: f for f in registry.FEATURES}
    assert len(entries) == len(registry.FEATURES)  # (one entry per module)
    assert set(entries) == modules
    for module, entry in entries.items():
        assert any(isinstance(entry, i) for i in INTERFACES), f"{module}: implements nothing"
        assert getattr(importlib.import_module(f"controller.features.{module}"), module.upper())


def test_the_features_kinds_are_watched_after_the_jobs_own() -> None:
    kinds = [c.resource for c in CHILDREN]
    assert kinds.index(CONFIGMAPS) < kinds.index(PODGROUPS)
    assert kinds[-3:] == [PODGROUPS, WORKLOADS, NETWORKPOLICIES]


@dataclass
class Tagged:
    """A feature that is not there: a ConfigMap of its own, a label on every pod, a key on
    every podSet, a view of the attempt, one more attempt counted, a key of the status
    forgotten when one ends, a variable of the job's and one of the delivery's in dglrun's
    env."""

    name: str = "tagged"
    before_rbac: bool = False
    views: list[int] = field(default_factory=list)

    def children(self, job: DGLJob, opts: BuildOptions, token: str) -> list[Obj]:
        meta = {"name": f"{job.name}-tag", "namespace": job.namespace}
        return [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta}]

    def mutate_pod(self, job: DGLJob, opts: BuildOptions, pod: Obj) -> Obj:
        pod["metadata"]["labels"]["tagged"] = "yes"
        return pod

    def mutate_pod_sets(self, job: DGLJob, sets: list[Obj]) -> list[Obj]:
        return [{**ps, "tagged": True} for ps in sets]

    def for_attempt(self, job: DGLJob, status: Obj, pods: Any) -> DGLJob:
        self.views.append(len(list(pods)))
        return replace(job, transfer_secret="seen")

    def attempts(self, status: Obj) -> int:
        return int(status.get("tagged") or 0)

    def attempt_over(self, status: Obj) -> None:
        status.pop("tagged", None)

    def job_env(self, job: DGLJob, role: str) -> tuple[tuple[str, str], ...]:
        return (("TAGGED_JOB", role),)

    def delivery_env(self, job: DGLJob, role: str) -> tuple[tuple[str, str], ...]:
        return (("TAGGED_DELIVERY", role),)


def test_a_new_feature_is_one_more_entry(
    seed_job_raw: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    job = parse_job(seed_job_raw)
    before = desired(job, BuildOptions(network_policy=False), token="t")
    tagged = Tagged()
    monkeypatch.setattr(registry, "FEATURES", (*registry.FEATURES, tagged))
    want = desired(job, BuildOptions(network_policy=False), token="t")
    assert want.once == [*before.once, *tagged.children(job, BuildOptions(), "")]
    pods = [*want.workers, want.partitioner, want.launcher]
    assert all(p is not None and p["metadata"]["labels"]["tagged"] == "yes" for p in pods)
    sets = pod_sets(job, BuildOptions(network_policy=False))
    assert [ps["name"] for ps in sets] == ["partitioner", "worker", "launcher"]
    assert all(ps["tagged"] is True for ps in sets)
    status = {"restartCount": 1, "tagged": 2}
    assert registry.attempt(status) == 3
    assert registry.for_attempt(job, status, iter([{}, {}])).transfer_secret == "seen"
    assert tagged.views == [2]
    registry.attempt_over(status)
    assert status == {"restartCount": 1}
    for pod, role in ((want.partitioner, "Partitioner"), (want.launcher, "Launcher")):
        assert pod is not None
        env = [(e["name"], e.get("value")) for e in pod["spec"]["containers"][0]["env"]]
        names = [n for n, _ in env]
        # the job's before the delivery's, the delivery's after the transfer's (last here)
        assert ("TAGGED_JOB", role) in env and env[-1] == ("TAGGED_DELIVERY", role)
        assert names.index("TAGGED_JOB") < names.index("DGL_OPERATOR_PARTITION_TRANSFER")
    assert all("TAGGED_JOB" not in str(w) for w in want.workers)
