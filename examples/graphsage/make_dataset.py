"""Write a synthetic node-classification graph in OGB's on-disk node-property layout.

The result loads with ``ogb.nodeproppred.DglNodePropPredDataset`` (its real CSV loader) from a
local directory, with no download and no ``input()`` prompt::

    <root>/<name with '-' -> '_'>/
        RELEASE_v1.txt                 # version marker: without it ogb asks "update now? (y/N)"
        meta.json                      # ogb's meta_dict fields for this dataset (see common.py)
        raw/edge.csv.gz                # one undirected edge "u,v" per line (ogb adds the inverse)
                                       # (--binary: raw/data.npz and raw/node-label.npz instead)
        raw/num-node-list.csv.gz       # "N"
        raw/num-edge-list.csv.gz       # number of lines of edge.csv.gz
        raw/node-feat.csv.gz           # N lines of feat_dim floats
        raw/node-label.csv.gz          # N lines, one class id each
        split/random/{train,valid,test}.csv.gz   # node ids, one per line
                                       # (no split_dict.pt: common.py reads no pickle)

The graph is a planted partition (stochastic block model): every node has a class, and an edge
joins two nodes of the same class with probability ``--homophily`` (else a uniformly random
node). Features are a weak class signal (a random unit "centroid" per class, scaled by
``--feat-signal``) plus standard normal noise. A node's own features therefore say little
about its class, while the mean over its ~avg-degree neighbours (what GraphSAGE computes) says a
lot; a features-only MLP scores far less.

The published label is the class, except for a ``--label-noise`` fraction of the nodes whose
label is redrawn uniformly (the edges and features still follow their class). That caps every
model's accuracy at ``1 - noise + noise / classes`` (0.91 with the defaults) whatever the size
and degree: without it GraphSAGE scores ~0.999 on a big, dense graph, where a broken
partition (features of the wrong nodes, a missing halo) would cost too little to show. With
it, the single-process baseline lands between 0.75 and 0.95 from 20k to millions of nodes.

Memory grows with the graph, never with text: features are drawn in row blocks as float32,
and the csv files are written a block of rows at a time (``--binary``, ogb's npz layout, is
the one for millions of nodes: seconds where csv takes minutes).

Everything is drawn from one ``numpy.random.default_rng(seed)``, and the gzip headers carry no
timestamp, so the same arguments write byte-identical files.

This script needs only numpy (no DGL, torch or ogb).
"""

from __future__ import annotations

import argparse
import gzip
import json
import shutil
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

SPLIT_NAME = "random"
META_FILE = "meta.json"
ROW_BLOCK = 1 << 16  # rows drawn or written at a time


@dataclass(frozen=True)
class SynthSpec:
    name: str = "ogbn-synth"
    num_nodes: int = 20000
    avg_degree: float = 10.0
    num_classes: int = 8
    feat_dim: int = 32
    homophily: float = 0.85
    feat_signal: float = 1.0
    label_noise: float = 0.1
    train_frac: float = 0.6
    val_frac: float = 0.2
    test_frac: float | None = None  # None: every node in neither train nor valid
    seed: int = 0
    binary: bool = False  # ogb's npz layout: fast to write and load at large sizes


@dataclass(frozen=True)
class SynthGraph:
    src: np.ndarray  # (E,) int64, one entry per undirected edge
    dst: np.ndarray  # (E,) int64
    feat: np.ndarray  # (N, D) float32
    label: np.ndarray  # (N,) int64, the published label (the class, or a redrawn one)
    train: np.ndarray  # node ids, sorted
    valid: np.ndarray
    test: np.ndarray
    centroids: np.ndarray  # (C, D) the class signal directions (unit vectors)
    cls: np.ndarray  # (N,) int64, the class the edges and features follow


def dir_name(name: str) -> str:
    """ogb's folder name for a dataset name: 'ogbn-synth' -> 'ogbn_synth'."""
    return "_".join(name.split("-"))


