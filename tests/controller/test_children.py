"""controller/children.py: the registry of child kinds, and what is derived from it."""

from __future__ import annotations

from typing import Any

import pytest

from controller.api import parse_job
from controller.builders import JOB_NAME_LABEL, BuildOptions, desired
from controller.children import CHILDREN, ONCE_BY_KIND, Listers
from informers.lister import Lister
from informers.store import ThreadSafeStore
from tests.controller.harness import Harness

# built by the operator, never watched: created blind (see the registry's docstring)
UNWATCHED = {"Secret", "PersistentVolumeClaim"}


def test_every_kind_the_builders_make_is_registered(seed_job_raw: dict[str, Any]) -> None:
    seed_job_raw["spec"]["storage"] = {"claimTemplate": {"spec": {"accessModes": ["X"]}}}
    want = desired(parse_job(seed_job_raw), BuildOptions())
    built = [
        *([want.claim] if want.claim else []),
        *([want.config_map] if want.config_map else []),
        *want.rbac,
        *want.transfer,
        *want.services,
        *want.workers,
        *([want.partitioner] if want.partitioner else []),
        want.launcher,
    ]
    kinds = {o["kind"] for o in built}
    registered = {c.resource.kind for c in CHILDREN}
    assert kinds - UNWATCHED == registered
    # what is created once and left alone: the RBAC objects and the transfer's NetworkPolicy
    once = {o["kind"] for o in [*want.rbac, *want.transfer]} - UNWATCHED
    assert set(ONCE_BY_KIND) == once
    assert all(ONCE_BY_KIND[kind].kind == kind for kind in ONCE_BY_KIND)


def test_the_controller_watches_each_registered_kind_by_its_selector() -> None:
    h = Harness()
    try:
        informers = h.ctrl.child_informers
        assert list(informers) == [c.resource for c in CHILDREN]
        for child in CHILDREN:
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
