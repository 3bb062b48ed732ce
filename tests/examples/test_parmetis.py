"""The ParMETIS and DistParMETIS modes with real Open MPI, PT-Scotch's ParMETIS API and DGL:
the chunked converter, the partitions against the source graph, GraphSAGE through dglrun on
2 local workers (network namespaces) against the single-process baseline, and the failures
(a bad chunk before any rank starts, a rank killed mid-partition)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from chunkedgraph.job import KAMINPAR, PARTITIONERS, PTSCOTCH
from distpart import parmetis
from distpart.kaminpar import SCRATCH_ENV
from distpart.pipeline import REPLICATE_ENV
from tests.examples.helpers import (
    DATASET,
    EXAMPLE,
    FEAT_DIM,
    NUM_CLASSES,
    NUM_NODES,
    SEED,
    Arg,
    Dgl,
    clean_env,
)
from tests.examples.helpers import GRAPH as METIS_GRAPH
from tests.support.paths import REPO
from tests.support.prerequisites import require

GRAPH = "graphsage"
CHUNKS = 4


@pytest.fixture(scope="session")
def mpi() -> str:
    mpirun = shutil.which("mpirun")
    require(mpirun is not None, "no mpirun: hack/tools.sh mpi installs Open MPI and PT-Scotch")
    assert mpirun is not None
    return mpirun


@pytest.fixture(scope="session")
def chunked(dgl: Dgl, dataset_root: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The session's dataset in DGL's chunked format (dgl-chunk-graph, 4 chunks)."""
    out = tmp_path_factory.mktemp("chunked") / "g"
    dgl.run(
        ["-m", "distpart.convert", "ogb", "--dataset", DATASET, "--root", dataset_root,
         "--out", out, "--num-chunks", CHUNKS, "--graph-name", GRAPH],
        env=clean_env(PYTHONPATH=str(REPO)),
    )  # fmt: skip
    return out


@pytest.fixture
def as_root() -> None:
    require(os.geteuid() == 0, "the local transport needs root (network namespaces)")


def partitions_check(dgl: Dgl, config: Path, dataset_root: Path) -> dict[str, Any]:
    info = dgl.check(
        "partitions", "--config", str(config), "--root", str(dataset_root), "--name", DATASET
    )
    assert set(info["mismatches"].values()) == {0}, info["mismatches"]
    assert info["covered_nodes"] == info["source_nodes"] and info["orig_nids_is_permutation"]
    assert all(p["contiguous_ids"] and p["inner_nodes_first"] for p in info["parts"])
    return info


@pytest.fixture(scope="session")
def metis(dgl: Dgl, two_parts: Path, dataset_root: Path) -> dict[str, Any]:
    """DGL's METIS partitions (two_parts), checked once: the cut the ParMETIS modes' is held to."""
    return partitions_check(dgl, two_parts / f"{METIS_GRAPH}.json", dataset_root)


def mpirun_distpart(
    dgl: Dgl,
    mpirun: str,
    ranks: int,
    chunked: Path,
    out: list[Path],
    *extra: str,
    env: dict[str, str] | None = None,
    check: bool = True,
) -> subprocess.CompletedProcess[str]:
    proc = mpirun_python(
        dgl, mpirun, ranks, "-m", "distpart", "partition", "--chunked", str(chunked),
        "--graph-name", GRAPH, "--out", *map(str, out), *extra, env=env,
    )  # fmt: skip
    assert proc.returncode == 0 or not check, proc.stdout[-4000:] + proc.stderr[-2000:]
    return proc


