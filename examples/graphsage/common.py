"""Code shared by the GraphSAGE example scripts: dataset loading, the models, train/eval loops.

``load_ogb_graph`` works for ogb's own node-property datasets (``ogbn-products``,
``ogbn-arxiv``, ... in a pre-downloaded ``root``: ogb's master.csv supplies their meta) and for
datasets written by ``make_dataset.py`` (their ``meta.json`` supplies ogb's ``meta_dict``).
Either way ogb's real loader reads the graph; nothing is downloaded. The split is read here,
from the split folder's CSV files (``read_split``): ogb's ``get_idx_split`` would
``torch.load`` a ``split_dict.pt`` there instead, a pickle, which runs any code it names.
Nothing the loading reads from the dataset folder is unpickled: ogb's processed cache
(``processed/dgl_data_processed``) is DGL's own binary format (``dgl.load_graphs``, parsed by
DGL's C++ reader), and the npz layout's files are read by ``numpy.load``, which refuses
pickled data.

The train and eval loops take any iterable of ``(input_nodes, output_nodes, blocks)`` (a
``dgl.dataloading.DataLoader`` or a ``dgl.dataloading.DistNodeDataLoader``) and anything
indexable by node ids for features and labels (a tensor or a ``DistTensor``), so the
single-process baseline and the distributed trainer run the same code.
"""

from __future__ import annotations

import argparse
import collections
import gzip
import json
import os
import pickle
import random
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, Protocol

os.environ.setdefault("OUTDATED_IGNORE", "1")  # ogb's import-time PyPI version check
os.environ.setdefault("DGLBACKEND", "pytorch")

import dgl
import numpy as np
import torch
import torch.nn.functional as F
from dgl.nn import SAGEConv
from torch import nn

META_FILE = "meta.json"  # written by make_dataset.py next to RELEASE_v1.txt
SPLIT_PARTS = ("train", "valid", "test")  # split/<type>/<part>.csv.gz, as ogb names them


# How a script that refused a file ends (dglrun's contract, podcontract.REFUSED_EXIT_CODE): its
# last line names the file and why; dglrun quotes it, and the operator fails the job at once
# (FileRefused), since every attempt would refuse the same file again
REFUSED_EXIT_CODE = 65


class WeightsRefused(RuntimeError):
    """A checkpoint or model file that holds more than tensors and plain values: loading it
    could run code (a pickle's objects), so it is not loaded. ``str()`` names the file; a
    script that meets one says so on its last line and exits with :data:`REFUSED_EXIT_CODE`."""


def load_weights(path: str | os.PathLike[str]) -> Any:
    """``torch.load`` that runs no code: tensors, dicts, lists and plain values only
    (``weights_only=True``: the checkpoints and the model on a claim others may write);
    :class:`WeightsRefused` for a file that holds anything else."""
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as e:
        why = (str(e).strip().splitlines() or ["not a weights-only file"])[-1]
        # (torch's words before it advise loading the file anyway: what it found is enough)
        why = why.rpartition("WeightsUnpickler error: ")[2] or why
        raise WeightsRefused(
            f"{path} is refused: it holds more than tensors and plain values, and loading it "
            f"could run code ({why})"
        ) from e


class DatasetError(RuntimeError):
    """The dataset cannot be loaded; ``str()`` is a one-line message for the user."""


class Indexable(Protocol):
    def __getitem__(self, idx: torch.Tensor) -> torch.Tensor: ...


Batch = tuple[torch.Tensor, torch.Tensor, list[Any]]  # (input_nodes, output_nodes, blocks)


# -- data -----------------------------------------------------------------------------------


def ogb_names() -> list[str]:
    """ogb's own node-property datasets (the columns of its master.csv)."""
    import pandas as pd
    from ogb import nodeproppred

    master = Path(nodeproppred.__file__).parent / "master.csv"
    return list(pd.read_csv(master, index_col=0, keep_default_na=False).columns)


def dataset_dir(name: str, root: str | os.PathLike[str]) -> Path:
    """Where ogb looks for ``name`` under ``root`` ('ogbn-arxiv' -> root/ogbn_arxiv)."""
    base = Path(root) / "_".join(name.split("-"))
    dgl_variant = base.with_name(base.name + "_dgl")  # ogb prefers this one if it exists
    return dgl_variant if dgl_variant.exists() else base