def meta_dict(spec: SynthSpec) -> dict[str, str]:
    """The fields ogb reads from master.csv (all strings, as in master.csv), minus dir_path."""
    return {
        "num tasks": "1",
        "num classes": str(spec.num_classes),
        "eval metric": "acc",
        "task type": "multiclass classification",
        "download_name": dir_name(spec.name),
        "version": "1",
        "url": "",  # never used: the raw files are present, so ogb does not download
        # ogb's npz reader takes the edges as they are: both directions are written
        "add_inverse_edge": "False" if spec.binary else "True",
        "has_node_attr": "True",
        "has_edge_attr": "False",
        "split": SPLIT_NAME,
        "additional node files": "None",
        "additional edge files": "None",
        "is hetero": "False",
        "binary": str(spec.binary),
        # (ours, for common.py: the npz edges hold both directions already)
        "bidirected": str(spec.binary),
    }


def generate(spec: SynthSpec) -> SynthGraph:
    """Draw the graph, features, labels and split; deterministic for ``spec``."""
    n, c, d = spec.num_nodes, spec.num_classes, spec.feat_dim
    if n < 2 * c:
        raise ValueError(f"--num-nodes {n} is too small for {c} classes")
    rng = np.random.default_rng(spec.seed)

    # Balanced classes, randomly placed over the node ids.
    label = rng.permutation(np.arange(n) % c).astype(np.int64)
    members = np.argsort(label, kind="stable")  # node ids grouped by class
    counts = np.bincount(label, minlength=c)
    offsets = np.concatenate([[0], np.cumsum(counts)[:-1]])

    # Undirected edges: u uniform; v from u's class with probability `homophily`, else uniform.
    # Oversample, drop self loops and duplicates, keep exactly `target` edges in drawn order.
    target = round(n * spec.avg_degree / 2)
    kept_src = np.empty(0, np.int64)
    kept_dst = np.empty(0, np.int64)
    while len(kept_src) < target:
        m = int((target - len(kept_src)) * 1.2) + 16
        u = rng.integers(0, n, size=m)
        same = rng.random(m) < spec.homophily
        cls = label[u]
        v_same = members[offsets[cls] + (rng.random(m) * counts[cls]).astype(np.int64)]
        v_any = rng.integers(0, n, size=m)
        v = np.where(same, v_same, v_any)
        src = np.concatenate([kept_src, np.minimum(u, v)])
        dst = np.concatenate([kept_dst, np.maximum(u, v)])
        ok = src != dst
        src, dst = src[ok], dst[ok]
        _, first = np.unique(src * n + dst, return_index=True)
        first.sort()  # keep first occurrences in drawn order
        kept_src, kept_dst = src[first], dst[first]
    kept_src, kept_dst = kept_src[:target], kept_dst[:target]
    # Random orientation, so edge.csv.gz does not list every edge as (small id, large id).
    flip = rng.random(target) < 0.5
    src = np.where(flip, kept_dst, kept_src)
    dst = np.where(flip, kept_src, kept_dst)

    # Features: weak class signal along a random unit direction per class, plus N(0, 1) noise,
    # drawn a block of rows at a time straight into float32 (no (N, D) float64 temporary).
    centroids = rng.standard_normal((c, d))
    centroids /= np.linalg.norm(centroids, axis=1, keepdims=True)
    signal = (spec.feat_signal * centroids).astype(np.float32)
    feat = np.empty((n, d), dtype=np.float32)
    for lo in range(0, n, ROW_BLOCK):
        hi = min(n, lo + ROW_BLOCK)
        rng.standard_normal((hi - lo, d), dtype=np.float32, out=feat[lo:hi])
        feat[lo:hi] += signal[label[lo:hi]]

    # The published labels: a `label_noise` fraction redrawn uniformly (see the module doc).
    cls = label
    label = cls.copy()
    noisy = rng.random(n) < spec.label_noise
    label[noisy] = rng.integers(0, c, size=int(noisy.sum()))

    # Random split.
    perm = rng.permutation(n)
    n_train = round(n * spec.train_frac)
    n_val = round(n * spec.val_frac)
    if n_train < 1 or n_val < 1 or n_train + n_val >= n:
        raise ValueError("--train-frac/--val-frac leave an empty train, valid or test split")
    train = np.sort(perm[:n_train])
    valid = np.sort(perm[n_train : n_train + n_val])
    rest = perm[n_train + n_val :]
    if spec.test_frac is not None:  # (the same permutation: train and valid do not change)
        rest = rest[: max(1, round(n * spec.test_frac))]
    test = np.sort(rest)
    return SynthGraph(
        src=src.astype(np.int64),
        dst=dst.astype(np.int64),
        feat=feat,
        label=label,
        train=train,
        valid=valid,
        test=test,
        centroids=centroids,
        cls=cls,
    )