def mpirun_python(
    dgl: Dgl, mpirun: str, ranks: int, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``ranks`` ranks of the DGL interpreter with ``args``, as dglrun starts them (TCP)."""
    argv = [mpirun, "-np", str(ranks), "--oversubscribe", "--bind-to", "none",
            "--mca", "btl", "tcp,self"]  # fmt: skip
    if os.geteuid() == 0:
        argv.append("--allow-run-as-root")
    return subprocess.run(
        [*argv, dgl.python, *args], capture_output=True, text=True, timeout=300, cwd=REPO,
        env=clean_env(**{"PYTHONPATH": str(REPO), **(env or {})}),
    )  # fmt: skip


def stats_of(out: str) -> dict[str, Any]:
    line = next(ln for ln in out.splitlines() if ln.startswith("distpart-stats "))
    stats: dict[str, Any] = json.loads(line.split(" ", 1)[1])
    return stats


# -- the converter --------------------------------------------------------------------------


def test_the_chunked_graph_is_exactly_what_ogbs_loader_builds(
    dgl: Dgl, dataset_root: Path, chunked: Path, tmp_path: Path
) -> None:
    info = dgl.check(
        "chunked", "--chunked", str(chunked), "--root", str(dataset_root), "--name", DATASET,
        "--roundtrip", str(tmp_path),
    )  # fmt: skip
    for source in ("from_ogb", "from_dgl"):
        assert set(info[source]["same"].values()) == {True}, info[source]
        assert info[source]["num_edges"] == 2 * 100000  # the inverse edges, as ogb adds them
    assert info["from_ogb"]["node_chunks"] == CHUNKS
    assert info["from_ogb"]["node_data"] == ["feat", "label", "test_mask", "train_mask", "val_mask"]


def test_the_npz_layout_converts_to_the_same_chunked_graph(
    dgl: Dgl, chunked: Path, tmp_path: Path
) -> None:
    """make_dataset.py --binary (ogb's npz layout, what big graphs use): the converter reads
    it and writes the chunked graph the csv layout gives, file for file."""
    args: list[Arg] = ["--root", tmp_path / "raw", "--name", DATASET, "--num-nodes", NUM_NODES,
            "--avg-degree", 10, "--num-classes", NUM_CLASSES, "--feat-dim", FEAT_DIM,
            "--seed", SEED, "--binary"]  # fmt: skip
    dgl.run([EXAMPLE / "make_dataset.py", *args])
    out = tmp_path / "chunked"
    dgl.run(
        ["-m", "distpart.convert", "ogb", "--dataset", DATASET, "--root", tmp_path / "raw",
         "--out", out, "--num-chunks", CHUNKS, "--graph-name", GRAPH],
        env=clean_env(PYTHONPATH=str(REPO)),
    )  # fmt: skip
    script = (
        "import sys, json, numpy as np, pathlib\n"
        "a, b = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])\n"
        "names = sorted(str(p.relative_to(a)) for p in a.rglob('*.npy'))\n"
        "assert names == sorted(str(p.relative_to(b)) for p in b.rglob('*.npy')), names\n"
        "same = {n: bool(np.allclose(np.load(a / n), np.load(b / n), atol=1e-6)) for n in names}\n"
        "print(json.dumps(same))\n"
    )
    same = json.loads(dgl.run(["-c", script, chunked, out]).stdout.strip().splitlines()[-1])
    assert len(same) == 4 * (1 + 5) and set(same.values()) == {True}, same


def test_the_converter_refuses_bad_input_in_one_line(dgl: Dgl, tmp_path: Path) -> None:
    env = clean_env(PYTHONPATH=str(REPO))
    proc = dgl.run(
        ["-m", "distpart.convert", "ogb", "--dataset", "ogbn-nothing", "--root", tmp_path,
         "--out", tmp_path / "out"],
        env=env, check=False,
    )  # fmt: skip
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert proc.stderr.strip() == (
        f"dgl-chunk-graph: error: dataset ogbn-nothing: {tmp_path / 'ogbn_nothing'} does not exist"
    )
    (tmp_path / "junk.bin").write_bytes(b"not a graph")
    proc = dgl.run(
        ["-m", "distpart.convert", "dgl", "--graph", tmp_path / "junk.bin", "--out",
         tmp_path / "out"],
        env=env, check=False,
    )  # fmt: skip
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert f"{tmp_path / 'junk.bin'}: not a graph saved by dgl.save_graphs" in proc.stderr


# -- partitions -------------------------------------------------------------------------------


@pytest.mark.parametrize("partitioner", PARTITIONERS)
@pytest.mark.parametrize(
    ("ranks", "parts", "layout"),
    [(2, 2, "Shared"), (3, 4, "Shared"), (3, 3, "Shared"), (2, 2, "PerWorker")],
    ids=["2-ranks-2-parts", "3-ranks-4-parts", "3-parts", "per-worker-slices"],
)
def test_parmetis_partitions_hold_exactly_the_source_graph(
    dgl: Dgl,
    mpi: str,
    dataset_root: Path,
    chunked: Path,
    metis: dict[str, Any],
    tmp_path: Path,
    ranks: int,
    parts: int,
    layout: str,
    partitioner: str,
) -> None:
    """Every node in exactly one part, the parts' own edges are the source's edge set, every
    feature row equals the source's, and each part's halo is DGL's one-hop halo, whichever
    partitioner assigned the parts. 3 parts (not a power of two) with PT-Scotch: its 64 fine
    parts grouped into 3, as on a large graph; KaMinPar partitions into 3 directly. The
    per-worker slices look every endpoint up at its owner, as on a graph too large for every
    rank to hold a value a node (DISTPART_REPLICATE_MAX_MIB=0); the others gather them."""
    outs = [tmp_path / f"worker-{r}" for r in range(ranks)] if layout != "Shared" else [tmp_path]
    grouped = partitioner == PTSCOTCH and parts & (parts - 1) != 0
    env = {parmetis.MIN_VERTICES_ENV: "10"} if grouped else {}
    if layout != "Shared":
        env[REPLICATE_ENV] = "0"
    proc = mpirun_distpart(
        dgl, mpi, ranks, chunked, outs, "--num-parts", str(parts), "--layout", layout,
        "--balance-train", "--balance-edges", "--partitioner", partitioner, env=env,
    )  # fmt: skip
    assert ("grouped into 3" in proc.stdout) == grouped
    assert ("KaMinPar: 3 parts in" in proc.stdout) == (partitioner == KAMINPAR and parts == 3)
    stats = stats_of(proc.stdout)
    assert stats["partitioner"] == partitioner
    if layout != "Shared":  # each rank wrote only its own part, into its own folder
        for r, out in enumerate(outs):
            assert sorted(p.name for p in out.glob("part[0-9]*")) == [f"part{r}"]
            assert (out / f"{GRAPH}.json").read_text() == (outs[0] / f"{GRAPH}.json").read_text()
        for r, out in enumerate(outs):
            shutil.copytree(out / f"part{r}", tmp_path / f"part{r}")
        shutil.copy(outs[0] / f"{GRAPH}.json", tmp_path)
    info = partitions_check(dgl, tmp_path / f"{GRAPH}.json", dataset_root)
    assert info["num_parts"] == parts and info["part_method"] == "parmetis"
    assert info["edge_cut"] == stats["edge_cut"]
    sizes = [p["inner_nodes"] for p in info["parts"]]
    assert max(sizes) <= 1.1 * sum(sizes) / parts  # ParMETIS' balance (5 %, weighted)
    # the cut is METIS-like (a random split would cut half of the edges)
    print(
        f"edge cut, {parts} parts: {partitioner} ({ranks} ranks, {layout}) {info['edge_cut']} "
        f"({100 * info['edge_cut_fraction']:.2f}%); METIS (DGL-API, 2 parts) "
        f"{metis['edge_cut']} ({100 * metis['edge_cut_fraction']:.2f}%)"
    )
    assert info["edge_cut_fraction"] < 3 * metis["edge_cut_fraction"] * (parts / 2)
    assert info["edge_cut_fraction"] < 0.25


def count_check(
    dgl: Dgl, dataset_root: Path, outs: list[Path], k: int, stats: dict[str, Any], merged: Path
) -> tuple[dict[str, Any], float]:
    """Count ``k``'s parts of a --counts run (3 ranks), gathered into ``merged`` from the
    folders the ranks wrote, checked against the source graph: (the check, the balance)."""
    for r, out in enumerate(outs):  # rank r wrote the parts p with p % 3 == r
        where = out if k == 3 else out.with_name(f"{out.name}@{k}")
        for part in where.glob("part[0-9]*"):
            assert len(outs) == 1 or int(part.name[4:]) % 3 == r, (r, part)
            shutil.copytree(part, merged / part.name)
        if r == 0:
            shutil.copy(where / f"{GRAPH}.json", merged)
    info = partitions_check(dgl, merged / f"{GRAPH}.json", dataset_root)
    assert info["num_parts"] == k and info["edge_cut"] == stats["counts"][str(k)]["edge_cut"]
    sizes = [p["inner_nodes"] for p in info["parts"]]
    return info, max(sizes) / (sum(sizes) / k)


@pytest.mark.parametrize("layout", ["PerWorker"])  # (Shared: the same code; ~35 s more)
def test_one_partitioning_serves_every_count_of_an_elastic_job(
    dgl: Dgl, mpi: str, dataset_root: Path, chunked: Path, tmp_path: Path, layout: str
) -> None:
    """--counts with PT-Scotch: the ranks partition once, into 64 fine parts grouped into 3
    and into 2, and write both sets (the other count beside its folder, OUT@2), each exactly
    the source graph, balanced, and cutting close to what a direct partition into that count
    cuts. (KaMinPar partitions each count directly: test_kaminpar_writes_every_count.)"""
    shared = layout == "Shared"
    outs = [tmp_path / "p"] if shared else [tmp_path / f"worker-{r}" for r in range(3)]
    small = {parmetis.MIN_VERTICES_ENV: "10"}  # (the test graph: 20k nodes, 312 per fine part)
    proc = mpirun_distpart(
        dgl, mpi, 3, chunked, outs, "--num-parts", "3", "--counts", "2", "--layout", layout,
        "--balance-train", "--balance-edges", "--partitioner", PTSCOTCH, env=small,
    )  # fmt: skip
    assert "one partitioning for the counts 3, 2: 64 fine parts, grouped into each" in proc.stdout
    stats = stats_of(proc.stdout)
    assert stats["fine_parts"] == 64 and sorted(stats["counts"]) == ["2", "3"]
    assert stats["edge_cut"] == stats["counts"]["3"]["edge_cut"]
    direct = {}
    for k in (2, 3):
        one = tmp_path / f"direct-{k}"
        direct[k] = stats_of(
            mpirun_distpart(
                dgl,
                mpi,
                3,
                chunked,
                [one],
                "--num-parts",
                str(k),
                "--balance-train",
                "--balance-edges",
                "--partitioner",
                PTSCOTCH,
            ).stdout
        )["edge_cut"]  # fmt: skip  (PT-Scotch's k parts: no fine parts on 20k nodes)
    for k in (3, 2):
        info, balance = count_check(dgl, dataset_root, outs, k, stats, tmp_path / f"merged-{k}")
        print(
            f"{layout}, {k} parts grouped from 64: edge cut {info['edge_cut']} "
            f"({100 * info['edge_cut_fraction']:.2f}%), direct {direct[k]} "
            f"({info['edge_cut'] / direct[k]:.3f}x); balance {balance:.3f}"
        )
        assert balance <= 1.1, balance
        assert info["edge_cut"] <= 1.25 * direct[k], (k, info["edge_cut"], direct[k])


def test_kaminpar_writes_every_count_from_one_load_of_the_graph(
    dgl: Dgl, mpi: str, dataset_root: Path, chunked: Path, metis: dict[str, Any], tmp_path: Path
) -> None:
    """--counts with KaMinPar (the default): rank 0 loads the graph once and partitions it
    into each count directly; both sets are exactly the source graph, balanced, and cut
    no more than DGL's METIS does."""
    outs = [tmp_path / f"worker-{r}" for r in range(3)]
    proc = mpirun_distpart(
        dgl, mpi, 3, chunked, outs, "--num-parts", "3", "--counts", "2", "--layout", "PerWorker",
        "--balance-train", "--balance-edges",
    )  # fmt: skip
    assert "KaMinPar: the counts 3, 2, each from one load of the graph" in proc.stdout
    assert proc.stdout.count(" directed edges loaded in ") == 1
    stats = stats_of(proc.stdout)
    assert stats["partitioner"] == KAMINPAR and stats["fine_parts"] is None
    assert sorted(stats["counts"]) == ["2", "3"]
    for k in (3, 2):
        info, balance = count_check(dgl, dataset_root, outs, k, stats, tmp_path / f"merged-{k}")
        print(
            f"KaMinPar, {k} parts: edge cut {info['edge_cut']} "
            f"({100 * info['edge_cut_fraction']:.2f}%); balance {balance:.3f}; METIS 2 parts "
            f"{100 * metis['edge_cut_fraction']:.2f}%"
        )
        assert balance <= 1.1, balance
        if k == 2:  # (the same count as DGL's METIS: a cut as good, within 5 %)
            assert info["edge_cut"] <= 1.05 * metis["edge_cut"], (info, metis["edge_cut"])


# What KaMinPar reads: a graph whose rows are spread over 2 ranks (rank 0: nodes 0-2, rank 1:
# nodes 3-4; a node without neighbours on each), written by rank 0 as a ParHIP file and loaded
# back by KaMinPar's own reader: every degree, neighbour and weight as the ranks held them.
PARHIP_SCRIPT = r"""
import json, sys, numpy as np, kaminpar
from mpi4py import MPI
from distpart.kaminpar import write_parhip
comm = MPI.COMM_WORLD
rows = {0: {0: [1, 3], 1: [0, 4], 2: []}, 1: {3: [0, 4], 4: [1, 3]}}[comm.Get_rank()]
weights = {0: 7, 1: 1, 2: 5, 3: 2, 4: 3_000_000_000}
xadj = np.cumsum([0] + [len(v) for v in rows.values()]).astype(np.int64)
adjncy = np.array([u for v in rows.values() for u in v], dtype=np.int64)
vwgt = np.array([weights[n] for n in rows], dtype=np.int64)
out = open(sys.argv[1], "wb") if comm.Get_rank() == 0 else None
write_parhip(comm, out, 5, xadj, adjncy, vwgt)
if out is not None:
    out.close()
    g = kaminpar.load_graph(sys.argv[1], kaminpar.GraphFileFormat.PARHIP)
    print(json.dumps({
        "n": g.n(), "m": g.m(),
        "neighbours": [sorted(v for v, _ in g.neighbors(u)) for u in range(g.n())],
        "weights": [g.node_weight(u) for u in range(g.n())],
    }))
"""


def test_kaminpar_reads_the_graph_the_ranks_held(dgl: Dgl, mpi: str, tmp_path: Path) -> None:
    proc = mpirun_python(dgl, mpi, 2, "-c", PARHIP_SCRIPT, str(tmp_path / "g.parhip"))
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got == {
        "n": 5,
        "m": 8,
        "neighbours": [[1, 3], [0, 4], [], [0, 4], [1, 3]],
        "weights": [7, 1, 5, 2, 3_000_000_000],
    }


def test_without_kaminpar_in_the_image_the_error_says_what_to_do(
    dgl: Dgl, mpi: str, chunked: Path, tmp_path: Path
) -> None:
    """An image built without KaMinPar (its import fails): one line naming it and the way out
    (--partitioner ptscotch); every rank stops; nothing is written."""
    shadow = tmp_path / "site" / "kaminpar"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError(\"No module named 'kaminpar'\")\n")
    proc = mpirun_distpart(
        dgl, mpi, 2, chunked, [tmp_path / "out"], "--num-parts", "2", check=False,
        env={"PYTHONPATH": f"{REPO}:{shadow.parent}"},
    )  # fmt: skip
    assert proc.returncode != 0
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("distpart: rank "))
    assert "error: KaMinPar is not installed in this image" in line, line
    assert "--partitioner ptscotch" in line, line
    assert "Traceback" not in proc.stdout + proc.stderr
    assert not list((tmp_path / "out").glob("part*"))


def test_a_full_scratch_folder_is_one_line_naming_it(
    dgl: Dgl, mpi: str, chunked: Path, tmp_path: Path
) -> None:
    """Rank 0 writes the graph for KaMinPar under $DISTPART_SCRATCH: when it does not fit (a
    1 MiB tmpfs; the graph is 1.1 MiB), the error names the folder, both sizes and the
    variable to set, before anything is written."""
    require(os.geteuid() == 0, "mounting a small tmpfs needs root")
    small = tmp_path / "small"
    small.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(small)], check=True)
    try:
        proc = mpirun_distpart(
            dgl, mpi, 2, chunked, [tmp_path / "out"], "--num-parts", "2", check=False,
            env={SCRATCH_ENV: str(small)},
        )  # fmt: skip
        assert list(small.iterdir()) == []  # (nothing was written)
    finally:
        subprocess.run(["umount", str(small)], check=True)
    assert proc.returncode != 0
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("distpart: rank 0 "))
    assert f"error: {small}: no room for the graph KaMinPar reads: it takes 1.1 MiB" in line, line
    assert f"MiB are free; set ${SCRATCH_ENV} to a folder with room" in line, line
    assert "Traceback" not in proc.stdout + proc.stderr


