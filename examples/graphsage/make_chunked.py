"""Write a synthetic graph shaped like ogbn-products straight into DGL's chunked graph format,
streaming: no step ever holds the edge list or the feature matrix.

    python make_chunked.py --out /data/chunked                      # every chunk
    python make_chunked.py --out /data/chunked --worker 1 --workers 3   # only worker 1's chunks

The defaults are ogbn-products' shape: 2,449,029 nodes, 61,859,140 undirected edges (each written
in both directions, 123,718,280 rows, as DGL's copy of products holds them), 100 float32
features, 47 classes. With ``--worker i --workers N`` only the chunks of worker ``i`` under the
``PerWorker`` layout are written (of ``C`` chunks, ``C * i // N`` up to ``C * (i + 1) // N``),
with the whole ``metadata.json``: every worker generates its own slice and no byte of the
graph is copied.
Each chunk is drawn from its own seed (``--seed``, the chunk's index, the column), so the same
arguments write the same files whichever worker writes them.

The graph (what makes it products-like, and a task that is neither trivial nor noise):

* **Degrees with a heavy tail** (Chung-Lu): every node has a weight drawn from a Pareto
  distribution (``--degree-exponent``, capped so that no node expects more than
  ``--max-degree`` edges); each edge's ends are drawn in proportion to the weights, so degrees
  follow the weights: a median far below the mean and hubs of thousands of edges.
* **Communities and classes** (like products' co-purchases: locality, and categories that
  mostly follow it): the nodes fall into communities of ``--community-size`` (their ids
  scattered, so the partitioner has work to do); a node has its community's class with
  probability ``--purity``, else a class drawn from 47 of unequal sizes. An edge's other end is,
  with probability ``--locality``, in its source's community, else with probability
  ``--homophily`` in its source's class, else any node (each drawn by weight). The graph thus
  has a low-cut partition (as products has, ~20% of the edges cut into 3 parts) and the
  neighbourhood says much, not all, about the class.
* **Features**: a weak class signal (a random unit direction per class times
  ``--feat-signal``) plus standard normal noise in every dimension: a node's own features say
  little (the nearest-centroid bound printed at the end, the best any features-only model can
  do), its neighbours' mean says more.
* **Labels**: the class, except a ``--label-noise`` fraction redrawn uniformly, which caps every
  model's accuracy at ``1 - noise + noise / classes`` (also printed).
* **Split**: ``--train-frac`` (products: 8%), ``--val-frac`` and ``--test-frac`` of the nodes,
  drawn independently per node (products tests on the other 88%; a smaller test set keeps the
  final evaluation short).

Node data: ``feat`` (float32), ``label`` (int64), ``train_mask``/``val_mask``/``test_mask``
(bool), as ``dgl-chunk-graph`` writes them. Edges: ``(n, 2)`` int64 ``.npy`` files. Each chunk is
written through a memory map a block at a time: the peak resident memory (printed) is the
per-node arrays (weights, classes: ~70 MB for products) plus a block, whatever the graph's size.
A chunk is written under a temporary name and renamed when complete, and a chunk already there
with the right header is kept: a rerun after a crash writes only what is missing.

Standard library and numpy only.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import socket
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

NTYPE = "_N"
ETYPE = "_N:_E:_N"
METADATA = "metadata.json"
EDGE_BLOCK = 1 << 21  # undirected edges drawn at a time (two rows each)
NODE_BLOCK = 1 << 16  # feature rows drawn at a time
# a column's seed: (seed, column, chunk, block)
_CLASSES, _WEIGHTS, _CENTROIDS, _EDGES, _FEAT, _LABEL, _SPLIT, _COMMUNITIES = range(8)


@dataclass(frozen=True)
class Shape:
    nodes: int = 2_449_029
    edges: int = 61_859_140  # undirected; written in both directions
    feat_dim: int = 100
    classes: int = 47
    chunks: int = 6
    degree_exponent: float = 2.5  # Pareto tail of the weights (P(w > x) ~ x^-(exponent - 1))
    max_degree: int = 17_000  # products' largest degree is 17,481
    community_size: int = 1000  # nodes per community (their ids are scattered)
    locality: float = 0.7  # P(an edge's other end is in its source's community)
    homophily: float = 0.3  # else P(it is in its source's class)
    purity: float = 0.8  # P(a node has its community's class)
    feat_signal: float = 2.0
    label_noise: float = 0.1
    train_frac: float = 0.08
    val_frac: float = 0.02
    test_frac: float = 0.1
    seed: int = 0

    def check(self) -> None:
        if self.nodes < 2 * self.classes:
            raise ValueError(f"--nodes {self.nodes} is too small for {self.classes} classes")
        if self.edges < self.chunks or self.nodes < self.chunks:
            raise ValueError(f"--chunks {self.chunks}: more chunks than nodes or edges")
        if self.degree_exponent <= 1.0:
            raise ValueError("--degree-exponent must be above 1")
        fracs = (self.train_frac, self.val_frac, self.test_frac)
        if min(fracs) <= 0 or sum(fracs) > 1:
            raise ValueError(
                "--train-frac, --val-frac, --test-frac: each above 0, at most 1 in all"
            )
        probabilities = (self.locality, self.homophily, self.purity, self.label_noise)
        if not all(0 <= x <= 1 for x in probabilities):
            raise ValueError("--locality, --homophily, --purity, --label-noise: each in 0..1")
        if self.community_size < 1:
            raise ValueError("--community-size must be at least 1")

    def accuracy_ceiling(self) -> float:
        return 1.0 - self.label_noise + self.label_noise / self.classes


def even_counts(total: int, chunks: int) -> list[int]:
    return [total * (c + 1) // chunks - total * c // chunks for c in range(chunks)]


def owned(chunks: int, worker: int | None, workers: int) -> list[int]:
    """The chunks a worker holds under the PerWorker layout (all of them for None): the
    contiguous run ``chunks * worker // workers`` up to ``chunks * (worker + 1) // workers``, as
    the partitioner's ranks read them (chunkedgraph.shares)."""
    if worker is None:
        return list(range(chunks))
    return list(range(chunks * worker // workers, chunks * (worker + 1) // workers))


def rng(shape: Shape, *key: int) -> np.random.Generator:
    return np.random.default_rng([shape.seed, *key])


class Groups:
    """Nodes grouped by a key (their class, their community), with the cumulative weights that
    turn a uniform draw into a member of a given group drawn in proportion to its weight."""

    def __init__(self, key: np.ndarray, weight: np.ndarray, count: int) -> None:
        self.members = np.argsort(key, kind="stable")
        self.start = np.concatenate([[0], np.cumsum(np.bincount(key, minlength=count))])
        cum = np.concatenate([[0.0], np.cumsum(weight[self.members])])
        self.cum = cum[1:]
        self.before = cum[self.start[:-1]]
        self.size = cum[self.start[1:]] - self.before

    def draw(self, key: np.ndarray, r: np.ndarray) -> np.ndarray:
        """A member of group ``key[i]`` for each uniform ``r[i]`` (the groups are not empty)."""
        at = np.searchsorted(self.cum, self.before[key] + r * self.size[key], side="right")
        return self.members[np.clip(at, self.start[key], self.start[key + 1] - 1)]


class Nodes:
    """What every writer needs of every node, drawn the same way by each: its community, its
    class and its weight (expected degree), and the draws of an edge's other end."""

    def __init__(self, shape: Shape) -> None:
        n, c = shape.nodes, shape.classes
        communities = max(1, n // shape.community_size)
        self.community = rng(shape, _COMMUNITIES).integers(0, communities, size=n)
        prior = 1.0 / np.arange(1, c + 1) ** 0.7  # unequal class sizes, no class dominating
        prior /= prior.sum()
        g = rng(shape, _CLASSES)
        own = g.choice(c, size=communities, p=prior)  # each community's class
        self.cls = np.where(
            g.random(n) < shape.purity, own[self.community], g.choice(c, size=n, p=prior)
        ).astype(np.int64)
        u = rng(shape, _WEIGHTS).random(n)
        weight = (1.0 - u) ** (-1.0 / (shape.degree_exponent - 1.0))  # Pareto, minimum 1
        mean_degree = 2.0 * shape.edges / n
        # cap: a weight's expected degree is mean_degree * w / mean(w)
        for _ in range(3):  # the cap lowers the mean: a few rounds settle it
            weight = np.minimum(weight, shape.max_degree / mean_degree * weight.mean())
        self.cum = np.cumsum(weight)
        self.total = float(self.cum[-1])
        self.by_class = Groups(self.cls, weight, c)
        self.by_community = Groups(self.community, weight, communities)
        self.expected_degree = weight * (mean_degree / weight.mean())

    def by_weight(self, r: np.ndarray) -> np.ndarray:
        at = np.searchsorted(self.cum, r * self.total, side="right")
        return np.minimum(at, len(self.cum) - 1)

    def other_ends(
        self, shape: Shape, u: np.ndarray, r: np.ndarray, pick: np.ndarray
    ) -> np.ndarray:
        """Each edge's other end: in u's community (``locality``), else in u's class
        (``homophily``), else any node; ``pick`` chooses the kind, ``r`` the node."""
        local = pick < shape.locality
        same = ~local & (pick < shape.locality + (1 - shape.locality) * shape.homophily)
        v = self.by_weight(r)
        v[local] = self.by_community.draw(self.community[u[local]], r[local])
        v[same] = self.by_class.draw(self.cls[u[same]], r[same])
        return v


def centroids(shape: Shape) -> np.ndarray:
    c = rng(shape, _CENTROIDS).standard_normal((shape.classes, shape.feat_dim))
    c /= np.linalg.norm(c, axis=1, keepdims=True)
    return c


def _npy_ok(path: Path, shape: tuple[int, ...], dtype: np.dtype[Any]) -> bool:
    try:
        with path.open("rb") as f:
            version = np.lib.format.read_magic(f)  # type: ignore[no-untyped-call]
            got, _, got_dtype = np.lib.format._read_array_header(f, version)  # type: ignore[attr-defined]
        return tuple(got) == shape and got_dtype == dtype and path.stat().st_size > 0
    except (OSError, ValueError):
        return False


class Writer:
    """One chunk file through a memory map, renamed into place when complete."""

    def __init__(self, path: Path, shape: tuple[int, ...], dtype: Any) -> None:
        self.path, self.shape, self.dtype = path, shape, np.dtype(dtype)
        self.done = _npy_ok(path, shape, self.dtype)
        self.tmp = path.with_name(path.name + ".tmp")
        self.array: Any = None

    def __enter__(self) -> Writer:
        if not self.done:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.array = np.lib.format.open_memmap(  # type: ignore[no-untyped-call]
                self.tmp, mode="w+", dtype=self.dtype, shape=self.shape
            )
        return self

    def __exit__(self, kind: object, *_: object) -> None:
        if self.array is None:
            return
        self.array.flush()
        del self.array
        self.array = None
        if kind is None:
            os.replace(self.tmp, self.path)
        else:
            self.tmp.unlink(missing_ok=True)


class Generator:
    def __init__(self, shape: Shape, out: Path) -> None:
        shape.check()
        self.shape, self.out = shape, out
        self.node_counts = even_counts(shape.nodes, shape.chunks)
        self.node_start = np.concatenate([[0], np.cumsum(self.node_counts)])
        self.edge_counts = even_counts(shape.edges, shape.chunks)  # undirected, per chunk
        self.nodes = Nodes(shape)
        self.signal = (shape.feat_signal * centroids(shape)).astype(np.float32)
        self.bytes = 0

    def metadata(self) -> dict[str, Any]:
        c = range(self.shape.chunks)

        def column(name: str) -> dict[str, Any]:
            return {"format": {"name": "numpy"}, "data": [f"node_data/{name}-{j}.npy" for j in c]}

        return {
            "graph_name": "graphsage",
            "node_type": [NTYPE],
            "num_nodes_per_chunk": [self.node_counts],
            "edge_type": [ETYPE],
            "num_edges_per_chunk": [[2 * m for m in self.edge_counts]],
            "edges": {
                ETYPE: {"format": {"name": "numpy"}, "data": [f"edges/edges-{j}.npy" for j in c]}
            },
            "node_data": {
                NTYPE: {
                    name: column(name)
                    for name in ("feat", "label", "train_mask", "val_mask", "test_mask")
                }
            },
            "edge_data": {},
            "synthetic": {
                "generator": "make_chunked.py",
                **asdict(self.shape),
                "accuracy_ceiling": round(self.shape.accuracy_ceiling(), 4),
            },
        }

    def edges(self, j: int) -> None:
        m = self.edge_counts[j]
        with Writer(self.out / "edges" / f"edges-{j}.npy", (2 * m, 2), np.int64) as w:
            if w.array is None:
                return
            for b, lo in enumerate(range(0, m, EDGE_BLOCK)):
                k = min(m, lo + EDGE_BLOCK) - lo
                r = rng(self.shape, _EDGES, j, b).random((3, k))
                u = self.nodes.by_weight(r[0])
                v = self.nodes.other_ends(self.shape, u, r[2], r[1])
                v = np.where(v == u, (v + 1) % self.shape.nodes, v)  # no self-loops
                block = w.array[2 * lo : 2 * (lo + k)]
                block[0::2, 0], block[0::2, 1] = u, v  # each edge followed by its inverse
                block[1::2, 0], block[1::2, 1] = v, u
            self.bytes += w.array.nbytes

    def node_data(self, j: int) -> None:
        s = self.shape
        lo, hi = int(self.node_start[j]), int(self.node_start[j + 1])
        cls = self.nodes.cls[lo:hi]
        with Writer(
            self.out / "node_data" / f"feat-{j}.npy", (hi - lo, s.feat_dim), np.float32
        ) as w:
            if w.array is not None:
                for b, at in enumerate(range(0, hi - lo, NODE_BLOCK)):
                    end = min(hi - lo, at + NODE_BLOCK)
                    block = rng(s, _FEAT, j, b).standard_normal(
                        (end - at, s.feat_dim), dtype=np.float32
                    )
                    block += self.signal[cls[at:end]]
                    w.array[at:end] = block
                self.bytes += w.array.nbytes
        r = rng(s, _LABEL, j).random(hi - lo)
        label = np.where(
            r < s.label_noise, rng(s, _LABEL, j, 1).integers(0, s.classes, size=hi - lo), cls
        )
        split = rng(s, _SPLIT, j).random(hi - lo)
        cut = np.cumsum([s.train_frac, s.val_frac, s.test_frac])
        columns = {
            "label": label.astype(np.int64),
            "train_mask": split < cut[0],
            "val_mask": (split >= cut[0]) & (split < cut[1]),
            "test_mask": (split >= cut[1]) & (split < cut[2]),
        }
        for name, values in columns.items():
            with Writer(
                self.out / "node_data" / f"{name}-{j}.npy", values.shape, values.dtype
            ) as w:
                if w.array is not None:
                    w.array[:] = values
                    self.bytes += w.array.nbytes

    def write_metadata(self) -> None:
        self.out.mkdir(parents=True, exist_ok=True)
        path = self.out / METADATA
        # (every worker writes the same metadata.json, maybe into one folder on a claim at
        # once: a temporary name of its own each)
        tmp = path.with_name(f".{METADATA}.{socket.gethostname()}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(self.metadata(), indent=2) + "\n")
        tmp.replace(path)

    def nearest_centroid_bound(self, sample: int = 20000) -> float:
        """Accuracy of the best features-only classifier on a sample of nodes (the nearest
        scaled centroid: the noise is isotropic), against the published labels."""
        s = self.shape
        g = rng(s, 99)
        cls = self.nodes.cls[:sample]
        x = g.standard_normal((len(cls), s.feat_dim)) + self.signal[cls]
        label = np.where(
            g.random(len(cls)) < s.label_noise, g.integers(0, s.classes, len(cls)), cls
        )
        d = ((x[:, None, :] - self.signal[None, :, :]) ** 2).sum(-1)
        return float((d.argmin(1) == label).mean())


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def parse_args(argv: Sequence[str] | None = None) -> tuple[argparse.Namespace, Shape]:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, type=Path, help="the chunked graph's folder")
    p.add_argument("--worker", type=int, help="write only this worker's chunks (PerWorker)")
    p.add_argument("--workers", type=int, default=1, help="with --worker: how many workers")
    d = Shape()
    for name, value in asdict(d).items():
        p.add_argument(f"--{name.replace('_', '-')}", type=type(value), default=value)
    a = p.parse_args(argv)
    shape = Shape(**{k: getattr(a, k) for k in asdict(d)})
    if a.worker is not None and not 0 <= a.worker < a.workers:
        p.error(f"--worker {a.worker}: not in 0..{a.workers - 1}")
    if a.worker is not None and shape.chunks < a.workers:
        p.error(f"--chunks {shape.chunks}: at least one chunk per worker ({a.workers})")
    return a, shape


def main(argv: Sequence[str] | None = None) -> int:
    a, shape = parse_args(argv)
    tic = time.perf_counter()
    try:
        gen = Generator(shape, a.out)
    except ValueError as e:
        print(f"make_chunked: {e}", file=sys.stderr)
        return 2
    mine = owned(shape.chunks, a.worker, a.workers)
    for j in mine:
        gen.edges(j)
        gen.node_data(j)
    gen.write_metadata()  # last: a folder without it is not a chunked graph yet
    deg = gen.nodes.expected_degree
    who = "every chunk" if a.worker is None else f"worker {a.worker}'s chunks {mine}"
    print(
        f"make_chunked: {who} of {shape.nodes:,} nodes, {2 * shape.edges:,} directed edges "
        f"in {time.perf_counter() - tic:.1f}s: {gen.bytes / 2**20:.0f} MiB written to {a.out}, "
        f"peak memory {peak_rss_mib():.0f} MiB; expected degree median "
        f"{np.median(deg):.0f}, mean {deg.mean():.1f}, max {deg.max():.0f}; accuracy ceiling "
        f"{shape.accuracy_ceiling():.3f}, features-only bound {gen.nearest_centroid_bound():.3f}",
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
