"""The patch of DGL 2.1's key-value store that serves node features memory-mapped.

Five functions of ``dgl.distributed`` are replaced in the process that calls :func:`install`
(a DGL server or trainer started by ``python -m outofcore run``), each falling through to
DGL's own for everything this patch does not serve:

* ``dist_graph.load_partition_feats`` (the server reading its partition's features): node
  features come from the part's ``.npy`` files (:mod:`outofcore.layout`), memory-mapped, and
  their DGL data names are registered, in this process and in the pod's registry
  (:data:`REGISTRY`, a file in the pod's ``/dev/shm``, which every DGL process of the pod
  sees). Edge features are DGL's.
* ``kvstore.empty_shared_mem`` (where servers create, and trainers and backup servers map,
  each data tensor's shared memory): a registered name gets the memory-mapped file instead
  of a shared-memory segment, one mapping per file per process. Tensors DGL makes later
  (``DistTensor``, ``DistEmbedding``: not registered) keep their shared memory.
* ``rpc.copy_data_to_shared_memory`` (the server copying what it loaded into that memory):
  a copy of a tensor onto itself is skipped.

DGL's pulls are DGL's: ``fast_pull`` gathers local rows from the mapped tensor, remote rows
are pulled from the owning server, which indexes its mapped tensor. The kernel reads pages
on first touch and may drop clean ones under the cgroup's memory pressure. Two more
functions only add a prefetch in front of those gathers (:func:`outofcore.layout.prefetch`:
the minibatch's pages asked of the disk at once, sorted, instead of one fault at a time):

* ``kvstore.KVClient.pull`` (a trainer's pull): for the rows of its own machine;
* ``kvstore.default_pull_handler`` (a server answering another machine's pull).

The patch is pinned: :func:`install` refuses any DGL but 2.1 (:data:`SUPPORTED`), whose
functions these are.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from outofcore import layout

SUPPORTED = "2.1."  # the DGL versions whose internals this patch knows
REGISTRY_ENV = "DGL_OUT_OF_CORE_REGISTRY"
REGISTRY = "/dev/shm/dgl-out-of-core.json"  # shared-memory name -> .npy path, per pod
SHM_SUFFIX = "-kvdata-"  # what DGL's key-value store appends to a data name
# how the mapped features are read: "random" (MADV_RANDOM: a fault reads its own page; with
# the prefetch below, a minibatch's pages are read at once) or "readahead" (the kernel's
# read-around: a fault reads up to 128 KiB around it). bench/out_of_core_bench.py measures
# both: without the prefetch the read-around was faster (fewer, larger reads), but under a
# limit it reads the same features many times over (16 GiB per epoch of 1.9 GiB of features
# at 0.5 x), evicting what the next minibatch needs
READS_ENV = "DGL_OUT_OF_CORE_READS"
READS = ("random", "readahead")
DEFAULT_READS = "random"


class OutOfCoreError(RuntimeError):
    """The patch cannot serve this process (wrong DGL, a file that does not match)."""


class _Mapped:
    """What ``empty_shared_mem`` returns, for a mapped file: DGL only calls ``to_dlpack``."""

    def __init__(self, tensor: Any) -> None:
        self.tensor = tensor

    def to_dlpack(self) -> Any:
        from torch.utils.dlpack import to_dlpack

        return to_dlpack(self.tensor)


_tensors: dict[str, Any] = {}  # path -> the tensor over its mapping (kept for the process)
_arrays: dict[int, Any] = {}  # the mapped tensors' data_ptr -> their numpy memmap
_names: dict[str, str] = {}  # shared-memory name -> path, registered by this process
_originals: dict[str, Callable[..., Any]] = {}


def registry_path() -> Path:
    return Path(os.environ.get(REGISTRY_ENV) or REGISTRY)


def mapped(path: str | os.PathLike[str]) -> Any:
    """The tensor over ``path``'s mapping: one per file per process."""
    key = str(path)
    if key not in _tensors:
        import torch

        reads = os.environ.get(READS_ENV) or DEFAULT_READS
        if reads not in READS:
            raise OutOfCoreError(f"{READS_ENV}={reads!r}: expected one of {', '.join(READS)}")
        rows = layout.open_rows(key, random=reads == "random")
        _tensors[key] = torch.from_numpy(rows)
        _arrays[_tensors[key].data_ptr()] = rows
    return _tensors[key]


def _registered(shm_name: str) -> str | None:
    if shm_name in _names:
        return _names[shm_name]
    try:
        doc = json.loads(registry_path().read_text())
    except (OSError, ValueError):
        return None
    found = doc.get(shm_name) if isinstance(doc, dict) else None
    return str(found) if found else None


def _register(names: dict[str, str]) -> None:
    _names.update(names)
    path = registry_path()
    try:
        doc = json.loads(path.read_text())
        doc = doc if isinstance(doc, dict) else {}
    except (OSError, ValueError):
        doc = {}
    doc.update(names)
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    tmp.write_text(json.dumps(doc, sort_keys=True))
    tmp.replace(path)