def _check_present(path: Path, name: str) -> None:
    """Fail with a clear message instead of ogb's download attempt or input() prompt."""
    if not path.is_dir():
        if name in ogb_names():
            how = f"extract ogb's {name} download (its {path.name} folder) into {path.parent}"
        else:
            how = f"write it with make_dataset.py --root {path.parent} --name {name}"
        raise DatasetError(f"dataset {name}: {path} does not exist (nothing is downloaded: {how})")
    if not (path / "RELEASE_v1.txt").is_file():
        raise DatasetError(f"dataset {name}: {path}/RELEASE_v1.txt is missing (ogb would ask)")
    raw = path / "raw"
    processed = path / "processed" / "dgl_data_processed"
    if not processed.is_file() and not any(
        (raw / f).is_file() for f in ("edge.csv.gz", "data.npz", "triplet-type-list.csv.gz")
    ):
        raise DatasetError(f"dataset {name}: no graph in {raw} (ogb would try to download)")


def load_ogb_dataset(name: str, root: str | os.PathLike[str]) -> Any:
    """``DglNodePropPredDataset`` for ``name`` under ``root``, never downloading."""
    from ogb.nodeproppred import DglNodePropPredDataset

    path = dataset_dir(name, root)
    _check_present(path, name)
    if name in ogb_names():
        return _ogb_dataset(path, name, lambda: DglNodePropPredDataset(name=name, root=str(root)))
    try:
        meta = json.loads((path / META_FILE).read_text())
    except (OSError, ValueError) as e:
        raise DatasetError(
            f"dataset {name} is not one of ogb's ({', '.join(ogb_names())}) and {path} has no "
            f"readable {META_FILE} with its meta_dict: {e}"
        ) from e
    meta = {k: v for k, v in meta.items() if isinstance(v, str)}
    meta["dir_path"] = str(path)
    return _ogb_dataset(path, name, lambda: DglNodePropPredDataset(name, str(root), meta))


def _ogb_dataset(path: Path, name: str, make: Callable[[], Any]) -> Any:
    """``make()`` (ogb's loader), with what it cannot read (a processed cache that is not a DGL
    graph file, an npz file holding pickled data) as a :class:`DatasetError` naming it."""
    from dgl import DGLError

    try:
        return make()
    except (DGLError, ValueError) as e:
        why = (str(e).strip().splitlines() or [type(e).__name__])[0].rsplit(": ", 1)[-1]
        cache = path / "processed" / "dgl_data_processed"
        what = f"{cache} (ogb's cache: delete it to rebuild it from raw/)"
        raise DatasetError(
            f"dataset {name}: ogb's loader cannot read "
            f"{what if cache.is_file() else path / 'raw'}: {why}"
        ) from e


def read_split(ds: Any, num_nodes: int) -> dict[str, torch.Tensor]:
    """The split ``ds`` names (its meta's ``split``: ``random``, ``time``, ...) as int64 node ids
    per part (``train``, ``valid``, ``test``), read from ``split/<type>/<part>.csv.gz`` (one
    node id per line, ogb's layout) with gzip and pandas. A ``split_dict.pt`` there is never
    read: it is a pickle (what ogb's ``get_idx_split`` loads first, with ``torch.load``, when it
    exists), and anyone who can write the dataset's volume could make it run code.
    :class:`DatasetError` names the file that is missing or holds anything but node ids."""
    import pandas as pd

    split_type = str(ds.meta_info["split"])
    if not split_type or split_type in (".", "..") or "/" in split_type or "\\" in split_type:
        raise DatasetError(f"dataset {ds.name}: its split {split_type!r} is not a folder name")
    folder = Path(ds.root) / "split" / split_type
    out: dict[str, torch.Tensor] = {}
    for part in SPLIT_PARTS:
        f = folder / f"{part}.csv.gz"
        try:
            with gzip.open(f, "rb") as text:
                ids = pd.read_csv(text, header=None, dtype=np.int64).to_numpy()
        except FileNotFoundError:
            also = (
                " (its split_dict.pt is not read: a pickle)"
                if (folder / "split_dict.pt").exists()
                else ""
            )
            raise DatasetError(f"dataset {ds.name}: {f} is missing{also}") from None
        except (OSError, ValueError, EOFError) as e:
            why = (str(e).strip().splitlines() or [type(e).__name__])[0]
            raise DatasetError(f"dataset {ds.name}: {f} is not a list of node ids: {why}") from e
        if ids.ndim != 2 or ids.shape[1] != 1:
            raise DatasetError(f"dataset {ds.name}: {f} has more than one column")
        ids = ids[:, 0]
        bad = (ids < 0) | (ids >= num_nodes)
        if bad.any():
            raise DatasetError(
                f"dataset {ds.name}: {f} names node {int(ids[bad][0])}, outside 0..{num_nodes - 1}"
            )
        out[part] = torch.from_numpy(ids)
    return out


