"""The seed DGLJob and its expected children (fixtures/*.yaml), and jobs made from them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from controller.api import DGLJOBS
from kubeclient import RestClient

FIXTURES = Path(__file__).parent / "fixtures"


def load_fixture(name: str) -> dict[str, Any]:
    data = yaml.safe_load((FIXTURES / name).read_text())
    assert isinstance(data, dict)
    return data


def make_job(api: RestClient, ns: str, name: str, workers: int = 4) -> None:
    """The seed DGLJob with ``workers`` workers, created as ``ns/name``."""
    raw = load_fixture("seed_dgljob.yaml")
    raw["metadata"].update(name=name, namespace=ns)
    raw["spec"]["dglReplicaSpecs"]["Worker"]["replicas"] = workers
    api.create(DGLJOBS, ns, raw)
