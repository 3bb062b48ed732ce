"""``dgl-chunk-graph``: write a graph in DGL's chunked graph format (the input of the ParMETIS
and DistParMETIS partition modes; see :mod:`chunkedgraph` for the format).

    dgl-chunk-graph ogb --dataset ogbn-products --root /data --out /data/chunked [--num-chunks 8]
    dgl-chunk-graph dgl --graph graph.bin [--index 0] --out /data/chunked [--num-chunks 8]

``ogb`` reads OGB's on-disk node-property layout (``raw/*.csv.gz``, or the binary
``raw/data.npz`` and ``raw/node-label.npz``, and ``split/<name>/``, the
folder ogb's own loader reads; for a dataset that is not one of ogb's, its ``meta.json`` as
``make_dataset.py`` writes it) in a streaming pass, a block of rows at a time, without ogb's
loader holding the graph in memory. It writes what
``examples/graphsage/common.py:load_ogb_graph`` builds: the same edge ids (each edge ``u,v``
followed by its inverse ``v,u``, as ogb orders them), and node data ``feat`` (float32),
``label`` (int64, -1 where unlabelled), ``train_mask``/``val_mask``/``test_mask`` (bool).
For a directed dataset (ogb's ``add_inverse_edge`` False) the inverse edges are added the same
way, where ``load_ogb_graph`` uses ``dgl.to_bidirected``: an edge present in both directions
then appears twice.

``dgl`` reads a graph saved with ``dgl.save_graphs`` and writes its edges in edge-id order and
every ``ndata``/``edata`` tensor (it needs the graph in memory: it is one).

Edges go to numpy ``(n, 2)`` int64 files (``--edge-format csv`` writes DGL's space-separated
text instead), data to ``.npy`` files; every column is split into ``--num-chunks`` chunks of
near-equal size. A DistParMETIS job with the ``PerWorker`` layout needs at least one chunk per
worker, and worker ``i`` holds the chunks ``chunks * i // workers`` up to, not including,
``chunks * (i + 1) // workers`` (chunkedgraph.shares).
"""

from __future__ import annotations

import argparse
import gzip
import json
import shutil
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from chunkedgraph import METADATA, ChunkedError
from chunkedgraph import load as load_chunked
from distpart.types import Array

NTYPE = "_N"
ETYPE = "_N:_E:_N"
BLOCK = 1 << 20  # rows per streamed block


class ConvertError(RuntimeError):
    """The input cannot be converted; ``str()`` is one line naming the file."""


def even_counts(total: int, chunks: int) -> list[int]:
    return [total * (c + 1) // chunks - total * c // chunks for c in range(chunks)]


class ChunkWriter:
    """One column written into chunk files of known sizes, from blocks of rows in order."""

    def __init__(
        self,
        out: Path,
        rel: str,
        counts: list[int],
        dtype: np.dtype[Any],
        row_shape: tuple[int, ...] = (),
        fmt: str = "numpy",
        delimiter: str = " ",
    ) -> None:
        self.out, self.rel, self.counts = out, rel, counts
        self.dtype, self.row_shape, self.fmt, self.delimiter = dtype, row_shape, fmt, delimiter
        self.files = [f"{rel}-{c}.{'npy' if fmt == 'numpy' else 'txt'}" for c in range(len(counts))]
        self._chunk = 0
        self._filled = 0
        self._current: Any = None
        (out / rel).parent.mkdir(parents=True, exist_ok=True)

    def _open(self) -> None:
        path = self.out / self.files[self._chunk]
        shape = (self.counts[self._chunk], *self.row_shape)
        if self.fmt == "numpy":
            self._current = np.lib.format.open_memmap(  # type: ignore[no-untyped-call]
                path, mode="w+", dtype=self.dtype, shape=shape
            )
        else:
            self._current = path.open("w")

    def _close_current(self) -> None:
        if self._current is None:
            return
        if self.fmt == "numpy":
            self._current.flush()
            del self._current
        else:
            self._current.close()
        self._current = None

    def write(self, rows: Array) -> None:
        rows = np.asarray(rows, dtype=self.dtype)
        at = 0
        while at < len(rows):
            if self._chunk >= len(self.counts):
                raise ConvertError(f"{self.rel}: more rows than the {sum(self.counts)} expected")
            if self._current is None:
                self._open()
            room = self.counts[self._chunk] - self._filled
            take = rows[at : at + room]
            if self.fmt == "numpy":
                self._current[self._filled : self._filled + len(take)] = take
            else:
                np.savetxt(self._current, take, fmt="%d", delimiter=self.delimiter)
            self._filled += len(take)
            at += len(take)
            if self._filled == self.counts[self._chunk]:
                self._close_current()
                self._chunk += 1
                self._filled = 0

    def close(self) -> dict[str, Any]:
        """The column's metadata entry; every chunk must be complete."""
        while self._chunk < len(self.counts) and self.counts[self._chunk] == 0:
            self._open()
            self._close_current()
            self._chunk += 1
        if self._chunk != len(self.counts):
            raise ConvertError(f"{self.rel}: fewer rows than the {sum(self.counts)} expected")
        fmt: dict[str, str] = {"name": self.fmt}
        if self.fmt == "csv":
            fmt["delimiter"] = self.delimiter
        return {"format": fmt, "data": list(self.files)}


def write_metadata(
    out: Path,
    graph_name: str,
    node_counts: list[int],
    edge_counts: list[int],
    edges: dict[str, Any],
    node_data: dict[str, dict[str, Any]],
    edge_data: dict[str, dict[str, Any]],
) -> Path:
    doc = {
        "graph_name": graph_name,
        "node_type": [NTYPE],
        "num_nodes_per_chunk": [node_counts],
        "edge_type": [ETYPE],
        "num_edges_per_chunk": [edge_counts],
        "edges": {ETYPE: edges},
        "node_data": {NTYPE: node_data} if node_data else {},
        "edge_data": {ETYPE: edge_data} if edge_data else {},
    }
    path = out / METADATA
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(doc, indent=2) + "\n")
    tmp.replace(path)  # last: a half-written folder has no metadata.json
    return path


