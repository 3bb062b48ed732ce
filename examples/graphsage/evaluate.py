"""Load a trained GraphSAGE (``model.pt`` and ``metrics.json`` as train_dist.py writes them,
e.g. on a DGLJob's storage) and measure its accuracy on a split of the graph, in one process.

    python evaluate.py --results /results/runs/dgl-graphsage-1a2b3c4d/output \\
        --dataset ogbn-synth --dataset_root raw_data [--split test_mask] [--out eval.json]

The model's shape (hidden units, layers, classes) comes from ``metrics.json``; evaluation is
exact (full neighbourhoods) unless ``--eval_fan_out`` says otherwise. Prints one JSON line:
``{"split": ..., "accuracy": ..., "nodes": ..., "trained_accuracy": ...}``. A ``model.pt``
that holds more than tensors (a pickle that would run code) is refused: one line naming it,
exit code 65 (dglrun's for a refused file).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path

os.environ.setdefault("OUTDATED_IGNORE", "1")  # before dgl/ogb are imported (see common.py)
os.environ.setdefault("DGLBACKEND", "pytorch")

import common
import dgl
import torch

PROG = "evaluate.py"


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    p.add_argument("--results", required=True, help="the folder holding model.pt, metrics.json")
    p.add_argument("--dataset", default=os.environ.get("DGL_DATASET", "ogbn-synth"))
    p.add_argument(
        "--dataset_root",
        default=os.environ.get("DGL_DATASET_ROOT", "raw_data"),
        help="folder holding the ogb dataset folder (default: $DGL_DATASET_ROOT or raw_data)",
    )
    p.add_argument("--split", default="test_mask", choices=["train_mask", "val_mask", "test_mask"])
    p.add_argument("--eval_fan_out", default="", help="neighbours per layer (default: all)")
    p.add_argument("--eval_batch_size", type=int, default=2000)
    p.add_argument("--out", help="also write the JSON line to this file")
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    a = parse_args(argv)
    results = Path(a.results)
    try:
        metrics = json.loads((results / "metrics.json").read_text())
        state = common.load_weights(results / "model.pt")
    except common.WeightsRefused as e:  # (a pod's step that scores it fails for good)
        sys.stdout.flush()  # (its refusal is its last line: dglrun quotes that one)
        print(f"{PROG}: error: {e}", file=sys.stderr, flush=True)
        return common.REFUSED_EXIT_CODE
    except (OSError, ValueError, RuntimeError) as e:
        print(f"{PROG}: error: cannot read the results in {results}: {e}", file=sys.stderr)
        return 2
    try:
        g, _ = common.load_ogb_graph(a.dataset, a.dataset_root)
    except common.DatasetError as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return 2
    feat, label = g.ndata["feat"], g.ndata["label"]
    model = common.GraphSAGE(
        int(feat.shape[1]),
        int(metrics["num_hidden"]),
        int(metrics["num_classes"]),
        int(metrics["num_layers"]),
        float(metrics["dropout"]),
    )
    model.load_state_dict(state)
    nodes = torch.nonzero(g.ndata[a.split], as_tuple=True)[0]
    loader = dgl.dataloading.DataLoader(
        g,
        nodes,
        common.eval_sampler(int(metrics["num_layers"]), a.eval_fan_out),
        batch_size=a.eval_batch_size,
        shuffle=False,
    )
    correct, total = common.count_correct(model, loader, feat, label)
    doc = {
        "split": a.split,
        "accuracy": round(float(correct) / max(total, 1), 4),
        "nodes": int(total),
        "trained_accuracy": metrics.get("test_accuracy"),
    }
    line = json.dumps(doc)
    print(line, flush=True)
    if a.out:
        Path(a.out).write_text(line + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
