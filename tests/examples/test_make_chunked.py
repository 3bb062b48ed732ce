"""examples/graphsage/make_chunked.py, demo-large's generator: a products-shaped graph written
straight into the chunked format, whole or one PerWorker slice at a time (numpy only: it runs
in this process)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import chunkedgraph
from tests.examples.helpers import EXAMPLE
from tests.support import scripts

SMALL = ["--nodes", "6000", "--edges", "90000", "--chunks", "6", "--max-degree", "600"]


mc = scripts.load(EXAMPLE / "make_chunked.py")


def generate(out: Path, *extra: str) -> None:
    assert mc.main(["--out", str(out), *SMALL, *extra]) == 0


def files(folder: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(folder)): p.read_bytes()
        for p in sorted(folder.rglob("*.npy"))
        if p.is_file()
    }


def column(folder: Path, meta: dict[str, Any], name: str) -> Any:
    spec = meta["node_data"]["_N"][name]
    return np.concatenate([np.load(folder / f) for f in spec["data"]])


def test_each_worker_writes_exactly_its_slice_of_the_same_graph(tmp_path: Path) -> None:
    generate(tmp_path / "whole")
    whole = files(tmp_path / "whole")
    union: dict[str, bytes] = {}
    for i in range(3):
        out = tmp_path / f"w{i}"
        generate(out, "--worker", str(i), "--workers", "3")
        mine = files(out)
        # chunks 6 * i // 3 up to 6 * (i + 1) // 3: 2i and 2i + 1
        assert {k.split("-")[-1] for k in mine} == {f"{2 * i}.npy", f"{2 * i + 1}.npy"}
        assert not set(mine) & set(union)
        union.update(mine)
        graph = chunkedgraph.load(out)
        share = chunkedgraph.shares(graph, 3, "PerWorker")[i]
        assert chunkedgraph.verify(graph, share) > 0  # every file of its share, checked
    assert union == whole  # byte for byte: no worker needs another's files


@pytest.mark.parametrize(("chunks", "workers"), [(4, 3), (6, 3), (4, 2), (7, 3), (5, 5)])
def test_a_workers_chunks_are_the_ones_its_rank_reads(chunks: int, workers: int) -> None:
    """make_chunked.py's owned() (numpy only: it runs in the worker's init container) deals the
    chunks as chunkedgraph.shares' ranks read them, whether or not the counts divide."""
    # (one row per chunk: a rank's rows are the indices of its chunks)
    for i, (lo, hi) in enumerate(chunkedgraph._groups([1] * chunks, workers, "edges")):
        assert mc.owned(chunks, i, workers) == list(range(lo, hi)), (chunks, workers, i)


def test_the_graph_has_products_shape(tmp_path: Path) -> None:
    generate(tmp_path)
    meta = json.loads((tmp_path / "metadata.json").read_text())
    edges = np.concatenate([np.load(tmp_path / f) for f in meta["edges"]["_N:_E:_N"]["data"]])
    assert edges.shape == (180000, 2) and edges.dtype == np.int64
    assert (edges[0::2] == edges[1::2, ::-1]).all()  # each edge followed by its inverse
    assert (edges[:, 0] != edges[:, 1]).all()  # no self-loops
    assert edges.min() >= 0 and edges.max() < 6000
    degree = np.bincount(edges[:, 0], minlength=6000)
    mean = degree.mean()
    assert mean == pytest.approx(30.0)
    assert np.median(degree) < 0.7 * mean < 10 * mean < degree.max()  # a heavy tail
    feat = column(tmp_path, meta, "feat")
    assert feat.shape == (6000, 100) and feat.dtype == np.float32
    label = column(tmp_path, meta, "label")
    assert label.min() >= 0 and label.max() < 47 and len(np.unique(label)) > 40
    masks = {k: column(tmp_path, meta, k) for k in ("train_mask", "val_mask", "test_mask")}
    assert not (masks["train_mask"] & masks["test_mask"]).any()
    assert masks["train_mask"].mean() == pytest.approx(0.08, abs=0.015)
    assert masks["test_mask"].mean() == pytest.approx(0.1, abs=0.015)
    same = (label[edges[:, 0]] == label[edges[:, 1]]).mean()
    assert 0.3 < same < 0.6  # homophily 0.45, less the label noise: neither trivial nor noise
    assert meta["synthetic"]["accuracy_ceiling"] == pytest.approx(0.9 + 0.1 / 47, abs=1e-4)


def test_a_rerun_keeps_complete_chunks_and_rewrites_broken_ones(tmp_path: Path) -> None:
    generate(tmp_path)
    before = files(tmp_path)
    kept = tmp_path / "edges" / "edges-1.npy"
    broken = tmp_path / "node_data" / "feat-2.npy"
    stamp = kept.stat().st_mtime_ns
    broken.write_bytes(broken.read_bytes()[:100])  # a crash mid-chunk
    (tmp_path / "edges" / "edges-3.npy").unlink()
    generate(tmp_path)
    assert kept.stat().st_mtime_ns == stamp
    assert files(tmp_path) == before
    assert not list(tmp_path.rglob("*.tmp"))


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--worker", "3", "--workers", "3"], "--worker 3: not in 0..2"),
        (["--worker", "0", "--workers", "8"], "--chunks 6: at least one chunk per worker (8)"),
    ],
)
def test_bad_arguments_are_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], says: str
) -> None:
    with pytest.raises(SystemExit) as e:
        mc.main(["--out", str(tmp_path), *SMALL, *args])
    assert e.value.code == 2
    assert says in capsys.readouterr().err
    assert not os.listdir(tmp_path)


def test_a_shape_that_cannot_be_drawn_is_refused_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert mc.main(["--out", str(tmp_path), "--nodes", "50"]) == 2
    assert capsys.readouterr().err.strip() == "make_chunked: --nodes 50 is too small for 47 classes"
