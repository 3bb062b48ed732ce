"""Fixtures for the GraphSAGE example tests: the DGL interpreter, and data generated once per
session (a synthetic ogb dataset, its 2-part partition, the single-process baseline).

The example scripts need DGL, torch and ogb, which the project's own environment does not have:
the tests run them with the DGL interpreter as subprocesses. It is ``$DGL_PYTHON``, else the
cached DGL virtualenv (~/.cache/dgl-operator/venv-dgl-<sha256(requirements-dgl.txt)[:12]>).
Without one the tests are skipped, or fail when ``CI=true``.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "graphsage"
CHECKS = Path(__file__).with_name("dgl_checks.py")
DGL_VENV_BASE = Path(os.environ.get("DGL_OPERATOR_CACHE", Path.home() / ".cache" / "dgl-operator"))
KNOWN_DGL_PYTHON = DGL_VENV_BASE / "venv-dgl-8c11b4e92900" / "bin" / "python"

DATASET = "ogbn-synth"
GRAPH = "synth"
NUM_NODES = 20000
NUM_CLASSES = 8
FEAT_DIM = 32
EPOCHS = 2
BATCH = 256
SEED = 0


def dgl_python_candidates() -> list[Path]:
    out = []
    if os.environ.get("DGL_PYTHON"):
        out.append(Path(os.environ["DGL_PYTHON"]))
    req = REPO / "requirements-dgl.txt"
    if req.is_file():
        key = hashlib.sha256(req.read_bytes()).hexdigest()[:12]
        out.append(DGL_VENV_BASE / f"venv-dgl-{key}" / "bin" / "python")
    out.append(KNOWN_DGL_PYTHON)
    return list(dict.fromkeys(out))  # without duplicates, in order


def find_dgl_python() -> str | None:
    for cand in dgl_python_candidates():
        if cand.is_file() and os.access(cand, os.X_OK):
            return str(cand)
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def clean_env(**extra: str) -> dict[str, str]:
    """This environment without DGL/torch-distributed settings that could leak in, plus what
    every DGL process needs."""
    drop = ("DGL_", "MASTER_", "GLOO_")
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(drop) and k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")
    }
    env.update(OUTDATED_IGNORE="1", DGLBACKEND="pytorch", PYTHONUNBUFFERED="1")
    env.pop("DGLRUN_OUTPUT_DIR", None)
    env.update(extra)
    return env


@dataclass(frozen=True)
class Dgl:
    """Runs scripts with the DGL interpreter."""

    python: str

    def run(
        self,
        argv: Sequence[str | os.PathLike[str]],
        *,
        cwd: Path | None = None,
        timeout: float = 120,
        check: bool = True,
        env: dict[str, str] | None = None,
    ) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(
            [self.python, *map(str, argv)],
            cwd=cwd,
            env=env or clean_env(),
            stdin=subprocess.DEVNULL,  # an input() prompt (ogb) fails instead of hanging
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if check and proc.returncode != 0:
            raise AssertionError(
                f"{' '.join(map(str, argv))} exited with {proc.returncode}\n"
                f"--- stdout ---\n{proc.stdout[-4000:]}\n--- stderr ---\n{proc.stderr[-4000:]}"
            )
        return proc

    def check(self, *args: str | os.PathLike[str]) -> dict[str, Any]:
        """Run dgl_checks.py and return its JSON result."""
        out = self.run([CHECKS, *args]).stdout.strip().splitlines()
        result = json.loads(out[-1])
        assert isinstance(result, dict)
        return result


@pytest.fixture(scope="session")
def dgl() -> Dgl:
    python = find_dgl_python()
    if python is None:
        tried = ", ".join(str(p) for p in dgl_python_candidates())
        msg = (
            "no DGL interpreter: set DGL_PYTHON to a python with dgl==2.1.0, torch and ogb "
            f"(see requirements-dgl.txt); tried {tried}"
        )
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(msg)
        pytest.skip(msg)
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


def partition(
    dgl: Dgl, dataset_root: Path, workspace: Path, parts: int, *extra: str
) -> subprocess.CompletedProcess[str]:
    return dgl.run(
        [
            EXAMPLE / "load_and_partition_graph.py",
            "--graph_name",
            GRAPH,
            "--workspace",
            workspace,
            "--rel_data_path",
            "dataset",
            "--num_parts",
            parts,
            "--dataset",
            DATASET,
            "--dataset_root",
            dataset_root,
            *extra,
        ]
    )


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
