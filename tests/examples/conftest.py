"""Fixtures for the GraphSAGE example tests: the DGL interpreter, and data generated once per
session (a synthetic ogb dataset, its 2-part partition, the single-process baseline).

The example scripts need DGL, torch and ogb, which the project's own environment does not have:
the tests run them with the DGL interpreter (tests/support/dgl_python.py) as subprocesses.
Without one the tests are skipped, or fail when ``CI=true``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.examples.helpers import (
    BATCH,
    DATASET,
    EPOCHS,
    EXAMPLE,
    FEAT_DIM,
    NUM_CLASSES,
    NUM_NODES,
    SEED,
    Dgl,
    partition,
)
from tests.support.dgl_python import dgl_python_candidates, find_dgl_python
from tests.support.prerequisites import unavailable


@pytest.fixture(scope="session")
def dgl() -> Dgl:
    python = find_dgl_python()
    if python is None:
        tried = ", ".join(str(p) for p in dgl_python_candidates())
        msg = (
            "no DGL interpreter: set DGL_PYTHON to a python with dgl==2.1.0, torch and ogb "
            f"(see requirements-dgl.txt); tried {tried}"
        )
        unavailable(msg)
    return Dgl(python)


@pytest.fixture(scope="session")
def dataset_root(dgl: Dgl, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The synthetic dataset (20k nodes, 8 classes, 32 features, seed 0), written once."""
    root = tmp_path_factory.mktemp("raw_data")
    dgl.run(
        [
            EXAMPLE / "make_dataset.py",
            "--root",
            root,
            "--name",
            DATASET,
            "--num-nodes",
            NUM_NODES,
            "--avg-degree",
            10,
            "--num-classes",
            NUM_CLASSES,
            "--feat-dim",
            FEAT_DIM,
            "--seed",
            SEED,
        ]
    )
    return root


@pytest.fixture(scope="session")
def two_parts(dgl: Dgl, dataset_root: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A workspace with the dataset partitioned into 2 parts; returns workspace/dataset."""
    workspace = tmp_path_factory.mktemp("workspace2")
    partition(dgl, dataset_root, workspace, 2, "--balance_train", "--balance_edges")
    return workspace / "dataset"


@pytest.fixture(scope="session")
def single_sage(
    dgl: Dgl, dataset_root: Path, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Any]:
    """Metrics of the single-process GraphSAGE baseline (EPOCHS epochs, batch BATCH)."""
    out = tmp_path_factory.mktemp("single") / "metrics.json"
    dgl.run(
        [
            EXAMPLE / "train_single.py",
            "--dataset",
            DATASET,
            "--dataset_root",
            dataset_root,
            "--num_epochs",
            EPOCHS,
            "--batch_size",
            BATCH,
            "--seed",
            SEED,
            "--out",
            out,
        ]
    )
    metrics = json.loads(out.read_text())
    assert isinstance(metrics, dict)
    return metrics
