"""DGL's chunked graph format as dglrun checks it before any MPI rank starts (chunkedgraph):
every bad input is one line naming the file or field."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import chunkedgraph
from chunkedgraph import ChunkedError, load, shares, verify
from tests.launcher.chunked_graph import write_graph
from tests.support.paths import REPO

N, E = 10, 24


def edit(root: Path, change: Any) -> None:
    meta = root / "metadata.json"
    doc = json.loads(meta.read_text())
    change(doc)
    meta.write_text(json.dumps(doc))


def test_a_valid_graph_loads_and_verifies(tmp_path: Path) -> None:
    g = load(write_graph(tmp_path / "g"))
    assert (g.num_nodes, g.num_edges, g.ntype, g.etype) == (N, E, "_N", "_N:_E:_N")
    assert sorted(g.node_data) == ["feat", "train_mask"]
    assert verify(g) == 6  # 2 edge + 2 feat + 2 mask files
    assert load(tmp_path / "g" / "metadata.json").metadata == g.metadata


def test_csv_edges_verify(tmp_path: Path) -> None:
    g = load(write_graph(tmp_path / "g", edge_format="csv"))
    assert g.edges.fmt == "csv" and verify(g) == 6


@pytest.mark.parametrize(
    ("change", "says"),
    [
        (lambda d: d.pop("graph_name"), "field 'graph_name' is missing"),
        (lambda d: d.update(node_type=["a", "b"]), "homogeneous graph"),
        (lambda d: d.update(edge_type=["_N:_E:other"]), "between nodes of type '_N'"),
        (lambda d: d["num_nodes_per_chunk"][0].append(3), "lists 2 file(s) but there are 3"),
        (lambda d: d["num_edges_per_chunk"][0].__setitem__(0, -1), "non-negative integers"),
        (
            lambda d: d["edges"]["_N:_E:_N"]["format"].update(name="parquet"),
            "convert parquet chunks to numpy",
        ),
        (lambda d: d["edges"].pop("_N:_E:_N"), "no entry for edge type"),
        (lambda d: d["node_data"].update(other={}), "unknown type(s) other"),
    ],
)
def test_malformed_metadata_is_one_line_naming_the_field(
    tmp_path: Path, change: Any, says: str
) -> None:
    root = write_graph(tmp_path / "g")
    edit(root, change)
    with pytest.raises(ChunkedError) as err:
        load(root)
    text = str(err.value)
    assert says in text and str(root / "metadata.json") in text and "\n" not in text


def test_missing_metadata_and_bad_json(tmp_path: Path) -> None:
    with pytest.raises(ChunkedError, match=r"metadata\.json does not exist"):
        load(tmp_path / "nothing")
    (tmp_path / "metadata.json").write_text("{not json")
    with pytest.raises(ChunkedError, match="is not valid JSON"):
        load(tmp_path)


def test_a_missing_chunk_is_named(tmp_path: Path) -> None:
    root = write_graph(tmp_path / "g")
    (root / "feat-1.npy").unlink()
    with pytest.raises(ChunkedError) as err:
        verify(load(root))
    assert str(err.value) == f"{root / 'feat-1.npy'}: node_data _N/feat chunk 1 of 2: missing"


def test_a_truncated_numpy_chunk_is_named(tmp_path: Path) -> None:
    root = write_graph(tmp_path / "g")
    path = root / "edges-1.npy"
    path.write_bytes(path.read_bytes()[:-8])
    with pytest.raises(ChunkedError) as err:
        verify(load(root))
    text = str(err.value)
    assert text.startswith(f"{path}: edges of _N:_E:_N chunk 1 of 2: truncated: 216 data bytes")
    assert "224 expected for shape (14, 2)" in text


def test_a_chunk_with_other_rows_than_the_metadata_says(tmp_path: Path) -> None:
    root = write_graph(tmp_path / "g")
    np.save(root / "mask-0.npy", np.zeros(5, dtype=bool))
    with pytest.raises(ChunkedError) as err:
        verify(load(root))
    assert str(err.value) == (
        f"{root / 'mask-0.npy'}: node_data _N/train_mask chunk 0 of 2: holds 5 rows, metadata "
        "says 4"
    )


def test_a_truncated_csv_chunk_is_named(tmp_path: Path) -> None:
    root = write_graph(tmp_path / "g", edge_format="csv")
    path = root / "edges-0.txt"
    path.write_bytes(path.read_bytes().rstrip(b"\n")[:-2])  # cut inside the last row
    with pytest.raises(ChunkedError) as err:
        verify(load(root))
    assert str(err.value).startswith(f"{path}: edges of _N:_E:_N chunk 0 of 2: truncated")
    path.write_bytes(b"1 2\n3 4\n")  # complete rows, but too few
    with pytest.raises(ChunkedError, match="holds 2 rows, metadata says 10"):
        verify(load(root))


def test_an_edge_file_must_hold_pairs(tmp_path: Path) -> None:
    root = write_graph(tmp_path / "g")
    np.save(root / "edges-0.npy", np.zeros((10, 3), dtype=np.int64))
    with pytest.raises(ChunkedError, match=r"must be an \(n, 2\) integer array"):
        verify(load(root))


def test_shared_layout_splits_rows_evenly_even_inside_chunks(tmp_path: Path) -> None:
    g = load(write_graph(tmp_path / "g"))
    s = shares(g, 3)
    assert [x.nodes for x in s] == [(0, 3), (3, 6), (6, 10)]
    assert [x.edges for x in s] == [(0, 8), (8, 16), (16, 24)]
    # rank 1's node rows 3..6 span both node chunks; its edges 8..16 both edge chunks
    assert [j for j, *_ in g.node_data["feat"].pieces(3, 6)] == [0, 1]
    assert g.edges.pieces(8, 16)[1][2:] == (0, 6)


def test_per_worker_layout_deals_out_whole_chunks(tmp_path: Path) -> None:
    g = load(write_graph(tmp_path / "g", node_chunks=(2, 3, 5), edge_chunks=(4, 4, 8, 8)))
    s = shares(g, 2, "PerWorker")
    assert [x.nodes for x in s] == [(0, 2), (2, 10)]  # node chunks {0}, {1, 2}
    assert [x.edges for x in s] == [(0, 8), (8, 24)]  # edge chunks {0, 1}, {2, 3}
    with pytest.raises(ChunkedError, match="3 node chunk\\(s\\) for 4 workers"):
        shares(g, 4, "PerWorker")


def test_every_rank_must_own_a_node(tmp_path: Path) -> None:
    g = load(write_graph(tmp_path / "g"))
    with pytest.raises(ChunkedError, match="rank 0 of 11 would own no nodes"):
        shares(g, 11)


def test_a_rank_checks_only_the_files_it_reads(tmp_path: Path) -> None:
    root = write_graph(tmp_path / "g")
    (root / "feat-1.npy").unlink()
    (root / "mask-1.npy").unlink()
    (root / "edges-1.npy").unlink()
    g = load(root)
    worker0, worker1 = shares(g, 2, "PerWorker")
    assert verify(g, worker0) == 3  # its own slice is complete
    with pytest.raises(ChunkedError, match=r"edges-1\.npy"):
        verify(g, worker1)


def run_check(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "chunkedgraph", "check", *args],
        capture_output=True,
        text=True,
        cwd=REPO,
    )


def test_the_check_command(tmp_path: Path) -> None:
    root = write_graph(tmp_path / "g")
    ok = run_check(str(root), "--ranks", "2", "--layout", "PerWorker", "--rank", "1")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    summary = json.loads(ok.stdout)
    assert summary["num_nodes"] == N and summary["files_checked"] == 3
    (root / "feat-0.npy").write_bytes(b"\x93NUMPY")
    bad = run_check(str(root))
    assert bad.returncode == 1
    assert bad.stdout.strip().splitlines() == [
        f"chunked graph: {root / 'feat-0.npy'}: truncated inside its .npy header"
    ]
    assert "Traceback" not in bad.stdout + bad.stderr


def test_npy_header_reader_matches_numpy(tmp_path: Path) -> None:
    for array in (np.zeros((7, 5), np.float32), np.ones(9, bool), np.arange(6, dtype=np.int64)):
        np.save(tmp_path / "a.npy", array)
        h = chunkedgraph.read_npy_header(tmp_path / "a.npy")
        assert h.shape == array.shape and h.itemsize == array.dtype.itemsize
        assert h.data_offset + h.data_bytes == (tmp_path / "a.npy").stat().st_size
