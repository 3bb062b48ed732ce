"""Fixtures of the controller's tests: the seed DGLJob (tests/support/fixtures), raw and parsed,
and ``h``: a started :class:`Harness` (the operator over the in-memory API), closed after."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest

from controller.api import DGLJob, parse_job
from tests.controller.harness import Harness
from tests.support.dgljobs import load_fixture


@pytest.fixture
def seed_job_raw() -> dict[str, Any]:
    raw = load_fixture("seed_dgljob.yaml")
    raw["metadata"]["uid"] = "uid-1234"
    raw["metadata"]["generation"] = 1
    return raw


@pytest.fixture
def seed_job(seed_job_raw: dict[str, Any]) -> DGLJob:
    return parse_job(seed_job_raw)


def job_with(raw: dict[str, Any], **spec_changes: Any) -> dict[str, Any]:
    out = copy.deepcopy(raw)
    out["spec"].update(spec_changes)
    return out


@pytest.fixture
def h() -> Iterator[Harness]:
    harness = Harness().start()
    yield harness
    harness.close()