def node_features(part_config: str, part_id: int) -> dict[str, Any]:
    """Part ``part_id``'s node features, memory-mapped, by DGL key (``<ntype>/<name>``);
    registers their data names."""
    from dgl.distributed.dist_graph import HeteroDataName

    files = layout.node_feat_files(part_config)
    if part_id not in files:
        raise OutOfCoreError(f"{part_config}: part-{part_id} has no node_feats entry")
    part_dir = files[part_id].parent
    feats: dict[str, Any] = {}
    names: dict[str, str] = {}
    for key, path in layout.read_index(part_dir).items():
        ntype, _, feat = key.partition("/")
        feats[key] = mapped(path)
        names[str(HeteroDataName(True, ntype, feat)) + SHM_SUFFIX] = str(path)
    _register(names)
    size = sum(int(t.numel()) * t.element_size() for t in feats.values())
    print(
        f"out-of-core: part {part_id}: {len(feats)} node feature(s), {size / 2**20:.1f} MiB, "
        f"memory-mapped from {layout.folder(part_dir)} (not copied into shared memory)",
        flush=True,
    )
    return feats


def _load_partition_feats(
    part_config: str, part_id: int, load_nodes: bool = True, load_edges: bool = True
) -> tuple[Any, Any]:
    nodes = node_features(part_config, part_id) if load_nodes else None
    edges = None
    if load_edges:
        _, edges = _originals["load_partition_feats"](
            part_config, part_id, load_nodes=False, load_edges=True
        )
    return nodes, edges


def _empty_shared_mem(name: str, is_create: bool, shape: Any, dtype: str) -> Any:
    path = _registered(name)
    if path is None:
        return _originals["empty_shared_mem"](name, is_create, shape, dtype)
    tensor = mapped(path)
    have = (tuple(tensor.shape), str(tensor.numpy().dtype))
    if have != (tuple(shape), str(dtype)):
        raise OutOfCoreError(
            f"{path}: holds {have[0]} {have[1]}, DGL expects {tuple(shape)} {dtype} for "
            f"{name.removesuffix(SHM_SUFFIX)}"
        )
    return _Mapped(tensor)


def prefetch(tensor: Any, local_ids: Any) -> None:
    """Start reading ``tensor[local_ids]``'s pages when ``tensor`` is a mapped file's."""
    rows = _arrays.get(tensor.data_ptr())
    if rows is not None and len(local_ids):
        layout.prefetch(rows, local_ids.numpy())


def _pull(self: Any, name: str, id_tensor: Any) -> Any:
    data = self._data_store.get(name)
    if data is not None and data.data_ptr() in _arrays:
        policy = self._part_policy[name]
        mine = id_tensor[policy.to_partid(id_tensor) == policy.part_id]
        prefetch(data, policy.to_local(mine))
    return _originals["pull"](self, name, id_tensor)


def _default_pull_handler(target: Any, name: str, id_tensor: Any) -> Any:
    prefetch(target[name], id_tensor)
    return _originals["default_pull_handler"](target, name, id_tensor)


def _copy_data_to_shared_memory(dst: Any, source: Any) -> None:
    if dst.data_ptr() == source.data_ptr() and tuple(dst.shape) == tuple(source.shape):
        return  # the mapped file itself: nothing to copy
    _originals["copy_data_to_shared_memory"](dst, source)


def check_version(version: str) -> None:
    if not version.startswith(SUPPORTED):
        raise OutOfCoreError(
            f"out-of-core workers patch DGL {SUPPORTED}x's key-value store; this image has DGL "
            f"{version}: use the DGL of requirements-dgl.txt, or train in memory (no "
            "spec.outOfCore / --out-of-core)"
        )


def _replaced() -> tuple[tuple[Any, str, Callable[..., Any]], ...]:
    """What the patch replaces: (owner, attribute, replacement), each attribute name once."""
    from dgl.distributed import dist_graph, kvstore, rpc

    return (
        (dist_graph, "load_partition_feats", _load_partition_feats),
        (kvstore, "empty_shared_mem", _empty_shared_mem),
        (rpc, "copy_data_to_shared_memory", _copy_data_to_shared_memory),
        (kvstore.KVClient, "pull", _pull),
        (kvstore, "default_pull_handler", _default_pull_handler),
    )


def install() -> None:
    """Replace the five functions (idempotent)."""
    if _originals:
        return
    import dgl

    check_version(dgl.__version__)
    for owner, name, replacement in _replaced():
        _originals[name] = getattr(owner, name)
        setattr(owner, name, replacement)


def uninstall() -> None:
    """Put DGL's functions back (tests)."""
    if not _originals:
        return
    for owner, name, _ in _replaced():
        setattr(owner, name, _originals.pop(name))
    _names.clear()
