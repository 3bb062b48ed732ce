"""A part's node features as plain ``.npy`` files: what out-of-core workers memory-map.

::

    part<k>/node_feat_npy/index.json   {"<ntype>/<name>": {"file": "<n>.npy",
                                        "shape": [...], "dtype": "float32"}, ...}
    part<k>/node_feat_npy/<n>.npy      one row per inner node of the part, in the part's row
                                        order: the rows of the same key in node_feat.dgl;
                                        its header padded to 4 KiB, so that the rows start
                                        on a page (a 4 KiB row is one page, not two)

Keys are DGL's (``node_feat.dgl``'s): node type, ``/``, feature name. File names are numbers,
so any feature name is a valid file name. ``index.json`` is written last, through a rename:
a folder without it is incomplete and is not read.

numpy and the standard library only.
"""

from __future__ import annotations

import json
import mmap
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from outofcore import reader

FOLDER = "node_feat_npy"
INDEX = "index.json"
DATA_OFFSET = 4096  # where a file's rows start: a page boundary
NPY_MAGIC = b"\x93NUMPY\x01\x00"  # .npy format version 1.0


class LayoutError(RuntimeError):
    """A part's feature files are missing or do not match their index."""


def folder(part_dir: str | os.PathLike[str]) -> Path:
    return Path(part_dir) / FOLDER


def write(part_dir: str | os.PathLike[str], features: Mapping[str, Any]) -> Path:
    """Write ``features`` (key -> array-like with ``numpy()`` or an ndarray) into
    ``part_dir``'s feature folder, replacing what it held; returns the index's path."""
    out = folder(part_dir)
    out.mkdir(parents=True, exist_ok=True)
    stale = out / INDEX
    stale.unlink(missing_ok=True)
    index: dict[str, dict[str, Any]] = {}
    for n, (key, values) in enumerate(sorted(features.items())):
        array = values.numpy() if hasattr(values, "numpy") else np.asarray(values)
        name = f"{n}.npy"
        save_aligned(out / name, np.ascontiguousarray(array))
        index[key] = {"file": name, "shape": list(array.shape), "dtype": str(array.dtype)}
    tmp = out / f".{INDEX}.tmp"
    tmp.write_text(json.dumps(index, indent=1, sort_keys=True) + "\n")
    tmp.replace(out / INDEX)
    return out / INDEX


def save_aligned(path: str | os.PathLike[str], array: np.ndarray[Any, Any]) -> None:
    """``array`` as a version 1.0 ``.npy`` file (``np.load`` reads it) whose header is padded
    with spaces to :data:`DATA_OFFSET` bytes."""
    meta = {"descr": array.dtype.str, "fortran_order": False, "shape": tuple(array.shape)}
    text = "{" + "".join(f"{k!r}: {v!r}, " for k, v in meta.items()) + "}"
    room = DATA_OFFSET - len(NPY_MAGIC) - 2 - len(text) - 1
    if room < 0:
        raise LayoutError(f"{path}: an .npy header of {len(text)} bytes does not fit in 4 KiB")
    header = (text + " " * room + "\n").encode("latin1")
    with open(path, "wb") as f:
        f.write(NPY_MAGIC + len(header).to_bytes(2, "little") + header)
        if array.size:
            f.write(array.reshape(-1).view(np.uint8).data)


def node_feat_files(config: str | os.PathLike[str]) -> dict[int, Path]:
    """Each part's ``node_feat.dgl``, by part id, from a partition config (DGL's JSON); the
    part's folder is its parent."""
    try:
        meta = json.loads(Path(config).read_text())
    except (OSError, ValueError) as e:
        raise LayoutError(f"{config}: cannot read the partition config: {e}") from None
    found: dict[int, Path] = {}
    for key, entry in meta.items() if isinstance(meta, dict) else ():
        if key.startswith("part-") and isinstance(entry, dict) and "node_feats" in entry:
            found[int(key[5:])] = Path(config).parent / entry["node_feats"]
    if not found:
        raise LayoutError(f"{config}: no part-<i> entry with node_feats")
    return found


