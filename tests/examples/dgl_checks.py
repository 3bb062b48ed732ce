"""Checks that need DGL, run by the tests with the DGL interpreter (``python dgl_checks.py ...``);
each prints one JSON object on its last line of stdout.

    dataset     load a dataset through examples/graphsage/common.py (ogb's real loader)
    partitions  compare every partition (nodes, edges, features, halo) with the source graph
    chunked     compare a chunked graph (dgl-chunk-graph's output) with the source graph
    model       load a saved GraphSAGE state_dict into the example's model class
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

os.environ.setdefault("OUTDATED_IGNORE", "1")
os.environ.setdefault("DGLBACKEND", "pytorch")

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "graphsage"
sys.path.insert(0, str(EXAMPLE))
sys.path.insert(1, str(EXAMPLE.parents[1]))  # distpart, launcher: this checkout

import common  # noqa: E402  (examples/graphsage/common.py)
import dgl  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
from dgl.data.utils import load_tensors  # noqa: E402


def check_dataset(a: argparse.Namespace) -> dict[str, Any]:
    ds = common.load_ogb_dataset(a.name, a.root)
    g, num_classes = common.load_ogb_graph(a.name, a.root)
    masks = [g.ndata[k] for k in ("train_mask", "val_mask", "test_mask")]
    overlap = int((masks[0].int() + masks[1].int() + masks[2].int() > 1).sum())
    labelled = g.ndata["label"][masks[0] | masks[1] | masks[2]]
    return {
        "loader": f"{type(ds).__module__}.{type(ds).__name__}",
        "dataset_root": str(ds.root),
        "num_nodes": int(g.num_nodes()),
        "num_edges": int(g.num_edges()),
        "feat_shape": list(g.ndata["feat"].shape),
        "feat_dtype": str(g.ndata["feat"].dtype),
        "label_shape": list(g.ndata["label"].shape),
        "label_dtype": str(g.ndata["label"].dtype),
        "label_min": int(labelled.min()),
        "label_max": int(labelled.max()),
        "num_classes": num_classes,
        "split_sizes": [int(m.sum()) for m in masks],
        "split_overlap": overlap,
        "self_loops": int((g.edges()[0] == g.edges()[1]).sum()),
        "reverse_edges_missing": int((~g.has_edges_between(g.edges()[1], g.edges()[0])).sum()),
    }


def _orig_nids(config: Path, meta: dict[str, Any]) -> torch.Tensor:
    """Partitioned node id -> source node id: DGL-API's orig_nids.pt beside the JSON, or the
    ParMETIS modes' part<k>/orig_nids.dgl (one per part, its inner nodes in id order)."""
    whole = config.parent / "orig_nids.pt"
    if whole.is_file():
        ids: torch.Tensor = torch.load(whole, weights_only=True)
        return ids
    ntype = next(iter(meta["ntypes"]))
    return torch.cat(
        [
            load_tensors(str(config.parent / f"part{i}" / "orig_nids.dgl"))[ntype]
            for i in range(meta["num_parts"])
        ]
    )


def _pairs(u: torch.Tensor, v: torch.Tensor, n: int) -> torch.Tensor:
    """Edges as sorted keys u * n + v (a multiset, comparable with torch.equal)."""
    return torch.sort(u.long() * n + v.long()).values


def check_partitions(a: argparse.Namespace) -> dict[str, Any]:
    """Every node in exactly one part, the parts' own edges are exactly the source's edges,
    every feature row equals the source's, and each part's halo and local edges are what DGL's
    one-hop halo holds: all in- and out-edges of its own nodes, and their other endpoints."""
    src, _ = common.load_ogb_graph(a.name, a.root)
    n = src.num_nodes()
    config = Path(a.config)
    meta = json.loads(config.read_text())
    orig_nids = _orig_nids(config, meta)
    ntype = next(iter(meta["ntypes"]))
    su, sv = src.edges()
    parts: list[dict[str, Any]] = []
    mismatches = {key: 0 for key in ("feat", "label", "train_mask", "val_mask", "test_mask")}
    mismatches.update(edges=0, halo=0, local_edges=0, part_id=0)
    own_edges, cut = [], 0
    for i in range(meta["num_parts"]):
        part, node_feats, _ef, gpb, name, _nt, _et = dgl.distributed.load_partition(a.config, i)
        inner = part.ndata["inner_node"].bool()
        new_ids = part.ndata[dgl.NID]
        start, end = meta["node_map"][ntype][i]
        contiguous = bool(torch.equal(new_ids[inner], torch.arange(start, end)))
        first_inner = bool(inner[: int(inner.sum())].all())
        orig = orig_nids[new_ids]  # source ids of every local node
        mine = orig[inner]
        for key in ("feat", "label", "train_mask", "val_mask", "test_mask"):
            got = node_feats[f"{ntype}/{key}"]
            want = src.ndata[key][mine].to(got.dtype)
            mismatches[key] += int((got != want).reshape(len(mine), -1).any(1).sum())
        # out-of-core workers' .npy copies (outofcore.layout), where written: the same rows
        part_dir = Path(a.config).parent / meta[f"part-{i}"]["node_feats"]
        if (part_dir.parent / "node_feat_npy" / "index.json").is_file():
            from outofcore import layout

            for key, path in layout.read_index(part_dir.parent).items():
                rows = torch.from_numpy(layout.open_rows(path).copy())
                mismatches[f"npy {key}"] = int(not torch.equal(rows, node_feats[key]))
        owner = (
            torch.searchsorted(
                torch.tensor([r[0] for r in meta["node_map"][ntype]]), new_ids, right=True
            )
            - 1
        )
        mismatches["part_id"] += int((part.ndata["part_id"] != owner).sum())
        u, v = part.edges()
        ie = part.edata["inner_edge"].bool()
        own_edges.append(torch.stack([orig[u[ie]], orig[v[ie]]]))
        cut += int((~inner[u[ie]]).sum())
        # the source's view of this part: in- and out-edges of its own nodes
        is_mine = torch.zeros(n, dtype=torch.bool)
        is_mine[mine] = True
        touching = is_mine[su] | is_mine[sv]
        want_local = _pairs(su[touching], sv[touching], n)
        got_local = _pairs(orig[u], orig[v], n)
        mismatches["local_edges"] += int(not torch.equal(want_local, got_local))
        ends = torch.cat([su[touching], sv[touching]])
        want_halo = torch.unique(ends[~is_mine[ends]])
        got_halo = torch.sort(orig[~inner]).values
        mismatches["halo"] += int(not torch.equal(want_halo, got_halo))
        parts.append(
            {
                "part": i,
                "graph_name": name,
                "inner_nodes": len(mine),
                "contiguous_ids": contiguous,
                "inner_nodes_first": first_inner,
                "halo_nodes": int((~inner).sum()),
                "own_edges": int(ie.sum()),
                "train_nodes": int(node_feats[f"{ntype}/train_mask"].sum()),
                "partid": int(gpb.partid),
            }
        )
    every = torch.cat(own_edges, dim=1)
    mismatches["edges"] = int(not torch.equal(_pairs(every[0], every[1], n), _pairs(su, sv, n)))
    is_permutation = bool(torch.equal(torch.sort(orig_nids).values, torch.arange(n)))
    return {
        "num_parts": meta["num_parts"],
        "part_method": meta.get("part_method"),
        "parts": parts,
        "orig_nids_is_permutation": is_permutation,
        "mismatches": mismatches,
        "covered_nodes": sum(p["inner_nodes"] for p in parts),
        "source_nodes": n,
        "source_edges": int(src.num_edges()),
        "edge_cut": cut,
        "edge_cut_fraction": round(cut / max(int(src.num_edges()), 1), 6),
    }


