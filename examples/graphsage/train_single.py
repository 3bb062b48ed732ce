"""Single-process baseline: the same GraphSAGE, data and flags as train_dist.py on the whole
graph in one process (no partitions, no servers); ``--model mlp`` trains a features-only MLP
instead, to show how much the graph adds.

    python train_single.py --dataset ogbn-synth --dataset_root data --num_epochs 2 \\
        --batch_size 1000 --out metrics.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

os.environ.setdefault("OUTDATED_IGNORE", "1")  # before dgl/ogb are imported (see common.py)
os.environ.setdefault("DGLBACKEND", "pytorch")

import common
import dgl
import torch
import torch.nn.functional as F
from torch import nn


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dataset", default=os.environ.get("DGL_DATASET", "ogbn-synth"))
    p.add_argument(
        "--dataset_root",
        default=os.environ.get("DGL_DATASET_ROOT", "raw_data"),
        help="folder holding the ogb dataset folder (default: $DGL_DATASET_ROOT or raw_data)",
    )
    p.add_argument("--model", choices=["sage", "mlp"], default="sage")
    p.add_argument("--num_epochs", type=int, default=2)
    p.add_argument("--batch_size", type=int, default=1000)
    p.add_argument(
        "--out",
        default=os.path.join(os.environ["DGLRUN_OUTPUT_DIR"], "metrics.json")
        if os.environ.get("DGLRUN_OUTPUT_DIR")
        else None,
        help="write the metrics as JSON to this file (default under $DGLRUN_OUTPUT_DIR, "
        "which dglrun sets in Skip mode)",
    )
    p.add_argument("--graph_name", help="ignored: accepted so that dglrun's Skip mode can run this")
    p.add_argument("--save_model", help="write the trained model's state_dict to this file")
    common.add_model_args(p)
    a = p.parse_args(argv)
    common.check_model_args(p, a)
    return a


def _split_ids(g: dgl.DGLGraph, key: str) -> torch.Tensor:
    return torch.nonzero(g.ndata[key], as_tuple=True)[0]


EpochFn = Callable[[], tuple[float, int]]  # one training epoch -> (mean loss, seed nodes)
AccuracyFn = Callable[[str], float]  # mask name ('val_mask') -> accuracy over that split


def build_sage(
    a: argparse.Namespace, g: dgl.DGLGraph, num_classes: int
) -> tuple[nn.Module, EpochFn, AccuracyFn]:
    feat, label = g.ndata["feat"], g.ndata["label"]
    model = common.GraphSAGE(feat.shape[1], a.num_hidden, num_classes, a.num_layers, a.dropout)
    opt = torch.optim.Adam(model.parameters(), lr=a.lr)
    sampler = dgl.dataloading.NeighborSampler(common.parse_fan_out(a.fan_out))
    train_loader = dgl.dataloading.DataLoader(
        g, _split_ids(g, "train_mask"), sampler, batch_size=a.batch_size, shuffle=True
    )
    full = common.eval_sampler(a.num_layers, a.eval_fan_out)

    def epoch() -> tuple[float, int]:
        return common.train_epoch(model, train_loader, feat, label, opt)

    def accuracy(key: str) -> float:
        loader = dgl.dataloading.DataLoader(
            g, _split_ids(g, key), full, batch_size=a.eval_batch_size, shuffle=False
        )
        correct, total = common.count_correct(model, loader, feat, label)
        return float(correct) / max(total, 1)

    return model, epoch, accuracy


def build_mlp(
    a: argparse.Namespace, g: dgl.DGLGraph, num_classes: int
) -> tuple[nn.Module, EpochFn, AccuracyFn]:
    feat, label = g.ndata["feat"], g.ndata["label"]
    model = common.MLP(feat.shape[1], a.num_hidden, num_classes, a.num_layers, a.dropout)
    opt = torch.optim.Adam(model.parameters(), lr=a.lr)
    train_ids = _split_ids(g, "train_mask")

    def epoch() -> tuple[float, int]:
        model.train()
        total = 0.0
        for idx in torch.randperm(len(train_ids)).split(a.batch_size):
            nodes = train_ids[idx]
            loss = F.cross_entropy(model(feat[nodes]), label[nodes])
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += float(loss) * len(nodes)
        return total / len(train_ids), len(train_ids)

    @torch.no_grad()
    def accuracy(key: str) -> float:
        model.eval()
        nodes = _split_ids(g, key)
        pred = model(feat[nodes]).argmax(1)
        return float((pred == label[nodes]).float().mean())

    return model, epoch, accuracy


def train(a: argparse.Namespace, epoch: EpochFn, accuracy: AccuracyFn) -> dict[str, Any]:
    losses: list[float] = []
    train_seconds = 0.0
    val_acc = test_acc = float("nan")
    for e in range(a.num_epochs):
        started = time.perf_counter()
        loss, seen = epoch()
        took = time.perf_counter() - started
        train_seconds += took
        losses.append(loss)
        line = f"[single] epoch {e} loss {loss:.4f} nodes {seen} time {took:.2f}s"
        last = e == a.num_epochs - 1
        if last or (a.eval_every and (e + 1) % a.eval_every == 0):
            val_acc, test_acc = accuracy("val_mask"), accuracy("test_mask")
            line += f" val_acc {val_acc:.4f} test_acc {test_acc:.4f}"
        print(line, flush=True)
    return {
        "test_accuracy": test_acc,
        "val_accuracy": val_acc,
        "epochs": a.num_epochs,
        "train_seconds": round(train_seconds, 3),
        "losses": [round(x, 5) for x in losses],
    }


def main(argv: Sequence[str] | None = None) -> int:
    a = parse_args(argv)
    common.set_seed(a.seed)
    started = time.perf_counter()
    try:
        g, num_classes = common.load_ogb_graph(a.dataset, a.dataset_root)
    except common.DatasetError as e:
        print(f"train_single.py: error: {e}", file=sys.stderr)
        return 2
    print(
        f"[single] {a.dataset}: {g.num_nodes()} nodes, {g.num_edges()} edges, {num_classes} "
        f"classes; loaded in {time.perf_counter() - started:.1f}s",
        flush=True,
    )
    build = build_sage if a.model == "sage" else build_mlp
    model, epoch, accuracy = build(a, g, num_classes)
    metrics = train(a, epoch, accuracy)
    metrics.update(
        model=a.model,
        dataset=a.dataset,
        batch_size=a.batch_size,
        fan_out=a.fan_out,
        num_hidden=a.num_hidden,
        num_layers=a.num_layers,
        lr=a.lr,
        seed=a.seed,
    )
    print(
        f"[single] {a.model}: test_accuracy {metrics['test_accuracy']:.4f} "
        f"val_accuracy {metrics['val_accuracy']:.4f} train_seconds {metrics['train_seconds']}",
        flush=True,
    )
    if a.out:
        out = Path(a.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(metrics, indent=2) + "\n")
    if a.save_model:
        torch.save(model.state_dict(), a.save_model)
    return 0


if __name__ == "__main__":
    sys.exit(main())