def accuracy_ceiling(spec: SynthSpec) -> float:
    """The best accuracy any model can expect: the class is right, the label is not always."""
    return 1.0 - spec.label_noise + spec.label_noise / spec.num_classes


def nearest_centroid_accuracy(g: SynthGraph, feat_signal: float, nodes: np.ndarray) -> float:
    """Accuracy of the Bayes-optimal features-only classifier (classes are balanced and the
    noise is isotropic, so it is the nearest scaled centroid): an upper bound for an MLP."""
    x = g.feat[nodes].astype(np.float64)
    dist = ((x[:, None, :] - feat_signal * g.centroids[None, :, :]) ** 2).sum(-1)
    return float((dist.argmin(1) == g.label[nodes]).mean())


def homophily_ratio(g: SynthGraph) -> float:
    """The fraction of edges inside one class (of the classes the edges follow)."""
    return float((g.cls[g.src] == g.cls[g.dst]).mean())


def _write_csv_gz(path: Path, rows: np.ndarray, fmt: str) -> None:
    """np.savetxt into a gzip stream without timestamp or file name (byte-identical reruns),
    a block of rows at a time."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with (
        path.open("wb") as raw,
        gzip.GzipFile(fileobj=raw, mode="wb", filename="", mtime=0, compresslevel=6) as f,
    ):
        for lo in range(0, len(rows), ROW_BLOCK):
            np.savetxt(f, rows[lo : lo + ROW_BLOCK], fmt=fmt, delimiter=",")


def _write_npz(raw: Path, g: SynthGraph) -> None:
    """ogb's binary layout (``raw/data.npz``, ``raw/node-label.npz``): the edges in both
    directions, each edge followed by its inverse as ogb's csv reader adds them, so both
    layouts load as the same graph, edge ids included."""
    raw.mkdir(parents=True, exist_ok=True)
    edge_index = np.empty((2, 2 * len(g.src)), dtype=np.int64)
    edge_index[0, 0::2], edge_index[1, 0::2] = g.src, g.dst
    edge_index[0, 1::2], edge_index[1, 1::2] = g.dst, g.src
    np.savez(
        raw / "data.npz",
        edge_index=edge_index,
        num_nodes_list=np.array([len(g.label)], dtype=np.int64),
        num_edges_list=np.array([edge_index.shape[1]], dtype=np.int64),
        node_feat=g.feat.astype(np.float32),
    )
    np.savez(raw / "node-label.npz", node_label=g.label[:, None].astype(np.int64))


def write(spec: SynthSpec, g: SynthGraph, root: Path) -> Path:
    """Write ``g`` under ``root`` in ogb's layout; returns the dataset folder."""
    out = root / dir_name(spec.name)
    if out.exists():
        if not (out / META_FILE).is_file() and any(out.iterdir()):
            raise FileExistsError(
                f"{out} exists and was not written by make_dataset.py (no {META_FILE}); "
                "refusing to overwrite it"
            )
        shutil.rmtree(out)  # also drops ogb's processed/ cache of an earlier graph
    raw = out / "raw"
    split = out / "split" / SPLIT_NAME
    if spec.binary:
        _write_npz(raw, g)
    else:
        _write_csv_gz(raw / "edge.csv.gz", np.stack([g.src, g.dst], axis=1), "%d")
        _write_csv_gz(raw / "num-node-list.csv.gz", np.array([[len(g.label)]]), "%d")
        _write_csv_gz(raw / "num-edge-list.csv.gz", np.array([[len(g.src)]]), "%d")
        _write_csv_gz(raw / "node-feat.csv.gz", g.feat, "%.6f")
        _write_csv_gz(raw / "node-label.csv.gz", g.label[:, None], "%d")
    for part, ids in (("train", g.train), ("valid", g.valid), ("test", g.test)):
        _write_csv_gz(split / f"{part}.csv.gz", ids[:, None], "%d")
    meta = {
        **meta_dict(spec),
        "synthetic": {
            "generator": "make_dataset.py",
            "num_nodes": spec.num_nodes,
            "num_undirected_edges": len(g.src),
            "avg_degree": spec.avg_degree,
            "homophily": spec.homophily,
            "feat_signal": spec.feat_signal,
            "label_noise": spec.label_noise,
            "accuracy_ceiling": round(accuracy_ceiling(spec), 4),
            "train_frac": spec.train_frac,
            "val_frac": spec.val_frac,
            "seed": spec.seed,
        },
    }
    (out / META_FILE).write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
    # The version marker ogb checks (master.csv 'version' = 1); written last, so a half-written
    # folder is never taken for a complete one.
    (out / "RELEASE_v1.txt").write_text("synthetic ogbn dataset written by make_dataset.py\n")
    return out


