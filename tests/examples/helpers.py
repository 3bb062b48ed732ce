"""What the GraphSAGE example tests share: the synthetic dataset's parameters, a clean
environment for DGL processes, and :class:`Dgl`, which runs scripts with the DGL interpreter
(tests/support/dgl_python.py) as subprocesses."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeAlias

from tests.support.paths import REPO

# One command-line argument of a script run by Dgl.run: str() gives its text.
Arg: TypeAlias = str | int | os.PathLike[str]

EXAMPLE = REPO / "examples" / "graphsage"
CHECKS = Path(__file__).with_name("dgl_checks.py")

DATASET = "ogbn-synth"
GRAPH = "synth"
NUM_NODES = 20000
NUM_CLASSES = 8
FEAT_DIM = 32
EPOCHS = 2
BATCH = 256
SEED = 0


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
        argv: Sequence[Arg],
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

    def check(self, *args: Arg) -> dict[str, Any]:
        """Run dgl_checks.py and return its JSON result."""
        out = self.run([CHECKS, *args]).stdout.strip().splitlines()
        result = json.loads(out[-1])
        assert isinstance(result, dict)
        return result


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


# dglrun with the local transport (2 worker "pods", network + mount namespaces; root) on the
# example's scripts and the synthetic dataset; a later --train-entry-point in ``extra`` wins
DGLRUN_GRAPH = "graphsage"


def dglrun_argv(dgl: Dgl, workspace: Path, dataset_root: Path, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "launcher.cli",
        "-g",
        DGLRUN_GRAPH,
        "--num-partitions",
        "2",
        "--balance-train",
        "--balance-edges",
        "--partition-entry-point",
        str(EXAMPLE / "load_and_partition_graph.py"),
        "--partition-args",
        f"--dataset {DATASET} --dataset_root {dataset_root}",
        "--train-entry-point",
        str(EXAMPLE / "train_dist.py"),
        "--num-epochs",
        "2",
        "--batch-size",
        "128",
        "--transport",
        "local",
        "--workspace",
        str(workspace),
        "--python",
        dgl.python,
        *extra,
    ]


def dglrun(
    dgl: Dgl,
    workspace: Path,
    dataset_root: Path,
    *extra: str,
    env: dict[str, str] | None = None,
    timeout: float = 300,
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        dglrun_argv(dgl, workspace, dataset_root, *extra),
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=REPO,
        env={**clean_env(PYTHONPATH=str(REPO)), **(env or {})},
    )