def _prepare(out: Path) -> None:
    if out.exists():
        if any(out.iterdir()) and not (out / METADATA).is_file():
            raise ConvertError(
                f"{out} exists, is not empty and holds no {METADATA}; refusing to overwrite it"
            )
        shutil.rmtree(out)
    out.mkdir(parents=True)


# -- OGB's on-disk layout -------------------------------------------------------------------


def _csv_blocks(path: Path, dtype: Any = None) -> Iterator[Array]:
    import pandas as pd

    if not path.is_file():
        raise ConvertError(f"{path} does not exist")
    try:
        for frame in pd.read_csv(path, header=None, chunksize=BLOCK, dtype=dtype):
            yield frame.to_numpy()
    except (OSError, ValueError, EOFError, gzip.BadGzipFile) as e:
        raise ConvertError(f"{path}: cannot read it: {e}") from e


def _first_int(path: Path) -> int:
    for block in _csv_blocks(path):
        if block.size:
            return int(block.reshape(-1)[0])
    raise ConvertError(f"{path} is empty")


def ogb_meta(name: str, folder: Path) -> dict[str, str]:
    """ogb's meta_dict for ``name``: its master.csv column, or the folder's meta.json."""
    meta_file = folder / "meta.json"
    if meta_file.is_file():
        try:
            doc = json.loads(meta_file.read_text())
        except ValueError as e:
            raise ConvertError(f"{meta_file} is not valid JSON: {e}") from e
        return {k: str(v) for k, v in doc.items() if isinstance(v, str)}
    try:
        import pandas as pd
        from ogb import nodeproppred

        master = pd.read_csv(
            Path(nodeproppred.__file__).parent / "master.csv", index_col=0, keep_default_na=False
        )
    except ImportError as e:
        raise ConvertError(f"{folder} has no meta.json and ogb is not installed: {e}") from e
    if name not in master:
        raise ConvertError(
            f"dataset {name}: not one of ogb's node-property datasets and {meta_file} is missing"
        )
    return {str(k): str(v) for k, v in master[name].items()}


def _npz(path: Path, key: str) -> Array:
    if not path.is_file():
        raise ConvertError(f"{path} does not exist")
    try:
        with np.load(path, allow_pickle=False) as doc:  # (runs no code)
            return np.asarray(doc[key])
    except KeyError:
        raise ConvertError(f"{path} holds no array {key!r}") from None
    except (OSError, ValueError, EOFError) as e:
        raise ConvertError(f"{path}: cannot read it: {e}") from e


def _blocks(array: Array) -> Iterator[Array]:
    for lo in range(0, len(array), BLOCK):
        yield array[lo : lo + BLOCK]


