"""Rows ``[lo, hi)`` of a chunked column, opening only the chunk files that hold them.

numpy chunks are memory-mapped and sliced (a rank reading 1/P of a chunk reads 1/P of its
bytes); csv chunks are parsed with pandas, skipping the rows before the slice.
"""

from __future__ import annotations

import numpy as np

from chunkedgraph import ChunkedError, FileSpec
from distpart.types import Array


def _csv_rows(spec: FileSpec, path: object, first: int, stop: int) -> Array:
    import pandas as pd

    frame = pd.read_csv(
        path,
        sep=spec.delimiter,
        header=None,
        skiprows=first,
        nrows=stop - first,
        engine="c",
    )
    values: Array = frame.to_numpy()
    if values.shape[1] == 1 and not spec.pairs:
        values = values[:, 0]
    return values


def _no_rows(spec: FileSpec) -> Array:
    """Zero rows of the column's shape and dtype (a rank with an empty share still takes part
    in the exchanges, with buffers of the right row size)."""
    nonempty = [j for j, n in enumerate(spec.counts) if n]
    if spec.pairs or not nonempty:
        return np.empty((0, 2) if spec.pairs else (0,), dtype=np.int64)
    j = nonempty[0]
    return read_rows(spec, spec.offsets[j], spec.offsets[j] + 1)[:0]


def read_rows(spec: FileSpec, lo: int, hi: int) -> Array:
    """The rows as one array (edges: ``(n, 2)`` int64)."""
    pieces = []
    for chunk, path, first, stop in spec.pieces(lo, hi):
        try:
            if spec.fmt == "numpy":
                data = np.load(path, mmap_mode="r", allow_pickle=False)  # (runs no code)
                piece = np.array(data[first:stop])
            else:
                piece = _csv_rows(spec, path, first, stop)
        except (OSError, ValueError) as e:
            raise ChunkedError(f"{path}: {spec.what} chunk {chunk}: cannot read it: {e}") from e
        if len(piece) != stop - first:
            raise ChunkedError(
                f"{path}: {spec.what} chunk {chunk}: read {len(piece)} rows, expected "
                f"{stop - first}"
            )
        pieces.append(piece)
    if not pieces:
        return _no_rows(spec)
    out = np.concatenate(pieces) if len(pieces) > 1 else pieces[0]
    if spec.pairs:
        if out.ndim != 2 or out.shape[1] != 2:
            raise ChunkedError(f"{spec.what}: rows must be (src, dst) pairs, got {out.shape}")
        out = out.astype(np.int64, copy=False)
    return out
