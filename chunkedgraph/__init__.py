"""DGL's chunked graph format: read ``metadata.json``, verify every chunk file, and decide which
rows each MPI rank reads. Standard library only, so dglrun can check an input wherever it lives
(the partitioner pod, or each worker through ``kubectl exec``) before any rank starts.

The format is the one DGL's distributed preprocessing guide describes::

    <folder>/metadata.json
    {
      "graph_name": "synth",
      "node_type": ["_N"],                      one node type (see below)
      "num_nodes_per_chunk": [[5000, 5000]],   per node type, per chunk
      "edge_type": ["_N:_E:_N"],                one edge type, "src:relation:dst"
      "num_edges_per_chunk": [[50000, 50000]],
      "edges": {"_N:_E:_N": {"format": {"name": "csv", "delimiter": " "},
                             "data": ["edges/0.txt", "edges/1.txt"]}},
      "node_data": {"_N": {"feat": {"format": {"name": "numpy"},
                                    "data": ["node_data/feat-0.npy", "node_data/feat-1.npy"]}}},
      "edge_data": {}
    }

Paths are relative to the metadata's folder (absolute ones are taken as they are). Edge files
hold one ``src dst`` pair per row (csv) or an ``(n, 2)`` integer array (numpy); data files hold
one row per node or edge of their chunk (csv: one line; numpy: ``shape[0]``). Node ids are the
global ids 0..N-1 in chunk order. ParMETIS knows one kind of vertex, so the ParMETIS modes take
a homogeneous graph: one node type and one edge type between nodes of that type (parquet, and
DGL's heterogeneous extensions, are refused with a message saying so).

Who reads what (:func:`shares`): with the ``Shared`` layout every rank sees every chunk and
reads an even slice of the node rows and of the edge rows (``N*r/P`` .. ``N*(r+1)/P``), even
within one chunk; with ``PerWorker`` worker ``r`` holds only its own chunks: node chunks and
edge chunks are dealt out in contiguous groups (chunk ``j`` of ``C`` to rank ``j*P//C``), so
``C`` must be at least the number of ranks.

    python -m chunkedgraph check <folder or metadata.json> [--ranks P --layout L --rank R]

checks everything (or only rank R's files) and prints a one-line JSON summary, or exits 1 with
one line naming the file and what is wrong with it.
"""

from __future__ import annotations

import ast
import hashlib
import json
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from podcontract import CHUNKED_LAYOUTS, PER_WORKER, SHARED

METADATA = "metadata.json"
FORMATS = ("numpy", "csv")
_NPY_MAGIC = b"\x93NUMPY"


class ChunkedError(ValueError):
    """The chunked graph is unusable; ``str()`` is one line naming the file or field."""


def offsets(counts: Sequence[int]) -> list[int]:
    """Where each chunk starts in the global rows, plus the total at the end."""
    out = [0]
    for n in counts:
        out.append(out[-1] + n)
    return out


@dataclass(frozen=True)
class FileSpec:
    """One column of the graph (the edges, or one feature), split over chunk files."""

    what: str  # e.g. "edges of _N:_E:_N", "node_data _N/feat"
    per: str  # "node" or "edge": one row per node or per edge
    pairs: bool  # the edge list itself: (src, dst) rows
    fmt: str  # numpy | csv
    delimiter: str
    files: tuple[Path, ...]
    counts: tuple[int, ...]  # rows per file

    @property
    def offsets(self) -> list[int]:
        """Global row index of each file's first row, plus the total at the end."""
        return offsets(self.counts)

    def pieces(self, lo: int, hi: int) -> list[tuple[int, Path, int, int]]:
        """``(chunk, file, first, stop)`` row ranges (within each file) covering global rows
        ``[lo, hi)``: the only files a reader of those rows opens."""
        out = []
        offsets = self.offsets
        for j, path in enumerate(self.files):
            start, end = offsets[j], offsets[j + 1]
            a, b = max(lo, start), min(hi, end)
            if a < b:
                out.append((j, path, a - start, b - start))
        return out


