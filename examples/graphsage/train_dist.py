"""dglrun's training entry point: distributed GraphSAGE node classification with DGL 2.1.

Every DGL server and every trainer runs this script with the same arguments::

    python train_dist.py --graph_name G --ip_config ip_config.txt --part_config dataset/G.json \\
        --num_epochs 2 --batch_size 1000 [--num_hidden 64 --fan_out 10,10 --lr 0.005 ...]

``DGL_ROLE`` (set by dglrun, see launcher/workers/dgl_env.py) decides what it does: a server
serves its partition inside ``dgl.distributed.initialize`` and exits there once the trainers are
done; a trainer (``DGL_ROLE=client``, ``DGL_DIST_MODE=distributed`` plus torch's ``MASTER_ADDR``,
``MASTER_PORT``, ``RANK``, ``WORLD_SIZE``) trains a DistributedDataParallel GraphSAGE on its
share of the training nodes, sampling neighbours through the servers. Every trainer evaluates
its share of the validation and test nodes (exact, full-neighbour inference unless
``--eval_fan_out`` says otherwise) and the correct/total counts are summed over all trainers,
so the accuracies cover every node of each split. Rank 0 writes ``metrics.json`` and
``model.pt`` (the model's state_dict) into ``$DGLRUN_OUTPUT_DIR`` (default ``./output``).

Checkpoints (dglrun's contract, launcher/checkpoints.py): with ``$DGLRUN_CHECKPOINT_DIR``
(a DGLJob with ``spec.storage``), rank 0 saves the model, the optimizer and the epochs done
after every epoch, atomically (``launcher.checkpoints.saving``); with ``$DGLRUN_RESUME_FROM``
(a restarted job) every trainer loads that checkpoint and carries on from the next epoch.

Without ``DGL_DIST_MODE=distributed`` (e.g. dglrun's Skip mode) the trainer runs DGL's
standalone mode: it loads a one-partition graph itself, no servers needed.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import time
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any

os.environ.setdefault("OUTDATED_IGNORE", "1")  # before dgl/ogb are imported (see common.py)
os.environ.setdefault("DGLBACKEND", "pytorch")

import common
import dgl
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

PROG = "train_dist.py"


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    p.add_argument("--graph_name", required=True, help="partition name (G.json)")
    p.add_argument(
        "--ip_config",
        default=os.environ.get("DGL_IP_CONFIG", "ip_config.txt"),
        help="one '<ip> <port>' line per machine (default: $DGL_IP_CONFIG, else ip_config.txt)",
    )
    p.add_argument(
        "--part_config",
        default=os.environ.get("DGL_CONF_PATH"),
        help="the partition JSON (default: $DGL_CONF_PATH, else dataset/<graph_name>.json)",
    )
    p.add_argument("--num_epochs", type=int, default=1)
    p.add_argument("--batch_size", type=int, default=1000)
    p.add_argument(
        "--out_dir",
        default=os.environ.get("DGLRUN_OUTPUT_DIR", "output"),
        help="where rank 0 writes metrics.json and model.pt (default: $DGLRUN_OUTPUT_DIR, "
        "else ./output)",
    )
    p.add_argument(
        "--checkpoint_dir",
        default=os.environ.get("DGLRUN_CHECKPOINT_DIR"),
        help="where rank 0 checkpoints after every epoch (default: $DGLRUN_CHECKPOINT_DIR; "
        "none: no checkpoints)",
    )
    p.add_argument(
        "--resume_from",
        default=os.environ.get("DGLRUN_RESUME_FROM"),
        help="a checkpoint to carry on from (default: $DGLRUN_RESUME_FROM, set by dglrun)",
    )
    p.add_argument(
        "--num_classes",
        type=int,
        help="number of classes (default: 1 + the largest label of the split nodes)",
    )
    common.add_model_args(p)
    a = p.parse_args(argv)
    common.check_model_args(p, a)
    if not a.part_config:
        a.part_config = str(Path("dataset") / f"{a.graph_name}.json")
    return a


def _gloo_interface(ip_config: str) -> str | None:
    """The local network interface holding this machine's ip_config address, if any.

    gloo (torch.distributed) picks its address by resolving the host name, which in network
    namespaces or multi-homed hosts may not be the address the other trainers can reach; the
    ip_config address is (DGL's servers listen on it)."""
    import psutil

    try:
        wanted = {
            line.split()[0] for line in Path(ip_config).read_text().splitlines() if line.strip()
        }
    except OSError:
        return None
    for name, addrs in psutil.net_if_addrs().items():
        if any(addr.family == socket.AF_INET and addr.address in wanted for addr in addrs):
            return str(name)
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _standalone_torch_env() -> None:
    """A one-process torch world when nobody set one up (DGL's standalone mode)."""
    if "WORLD_SIZE" not in os.environ:
        os.environ.update(
            MASTER_ADDR="127.0.0.1",
            MASTER_PORT=str(_free_port()),
            RANK="0",
            WORLD_SIZE="1",
            LOCAL_RANK="0",
        )


def _save_checkpoint(
    folder: str,
    epochs_done: int,
    model: torch.nn.Module,
    opt: torch.optim.Optimizer,
    losses: list[float],
    epoch_seconds: list[float],
) -> None:
    """Everything a restarted job needs to carry on after ``epochs_done`` epochs, committed
    the way dglrun checks it (written, then renamed; then its SHA-256)."""
    from launcher.checkpoints import saving

    state = {
        "epochs_done": epochs_done,
        "model": model.state_dict(),
        "optimizer": opt.state_dict(),
        "losses": losses,
        "epoch_seconds": epoch_seconds,
    }
    with saving(folder, epochs_done) as tmp:
        torch.save(state, tmp)


def _load_checkpoint(path: str, tag: str) -> dict[str, Any]:
    """The checkpoint to resume from, loaded weights-only (no code runs); a file that holds
    anything else stops the trainer at once with one line naming it, and
    ``common.REFUSED_EXIT_CODE``: dglrun quotes that line, and the operator fails the job
    without restarts (each would refuse the file again). At once: past
    dgl.distributed.initialize, DGL's exit handler would wait for the other trainers."""
    try:
        state: dict[str, Any] = common.load_weights(path)
    except common.WeightsRefused as e:
        # what it printed before goes out first, its refusal last: dglrun quotes the last
        # line, and over kubectl exec stdout and stderr travel apart (flushed after the
        # refusal, a buffered line of stdout came last on the local cluster)
        sys.stdout.flush()
        print(f"{PROG}: error: {tag} checkpoint {e}", file=sys.stderr, flush=True)
        os._exit(common.REFUSED_EXIT_CODE)
    print(f"{tag} resumed from {path}: {state['epochs_done']} epoch(s) were done", flush=True)
    return state


def _allreduce(values: Sequence[float], op: Any = dist.ReduceOp.SUM) -> list[float]:
    t = torch.tensor(list(values), dtype=torch.float64)
    dist.all_reduce(t, op=op)
    return [float(x) for x in t]


def main(argv: Sequence[str] | None = None) -> int:
    a = parse_args(argv)
    role = os.environ.get("DGL_ROLE", "client")
    distributed = os.environ.get("DGL_DIST_MODE", "standalone") == "distributed"
    if role != "server" and not Path(a.part_config).is_file():
        print(f"{PROG}: error: partition config {a.part_config} does not exist", file=sys.stderr)
        return 2
    if role == "client" and not distributed:
        _standalone_torch_env()
    if role == "client" and distributed and "GLOO_SOCKET_IFNAME" not in os.environ:
        iface = _gloo_interface(a.ip_config)
        if iface:
            os.environ["GLOO_SOCKET_IFNAME"] = iface

    started = time.perf_counter()
    # Servers serve their partition in here until the trainers finish, then exit (code 0);
    # seeded first: a server samples its part's neighbours for the other machines' trainers
    common.set_seed(a.seed)
    dgl.distributed.initialize(a.ip_config)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    tag = f"[rank {rank}]"

    common.set_seed(a.seed)
    g = dgl.distributed.DistGraph(a.graph_name, part_config=a.part_config)
    pb = g.get_partition_book()
    train_nid = dgl.distributed.node_split(g.ndata["train_mask"], pb, force_even=True)
    val_nid = dgl.distributed.node_split(g.ndata["val_mask"], pb, force_even=True)
    test_nid = dgl.distributed.node_split(g.ndata["test_mask"], pb, force_even=True)
    feat, label = g.ndata["feat"], g.ndata["label"]
    in_feats = int(feat.shape[1])
    num_classes = a.num_classes
    if num_classes is None:
        local_max = max(
            (int(label[ids].max()) for ids in (train_nid, val_nid, test_nid) if len(ids)),
            default=0,
        )
        num_classes = int(_allreduce([local_max], dist.ReduceOp.MAX)[0]) + 1
    print(
        f"{tag} {a.graph_name}: {g.num_nodes()} nodes, {g.num_edges()} edges, "
        f"{pb.num_partitions()} partition(s), machine {pb.partid}, world size {world}; "
        f"this trainer: {len(train_nid)} train, {len(val_nid)} val, {len(test_nid)} test "
        f"nodes; {in_feats} features, {num_classes} classes; up in "
        f"{time.perf_counter() - started:.1f}s",
        flush=True,
    )

    model = common.GraphSAGE(in_feats, a.num_hidden, num_classes, a.num_layers, a.dropout)
    resumed = _load_checkpoint(a.resume_from, tag) if a.resume_from else None
    if resumed is not None:
        model.load_state_dict(resumed["model"])
    ddp = DistributedDataParallel(model)  # rank 0's initial weights are broadcast
    common.set_seed(a.seed + rank)  # different shuffles and samples per trainer
    opt = torch.optim.Adam(ddp.parameters(), lr=a.lr)
    start = 0
    losses: list[float] = []
    epoch_seconds: list[float] = []
    if resumed is not None:
        opt.load_state_dict(resumed["optimizer"])
        start = int(resumed["epochs_done"])
        losses, epoch_seconds = list(resumed["losses"]), list(resumed["epoch_seconds"])
        common.set_seed(a.seed + rank + 1000 * start)  # not the first epochs' samples again
    train_loader = dgl.dataloading.DistNodeDataLoader(
        g,
        train_nid,
        dgl.dataloading.NeighborSampler(common.parse_fan_out(a.fan_out)),
        batch_size=a.batch_size,
        shuffle=True,
        drop_last=False,
    )
    full = common.eval_sampler(a.num_layers, a.eval_fan_out)
    val_loader = dgl.dataloading.DistNodeDataLoader(
        g, val_nid, full, batch_size=a.eval_batch_size, shuffle=False
    )
    test_loader = dgl.dataloading.DistNodeDataLoader(
        g, test_nid, full, batch_size=a.eval_batch_size, shuffle=False
    )

    def evaluate() -> tuple[float, float, int, int]:
        k = a.sample_ahead
        vc, vt = common.count_correct(model, common.ahead(val_loader, k), feat, label)  # no DDP
        tc, tt = common.count_correct(model, common.ahead(test_loader, k), feat, label)
        vc, vt, tc, tt = _allreduce([vc, vt, tc, tt])
        return vc / max(vt, 1), tc / max(tt, 1), int(vt), int(tt)

    eval_seconds = 0.0
    val_acc = test_acc = float("nan")
    num_val = num_test = 0
    for epoch in range(start, a.num_epochs):
        tic = time.perf_counter()
        # join(): trainers whose share has one batch more than another's do not hang DDP.
        with ddp.join():
            batches = common.ahead(train_loader, a.sample_ahead)
            loss, seen = common.train_epoch(ddp, batches, feat, label, opt)
        took = time.perf_counter() - tic
        loss_sum, seen_all, slowest = (
            *_allreduce([loss * seen, seen]),
            _allreduce([took], dist.ReduceOp.MAX)[0],
        )
        losses.append(loss_sum / max(seen_all, 1))
        epoch_seconds.append(slowest)
        line = (
            f"{tag} epoch {epoch} loss {loss:.4f} (all trainers {losses[-1]:.4f}) "
            f"nodes {seen} time {took:.2f}s"
        )
        last = epoch == a.num_epochs - 1
        if last or (a.eval_every and (epoch + 1) % a.eval_every == 0):
            tic = time.perf_counter()
            val_acc, test_acc, num_val, num_test = evaluate()
            eval_seconds += time.perf_counter() - tic
            line += f" val_acc {val_acc:.4f} test_acc {test_acc:.4f}"
        if rank == 0 and a.checkpoint_dir:
            _save_checkpoint(a.checkpoint_dir, epoch + 1, model, opt, losses, epoch_seconds)
        print(line, flush=True)  # (after the checkpoint: "epoch k" in the log means it is saved)
    if start >= a.num_epochs:  # resumed from the last epoch's checkpoint: nothing left to train
        val_acc, test_acc, num_val, num_test = evaluate()
        print(f"{tag} all {a.num_epochs} epochs were done: evaluated the model", flush=True)

    if rank == 0:
        out = Path(a.out_dir)
        out.mkdir(parents=True, exist_ok=True)
        torch.save(model.state_dict(), out / "model.pt")
        metrics = {
            "test_accuracy": test_acc,
            "val_accuracy": val_acc,
            "epochs": a.num_epochs,
            "resumed_at_epoch": start,
            "train_seconds": round(sum(epoch_seconds), 3),
            "epoch_seconds": [round(x, 3) for x in epoch_seconds],
            "eval_seconds": round(eval_seconds, 3),
            "losses": [round(x, 5) for x in losses],
            "world_size": world,
            "num_parts": int(pb.num_partitions()),
            "graph_name": a.graph_name,
            "num_nodes": int(g.num_nodes()),
            "num_edges": int(g.num_edges()),
            "num_classes": num_classes,
            "val_nodes": num_val,
            "test_nodes": num_test,
            "batch_size": a.batch_size,
            "fan_out": a.fan_out,
            "num_hidden": a.num_hidden,
            "num_layers": a.num_layers,
            "lr": a.lr,
            "dropout": a.dropout,
            "seed": a.seed,
        }
        (out / "metrics.json").write_text(json.dumps(metrics, indent=2) + "\n")
        print(
            f"{tag} done: test_accuracy {test_acc:.4f} val_accuracy {val_acc:.4f} "
            f"train_seconds {metrics['train_seconds']}; wrote {out}/metrics.json and model.pt",
            flush=True,
        )
    dist.barrier()  # nobody leaves (and stops the servers) before rank 0 has written
    return 0


def run() -> int:
    """main(), but an exception ends the process at once with code 1: after
    dgl.distributed.initialize, DGL's exit handler would otherwise wait for the other trainers
    forever, and the launcher would see a hang instead of a failure."""
    try:
        return main()
    except SystemExit:  # argparse errors; servers leaving initialize()
        raise
    except BaseException as e:
        traceback.print_exc()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(130 if isinstance(e, KeyboardInterrupt) else 1)


if __name__ == "__main__":
    sys.exit(run())