# -- through dglrun, with training ----------------------------------------------------------


def dglrun_argv(dgl: Dgl, workspace: Path, mode: str, chunked: Path, *extra: str) -> list[str]:
    return [
        sys.executable, "-m", "launcher.cli", "-g", GRAPH, "--num-partitions", "2",
        "--partition-mode", mode, "--chunked-graph", str(chunked),
        "--balance-train", "--balance-edges",
        "--train-entry-point", str(EXAMPLE / "train_dist.py"),
        "--num-epochs", "2", "--batch-size", "128",
        "--transport", "local", "--workspace", str(workspace), "--python", dgl.python, *extra,
    ]  # fmt: skip


def dglrun(argv: list[str], timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv, capture_output=True, text=True, timeout=timeout, cwd=REPO,
        env=clean_env(PYTHONPATH=str(REPO)),
    )  # fmt: skip


def leftovers() -> str:
    out = subprocess.run(
        ["pgrep", "-af", "distpart partition|orted|train_dist.py"], capture_output=True, text=True
    )
    return "\n".join(ln for ln in out.stdout.splitlines() if "pgrep" not in ln)


@pytest.mark.parametrize("mode", ["ParMETIS", "DistParMETIS"])
def test_graphsage_through_dglrun_in_each_mode(
    dgl: Dgl,
    mpi: str,
    dataset_root: Path,
    chunked: Path,
    single_sage: dict[str, Any],
    tmp_path: Path,
    as_root: None,
    mode: str,
) -> None:
    # DistParMETIS with out-of-core workers: distpart writes the features as .npy too
    ooc = ("--out-of-core",) if mode == "DistParMETIS" else ()
    proc = dglrun(dglrun_argv(dgl, tmp_path, mode, chunked, "--keep-local", *ooc))
    out = proc.stdout
    assert proc.returncode == 0, out[-4000:] + proc.stderr[-2000:]
    for k, name in enumerate(["partition", "deliver", "dispatch", "configure", "train"], 1):
        assert f"[{k}/5] {name} done in" in out
    metrics = json.loads((tmp_path / "output" / "metrics.json").read_text())
    acc, base = metrics["test_accuracy"], single_sage["test_accuracy"]
    assert metrics["world_size"] == 2 and metrics["num_parts"] == 2
    assert abs(acc - base) <= 0.02, f"{mode}: distributed {acc:.4f} vs single-process {base:.4f}"
    summary = out.strip().splitlines()[-1]
    assert summary.startswith("dglrun: done: partition") and "edge cut" in summary
    # the ranks' memory, step by step: each step's line from rank 0, then the summary
    for step in ("read", "adjacency", "parmetis", "renumber", "shuffle", "write"):
        assert f"[distpart] memory {step}: peak " in out, step
    assert "ranks' memory per step (the largest rank's peak): read " in out
    workers = tmp_path / "workers"
    if mode == "ParMETIS":  # partitioned here, then shipped like DGL-API's
        assert "mpirun: 2 ranks of distpart in this pod" in out
        config = tmp_path / "dataset" / f"{GRAPH}.json"
    else:  # each worker wrote its own part, nothing was copied
        assert "one rank of distpart on each of worker-0, worker-1" in out
        assert "nothing to deliver: every worker wrote its own partition" in out
        assert "ranks (worker-0, worker-1)" in out  # the ranks ran in the workers' namespaces
        merged = tmp_path / "merged"
        for i in (0, 1):
            workload = workers / f"worker-{i}" / "dgl_workspace" / "workload"
            assert sorted(p.name for p in workload.glob("part[0-9]*")) == [f"part{i}"]
            assert f"[worker-{i}/server-0] out-of-core: part {i}: " in out
            assert (workload / f"part{i}" / "node_feat_npy" / "index.json").is_file()
            shutil.copytree(workload / f"part{i}", merged / f"part{i}")
        shutil.copy(workers / "worker-0" / "dgl_workspace" / "workload" / f"{GRAPH}.json", merged)
        config = merged / f"{GRAPH}.json"
        assert not (tmp_path / "dataset").exists()
    partitions_check(dgl, config, dataset_root)
    print(f"{mode}: test accuracy {acc:.4f} (single process {base:.4f}); {summary}")
    assert leftovers() == ""