@dataclass(frozen=True)
class ChunkedGraph:
    root: Path  # the metadata's folder
    metadata: Path
    graph_name: str
    ntype: str
    etype: str  # canonical "src:rel:dst"
    node_counts: tuple[int, ...]
    edges: FileSpec
    node_data: dict[str, FileSpec]
    edge_data: dict[str, FileSpec]

    @property
    def num_nodes(self) -> int:
        return sum(self.node_counts)

    @property
    def num_edges(self) -> int:
        return sum(self.edges.counts)

    def columns(self) -> list[FileSpec]:
        return [self.edges, *self.node_data.values(), *self.edge_data.values()]

    def summary(self) -> dict[str, object]:
        return {
            "graph_name": self.graph_name,
            "num_nodes": self.num_nodes,
            "num_edges": self.num_edges,
            "node_chunks": len(self.node_counts),
            "edge_chunks": len(self.edges.counts),
            "node_data": sorted(self.node_data),
            "edge_data": sorted(self.edge_data),
        }


# -- metadata.json --------------------------------------------------------------------------


def _field(doc: dict[str, object], key: str, kind: type, where: str) -> object:
    if key not in doc:
        raise ChunkedError(f"{where}: field {key!r} is missing")
    value = doc[key]
    if not isinstance(value, kind) or isinstance(value, bool):
        raise ChunkedError(
            f"{where}: field {key!r} must be a {kind.__name__}, got {type(value).__name__}"
        )
    return value


def _counts(value: object, where: str) -> tuple[int, ...]:
    if not isinstance(value, list) or not value:
        raise ChunkedError(f"{where} must be a non-empty list of chunk sizes")
    for n in value:
        if not isinstance(n, int) or isinstance(n, bool) or n < 0:
            raise ChunkedError(f"{where} must hold non-negative integers, got {n!r}")
    return tuple(value)


def _file_spec(
    spec: object, root: Path, counts: tuple[int, ...], what: str, where: str, per: str
) -> FileSpec:
    if not isinstance(spec, dict):
        raise ChunkedError(f"{where} must be an object with 'format' and 'data'")
    fmt_doc = _field(spec, "format", dict, where)
    assert isinstance(fmt_doc, dict)
    name = fmt_doc.get("name")
    if name not in FORMATS:
        raise ChunkedError(
            f"{where}.format.name is {name!r}: supported formats are {', '.join(FORMATS)}"
            + (" (convert parquet chunks to numpy first)" if name == "parquet" else "")
        )
    delimiter = fmt_doc.get("delimiter", " " if name == "csv" else "")
    if not isinstance(delimiter, str) or (name == "csv" and len(delimiter) != 1):
        raise ChunkedError(f"{where}.format.delimiter must be one character")
    data = _field(spec, "data", list, where)
    assert isinstance(data, list)
    if len(data) != len(counts):
        raise ChunkedError(
            f"{where}.data lists {len(data)} file(s) but there are {len(counts)} chunk(s)"
        )
    files = []
    for i, item in enumerate(data):
        if not isinstance(item, str) or not item:
            raise ChunkedError(f"{where}.data[{i}] must be a file path")
        path = Path(item)
        files.append(path if path.is_absolute() else root / path)
    return FileSpec(what, per, what.startswith("edges"), str(name), delimiter, tuple(files), counts)


def metadata_path(path: str | Path) -> Path:
    """``path`` itself when it is a file, else ``path/metadata.json``."""
    p = Path(path)
    return p / METADATA if p.is_dir() or not p.suffix else p


