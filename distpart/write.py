"""One DGL partition on disk, as ``dgl.distributed.partition_graph`` (DGL 2.1) writes it, so that
``DistGraph``, ``load_partition`` and training scripts read it unchanged::

    part<k>/graph.dgl       the local graph (dgl.save_graphs, COO):
                            nodes: the part's own ("inner") nodes first, in global id order,
                            then the halo: every other endpoint of their in- and out-edges;
                            ndata  _ID (global id), inner_node (uint8), part_id (int64)
                            edges: the part's own edges (destination inside) first, in global id
                            order, then its nodes' out-edges to the halo (inner_edge 0)
                            edata  _ID (global id), inner_edge (uint8)
    part<k>/node_feat.dgl   "<ntype>/<name>" -> one row per inner node (bool as uint8, as DGL)
    part<k>/edge_feat.dgl   "<etype>/<name>" -> one row per inner edge
    part<k>/orig_nids.dgl   "<ntype>" -> the chunked graph's id of every inner node
    part<k>/orig_eids.dgl   "<etype>" -> the chunked graph's id of every inner edge
    part<k>/node_feat_npy/  with ``feature_files``: node_feat.dgl's columns as .npy, for
                            out-of-core workers (outofcore.layout)

(the last two, as DGL's own distributed pipeline writes them, map results back to the input).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from chunkedgraph import ChunkedGraph
from distpart.types import Array
from outofcore import layout


@dataclass
class PartRows:
    """Everything a writer received for one part, already in the part's order.

    ``src``/``dst``/``eids``: the part's own edges (those into its nodes) in edge id order,
    then its nodes' out-edges to other parts in edge id order; new global node ids, which
    :func:`write_part` turns into local ones in place (no copy of the edge list)."""

    part: int
    node_range: tuple[int, int]
    edge_range: tuple[int, int]
    orig_nids: Array  # the chunked graph's id of each of the part's nodes, in new id order
    node_feats: dict[str, Array]  # one row per node of the part, in new id order
    src: Array
    dst: Array
    eids: Array
    orig_eids: Array  # the chunked graph's id of each own edge
    edge_feats: dict[str, Array]  # one row per own edge, in edge id order

    @property
    def own_edges(self) -> int:
        return self.edge_range[1] - self.edge_range[0]


def import_dgl() -> None:
    """Import DGL (and torch) now, before any data is held.

    DGL 2.1's import keeps a frame of it alive for good, and with it every frame it was
    imported from: the first function to import DGL keeps its locals until the process
    ends. Imported lazily by :func:`write_part`, the first part's rows stayed resident through
    every later round and count (1.3 GiB a rank at products scale: an elastic job's second
    count ran out of memory). Call this first from a function whose locals at its return hold
    no data (distpart.pipeline's write_count, just before its first part is written, so that
    the steps before it do not carry DGL's 400 MiB); :func:`write_part` then finds DGL
    imported.
    """
    import dgl  # noqa: F401
    import torch  # noqa: F401


def _tensor_dict(prefix: str, columns: dict[str, Array]) -> dict[str, object]:
    import torch

    out: dict[str, object] = {}
    for name, values in columns.items():
        if values.dtype == np.bool_:
            values = values.view(np.uint8)  # DGL stores boolean masks as uint8
        out[f"{prefix}/{name}" if prefix else name] = torch.from_numpy(np.ascontiguousarray(values))
    return out


def _to_local(ids: Array, start: int, end: int, halo: Array) -> None:
    """Global node ids -> the part's local ids, in place: own nodes first, then the halo."""
    outside = np.flatnonzero((ids < start) | (ids >= end))
    local = (end - start) + np.searchsorted(halo, ids[outside])
    np.subtract(ids, start, out=ids)
    ids[outside] = local


def write_part(
    out: Path, graph: ChunkedGraph, node_start: Array, rows: PartRows, feature_files: bool = False
) -> Path:
    """Write part ``rows.part``. Its ``src`` and ``dst`` become local ids."""
    import dgl
    import torch
    from dgl.data.utils import save_tensors

    start, end = rows.node_range
    n, own = end - start, rows.own_edges
    # the halo: the other end of in-edges from other parts, and of the out-edges
    ins = rows.src[:own]
    halo = np.unique(
        np.concatenate([ins[(ins < start) | (ins >= end)], rows.dst[own:]]).astype(np.int64)
    )
    del ins
    _to_local(rows.src, start, end, halo)
    _to_local(rows.dst, start, end, halo)
    global_ids = np.concatenate([np.arange(start, end, dtype=np.int64), halo])

    g = dgl.graph(
        (torch.from_numpy(rows.src), torch.from_numpy(rows.dst)), num_nodes=len(global_ids)
    )
    g.ndata[dgl.NID] = torch.from_numpy(global_ids)
    g.ndata["inner_node"] = torch.from_numpy(
        np.concatenate([np.ones(n, np.uint8), np.zeros(len(halo), np.uint8)])
    )
    g.ndata["part_id"] = torch.from_numpy(
        (np.searchsorted(node_start, global_ids, side="right") - 1).astype(np.int64)
    )
    g.edata[dgl.EID] = torch.from_numpy(rows.eids)
    inner = np.zeros(len(rows.eids), np.uint8)
    inner[:own] = 1
    g.edata["inner_edge"] = torch.from_numpy(inner)

    folder = out / f"part{rows.part}"
    folder.mkdir(parents=True, exist_ok=True)
    dgl.save_graphs(str(folder / "graph.dgl"), [g])
    del g
    node_feats = _tensor_dict(graph.ntype, rows.node_feats)
    save_tensors(str(folder / "node_feat.dgl"), node_feats)
    if feature_files:  # the same columns, as DGL stores them (masks as uint8)
        layout.write(folder, node_feats)
    del node_feats
    save_tensors(str(folder / "edge_feat.dgl"), _tensor_dict(graph.etype, rows.edge_feats))
    save_tensors(str(folder / "orig_nids.dgl"), _tensor_dict("", {graph.ntype: rows.orig_nids}))
    save_tensors(str(folder / "orig_eids.dgl"), _tensor_dict("", {graph.etype: rows.orig_eids}))
    return folder
