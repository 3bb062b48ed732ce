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

(the last two, as DGL's own distributed pipeline writes them, map results back to the input).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from chunkedgraph import ChunkedGraph
from distpart.types import Array

# The edge records the pipeline ships to writers, one int64 row each: new source and
# destination ids, new edge id, the chunked graph's edge id, 1 for the part's own edges (0 for
# its nodes' out-edges to the halo), and the part the record is for.
SRC, DST, EID, ORIG, INNER, PART = range(6)


def _tensor_dict(prefix: str, columns: dict[str, Array]) -> dict[str, object]:
    import torch

    out: dict[str, object] = {}
    for name, values in columns.items():
        if values.dtype == np.bool_:
            values = values.astype(np.uint8)  # DGL stores boolean masks as uint8
        out[f"{prefix}/{name}" if prefix else name] = torch.from_numpy(np.ascontiguousarray(values))
    return out


def write_part(
    out: Path,
    part: int,
    *,
    graph: ChunkedGraph,
    node_range: tuple[int, int],
    node_start: Array,
    node_ids: Array,
    orig_nids: Array,
    node_feats: dict[str, Array],
    edges: Array,
    edge_feats: dict[str, Array],
    edge_range: tuple[int, int],
) -> Path:
    """Write part ``part`` from the rows its writer received (in any order)."""
    import dgl
    import torch
    from dgl.data.utils import save_tensors

    start, end = node_range
    n = end - start
    if len(node_ids) != n or (n and not np.array_equal(np.sort(node_ids), np.arange(start, end))):
        raise ValueError(f"part {part}: received {len(node_ids)} of its {n} nodes")
    at = node_ids - start
    orig = np.empty(n, dtype=np.int64)
    orig[at] = orig_nids
    feats = {}
    for name, rows in node_feats.items():
        placed = np.empty_like(rows)
        placed[at] = rows
        feats[name] = placed

    inner = edges[:, INNER] == 1
    own, out_edges = edges[inner], edges[~inner]
    order = np.argsort(own[:, EID], kind="stable")
    own = own[order]
    efeats = {name: rows[order] for name, rows in edge_feats.items()}
    lo, hi = edge_range
    if len(own) != hi - lo or (len(own) and not np.array_equal(own[:, EID], np.arange(lo, hi))):
        raise ValueError(f"part {part}: received {len(own)} of its {hi - lo} edges")
    out_edges = out_edges[np.argsort(out_edges[:, EID], kind="stable")]
    local_edges = np.concatenate([own, out_edges])

    ends = np.concatenate([local_edges[:, SRC], local_edges[:, DST]])
    halo = np.unique(ends[(ends < start) | (ends >= end)])
    global_ids = np.concatenate([np.arange(start, end, dtype=np.int64), halo])

    def local(ids: Array) -> Array:
        inside = (ids >= start) & (ids < end)
        return np.where(inside, ids - start, n + np.searchsorted(halo, ids))

    g = dgl.graph(
        (
            torch.from_numpy(local(local_edges[:, SRC])),
            torch.from_numpy(local(local_edges[:, DST])),
        ),
        num_nodes=len(global_ids),
    )
    g.ndata[dgl.NID] = torch.from_numpy(global_ids)
    g.ndata["inner_node"] = torch.from_numpy(
        np.concatenate([np.ones(n, np.uint8), np.zeros(len(halo), np.uint8)])
    )
    g.ndata["part_id"] = torch.from_numpy(
        (np.searchsorted(node_start, global_ids, side="right") - 1).astype(np.int64)
    )
    g.edata[dgl.EID] = torch.from_numpy(np.ascontiguousarray(local_edges[:, EID]))
    g.edata["inner_edge"] = torch.from_numpy(
        np.concatenate([np.ones(len(own), np.uint8), np.zeros(len(out_edges), np.uint8)])
    )

    folder = out / f"part{part}"
    folder.mkdir(parents=True, exist_ok=True)
    dgl.save_graphs(str(folder / "graph.dgl"), [g])
    save_tensors(str(folder / "node_feat.dgl"), _tensor_dict(graph.ntype, feats))
    save_tensors(str(folder / "edge_feat.dgl"), _tensor_dict(graph.etype, efeats))
    save_tensors(str(folder / "orig_nids.dgl"), _tensor_dict("", {graph.ntype: orig}))
    save_tensors(
        str(folder / "orig_eids.dgl"),
        _tensor_dict("", {graph.etype: np.ascontiguousarray(own[:, ORIG])}),
    )
    return folder