def load(path: str | Path) -> ChunkedGraph:
    """Parse and check ``metadata.json`` (not the chunk files: see :func:`verify`)."""
    meta = metadata_path(path)
    try:
        doc = json.loads(meta.read_text())
    except FileNotFoundError:
        raise ChunkedError(f"chunked graph: {meta} does not exist") from None
    except OSError as e:
        raise ChunkedError(f"chunked graph: cannot read {meta}: {e.strerror}") from None
    except ValueError as e:
        raise ChunkedError(f"chunked graph: {meta} is not valid JSON: {e}") from None
    if not isinstance(doc, dict):
        raise ChunkedError(f"chunked graph: {meta} must hold a JSON object")
    where = str(meta)
    name = _field(doc, "graph_name", str, where)
    ntypes = _field(doc, "node_type", list, where)
    etypes = _field(doc, "edge_type", list, where)
    assert isinstance(ntypes, list) and isinstance(etypes, list)
    if len(ntypes) != 1 or len(etypes) != 1:
        raise ChunkedError(
            f"{where}: node_type lists {len(ntypes)} type(s) and edge_type {len(etypes)}; the "
            "ParMETIS modes take a homogeneous graph (one node type, one edge type)"
        )
    ntype, etype = str(ntypes[0]), str(etypes[0])
    parts = etype.split(":")
    if len(parts) != 3 or parts[0] != ntype or parts[2] != ntype:
        raise ChunkedError(
            f"{where}: edge_type {etype!r} must be 'src:relation:dst' between nodes of type "
            f"{ntype!r}"
        )
    node_chunks = _field(doc, "num_nodes_per_chunk", list, where)
    edge_chunks = _field(doc, "num_edges_per_chunk", list, where)
    assert isinstance(node_chunks, list) and isinstance(edge_chunks, list)
    if len(node_chunks) != 1 or len(edge_chunks) != 1:
        raise ChunkedError(
            f"{where}: num_nodes_per_chunk and num_edges_per_chunk need one list (one type) each"
        )
    node_counts = _counts(node_chunks[0], f"{where}: num_nodes_per_chunk[0]")
    edge_counts = _counts(edge_chunks[0], f"{where}: num_edges_per_chunk[0]")
    if sum(node_counts) < 1:
        raise ChunkedError(f"{where}: the graph has no nodes")
    edges_doc = _field(doc, "edges", dict, where)
    assert isinstance(edges_doc, dict)
    if etype not in edges_doc:
        raise ChunkedError(f"{where}: edges has no entry for edge type {etype!r}")
    root = meta.parent
    edges = _file_spec(
        edges_doc[etype],
        root,
        edge_counts,
        f"edges of {etype}",
        f"{where}: edges[{etype!r}]",
        "edge",
    )

    def data(key: str, owner: str, counts: tuple[int, ...], per: str) -> dict[str, FileSpec]:
        section = doc.get(key) or {}
        if not isinstance(section, dict):
            raise ChunkedError(f"{where}: {key} must be an object")
        unknown = sorted(set(section) - {owner})
        if unknown:
            raise ChunkedError(f"{where}: {key} names unknown type(s) {', '.join(unknown)}")
        cols = section.get(owner) or {}
        if not isinstance(cols, dict):
            raise ChunkedError(f"{where}: {key}[{owner!r}] must be an object")
        return {
            col: _file_spec(
                spec,
                root,
                counts,
                f"{key} {owner}/{col}",
                f"{where}: {key}[{owner!r}][{col!r}]",
                per,
            )
            for col, spec in sorted(cols.items())
        }

    return ChunkedGraph(
        root=root,
        metadata=meta,
        graph_name=str(name),
        ntype=ntype,
        etype=etype,
        node_counts=node_counts,
        edges=edges,
        node_data=data("node_data", ntype, node_counts, "node"),
        edge_data=data("edge_data", etype, edge_counts, "edge"),
    )


# -- chunk files ----------------------------------------------------------------------------


@dataclass(frozen=True)
class NpyHeader:
    shape: tuple[int, ...]
    descr: str
    itemsize: int
    data_offset: int

    @property
    def data_bytes(self) -> int:
        return math.prod(self.shape) * self.itemsize


