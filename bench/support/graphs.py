"""The benchmarks' synthetic graphs (examples/graphsage/make_dataset.py, then chunked by
``distpart.convert``), generated once per shape under the cache, and the environment the DGL
interpreter runs them with."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

from bench.support.console import Say
from bench.support.paths import EXAMPLE, REPO
from launcher import programs
from launcher.partition.mpirun import Launch, mpirun_argv
from localcluster.cluster import CACHE

NONROOT = 65532  # the uid and gid the example image's pods run as
PRODUCTS_NODES = 2_449_029
PRODUCTS_EDGES = 61_859_140  # undirected (make_chunked writes both directions)


def dgl_env(**extra: str) -> dict[str, str]:
    """This process's environment for the DGL interpreter (PyTorch backend, no version check),
    with ``extra``."""
    return {**os.environ, "OUTDATED_IGNORE": "1", "DGLBACKEND": "pytorch", **extra}


def prepare_graph(py: str, root: Path, dataset_args: list[str], say: Say) -> Path:
    """``root``/raw_data (make_dataset.py with ``dataset_args``, run by ``py``) and
    ``root``/chunked (dgl-chunk-graph, 4 chunks), written once: a ``root``/ready left by an
    earlier run is reused. What it did goes to ``say``."""
    if (root / "ready").is_file():
        say(f"reusing the graph in {root}")
        return root
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    started = time.monotonic()
    subprocess.run(
        [py, str(EXAMPLE / "make_dataset.py"), "--root", str(root / "raw_data"), *dataset_args],
        check=True, env=dgl_env(),
    )  # fmt: skip
    generated = time.monotonic() - started
    subprocess.run(
        [py, "-m", "distpart.convert", "ogb", "--dataset", "ogbn-synth", "--root",
         str(root / "raw_data"), "--out", str(root / "chunked"), "--num-chunks", "4",
         "--graph-name", "graphsage"],
        check=True, env=dgl_env(PYTHONPATH=str(REPO)),
    )  # fmt: skip
    say(f"graph generated in {generated:.0f}s, chunked in {time.monotonic() - started:.0f}s")
    (root / "ready").write_text("")
    return root


def products_graph(py: str, scale: float, say: Say) -> Path:
    """A chunked graph shaped like ogbn-products (examples/graphsage/make_chunked.py, ``scale``
    of its nodes and edges), made once under the cache: its folder."""
    args = []
    if scale != 1.0:
        args += ["--nodes", str(round(PRODUCTS_NODES * scale))]
        args += ["--edges", str(round(PRODUCTS_EDGES * scale))]
    root = CACHE / "bench" / "elastic-partition" / f"products-{scale:g}"
    return heavy_tailed_graph(py, root, args, say)


def heavy_tailed_graph(py: str, root: Path, args: list[str], say: Say) -> Path:
    """``root``/chunked: examples/graphsage/make_chunked.py's graph (heavy-tailed degrees,
    communities) with ``args``, written once (a ``root``/ready left by an earlier run is
    reused): its folder."""
    if (root / "ready").is_file():
        say(f"reusing the graph in {root}")
        return root / "chunked"
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    started = time.monotonic()
    argv = [py, str(EXAMPLE / "make_chunked.py"), "--out", str(root / "chunked"), *args]
    subprocess.run(argv, check=True, env=dgl_env())
    (root / "ready").write_text("")
    say(f"generated {root / 'chunked'} in {time.monotonic() - started:.0f}s")
    return root / "chunked"


def give_to_pods(data: Path) -> None:
    """``data`` and everything in it owned by the pods' user (ogb writes its processed cache
    beside the raw files, as root here)."""
    for path in [data, *data.rglob("*")]:
        os.chown(path, NONROOT, NONROOT)


def rank_argv(py: str, ranks: int, wrap: list[str], *args: str) -> list[str]:
    """dglrun's own mpirun command line (launcher.partition.mpirun: TCP between the ranks,
    ``--oversubscribe`` on one host) around ``python -P -m distpart partition``."""
    mpirun = shutil.which("mpirun")
    if mpirun is None:
        raise SystemExit("distpart_bench: needs mpirun (make bench installs Open MPI)")
    env = {"PYTHONPATH": str(REPO), "DGLBACKEND": "pytorch", "OUTDATED_IGNORE": "1"}
    command = [*wrap, *programs.argv(py, programs.PARTITION_RANK, "partition"), *args]
    return mpirun_argv(Launch(mpirun, ranks, env=env), command)
