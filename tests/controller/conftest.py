from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from controller.api import DGLJob, parse_job

FIXTURES = Path(__file__).parent / "fixtures"
REPO = Path(__file__).resolve().parents[2]
CRD_PATH = REPO / "charts" / "dgl-operator" / "crds" / "qihoo.net_dgljobs.yaml"


def load_fixture(name: str) -> dict[str, Any]:
    data = yaml.safe_load((FIXTURES / name).read_text())
    assert isinstance(data, dict)
    return data


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