def test_distparmetis_restarts_reuse_the_parts_each_worker_cached(
    dgl: Dgl, mpi: str, dataset_root: Path, chunked: Path, tmp_path: Path, as_root: None
) -> None:
    """DistParMETIS with --storage, run as a job and its restarts on one storage: the first
    run partitions and every worker copies its part into the cache; the second gives each
    worker its part back (checked file by file) without starting MPI; a damaged cached file
    makes the third partition again, naming it."""
    storage = tmp_path / "storage"
    storage.mkdir()

    def run(ws: str) -> str:
        argv = dglrun_argv(dgl, tmp_path / ws, "DistParMETIS", chunked, "--keep-local",
                           "--storage", str(storage), "--run-name", "dist-1234abcd")  # fmt: skip
        argv[argv.index("--num-epochs") + 1] = "1"
        proc = dglrun(argv)
        assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
        return proc.stdout

    first = run("a")
    assert "mpirun: one rank of distpart on each of" in first
    assert "cached at partitions/" in first
    (entry,) = [p for p in (storage / "partitions").iterdir() if not p.name.startswith(".")]
    assert sorted(p.name for p in entry.glob("part*")) == ["part0", "part1"]
    second = run("b")
    assert "reused the partitions cached at partitions/" in second
    assert "every worker copied its own part" in second and "mpirun:" not in second
    merged = tmp_path / "merged"
    for i in (0, 1):  # what the workers got is the partition, exactly
        workload = tmp_path / "b" / "workers" / f"worker-{i}" / "dgl_workspace" / "workload"
        assert sorted(p.name for p in workload.glob("part[0-9]*")) == [f"part{i}"]
        shutil.copytree(workload / f"part{i}", merged / f"part{i}")
    shutil.copy(entry / f"{GRAPH}.json", merged)
    partitions_check(dgl, merged / f"{GRAPH}.json", dataset_root)
    damaged = entry / "part1" / "graph.dgl"
    damaged.write_bytes(damaged.read_bytes()[:-7])
    third = run("c")
    assert (
        f"the cached partitions are damaged: worker-1: {damaged} does not match its SHA-256"
        in third
    ), third[-3000:]
    assert "mpirun: one rank of distpart on each of" in third
    assert leftovers() == ""