def read_npy_header(path: Path) -> NpyHeader:
    """The header of a ``.npy`` file (numpy's format, read without numpy)."""
    with path.open("rb") as f:
        head = f.read(10)
        if not head.startswith(_NPY_MAGIC):
            raise ChunkedError(f"{path}: not a .npy file (no numpy magic)")
        if len(head) < 10:
            raise ChunkedError(f"{path}: truncated inside its .npy header")
        major = head[6]
        if major == 1:
            size, start = int.from_bytes(head[8:10], "little"), 10
        else:
            head += f.read(2)
            size, start = int.from_bytes(head[8:12], "little"), 12
        raw = f.read(size)
    if len(raw) < size:
        raise ChunkedError(f"{path}: truncated inside its .npy header")
    try:
        doc = ast.literal_eval(raw.decode("latin1"))
        descr, shape, fortran = doc["descr"], tuple(doc["shape"]), doc["fortran_order"]
    except (ValueError, SyntaxError, KeyError, TypeError):
        raise ChunkedError(f"{path}: unreadable .npy header") from None
    if not isinstance(descr, str) or fortran:
        raise ChunkedError(f"{path}: only C-ordered arrays of a plain dtype are supported")
    try:
        itemsize = int(descr[2:])
    except ValueError:
        raise ChunkedError(f"{path}: unsupported dtype {descr!r}") from None
    return NpyHeader(shape, descr, itemsize, start + size)


def _check_numpy(path: Path, rows: int, what: str, *, pairs: bool) -> None:
    h = read_npy_header(path)
    if not h.shape or h.shape[0] != rows:
        raise ChunkedError(
            f"{path}: {what}: holds {h.shape[0] if h.shape else 0} rows, metadata says {rows}"
        )
    if pairs and (len(h.shape) != 2 or h.shape[1] != 2 or h.descr[1] not in "iu"):
        raise ChunkedError(f"{path}: {what}: must be an (n, 2) integer array, got {h.shape}")
    have = path.stat().st_size - h.data_offset
    if have < h.data_bytes:
        raise ChunkedError(
            f"{path}: {what}: truncated: {have} data bytes, {h.data_bytes} expected for shape "
            f"{h.shape} {h.descr}"
        )


def _check_csv(path: Path, rows: int, delimiter: str, what: str, *, pairs: bool) -> None:
    lines = 0
    last = b""
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 22), b""):
            lines += block.count(b"\n")
            last = block
    complete = not last or last.endswith(b"\n")
    total = lines + (0 if complete else 1)
    if total != rows:
        raise ChunkedError(f"{path}: {what}: holds {total} rows, metadata says {rows}")
    if rows == 0:
        return
    with path.open("rb") as f:
        first = f.readline().rstrip(b"\r\n")
    tail = last.rstrip(b"\n").rsplit(b"\n", 1)[-1].rstrip(b"\r")
    sep = delimiter.encode()
    want = 2 if pairs else len(first.split(sep))
    if not complete or len(tail.split(sep)) != want:
        raise ChunkedError(
            f"{path}: {what}: truncated: the last row has {len(tail.split(sep))} field(s), "
            f"expected {want}"
        )


def check_file(spec: FileSpec, chunk: int) -> None:
    path, rows = spec.files[chunk], spec.counts[chunk]
    what = f"{spec.what} chunk {chunk} of {len(spec.files)}"
    if not path.is_file():
        raise ChunkedError(f"{path}: {what}: missing")
    try:
        if spec.fmt == "numpy":
            _check_numpy(path, rows, what, pairs=spec.pairs)
        else:
            _check_csv(path, rows, spec.delimiter, what, pairs=spec.pairs)
    except OSError as e:
        raise ChunkedError(f"{path}: {what}: cannot read it: {e.strerror}") from None


# -- who reads what -------------------------------------------------------------------------


@dataclass(frozen=True)
class Share:
    """What rank ``rank`` reads: global node rows ``nodes`` (the vertices it owns for ParMETIS,
    its slice of ``vtxdist``) and global edge rows ``edges``."""

    rank: int
    nodes: tuple[int, int]
    edges: tuple[int, int]