class _OgbRaw:
    """ogb's raw files, csv (``raw/*.csv.gz``) or binary (``raw/data.npz``,
    ``raw/node-label.npz``), as blocks of rows."""

    def __init__(self, raw: Path, binary: bool) -> None:
        self.raw, self.binary = raw, binary

    def _array(self, key: str) -> Array:
        return _npz(self.raw / "data.npz", key)

    def num_nodes(self) -> int:
        if self.binary:
            return int(self._array("num_nodes_list")[0])
        return _first_int(self.raw / "num-node-list.csv.gz")

    def num_edges(self) -> int:
        if self.binary:
            return int(self._array("num_edges_list")[0])
        return _first_int(self.raw / "num-edge-list.csv.gz")

    def edges(self) -> Iterator[Array]:
        if self.binary:
            return _blocks(self._array("edge_index").T)
        return _csv_blocks(self.raw / "edge.csv.gz", dtype=np.int64)

    def node_feat(self) -> Iterator[Array]:
        if self.binary:
            return _blocks(self._array("node_feat"))
        return _csv_blocks(self.raw / "node-feat.csv.gz")

    def labels(self) -> Iterator[Array]:
        if self.binary:
            return _blocks(_npz(self.raw / "node-label.npz", "node_label").reshape(-1, 1))
        return _csv_blocks(self.raw / "node-label.csv.gz")

    def where(self, what: str) -> Path:
        if self.binary:
            return self.raw / ("node-label.npz" if what == "label" else "data.npz")
        return self.raw / {"edge": "edge.csv.gz", "feat": "node-feat.csv.gz"}[what]


def convert_ogb(
    name: str,
    root: Path,
    out: Path,
    num_chunks: int,
    *,
    edge_format: str = "numpy",
    graph_name: str | None = None,
) -> Path:
    folder = root / "_".join(name.split("-"))
    if not folder.is_dir():
        raise ConvertError(f"dataset {name}: {folder} does not exist")
    meta = ogb_meta(name, folder)
    if meta.get("is hetero") == "True":
        raise ConvertError(f"dataset {name}: heterogeneous ogb datasets are not supported")
    src = _OgbRaw(folder / "raw", meta.get("binary") == "True")
    raw = src.raw
    n = src.num_nodes()
    e_raw = src.num_edges()
    inverse = meta.get("add_inverse_edge") == "True"
    # (make_dataset.py --binary: the npz holds each edge followed by its inverse already)
    both_ways = meta.get("bidirected") == "True"
    e_out = e_raw if both_ways else 2 * e_raw
    _prepare(out)
    node_counts = even_counts(n, num_chunks)
    edge_counts = even_counts(e_out, num_chunks)
    edges = ChunkWriter(out, "edges/edges", edge_counts, np.dtype(np.int64), (2,), fmt=edge_format)
    seen = 0
    for block in src.edges():
        if both_ways:
            edges.write(np.ascontiguousarray(block, dtype=np.int64))
        else:
            pairs = np.empty((2 * len(block), 2), dtype=np.int64)
            pairs[0::2] = block
            pairs[1::2] = block[:, ::-1]  # ogb's order: every edge, then its inverse
            edges.write(pairs)
        seen += len(block)
    if seen != e_raw:
        raise ConvertError(f"{src.where('edge')}: {seen} edges, the edge count says {e_raw}")
    if not inverse and not both_ways:
        print(f"dgl-chunk-graph: {name} is directed: inverse edges added", flush=True)
    edge_data = {}
    edge_feat = raw / "edge-feat.csv.gz"
    if edge_feat.is_file():
        writer: ChunkWriter | None = None
        for block in _csv_blocks(edge_feat):
            block = block.astype(np.float32)
            if writer is None:
                writer = ChunkWriter(
                    out, "edge_data/feat", edge_counts, np.dtype(np.float32), block.shape[1:]
                )
            writer.write(np.repeat(block, 2, axis=0))
        if writer is not None:
            edge_data["feat"] = writer.close()

    node_data: dict[str, dict[str, Any]] = {}
    feat_writer: ChunkWriter | None = None
    for block in src.node_feat():
        block = block.astype(np.float32)
        if feat_writer is None:
            feat_writer = ChunkWriter(
                out, "node_data/feat", node_counts, np.dtype(np.float32), block.shape[1:]
            )
        feat_writer.write(block)
    if feat_writer is None:
        raise ConvertError(f"{src.where('feat')} holds no node features")
    node_data["feat"] = feat_writer.close()
    label_writer = ChunkWriter(out, "node_data/label", node_counts, np.dtype(np.int64))
    for block in src.labels():
        values = block[:, 0].astype(np.float64)
        label_writer.write(np.where(np.isnan(values), -1, values).astype(np.int64))
    node_data["label"] = label_writer.close()
    split = folder / "split" / meta.get("split", "random")
    for key, part in (("train_mask", "train"), ("val_mask", "valid"), ("test_mask", "test")):
        mask = np.zeros(n, dtype=bool)
        for block in _csv_blocks(split / f"{part}.csv.gz", dtype=np.int64):
            ids = block[:, 0]
            if len(ids) and (ids.min() < 0 or ids.max() >= n):
                raise ConvertError(f"{split / part}.csv.gz: node id out of range 0..{n - 1}")
            mask[ids] = True
        writer = ChunkWriter(out, f"node_data/{key}", node_counts, np.dtype(bool))
        writer.write(mask)
        node_data[key] = writer.close()
    return write_metadata(
        out,
        graph_name or name,
        node_counts,
        edge_counts,
        edges.close(),
        node_data,
        edge_data,
    )