def _chunked_equals(graph: dgl.DGLGraph, chunked_dir: Path) -> dict[str, Any]:
    from chunkedgraph import load, verify
    from distpart.read import read_rows

    c = load(chunked_dir)
    verify(c)
    pairs = read_rows(c.edges, 0, c.num_edges)
    u, v = graph.edges(order="eid")
    same = {
        "edges": bool(
            pairs.shape == (graph.num_edges(), 2)
            and (pairs[:, 0] == u.numpy()).all()
            and (pairs[:, 1] == v.numpy()).all()
        )
    }
    for key, spec in c.node_data.items():
        rows = read_rows(spec, 0, c.num_nodes)
        same[key] = bool(np.array_equal(rows, graph.ndata[key].numpy()))
    return {
        "num_nodes": c.num_nodes,
        "num_edges": c.num_edges,
        "node_chunks": len(c.node_counts),
        "node_data": sorted(c.node_data),
        "same": same,
    }


def check_chunked(a: argparse.Namespace) -> dict[str, Any]:
    """The converter's chunked graph holds exactly what ogb's own loader builds (edge ids and
    order, every node data column); with --roundtrip, so does the graph converted from a
    DGLGraph saved with dgl.save_graphs."""
    from distpart.convert import convert_dgl

    src, _ = common.load_ogb_graph(a.name, a.root)
    out = {"from_ogb": _chunked_equals(src, Path(a.chunked))}
    if a.roundtrip:
        folder = Path(a.roundtrip)
        folder.mkdir(parents=True, exist_ok=True)
        dgl.save_graphs(str(folder / "graph.bin"), [src])
        convert_dgl(folder / "graph.bin", folder / "chunked", 3, edge_format="csv")
        out["from_dgl"] = _chunked_equals(src, folder / "chunked")
    return out


def check_model(a: argparse.Namespace) -> dict[str, Any]:
    state = common.load_weights(a.path)
    weights = [k for k in state if k.endswith("weight")]
    in_feats = int(state["layers.0.fc_neigh.weight"].shape[1])
    layers = sorted({k.split(".")[1] for k in state if k.startswith("layers.")})
    last = f"layers.{len(layers) - 1}.fc_neigh.weight"
    num_classes = int(state[last].shape[0])
    hidden = int(state["layers.0.fc_neigh.weight"].shape[0])
    model = common.GraphSAGE(in_feats, hidden, num_classes, len(layers))
    model.load_state_dict(state)  # strict: every key and shape must match
    return {
        "in_feats": in_feats,
        "num_hidden": hidden,
        "num_classes": num_classes,
        "num_layers": len(layers),
        "tensors": len(state),
        "weights": len(weights),
    }


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("dataset")
    d.add_argument("--root", required=True)
    d.add_argument("--name", default="ogbn-synth")
    q = sub.add_parser("partitions")
    q.add_argument("--config", required=True)
    q.add_argument("--root", required=True)
    q.add_argument("--name", default="ogbn-synth")
    c = sub.add_parser("chunked")
    c.add_argument("--chunked", required=True)
    c.add_argument("--root", required=True)
    c.add_argument("--name", default="ogbn-synth")
    c.add_argument("--roundtrip", help="also convert a saved DGLGraph here and compare")
    m = sub.add_parser("model")
    m.add_argument("--path", required=True)
    a = p.parse_args(argv)
    check = {
        "dataset": check_dataset,
        "partitions": check_partitions,
        "chunked": check_chunked,
        "model": check_model,
    }
    print(json.dumps(check[a.cmd](a)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
