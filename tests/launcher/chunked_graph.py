"""A small valid graph in DGL's chunked format, for the tests of chunkedgraph and of the
memory plan and storage paths that read it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np


def write_graph(
    root: Path,
    *,
    node_chunks: tuple[int, ...] = (4, 6),
    edge_chunks: tuple[int, ...] = (10, 14),
    edge_format: str = "numpy",
) -> Path:
    """A small valid chunked graph: numpy (or csv) edges, a float feature, a bool mask."""
    root.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    n, e = sum(node_chunks), sum(edge_chunks)
    pairs = rng.integers(0, n, size=(e, 2))
    feat = rng.standard_normal((n, 3)).astype(np.float32)
    mask = np.arange(n) % 2 == 0
    edge_files, at = [], 0
    for j, count in enumerate(edge_chunks):
        rows = pairs[at : at + count]
        at += count
        if edge_format == "numpy":
            name = f"edges-{j}.npy"
            np.save(root / name, rows)
        else:
            name = f"edges-{j}.txt"
            np.savetxt(root / name, rows, fmt="%d", delimiter=" ")
        edge_files.append(name)
    feat_files, mask_files, at = [], [], 0
    for j, count in enumerate(node_chunks):
        np.save(root / f"feat-{j}.npy", feat[at : at + count])
        np.save(root / f"mask-{j}.npy", mask[at : at + count])
        feat_files.append(f"feat-{j}.npy")
        mask_files.append(f"mask-{j}.npy")
        at += count
    fmt: dict[str, Any] = {"name": edge_format}
    if edge_format == "csv":
        fmt["delimiter"] = " "
    doc = {
        "graph_name": "g",
        "node_type": ["_N"],
        "num_nodes_per_chunk": [list(node_chunks)],
        "edge_type": ["_N:_E:_N"],
        "num_edges_per_chunk": [list(edge_chunks)],
        "edges": {"_N:_E:_N": {"format": fmt, "data": edge_files}},
        "node_data": {
            "_N": {
                "feat": {"format": {"name": "numpy"}, "data": feat_files},
                "train_mask": {"format": {"name": "numpy"}, "data": mask_files},
            }
        },
        "edge_data": {},
    }
    (root / "metadata.json").write_text(json.dumps(doc))
    return root