def _groups(counts: Sequence[int], ranks: int, what: str) -> list[tuple[int, int]]:
    if len(counts) < ranks:
        raise ChunkedError(
            f"layout {PER_WORKER}: {len(counts)} {what} chunk(s) for {ranks} workers; each "
            f"worker holds its own chunks, so there must be at least one {what} chunk per worker"
        )
    starts = offsets(counts)
    c = len(counts)
    return [(starts[c * r // ranks], starts[c * (r + 1) // ranks]) for r in range(ranks)]


def shares(graph: ChunkedGraph, ranks: int, layout: str = SHARED) -> list[Share]:
    if ranks < 1:
        raise ChunkedError(f"need at least one rank, got {ranks}")
    if layout not in CHUNKED_LAYOUTS:
        raise ChunkedError(f"layout {layout!r}: expected one of {', '.join(CHUNKED_LAYOUTS)}")
    n, e = graph.num_nodes, graph.num_edges
    if layout == SHARED:
        nodes = [(n * r // ranks, n * (r + 1) // ranks) for r in range(ranks)]
        edges = [(e * r // ranks, e * (r + 1) // ranks) for r in range(ranks)]
    else:
        nodes = _groups(graph.node_counts, ranks, "node")
        edges = _groups(graph.edges.counts, ranks, "edge")
    for r, (lo, hi) in enumerate(nodes):
        if hi <= lo:
            raise ChunkedError(
                f"rank {r} of {ranks} would own no nodes ({n} nodes in all): ParMETIS needs at "
                "least one vertex per rank; use fewer ranks"
            )
    return [Share(r, nodes[r], edges[r]) for r in range(ranks)]


def _read_by(graph: ChunkedGraph, share: Share | None) -> list[tuple[FileSpec, int]]:
    """``(column, chunk)`` of every chunk file ``share`` reads (all of them without one)."""
    out = []
    for spec in graph.columns():
        if share is None:
            chunks: Sequence[int] = range(len(spec.files))
        else:
            lo, hi = share.nodes if spec.per == "node" else share.edges
            chunks = [j for j, *_ in spec.pieces(lo, hi)]
        out += [(spec, j) for j in chunks]
    return out


def verify(graph: ChunkedGraph, share: Share | None = None) -> int:
    """Check every chunk file ``share`` reads (all of them without one); returns how many
    files were checked. Raises :class:`ChunkedError` naming the first bad file."""
    read = _read_by(graph, share)
    for spec, j in read:
        check_file(spec, j)
    return len(read)


def content_hashes(graph: ChunkedGraph, share: Share | None = None) -> dict[str, str]:
    """SHA-256 of the metadata and of every chunk file ``share`` reads, by path relative to
    the metadata's folder (what a cache of the partitions made from them is keyed by)."""
    files = [graph.metadata, *(spec.files[j] for spec, j in _read_by(graph, share))]
    out = {}
    for f in files:
        try:
            out[os.path.relpath(f, graph.root)] = _sha256(f)
        except OSError as e:
            raise ChunkedError(f"chunked graph: cannot read {f}: {e.strerror}") from e
    return out


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def row_bytes(spec: FileSpec) -> int:
    """The bytes of one row of a data column, from its first chunk (numpy: the array's item
    size times its row shape; text: 4 bytes, a float32, per value)."""
    first = spec.files[0]  # (a PerWorker worker other than 0 does not hold it)
    try:
        if spec.fmt == "numpy":
            h = read_npy_header(first)
            return h.itemsize * math.prod(h.shape[1:])
        with first.open() as f:
            line = f.readline()
    except OSError as e:
        raise ChunkedError(f"{first}: cannot read it: {e.strerror}") from e
    return 4 * len(line.split(spec.delimiter or None))


def data_bytes(graph: ChunkedGraph) -> tuple[int, int]:
    """The bytes of one node's and of one edge's data (every column), for the memory plan."""
    node_bytes = sum(row_bytes(s) for s in graph.node_data.values())
    edge_bytes = sum(row_bytes(s) for s in graph.edge_data.values())
    return node_bytes, edge_bytes
