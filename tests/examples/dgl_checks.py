"""Checks that need DGL, run by the tests with the DGL interpreter (``python dgl_checks.py ...``);
each prints one JSON object on its last line of stdout.

    dataset     load a dataset through examples/graphsage/common.py (ogb's real loader)
    partitions  compare every partition's nodes and a sample of its edges with the source graph
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

import common  # noqa: E402  (examples/graphsage/common.py)
import dgl  # noqa: E402
import torch  # noqa: E402


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


def check_partitions(a: argparse.Namespace) -> dict[str, Any]:
    src, _ = common.load_ogb_graph(a.name, a.root)
    orig_nids: torch.Tensor = torch.load(a.orig_nids)
    meta = json.loads(Path(a.config).read_text())
    gen = torch.Generator().manual_seed(0)
    parts: list[dict[str, Any]] = []
    mismatches: dict[str, int] = {}
    for i in range(meta["num_parts"]):
        part, node_feats, _edge_feats, gpb, name, _nt, _et = dgl.distributed.load_partition(
            a.config, i
        )
        inner = part.ndata["inner_node"].bool()
        new_ids = part.ndata[dgl.NID][inner]  # global ids in the partitioned numbering
        start, end = meta["node_map"]["_N"][i]
        contiguous = bool(torch.equal(new_ids, torch.arange(start, end)))
        orig = orig_nids[new_ids]
        for key in ("feat", "label", "train_mask", "val_mask", "test_mask"):
            got = node_feats[f"_N/{key}"]
            want = src.ndata[key][orig]
            bad = int((got != want).reshape(len(orig), -1).any(1).sum())
            mismatches[key] = mismatches.get(key, 0) + bad
        # A sample of the partition's edges must exist in the source graph (original ids).
        u, v = part.edges()
        pick = torch.randperm(len(u), generator=gen)[: a.edges]
        gu = orig_nids[part.ndata[dgl.NID][u[pick]]]
        gv = orig_nids[part.ndata[dgl.NID][v[pick]]]
        missing_edges = int((~src.has_edges_between(gu, gv)).sum())
        mismatches["edges"] = mismatches.get("edges", 0) + missing_edges
        parts.append(
            {
                "part": i,
                "graph_name": name,
                "inner_nodes": len(new_ids),
                "contiguous_ids": contiguous,
                "halo_nodes": int((~inner).sum()),
                "edges_checked": len(pick),
                "train_nodes": int(node_feats["_N/train_mask"].sum()),
                "partid": int(gpb.partid),
            }
        )
    is_permutation = bool(torch.equal(torch.sort(orig_nids).values, torch.arange(src.num_nodes())))
    return {
        "num_parts": meta["num_parts"],
        "part_method": meta.get("part_method"),
        "parts": parts,
        "orig_nids_is_permutation": is_permutation,
        "mismatches": mismatches,
        "covered_nodes": sum(p["inner_nodes"] for p in parts),
        "source_nodes": int(src.num_nodes()),
    }


def check_model(a: argparse.Namespace) -> dict[str, Any]:
    state = torch.load(a.path)
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
    q.add_argument("--orig-nids", required=True)
    q.add_argument("--root", required=True)
    q.add_argument("--name", default="ogbn-synth")
    q.add_argument("--edges", type=int, default=2000, help="edges to check per partition")
    m = sub.add_parser("model")
    m.add_argument("--path", required=True)
    a = p.parse_args(argv)
    check = {"dataset": check_dataset, "partitions": check_partitions, "model": check_model}
    print(json.dumps(check[a.cmd](a)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