def load_ogb_graph(name: str, root: str | os.PathLike[str]) -> tuple[dgl.DGLGraph, int]:
    """The dataset as one graph with ndata ``feat``, ``label`` (int64, -1 = unlabelled),
    ``train_mask``, ``val_mask``, ``test_mask`` (bool), and the number of classes.

    Directed graphs (ogb's ``add_inverse_edge`` False, e.g. ogbn-arxiv) get their reverse edges
    added, as GraphSAGE on them usually does; not those whose meta says ``bidirected`` (the
    npz layout of make_dataset.py, which holds both directions already)."""
    ds = load_ogb_dataset(name, root)
    if ds.is_hetero:
        raise DatasetError(f"dataset {name} is heterogeneous; this example needs a homogeneous one")
    g, labels = ds[0]
    split = read_split(ds, g.num_nodes())  # never ds.get_idx_split(): see read_split
    bidirected = str(ds.meta_info.get("bidirected")) == "True"
    if str(ds.meta_info["add_inverse_edge"]) != "True" and not bidirected:
        g = dgl.to_bidirected(g, copy_ndata=True)
    labels = labels.reshape(g.num_nodes(), -1)[:, 0]
    if labels.is_floating_point():  # e.g. papers100M: NaN for unlabelled nodes
        labels = torch.nan_to_num(labels, nan=-1.0)
    g.ndata["label"] = labels.long()
    if "feat" not in g.ndata:
        raise DatasetError(f"dataset {name} has no node features")
    g.ndata["feat"] = g.ndata["feat"].float()
    for key, part in (("train_mask", "train"), ("val_mask", "valid"), ("test_mask", "test")):
        mask = torch.zeros(g.num_nodes(), dtype=torch.bool)
        mask[split[part]] = True
        g.ndata[key] = mask
    return g, int(ds.num_classes)


# -- models ---------------------------------------------------------------------------------


class GraphSAGE(nn.Module):
    """``num_layers`` mean-aggregator SAGEConv layers; ReLU and dropout between layers."""

    def __init__(
        self,
        in_feats: int,
        num_hidden: int,
        num_classes: int,
        num_layers: int = 2,
        dropout: float = 0.2,
        aggregator: str = "mean",
    ) -> None:
        super().__init__()
        if num_layers < 1:
            raise ValueError("num_layers must be at least 1")
        dims = [in_feats] + [num_hidden] * (num_layers - 1) + [num_classes]
        self.layers = nn.ModuleList(
            SAGEConv(dims[i], dims[i + 1], aggregator) for i in range(num_layers)
        )
        self.dropout = nn.Dropout(dropout)

    def forward(self, blocks: Sequence[Any], x: torch.Tensor) -> torch.Tensor:
        h = x
        last = len(self.layers) - 1
        for i, (layer, block) in enumerate(zip(self.layers, blocks, strict=True)):
            h = layer(block, h)
            if i != last:
                h = self.dropout(F.relu(h))
        return h


class MLP(nn.Module):
    """Features-only baseline: same depth and width as GraphSAGE, no graph."""

    def __init__(
        self,
        in_feats: int,
        num_hidden: int,
        num_classes: int,
        num_layers: int = 2,
        dropout: float = 0.2,
    ) -> None:
        super().__init__()
        dims = [in_feats] + [num_hidden] * (num_layers - 1) + [num_classes]
        self.layers = nn.ModuleList(nn.Linear(dims[i], dims[i + 1]) for i in range(num_layers))
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x
        for i, layer in enumerate(self.layers):
            h = layer(h)
            if i != len(self.layers) - 1:
                h = self.dropout(F.relu(h))
        return h


# -- loops ----------------------------------------------------------------------------------


def parse_fan_out(text: str) -> list[int]:
    """'10,10' -> [10, 10]; -1 means all neighbours."""
    try:
        out = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise ValueError(f"fan-out {text!r} is not a comma-separated list of integers") from None
    if not out or any(f == 0 or f < -1 for f in out):
        raise ValueError(f"fan-out {text!r}: need positive integers (or -1 for all neighbours)")
    return out