# -- a saved DGLGraph -----------------------------------------------------------------------


def convert_dgl(
    graph_file: Path,
    out: Path,
    num_chunks: int,
    *,
    index: int = 0,
    edge_format: str = "numpy",
    graph_name: str | None = None,
) -> Path:
    import dgl

    if not graph_file.is_file():
        raise ConvertError(f"{graph_file} does not exist")
    try:
        graphs, _ = dgl.load_graphs(str(graph_file))
    except Exception as e:  # DGL raises its own error types for a bad file
        raise ConvertError(f"{graph_file}: not a graph saved by dgl.save_graphs: {e}") from e
    if not 0 <= index < len(graphs):
        raise ConvertError(f"{graph_file} holds {len(graphs)} graph(s); --index {index} is out")
    g = graphs[index]
    if len(g.ntypes) != 1 or len(g.etypes) != 1:
        raise ConvertError(
            f"{graph_file}: the graph has {len(g.ntypes)} node and {len(g.etypes)} edge types; "
            "the ParMETIS modes take a homogeneous graph (dgl.to_homogeneous converts one)"
        )
    _prepare(out)
    n, m = g.num_nodes(), g.num_edges()
    node_counts, edge_counts = even_counts(n, num_chunks), even_counts(m, num_chunks)
    src, dst = g.edges(order="eid")
    edges = ChunkWriter(out, "edges/edges", edge_counts, np.dtype(np.int64), (2,), fmt=edge_format)
    for lo in range(0, m, BLOCK):
        edges.write(np.stack([src[lo : lo + BLOCK].numpy(), dst[lo : lo + BLOCK].numpy()], 1))

    def columns(data: Any, counts: list[int], prefix: str) -> dict[str, dict[str, Any]]:
        out_cols = {}
        for key in sorted(data.keys()):
            values = data[key].numpy()
            w = ChunkWriter(out, f"{prefix}/{key}", counts, values.dtype, values.shape[1:])
            w.write(values)
            out_cols[str(key)] = w.close()
        return out_cols

    return write_metadata(
        out,
        graph_name or graph_file.stem,
        node_counts,
        edge_counts,
        edges.close(),
        columns(g.ndata, node_counts, "node_data"),
        columns(g.edata, edge_counts, "edge_data"),
    )


# -- command line ---------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="dgl-chunk-graph", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="source", required=True)
    o = sub.add_parser("ogb", help="from OGB's on-disk node-property layout")
    o.add_argument("--dataset", required=True, help="e.g. ogbn-products, ogbn-synth")
    o.add_argument("--root", required=True, help="the folder holding the dataset's folder")
    d = sub.add_parser("dgl", help="from a graph saved with dgl.save_graphs")
    d.add_argument("--graph", required=True, help="the .bin file")
    d.add_argument("--index", type=int, default=0, help="which graph of the file")
    for sp in (o, d):
        sp.add_argument("--out", required=True, help="the chunked graph's folder (created)")
        sp.add_argument("--num-chunks", type=int, default=4)
        sp.add_argument("--graph-name", help="graph_name in metadata.json")
        sp.add_argument("--edge-format", choices=["numpy", "csv"], default="numpy")
    a = p.parse_args(argv)
    if a.num_chunks < 1:
        p.error("--num-chunks must be at least 1")
    return a


def main(argv: Sequence[str] | None = None) -> int:
    a = parse_args(argv)
    started = time.perf_counter()
    out = Path(a.out)
    try:
        if a.source == "ogb":
            meta = convert_ogb(
                a.dataset,
                Path(a.root),
                out,
                a.num_chunks,
                edge_format=a.edge_format,
                graph_name=a.graph_name,
            )
        else:
            meta = convert_dgl(
                Path(a.graph),
                out,
                a.num_chunks,
                index=a.index,
                edge_format=a.edge_format,
                graph_name=a.graph_name,
            )
        graph = load_chunked(meta)
    except (ConvertError, ChunkedError, OSError) as e:
        print(f"dgl-chunk-graph: error: {e}", file=sys.stderr)
        return 1
    print(
        f"dgl-chunk-graph: wrote {meta}: {graph.num_nodes} nodes, {graph.num_edges} edges in "
        f"{a.num_chunks} chunk(s); node data {', '.join(sorted(graph.node_data)) or 'none'}; "
        f"edge data {', '.join(sorted(graph.edge_data)) or 'none'}; "
        f"{time.perf_counter() - started:.1f}s",
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
