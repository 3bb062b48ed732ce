"""outofcore.layout without DGL: the page-aligned .npy files, their index, its one-line errors,
and the prefetch's page ranges."""

from __future__ import annotations

import json
import mmap
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from outofcore import layout
from tests.outofcore.pages import evict, fetched


def test_written_files_load_as_npy_with_rows_on_a_page(tmp_path: Path) -> None:
    feats: dict[str, np.ndarray[Any, Any]] = {
        "_N/feat": np.arange(12, dtype=np.float32).reshape(3, 4),
        "_N/label": np.array([1, 2, 3], dtype=np.int64),
        "_N/train_mask": np.array([1, 0, 1], dtype=np.uint8),
        "_N/empty": np.zeros((0, 3), dtype=np.float32),
    }
    layout.write(tmp_path, feats)
    files = layout.read_index(tmp_path)
    assert sorted(files) == sorted(feats)
    for key, values in feats.items():
        assert np.load(files[key]).tolist() == values.tolist()  # numpy's own reader
        rows = layout.open_rows(files[key], random=True)
        assert rows.dtype == values.dtype and rows.shape == values.shape
        assert (rows == values).all()
        assert files[key].stat().st_size == layout.DATA_OFFSET + values.nbytes
    index = json.loads((tmp_path / "node_feat_npy" / "index.json").read_text())
    assert index["_N/feat"] == {"file": index["_N/feat"]["file"], "shape": [3, 4],
                                "dtype": "float32"}  # fmt: skip
    assert layout.nbytes(tmp_path) == sum(p.stat().st_size for p in files.values())


def test_a_part_without_files_or_with_a_missing_one_is_named(tmp_path: Path) -> None:
    with pytest.raises(layout.LayoutError) as err:
        layout.read_index(tmp_path)
    assert str(err.value) == (
        f"{tmp_path}/node_feat_npy/index.json: not found: this partition was not written for "
        "out-of-core workers (partition again with dglrun --out-of-core, a DGLJob's "
        "spec.outOfCore)"
    )
    layout.write(tmp_path, {"_N/feat": np.ones((2, 2), np.float32)})
    (tmp_path / "node_feat_npy" / "0.npy").unlink()
    with pytest.raises(layout.LayoutError, match=r"0\.npy: missing \(listed in .*index\.json"):
        layout.read_index(tmp_path)
    (tmp_path / "node_feat_npy" / "index.json").write_text("[1]")
    with pytest.raises(layout.LayoutError, match="expected an object of feature keys"):
        layout.read_index(tmp_path)


def test_prefetch_asks_for_the_rows_pages_sorted_and_merged(tmp_path: Path) -> None:
    page = mmap.PAGESIZE
    wide = np.zeros((100, page // 4), np.float32)  # one page per row
    layout.write(tmp_path, {"_N/feat": wide})
    path = layout.read_index(tmp_path)["_N/feat"]
    rows = layout.open_rows(path, random=True)  # (a fault reads its own page, no more)
    evict(path)  # (after the header's read, which read ahead)
    pages = layout.resident_pages(rows)
    assert pages is not None and len(pages) == 100 and not (pages & 1).any()
    before = fetched()
    # rows 3, 4, 5 are one run of pages; 7 and 50 are runs of their own; duplicates count once
    assert layout.prefetch(rows, np.array([50, 5, 3, 4, 7, 3])) == 3
    assert fetched() - before >= 5 * page
    assert layout.prefetch(rows, np.array([], np.int64)) == 0
    assert layout.prefetch(rows, np.arange(100)) == 1
    assert fetched() - before >= 100 * page  # (read from the disk: see tests/outofcore/pages)