def set_seed(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    dgl.seed(seed)


def ahead(batches: Iterable[Batch], k: int) -> Iterator[Batch]:
    """``batches``, drawn ``k`` ahead of the one handed out: the loader samples minibatch
    i + k before minibatch i is trained on. An out-of-core worker's loader asks for a
    minibatch's feature rows as it samples it (outofcore.patch), so they are read while the
    minibatches before it train. The same in memory, so that a seed samples the same there:
    DGL's feature pulls draw from the random engine that sampling draws from."""
    queued: collections.deque[Batch] = collections.deque()
    for batch in batches:  # (one iter(): a DGL loader's __iter__ shuffles)
        queued.append(batch)
        if len(queued) > k:
            yield queued.popleft()
    while queued:
        yield queued.popleft()


def train_epoch(
    model: nn.Module,
    batches: Iterable[Batch],
    feat: Indexable,
    label: Indexable,
    optimizer: torch.optim.Optimizer,
) -> tuple[float, int]:
    """One pass over ``batches``; returns (mean loss over seed nodes, number of seed nodes)."""
    model.train()
    total_loss = 0.0
    seen = 0
    for input_nodes, output_nodes, blocks in batches:
        x = feat[input_nodes]
        y = label[output_nodes]
        loss = F.cross_entropy(model(blocks, x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        total_loss += float(loss) * len(output_nodes)
        seen += len(output_nodes)
    return total_loss / max(seen, 1), seen


@torch.no_grad()
def count_correct(
    model: nn.Module, batches: Iterable[Batch], feat: Indexable, label: Indexable
) -> tuple[int, int]:
    """(correct predictions, nodes) over ``batches`` in eval mode (no dropout)."""
    was_training = model.training
    model.eval()
    correct = 0
    total = 0
    try:
        for input_nodes, output_nodes, blocks in batches:
            pred = model(blocks, feat[input_nodes]).argmax(1)
            correct += int((pred == label[output_nodes]).sum())
            total += len(output_nodes)
    finally:
        model.train(was_training)
    return correct, total


def eval_sampler(num_layers: int, eval_fan_out: str) -> dgl.dataloading.NeighborSampler:
    """Full neighbourhoods for evaluation (exact, like layer-wise full-graph inference) unless
    ``eval_fan_out`` ('25,25') limits them (for graphs with large degrees)."""
    if not eval_fan_out:
        return dgl.dataloading.MultiLayerFullNeighborSampler(num_layers)
    fan_out = parse_fan_out(eval_fan_out)
    if len(fan_out) != num_layers:
        raise ValueError(f"--eval_fan_out {eval_fan_out} needs {num_layers} entries")
    return dgl.dataloading.NeighborSampler(fan_out)


def add_model_args(p: argparse.ArgumentParser) -> None:
    """The model and optimisation flags shared by train_dist.py and train_single.py."""
    p.add_argument("--num_hidden", type=int, default=64)
    p.add_argument("--num_layers", type=int, default=2)
    p.add_argument("--fan_out", default="10,10", help="sampled neighbours per layer, input first")
    p.add_argument("--lr", type=float, default=0.005)
    p.add_argument("--dropout", type=float, default=0.2)
    p.add_argument("--eval_every", type=int, default=1, help="evaluate every N epochs (0: at end)")
    p.add_argument(
        "--eval_fan_out",
        default="",
        help="neighbours per layer for evaluation (default: all, i.e. exact inference)",
    )
    p.add_argument("--eval_batch_size", type=int, default=2000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--sample_ahead",
        type=int,
        default=2,
        help="minibatches sampled ahead of the one trained on (out-of-core workers read their "
        "features meanwhile; 0: none)",
    )


def check_model_args(p: argparse.ArgumentParser, a: argparse.Namespace) -> None:
    try:
        fan_out = parse_fan_out(a.fan_out)
    except ValueError as e:
        p.error(str(e))
    if len(fan_out) != a.num_layers:
        p.error(f"--fan_out {a.fan_out} has {len(fan_out)} entries, --num_layers is {a.num_layers}")
    if a.eval_fan_out:
        try:
            n = len(parse_fan_out(a.eval_fan_out))
        except ValueError as e:
            p.error(str(e))
        if n != a.num_layers:
            p.error(f"--eval_fan_out {a.eval_fan_out} needs {a.num_layers} entries")
    if a.num_epochs < 1 or a.batch_size < 1 or a.eval_batch_size < 1 or a.num_hidden < 1:
        p.error("--num_epochs, --batch_size, --eval_batch_size and --num_hidden must be >= 1")
    if a.eval_every < 0:
        p.error("--eval_every must not be negative")
    if a.sample_ahead < 0:
        p.error("--sample_ahead must not be negative")
