"""controller/children.py: the registry of child kinds, and what is derived from it."""

from __future__ import annotations

from typing import Any

import pytest

from controller.api import parse_job
from controller.builders import GANG_SCHEDULER_PLUGINS, JOB_NAME_LABEL, BuildOptions, desired
from controller.children import CHILDREN, ONCE_BY_KIND, Listers, active
from informers.lister import Lister
from informers.store import ThreadSafeStore
from tests.controller.harness import Harness

# built by the operator, never watched: created blind (see the registry's docstring)
UNWATCHED = {"Secret", "PersistentVolumeClaim"}
GANG = BuildOptions(gang_scheduling=GANG_SCHEDULER_PLUGINS)
SETTINGS = {"default": BuildOptions(), "gang": GANG}


@pytest.mark.parametrize("settings", sorted(SETTINGS))
def test_every_kind_the_builders_make_is_registered(
    seed_job_raw: dict[str, Any], settings: str
) -> None:
    seed_job_raw["spec"]["storage"] = {"claimTemplate": {"spec": {"accessModes": ["X"]}}}
    options = SETTINGS[settings]
    want = desired(parse_job(seed_job_raw), options)
    built = [
        *([want.claim] if want.claim else []),
        *([want.config_map] if want.config_map else []),
        *want.rbac,
        *want.transfer,
        *([want.pod_group] if want.pod_group else []),
        *want.services,
        *want.workers,
        *([want.partitioner] if want.partitioner else []),
        want.launcher,
    ]
    kinds = {o["kind"] for o in built}
    registered = {c.resource.kind for c in active(options)}
    assert kinds - UNWATCHED == registered
    # what is created once and left alone: the PodGroup, the RBAC objects and the transfer's
    # NetworkPolicy
    once = {o["kind"] for o in want.once} - UNWATCHED
    assert {k for k in ONCE_BY_KIND if k in registered} == once
    assert all(ONCE_BY_KIND[kind].kind == kind for kind in ONCE_BY_KIND)


def test_the_podgroup_is_in_use_only_with_gang_scheduling() -> None:
    assert "PodGroup" not in {c.resource.kind for c in active(BuildOptions())}
    assert "PodGroup" in {c.resource.kind for c in active(GANG)}
    assert set(CHILDREN) == set(active(GANG))  # every entry is in use with some settings


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