def elastic_run(
    dgl: Dgl,
    ws: Path,
    mode: str,
    graph: Path,
    storage: Path,
    run_name: str,
    workers: int,
    epochs: int,
) -> str:
    """One attempt of an elastic run (``--partition-counts 2-3``) with ``workers`` local
    workers and ``epochs`` epochs: dglrun's output (it must succeed)."""
    argv = dglrun_argv(dgl, ws, mode, graph, "--storage", str(storage), "--run-name", run_name,
                       "--partition-counts", "2-3")  # fmt: skip
    argv[argv.index("--num-partitions") + 1] = str(workers)
    argv[argv.index("--num-epochs") + 1] = str(epochs)
    proc = subprocess.run(
        argv, capture_output=True, text=True, timeout=300, cwd=REPO,
        env=clean_env(PYTHONPATH=str(REPO), **{parmetis.MIN_VERTICES_ENV: "10"}),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    return proc.stdout


def test_an_elastic_run_partitions_once_for_every_count(
    dgl: Dgl,
    mpi: str,
    dataset_root: Path,
    chunked: Path,
    single_sage: dict[str, Any],
    tmp_path: Path,
    as_root: None,
) -> None:
    """An elastic job's run (--partition-counts 2-3): epoch 1 on 3 workers, then epoch 2 on 2
    (a worker lost): the first attempt partitions once and caches the partitions of both
    counts; the second trains on the 2 cached parts without starting MPI and without reading
    the chunks (they are gone), resuming from the checkpoint, to the single-process accuracy
    of 2 epochs."""
    storage = tmp_path / "storage"
    storage.mkdir()
    run_name = "elastic-1234abcd"
    graph = tmp_path / "chunked"
    shutil.copytree(chunked, graph)

    def run(ws: str, workers: int, epochs: int) -> str:
        return elastic_run(dgl, tmp_path / ws, "DistParMETIS", graph, storage, run_name,
                           workers, epochs)  # fmt: skip

    first = run("a", 3, 1)  # (epoch 1 on 3 workers, then a worker is lost)
    assert "KaMinPar: the counts 3, 2, each from one load of the graph" in first
    assert first.count("mpirun: one rank of distpart on each of") == 1
    assert "cached the partitions for 2 workers too (the same partitioning" in first
    record = json.loads((storage / "runs" / run_name / "partitions.json").read_text())
    assert sorted(record["keys"]) == ["2", "3"] and record["size"]["nodes"] == 20000
    entries = {p.name: p for p in (storage / "partitions").iterdir() if not p.name.startswith(".")}
    assert set(entries) == set(record["keys"].values())
    two = entries[record["keys"]["2"]]
    assert sorted(p.name for p in two.glob("part*")) == ["part0", "part1"]
    partitions_check(dgl, two / f"{GRAPH}.json", dataset_root)

    shutil.rmtree(graph)  # (a lost worker's chunks: the next attempt does not need them)
    second = run("b", 2, 2)  # (epoch 2 on the 2 left, from epoch 1's checkpoint)
    assert (
        "this run partitioned the graph for 2 workers before: the workers' chunks are not read"
        in second
    )
    assert "reused the partitions cached at partitions/" in second
    assert "this run's 2 partitions" in second and "mpirun:" not in second
    assert "resuming at epoch 1 of 2 from the checkpoint" in second
    metrics = json.loads((storage / "runs" / run_name / "output" / "metrics.json").read_text())
    acc, base = metrics["test_accuracy"], single_sage["test_accuracy"]
    assert metrics["world_size"] == 2 and metrics["num_parts"] == 2
    print(f"elastic: 3 workers, then 2 from the same partitioning: test accuracy {acc:.4f} "
          f"(single process {base:.4f})")  # fmt: skip
    assert abs(acc - base) <= 0.02
    assert leftovers() == ""


def test_an_elastic_run_in_the_partitioner_pod_partitions_once_for_every_count(
    dgl: Dgl, mpi: str, chunked: Path, tmp_path: Path, as_root: None
) -> None:
    """ParMETIS mode (the partitioner pod's ranks): the first attempt caches both counts; the
    next attempt, with 2 workers, takes the run's 2-part set without starting MPI."""
    storage = tmp_path / "storage"
    storage.mkdir()

    def run(ws: str, workers: int) -> str:
        return elastic_run(dgl, tmp_path / ws, "ParMETIS", chunked, storage, "pm-1234abcd",
                           workers, 1)  # fmt: skip

    first = run("a", 3)
    assert "mpirun: 2 ranks of distpart in this pod" in first
    assert "cached the partitions for 2 workers too (the same partitioning" in first
    second = run("b", 2)
    assert "this run's 2 partitions" in second and "mpirun:" not in second
    assert leftovers() == ""


# -- failures -------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["ParMETIS", "DistParMETIS"])
@pytest.mark.parametrize("damage", ["missing", "truncated"])
def test_a_bad_chunk_is_one_line_naming_the_file_before_any_rank_starts(
    dgl: Dgl, mpi: str, chunked: Path, tmp_path: Path, as_root: None, mode: str, damage: str
) -> None:
    bad = tmp_path / "chunked"
    shutil.copytree(chunked, bad)
    victim = bad / "node_data" / "feat-2.npy"
    if damage == "missing":
        victim.unlink()
    else:
        victim.write_bytes(victim.read_bytes()[:-100])
    started = time.monotonic()
    proc = dglrun(dglrun_argv(dgl, tmp_path / "ws", mode, bad), timeout=120)
    took = time.monotonic() - started
    assert proc.returncode == 1
    last = proc.stdout.strip().splitlines()[-1]
    assert last.startswith("dglrun: error: partition failed: ") and str(victim) in last, last
    assert ("missing" if damage == "missing" else "truncated: 639900 data bytes") in last
    assert last.endswith("; no MPI rank was started"), last
    assert "mpirun:" not in proc.stdout, "an MPI rank was started"
    assert "Traceback" not in proc.stdout + proc.stderr
    assert took < 60


def _rank_process(rank: int) -> int | None:
    """The pid of MPI rank ``rank``'s distpart process (not its launcher.workers.remote wrapper)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes().split(b"\0")
            environ = (entry / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if (
            b"distpart" in cmd
            and b"launcher.workers.remote" not in cmd
            and (f"OMPI_COMM_WORLD_RANK={rank}".encode() in environ)
        ):
            return int(entry.name)
    return None


def test_a_rank_killed_mid_partition_fails_the_partition_naming_it(
    dgl: Dgl, mpi: str, chunked: Path, tmp_path: Path, as_root: None
) -> None:
    """DistParMETIS: kill -9 of rank 1 (on worker-1) while the ranks work: dglrun stops mpirun
    and every rank, and fails naming the rank, its worker and the phase; nothing is left."""
    proc = subprocess.Popen(
        dglrun_argv(dgl, tmp_path, "DistParMETIS", chunked),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=REPO,
        env=clean_env(PYTHONPATH=str(REPO)),
    )  # fmt: skip
    lines: list[str] = []
    killed_at = None
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            if killed_at is None and "[distpart]" in line:  # every rank is up
                pid = _rank_process(1)
                assert pid is not None, "rank 1 is not running"
                os.kill(pid, signal.SIGKILL)
                killed_at = time.monotonic()
        code = proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert killed_at is not None, "".join(lines)[-3000:]
    took = time.monotonic() - killed_at
    last = lines[-1].strip()
    assert code == 1, "".join(lines)[-3000:]
    assert last == (
        "dglrun: error: partition failed: MPI rank 1 on worker-1 was killed by SIGKILL (exit code "
        "137); stopped every MPI rank"
    ), last
    print(f"rank 1 killed mid-partition: dglrun exited {took:.1f}s later")
    assert took < 60
    deadline = time.monotonic() + 10
    while leftovers() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert leftovers() == "", "MPI or DGL processes survived"


def test_the_partition_stats_file(dgl: Dgl, mpi: str, chunked: Path, tmp_path: Path) -> None:
    """What the benchmark reads: figures of the run next to the partitions."""
    mpirun_distpart(dgl, mpi, 2, chunked, [tmp_path], "--num-parts", "2")
    stats = json.loads((tmp_path / "partition_stats.json").read_text())
    assert stats["num_nodes"] == 20000 and stats["num_edges"] == 200000
    assert sum(stats["nodes_per_part"]) == 20000 and sum(stats["edges_per_part"]) == 200000
    assert len(stats["peak_rss_mb_per_rank"]) == 2 and min(stats["peak_rss_mb_per_rank"]) > 0
    assert set(stats["seconds"]) >= {"read", "parmetis", "shuffle", "write", "total"}
    # every rank's peak in every step, which the profile is made of
    profile = stats["memory_mb_per_step"]
    steps = ["read", "adjacency", "parmetis", "renumber", "shuffle", "write"]
    assert profile["per_step"] is True and list(profile["peak"]) == steps
    for step in steps:
        assert len(profile["peak"][step]) == 2 and min(profile["peak"][step]) > 0
        assert all(e <= p for e, p in zip(profile["end"][step], profile["peak"][step], strict=True))
    for r in range(2):  # (and whatever came before the first step)
        assert stats["peak_rss_mb_per_rank"][r] >= max(profile["peak"][s][r] for s in steps)
    # the writer imports torch and DGL: its step is the one above the fixed cost
    assert min(profile["peak"]["write"]) > 300
    assert np.isclose(stats["edge_cut_fraction"], stats["edge_cut"] / 200000, atol=1e-6)
