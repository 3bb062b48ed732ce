"""dglrun's partition entry point: load an ogb node-property dataset and partition it with METIS.

    python load_and_partition_graph.py --graph_name G --workspace W --rel_data_path dataset \\
        --num_parts N [--balance_train] [--balance_edges] [--dataset ogbn-synth] \\
        [--dataset_root DIR]

writes ``dgl.distributed.partition_graph``'s output to ``W/<rel_data_path>`` (``G.json``,
``part0/`` ... ``part<N-1>/``) plus ``orig_nids.pt``: for every node id of the partitioned
graph (nodes are renumbered so that each partition's nodes are contiguous), its id in the
source dataset (``torch.save`` of an int64 tensor).

The dataset is ``--dataset`` (default ``$DGL_DATASET``, else ``ogbn-synth``) under
``--dataset_root`` (default ``$DGL_DATASET_ROOT``, else ``W/raw_data``), in ogb's layout: one
of ogb's own datasets extracted there, or one written by make_dataset.py. Nothing is
downloaded; ``--dataset_url`` (which dglrun passes through) is only reported as unsupported.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path

PROG = "load_and_partition_graph.py"


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    p.add_argument("--graph_name", required=True, help="partition name (G.json)")
    p.add_argument("--workspace", required=True, help="dglrun's workspace folder")
    p.add_argument("--rel_data_path", default="dataset", help="output folder inside workspace")
    p.add_argument("--num_parts", type=int, required=True)
    p.add_argument("--balance_train", action="store_true", help="balance training nodes")
    p.add_argument("--balance_edges", action="store_true", help="balance edges")
    p.add_argument(
        "--dataset",
        default=os.environ.get("DGL_DATASET") or "ogbn-synth",
        help="ogb dataset name (default: $DGL_DATASET, else ogbn-synth)",
    )
    p.add_argument(
        "--dataset_root",
        default=os.environ.get("DGL_DATASET_ROOT") or None,
        help="folder holding the ogb dataset folder (default: $DGL_DATASET_ROOT, else "
        "<workspace>/raw_data)",
    )
    p.add_argument("--dataset_url", help="not supported (no downloads); only reported")
    p.add_argument("--part_method", choices=["metis", "random"], default="metis")
    p.add_argument("--num_hops", type=int, default=1, help="halo hops stored per partition")
    p.add_argument(
        "--num_trainers_per_machine",
        type=int,
        default=1,
        help="split each partition's nodes among this many trainers (METIS only)",
    )
    a = p.parse_args(argv)
    if a.num_parts < 1:
        p.error("--num_parts must be at least 1")
    if a.num_trainers_per_machine < 1 or a.num_hops < 1:
        p.error("--num_trainers_per_machine and --num_hops must be at least 1")
    return a


def main(argv: Sequence[str] | None = None) -> int:
    a = parse_args(argv)
    workspace = Path(a.workspace)
    out = workspace / a.rel_data_path
    root = Path(a.dataset_root) if a.dataset_root else workspace / "raw_data"
    if a.dataset_url:
        print(
            f"{PROG}: warning: --dataset_url {a.dataset_url} is not supported (this example "
            f"does not download); loading {a.dataset} from {root} instead",
            flush=True,
        )
    if not root.is_dir():
        print(
            f"{PROG}: error: dataset root {root} does not exist; put the dataset there "
            "(make_dataset.py --root ...) or pass --dataset_root / set DGL_DATASET_ROOT",
            file=sys.stderr,
        )
        return 2

    started = time.perf_counter()
    import common
    import dgl
    import torch

    imported = time.perf_counter()
    try:
        g, num_classes = common.load_ogb_graph(a.dataset, root)
    except common.DatasetError as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return 2
    loaded = time.perf_counter()
    num_train = int(g.ndata["train_mask"].sum())
    print(
        f"[partition] {a.dataset} from {root}: {g.num_nodes()} nodes, {g.num_edges()} edges, "
        f"{num_classes} classes, {num_train}/{int(g.ndata['val_mask'].sum())}/"
        f"{int(g.ndata['test_mask'].sum())} train/val/test; loaded in {loaded - imported:.1f}s "
        f"(imports {imported - started:.1f}s)",
        flush=True,
    )

    out.mkdir(parents=True, exist_ok=True)
    orig_nids, _orig_eids = dgl.distributed.partition_graph(
        g,
        a.graph_name,
        a.num_parts,
        str(out),
        num_hops=a.num_hops,
        part_method=a.part_method,
        balance_ntypes=g.ndata["train_mask"] if a.balance_train else None,
        balance_edges=a.balance_edges,
        return_mapping=True,
        num_trainers_per_machine=a.num_trainers_per_machine,
    )
    partitioned = time.perf_counter()
    torch.save(orig_nids, out / "orig_nids.pt")

    meta = json.loads((out / f"{a.graph_name}.json").read_text())
    ranges = meta["node_map"]["_N"]  # [start, end) of each part's new node ids
    sizes = []
    for start, end in ranges:
        part_train = int(g.ndata["train_mask"][orig_nids[start:end]].sum())
        sizes.append(f"{end - start} nodes ({part_train} train)")
    print(
        f"[partition] {a.num_parts} part(s) with {a.part_method}"
        f"{', balanced train nodes' if a.balance_train else ''}"
        f"{', balanced edges' if a.balance_edges else ''}: {'; '.join(sizes)}; "
        f"partitioned in {partitioned - loaded:.1f}s",
        flush=True,
    )
    print(
        f"[partition] wrote {out / (a.graph_name + '.json')} and {out / 'orig_nids.pt'}; "
        f"total {time.perf_counter() - started:.1f}s",
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