# ogb's own node-property datasets: their meta comes from ogb's master.csv, never from here.
OGB_NAMES = ("ogbn-proteins", "ogbn-products", "ogbn-arxiv", "ogbn-mag", "ogbn-papers100M")


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--root", required=True, help="dataset root (ogb's `root`)")
    p.add_argument("--name", default="ogbn-synth", help="dataset name (not one of ogb's own)")
    p.add_argument("--num-nodes", type=int, default=20000)
    p.add_argument(
        "--avg-degree", type=float, default=10.0, help="mean degree (ogb adds inverse edges)"
    )
    p.add_argument("--num-classes", type=int, default=8)
    p.add_argument("--feat-dim", type=int, default=32)
    p.add_argument(
        "--homophily",
        type=float,
        default=0.85,
        help="probability that an edge is drawn inside its source's class",
    )
    p.add_argument(
        "--feat-signal",
        type=float,
        default=1.0,
        help="length of the class signal in the features (the noise has std 1 per dimension)",
    )
    p.add_argument(
        "--label-noise",
        type=float,
        default=0.1,
        help="fraction of nodes whose published label is redrawn uniformly (caps accuracy)",
    )
    p.add_argument("--train-frac", type=float, default=0.6)
    p.add_argument("--val-frac", type=float, default=0.2)
    p.add_argument(
        "--test-frac",
        type=float,
        help="fraction of nodes in the test split (default: all the others); large graphs "
        "evaluate faster on a sample",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--binary",
        action="store_true",
        help="ogb's npz layout instead of csv (seconds instead of minutes for big graphs)",
    )
    a = p.parse_args(argv)
    if a.name in OGB_NAMES:
        p.error(f"--name {a.name} is one of ogb's own datasets; pick another name")
    if not 0.0 <= a.homophily <= 1.0:
        p.error("--homophily must be in [0, 1]")
    if not 0.0 <= a.label_noise <= 1.0:
        p.error("--label-noise must be in [0, 1]")
    if a.num_classes < 2 or a.feat_dim < 1 or a.avg_degree <= 0:
        p.error("--num-classes must be >= 2, --feat-dim >= 1 and --avg-degree > 0")
    return a


def main(argv: Sequence[str] | None = None) -> int:
    a = parse_args(argv)
    spec = SynthSpec(
        name=a.name,
        num_nodes=a.num_nodes,
        avg_degree=a.avg_degree,
        num_classes=a.num_classes,
        feat_dim=a.feat_dim,
        homophily=a.homophily,
        feat_signal=a.feat_signal,
        label_noise=a.label_noise,
        train_frac=a.train_frac,
        val_frac=a.val_frac,
        test_frac=a.test_frac,
        seed=a.seed,
        binary=a.binary,
    )
    started = time.perf_counter()
    try:
        g = generate(spec)
        out = write(spec, g, Path(a.root))
    except (ValueError, OSError) as e:
        print(f"make_dataset.py: error: {e}", file=sys.stderr)
        return 1
    sample = g.test[:2000]
    print(
        f"wrote {out}: {spec.num_nodes} nodes, {len(g.src)} undirected edges "
        f"({2 * len(g.src)} directed), {spec.num_classes} classes, {spec.feat_dim} features; "
        f"split {len(g.train)}/{len(g.valid)}/{len(g.test)}; edge homophily "
        f"{homophily_ratio(g):.3f}; best features-only accuracy "
        f"~{nearest_centroid_accuracy(g, spec.feat_signal, sample):.3f}, any model's "
        f"~{accuracy_ceiling(spec):.3f}; "
        f"{time.perf_counter() - started:.1f}s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
