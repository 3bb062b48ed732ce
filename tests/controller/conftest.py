"""Fixtures of the controller's tests: the seed DGLJob (tests/support/fixtures), raw and parsed."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from controller.api import DGLJob, parse_job
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