def read_index(part_dir: str | os.PathLike[str]) -> dict[str, Path]:
    """Key -> ``.npy`` path of a part written by :func:`write` (:class:`LayoutError` names
    what is missing)."""
    out = folder(part_dir)
    path = out / INDEX
    try:
        doc = json.loads(path.read_text())
    except FileNotFoundError:
        raise LayoutError(
            f"{path}: not found: this partition was not written for out-of-core workers "
            "(partition again with dglrun --out-of-core, a DGLJob's spec.outOfCore)"
        ) from None
    except (OSError, ValueError) as e:
        raise LayoutError(f"{path}: unreadable: {e}") from None
    if not isinstance(doc, dict):
        raise LayoutError(f"{path}: expected an object of feature keys")
    files: dict[str, Path] = {}
    for key, entry in doc.items():
        try:
            files[key] = out / str(entry["file"])
        except (TypeError, KeyError):
            raise LayoutError(f"{path}: entry {key!r} has no file") from None
        if not files[key].is_file():
            raise LayoutError(f"{files[key]}: missing (listed in {path} for {key!r})")
    return files


def open_rows(path: str | os.PathLike[str], random: bool = False) -> np.ndarray[Any, Any]:
    """A feature file memory-mapped copy-on-write: pages are read on demand and shared with
    every process mapping the file; a write stays in the writing process. ``random``: tell
    the kernel the reads are random (``MADV_RANDOM``: a page fault reads that page, not the
    read-around window of up to 128 KiB, which minibatches of scattered rows mostly waste)."""
    if os.path.getsize(path) <= DATA_OFFSET:  # no rows: nothing to map (mmap refuses 0 bytes)
        empty: np.ndarray[Any, Any] = np.load(path, allow_pickle=False)
        return empty
    rows: np.ndarray[Any, Any] = np.load(path, mmap_mode="c", allow_pickle=False)
    mapping = getattr(rows, "_mmap", None)  # numpy's memmap keeps its mmap.mmap here
    if random and mapping is not None:
        mapping.madvise(mmap.MADV_RANDOM)
    return rows


def mapping(rows: np.ndarray[Any, Any]) -> tuple[int, int] | None:
    """(address, length) of the whole mapping under ``rows`` (from :func:`open_rows`)."""
    mapping = getattr(rows, "_mmap", None)
    if mapping is None:
        return None
    start = rows.ctypes.data - int(getattr(rows, "offset", 0)) % mmap.ALLOCATIONGRANULARITY
    return start, len(mapping)


def resident_pages(rows: np.ndarray[Any, Any]) -> np.ndarray[Any, Any] | None:
    """One byte per page of ``rows``'s mapping, whose low bit is set when the page is in
    memory (:func:`outofcore.reader.resident_pages`); None when it cannot be asked."""
    where = mapping(rows)
    return None if where is None else reader.resident_pages(*where)


def page_ranges(
    rows: np.ndarray[Any, Any], ids: np.ndarray[Any, Any]
) -> tuple[int, Any, Any] | None:
    """The pages of ``rows[ids]`` (a mapping from :func:`open_rows`) as the mapping's address
    and the sorted, merged ranges in it (:func:`outofcore.reader.ranges`); None when there
    is no mapping or no row."""
    where = mapping(rows)
    if where is None or not len(ids) or rows.ndim == 0:
        return None
    starts, lengths = reader.ranges(ids, rows.strides[0], rows.ctypes.data - where[0])
    return where[0], starts, lengths


def prefetch(rows: np.ndarray[Any, Any], ids: np.ndarray[Any, Any]) -> int:
    """Ask the kernel to start reading the pages of ``rows[ids]``, all at once
    (``MADV_WILLNEED`` on :func:`page_ranges`), so that the gather that follows waits for a
    disk busy with all of them rather than for one page fault after another; pages in memory
    cost the kernel a lookup. Returns the page ranges asked for."""
    found = page_ranges(rows, ids)
    if found is None:
        return 0
    address, starts, lengths = found
    reader.willneed(address + starts, lengths)
    return len(starts)


def nbytes(part_dir: str | os.PathLike[str]) -> int:
    """The bytes of a part's feature files."""
    return sum(p.stat().st_size for p in read_index(part_dir).values())
