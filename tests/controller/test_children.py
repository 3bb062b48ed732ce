"""controller/children.py: the registry of child kinds, and what is derived from it."""

from __future__ import annotations

from typing import Any

import pytest

from controller.api import parse_job
from controller.builders import GANG_SCHEDULER_PLUGINS, JOB_NAME_LABEL, BuildOptions
from controller.builders import workload as workloads
from controller.builders.desired import desired
from controller.children import CHILDREN, ONCE_BY_KIND, Listers, active
from controller.features import kueue
from controller.machinery.slim import CHILD_METADATA, slim_metadata
from informers.lister import Lister
from informers.store import ThreadSafeStore
from tests.controller.harness import NS, PART, W0, W1, Harness, poke
from tests.support.waiting import wait_for

# built by the operator, never watched: created blind (see the registry's docstring)
UNWATCHED = {"Secret", "PersistentVolumeClaim"}
GANG = BuildOptions(gang_scheduling=GANG_SCHEDULER_PLUGINS)
KUEUE = BuildOptions(kueue=True)
EVERYTHING = BuildOptions(gang_scheduling=GANG_SCHEDULER_PLUGINS, kueue=True)
OPEN = BuildOptions(network_policy=False)
SETTINGS = {"default": BuildOptions(), "gang": GANG, "kueue": KUEUE, "no-network-policy": OPEN}
RECONCILES = "controller_runtime_reconcile_total"


@pytest.mark.parametrize("settings", sorted(SETTINGS))
def test_every_kind_the_builders_make_is_registered(
    seed_job_raw: dict[str, Any], settings: str
) -> None:
    seed_job_raw["spec"]["storage"] = {"claimTemplate": {"spec": {"accessModes": ["X"]}}}
    seed_job_raw["metadata"]["labels"] = {kueue.QUEUE_LABEL: "lq"}
    options = SETTINGS[settings]
    job = parse_job(seed_job_raw)
    want = desired(job, options)
    # --kueue: a queued job's Workload too (controller/features/kueue.py), created once
    queue = [workloads.workload(job, options)] if options.kueue else []
    built = [
        *([want.claim] if want.claim else []),
        *([want.config_map] if want.config_map else []),
        *want.rbac,
        *want.transfer,
        *want.network,
        *([want.pod_group] if want.pod_group else []),
        *want.services,
        *want.workers,
        *([want.partitioner] if want.partitioner else []),
        want.launcher,
        *queue,
    ]
    kinds = {o["kind"] for o in built}
    registered = {c.resource.kind for c in active(options)}
    assert kinds - UNWATCHED == registered
    # what is created once and left alone: the PodGroup, the RBAC objects and the
    # NetworkPolicy
    once = {o["kind"] for o in [*want.once, *queue]} - UNWATCHED
    assert {k for k in ONCE_BY_KIND if k in registered} == once
    assert all(ONCE_BY_KIND[kind].kind == kind for kind in ONCE_BY_KIND)


def test_the_podgroup_and_the_workload_are_in_use_only_with_their_settings() -> None:
    assert "PodGroup" not in {c.resource.kind for c in active(BuildOptions())}
    assert "PodGroup" in {c.resource.kind for c in active(GANG)}
    assert "Workload" not in {c.resource.kind for c in active(GANG)}
    assert "Workload" in {c.resource.kind for c in active(KUEUE)}
    assert "NetworkPolicy" in {c.resource.kind for c in active(BuildOptions())}
    assert "NetworkPolicy" not in {c.resource.kind for c in active(OPEN)}
    assert set(CHILDREN) == set(active(EVERYTHING))  # every entry is in use with some settings


@pytest.mark.parametrize("settings", sorted(SETTINGS))
def test_the_controller_watches_each_kind_in_use_by_its_selector(settings: str) -> None:
    h = Harness(options=SETTINGS[settings])
    try:
        informers = h.ctrl.child_informers
        kinds = active(SETTINGS[settings])
        assert list(informers) == [c.resource for c in kinds]
        for child in kinds:
            assert child.label_selector == JOB_NAME_LABEL
            assert informers[child.resource] is h.factory.informer_for(
                child.resource, label_selector=child.label_selector
            )
            assert h.ctrl.listers[child.resource].store is informers[child.resource].store
    finally:
        h.close()


def test_the_caches_keep_what_each_entry_transforms_to(seed_job_raw: dict[str, Any]) -> None:
    """The kinds created once, and the workers' Service, are cached as metadata only (a
    Role's rules, a Service's ports: never read); the ConfigMap whole (its data is
    compared); pods slim. The job's children are still all there, and created once."""
    h = Harness(options=GANG).start()
    try:
        h.create_job(seed_job_raw)
        h.wait_pods(W0, W1, PART)
        h.settle()  # (the API has the pods: the caches get them a moment later)
        for child in active(GANG):
            cached = h.ctrl.child_informers[child.resource].store.list()
            assert cached, f"nothing cached of {child.resource}"
            for obj in cached:
                name = obj["metadata"]["name"]
                stored = h.kube.get(child.resource, NS, name)
                if child.transform is slim_metadata:
                    assert set(obj) == {"apiVersion", "kind", "metadata"}, name
                    assert set(obj["metadata"]) <= set(CHILD_METADATA), name
                    assert (
                        obj["metadata"]["ownerReferences"] == stored["metadata"]["ownerReferences"]
                    )
                elif child.transform is None:
                    assert obj == stored, name
                else:
                    assert obj == child.transform(stored), name
        once = {c.resource.kind for c in active(GANG) if c.once}
        assert {c.resource.kind for c in active(GANG) if c.transform is slim_metadata} == {
            *once,
            "Service",
        }
        h.settle()
        syncs = h.sample(RECONCILES, controller="dgljob", result="success")
        h.kube.clear_actions()
        poke(h)  # synced again: it finds every child in the slim caches and creates nothing
        wait_for(
            lambda: h.sample(RECONCILES, controller="dgljob", result="success") > syncs,
            what="another sync",
        )
        h.settle()
        created = [(a.resource, a.name) for a in h.kube.writes() if a.verb == "create"]
        assert created == []
    finally:
        h.close()


def test_slim_metadata_keeps_the_metadata_the_sync_reads() -> None:
    role: dict[str, Any] = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {"name": "j-launcher", "namespace": NS, "uid": "u", "resourceVersion": "7",
                     "labels": {JOB_NAME_LABEL: "j"}, "ownerReferences": [{"uid": "o"}],
                     "managedFields": [{"manager": "x"}], "annotations": {"a": "b"}},
        "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}],
    }  # fmt: skip
    slim = slim_metadata(role)
    assert slim == {
        "apiVersion": role["apiVersion"],
        "kind": "Role",
        "metadata": {k: role["metadata"][k] for k in
                     ("name", "namespace", "uid", "resourceVersion", "labels", "ownerReferences")},
    }  # fmt: skip


def test_listers_need_one_lister_per_registered_kind() -> None:
    def lister() -> Lister:
        return Lister(ThreadSafeStore())

    complete = {c.resource: lister() for c in CHILDREN}
    Listers(lister(), complete)
    missing = dict(complete)
    del missing[CHILDREN[-1].resource]
    with pytest.raises(ValueError, match=str(CHILDREN[-1].resource)):
        Listers(lister(), missing)
    # the PodGroup's lister only with gang scheduling
    without = {c.resource: lister() for c in active(BuildOptions())}
    Listers(lister(), without)
    with pytest.raises(ValueError, match=r"podgroups\.scheduling\.x-k8s\.io"):
        Listers(lister(), without, GANG)
