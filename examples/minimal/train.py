"""A minimal training script for a DGLJob: DGL's public API and dglrun's contract, nothing else
(docs/your-own-script.md says what that contract is).

dglrun runs it as every DGL server and every trainer, on every worker:

    python3 train.py --graph_name G --ip_config IP --part_config G.json --num_epochs E \\
        --batch_size B [--train-args: --lr 0.01 --fan_out 10,10 --hidden 64]

It trains a two-layer GraphSAGE on the partitioned graph's ``feat``/``label``/``*_mask``, prints
one epoch line per epoch (the job's progress, ETA and metrics are read from it), saves a
checkpoint after every epoch when the job has storage and resumes from the one dglrun names
after a restart, and writes ``metrics.json`` (the test accuracy) to ``$DGLRUN_OUTPUT_DIR``.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import sys
import time
import traceback
from pathlib import Path

import dgl
import torch
import torch.distributed as dist
import torch.nn.functional as F
from dgl.nn import SAGEConv
from torch import nn

from launcher.checkpoints import saving  # dglrun's: a checkpoint written whole, or not at all

REFUSED = 65  # dglrun's exit code of a process that refused a file (its last line names it)


class SAGE(nn.Module):
    def __init__(self, in_feats: int, hidden: int, classes: int) -> None:
        super().__init__()
        self.layers = nn.ModuleList([SAGEConv(in_feats, hidden, "mean"),
                                     SAGEConv(hidden, classes, "mean")])  # fmt: skip

    def forward(self, blocks: list, x: torch.Tensor) -> torch.Tensor:
        for i, (layer, block) in enumerate(zip(self.layers, blocks, strict=True)):
            x = layer(block, x)
            if i < len(self.layers) - 1:
                x = F.relu(x)
        return x


def args() -> argparse.Namespace:
    p = argparse.ArgumentParser()
    for name in ("--graph_name", "--ip_config", "--part_config"):  # dglrun's
        p.add_argument(name, required=True)
    p.add_argument("--num_epochs", type=int, required=True)
    p.add_argument("--batch_size", type=int, required=True)
    p.add_argument("--lr", type=float, default=0.01)  # yours, through --train-args
    p.add_argument("--fan_out", default="10,10")
    p.add_argument("--hidden", type=int, default=64)
    return p.parse_args()


def summed(*values: float) -> list[float]:
    t = torch.tensor(values, dtype=torch.float64)
    dist.all_reduce(t)
    return t.tolist()


def main() -> None:
    a = args()
    dgl.distributed.initialize(a.ip_config)  # a DGL server serves here and never returns
    dist.init_process_group("gloo")
    g = dgl.distributed.DistGraph(a.graph_name, part_config=a.part_config)
    book = g.get_partition_book()
    train = dgl.distributed.node_split(g.ndata["train_mask"], book, force_even=True)
    test = dgl.distributed.node_split(g.ndata["test_mask"], book, force_even=True)
    feat, label = g.ndata["feat"], g.ndata["label"]
    top = torch.tensor([float(label[train].max())])  # the classes: the largest label, + 1
    dist.all_reduce(top, op=dist.ReduceOp.MAX)
    classes = int(top.item()) + 1
    sampler = dgl.dataloading.NeighborSampler([int(f) for f in a.fan_out.split(",")])
    loader = dgl.dataloading.DistNodeDataLoader(g, train, sampler, batch_size=a.batch_size,
                                                shuffle=True)  # fmt: skip
    model = nn.parallel.DistributedDataParallel(SAGE(feat.shape[1], a.hidden, classes))
    opt = torch.optim.Adam(model.parameters(), lr=a.lr)

    first = 0
    resume = os.environ.get("DGLRUN_RESUME_FROM")  # after a restart: the checkpoint to resume
    if resume:
        try:  # weights only: a checkpoint that would run code is refused, named
            state = torch.load(resume, weights_only=True)
        except pickle.UnpicklingError as e:
            sys.stdout.flush()
            print(f"train.py: error: checkpoint {resume} refused: {e}", file=sys.stderr, flush=True)
            os._exit(REFUSED)  # the job fails FileRefused, not restarted to refuse it again
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        first = int(os.environ["DGLRUN_RESUME_EPOCH"])
        print(f"resuming at epoch {first} from {resume}", flush=True)
    checkpoints = os.environ.get("DGLRUN_CHECKPOINT_DIR")  # with spec.storage only

    for epoch in range(first, a.num_epochs):
        model.train()
        started, losses = time.time(), []
        for inputs, seeds, blocks in loader:
            loss = F.cross_entropy(model(blocks, feat[inputs]), label[seeds])
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        mean = sum(losses) / max(len(losses), 1)
        # the epoch line (0-based): the job's PROGRESS, ETA and status.progressDetail.metrics
        print(f"epoch {epoch} loss {mean:.4f} nodes {len(train)} "
              f"time {time.time() - started:.2f}s", flush=True)  # fmt: skip
        if checkpoints and dist.get_rank() == 0:
            with saving(Path(checkpoints), epoch + 1) as tmp:
                torch.save({"model": model.state_dict(), "opt": opt.state_dict()}, tmp)

    model.eval()
    right = 0
    test_loader = dgl.dataloading.DistNodeDataLoader(g, test, sampler, batch_size=a.batch_size)
    with torch.no_grad():
        for inputs, seeds, blocks in test_loader:
            right += int((model(blocks, feat[inputs]).argmax(1) == label[seeds]).sum())
    right_all, total = summed(float(right), float(len(test)))
    accuracy = right_all / max(total, 1.0)
    print(f"test accuracy {accuracy:.4f}", flush=True)
    output = os.environ.get("DGLRUN_OUTPUT_DIR")  # the trainers'; copied back, or on the claim
    if output and dist.get_rank() == 0:
        Path(output).mkdir(parents=True, exist_ok=True)
        (Path(output) / "metrics.json").write_text(json.dumps({"test_accuracy": accuracy}))
    dist.barrier()  # nobody leaves (which stops the servers) before rank 0 has written


if __name__ == "__main__":
    try:
        main()
    except SystemExit:  # argparse's errors, and a DGL server leaving initialize()
        raise
    except BaseException:  # a trainer that fails must exit non-zero at once: else DGL's exit
        traceback.print_exc()  # handler waits for the other trainers forever
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(1)
