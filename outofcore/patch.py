"""The patch of DGL 2.1's key-value store that serves node features memory-mapped, and reads
them ahead of the minibatches that need them.

Functions of ``dgl.distributed`` are replaced in the process that calls :func:`install` (a
DGL server or trainer started by ``python -m outofcore run``), each falling through to DGL's
own for everything this patch does not serve (:func:`_replaced` is the table):

* ``dist_graph.load_partition_feats`` (the server reading its partition's features): node
  features come from the part's ``.npy`` files (:mod:`outofcore.layout`), memory-mapped, and
  their DGL data names are registered, in this process and in the pod's registry
  (:data:`REGISTRY`, a file in the pod's ``/dev/shm``, which every DGL process of the pod
  sees). Edge features are DGL's. The server then warms the files (:mod:`outofcore.reader`:
  read in their on-disk order, in the background, while the pod's memory has room).
* ``kvstore.empty_shared_mem`` (where servers create, and trainers and backup servers map,
  each data tensor's shared memory): a registered name gets the memory-mapped file instead
  of a shared-memory segment, one mapping per file per process. Tensors DGL makes later
  (``DistTensor``, ``DistEmbedding``: not registered) keep their shared memory.
* ``rpc.copy_data_to_shared_memory`` (the server copying what it loaded into that memory):
  a copy of a tensor onto itself is skipped.
* ``DistDataLoader.__next__`` (a trainer's minibatches, when it samples in its own process,
  DGL's default): DGL's, and then the rows of the minibatch's input nodes are asked for at
  once: this machine's through the process's reader thread, the other machines' by a
  :class:`WillNeedRequest` to their server, which asks its own disk. A training loop that
  samples k minibatches ahead of the one it trains on (the example's ``--sample_ahead``,
  :func:`common.ahead`) finds their rows in memory or on their way. The patch does not
  sample ahead itself: DGL 2.1's ``fast_pull`` draws from the random engine that sampling
  draws from (which server of a machine to ask), so sampling ahead of the pulls changes what
  a seed samples; a loop that does it in memory too keeps both runs' losses the same.
* ``DistDataLoader.__iter__`` (an epoch of a loader): DGL's, unless the process trains in
  buffer order (``spec.outOfCore.order: Buffer``) and the loader shuffles (a training
  loader): then its epoch walks the buffer's states (:mod:`outofcore.buffer`).
* ``kvstore.KVClient.pull`` (a trainer's pull): DGL's, after asking at once for this
  machine's rows that were not read ahead (:func:`prefetch`).
* ``kvstore.default_pull_handler`` (a server answering another machine's pull): the pages
  of the rows no :class:`WillNeedRequest` named are asked of the disk at once, sorted,
  before DGL's gather.

The patch is pinned: :func:`install` refuses any DGL but 2.1 (:data:`SUPPORTED`), whose
functions these are.
"""

from __future__ import annotations

import atexit
import collections
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from outofcore import buffer, layout, reader
from podcontract.logline import say

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


# "0": the server does not warm its feature files (bench/out_of_core_bench.py measures both)
WARM_ENV = "DGL_OUT_OF_CORE_WARM"
WILLNEED_SERVICE = 0x00C0FFEE  # the RPC service id of WillNeedRequest (DGL's are 9012xx)

# what a trainer's loader did to read ahead (read by bench/ooc_profile.py): the seconds it
# spent asking for rows (on the training thread) and the rows it asked for
STATS: dict[str, float] = {"ahead_seconds": 0.0, "ahead_rows": 0.0, "ahead_words": 0.0}


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
_fds: dict[int, int] = {}  # the mapped tensors' data_ptr -> a descriptor of their file
# the mapped tensors' data_ptr -> per row, the reads ahead asked for it and not yet gathered
# (a row in two minibatches read ahead is gathered twice)
_asked: dict[int, Any] = {}


def warmed_path() -> Path:
    """The file the pod's server writes once it warmed all its feature files (beside the
    registry, in the pod's ``/dev/shm``)."""
    return registry_path().with_name(registry_path().name + ".warmed")


def _warmed_now() -> None:
    warmed_path().write_text("1\n")


_reader = reader.Reader(on_warmed=_warmed_now)
_pending: collections.deque[dict[str, Any]] = collections.deque()  # sampled, not asked for
_in_flight = [0]  # minibatches asked for and not yet gathered
_limited: list[bool] = []  # whether the pod's memory cannot hold the features (decided once)
_warm_seen: list[bool] = []


CHECK_EVERY = 2.0  # seconds between two looks at whether the warmed pages are still in memory
_dropped = {"due": 0.0, "seen": False}  # (a page of the warmed files dropped: seen for good)


def all_in_memory() -> bool:
    """Whether this pod's server warmed all its feature files and the kernel has dropped none
    of them since: reading ahead would ask for pages that are all in memory. The pod's own
    limit has room then, but the node's memory may run short: every :data:`CHECK_EVERY`
    seconds the reader thread looks (:func:`_look`); once a page was dropped, reading ahead
    goes on for the rest of the process's life."""
    if _dropped["seen"]:
        return False
    if not _warm_seen:
        if not warmed_path().exists():
            return False
        _warm_seen.append(True)
    now = time.monotonic()
    if now >= _dropped["due"]:
        _dropped["due"] = now + CHECK_EVERY
        _reader.call(_look)
    return reader.room() > 0


def _look() -> None:
    """(The reader thread.) Whether the kernel dropped pages of the large mapped files."""
    for rows in list(_arrays.values()):
        where = layout.mapping(rows)
        if where is None or rows.nbytes <= reader.WARM_CHUNK or _dropped["seen"]:
            continue
        share = reader.resident_share(*where)
        if share < 0.999:
            _dropped["seen"] = True
            say(
                f"out-of-core: the node's memory ran short: {100 * (1 - share):.1f}% of the "
                "warmed feature pages were dropped; reading ahead again"
            )


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
        _fds[_tensors[key].data_ptr()] = os.open(key, os.O_RDONLY | os.O_CLOEXEC)
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
    warmed_path().unlink(missing_ok=True)  # (an earlier attempt's, in this pod: other files)
    _warm(feats)
    size = sum(int(t.numel()) * t.element_size() for t in feats.values())
    say(
        f"out-of-core: part {part_id}: {len(feats)} node feature(s), {size / 2**20:.1f} MiB, "
        f"memory-mapped from {layout.folder(part_dir)} (not copied into shared memory)"
    )
    return feats


def _warm(feats: dict[str, Any]) -> None:
    """Have the reader warm the part's feature files, the small ones first, when the pod's
    memory has room for all of them: warming a share of them would fill the page cache with
    rows that the minibatches' own reads then push out, and read them twice."""
    if os.environ.get(WARM_ENV) == "0":
        return
    total = sum(_arrays[t.data_ptr()].nbytes for t in feats.values())
    room = reader.room()
    if room < total:
        say(
            f"out-of-core: not warming the feature files: the pod's memory has room for "
            f"{room / 2**20:.0f} of their {total / 2**20:.0f} MiB"
        )
        return
    ptrs = [t.data_ptr() for t in sorted(feats.values(), key=lambda t: int(t.numel()))]
    start = layout.DATA_OFFSET
    _reader.warm([(_fds[p], start, start + _arrays[p].nbytes) for p in ptrs])


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
    """Before a gather of ``tensor[local_ids]`` (a mapped file's tensor: else nothing): start
    reading the pages of the rows no one read ahead (:func:`read_ahead`); for the others the
    gather uses up one read ahead each. Rows read ahead are not asked for again: their reads
    are in flight or done (and asking the kernel which pages it holds, ``mincore`` over a
    2 GiB file, costs ~45 ms a call: more than the gather)."""
    rows = _arrays.get(tensor.data_ptr())
    if rows is None or not len(local_ids):
        return
    ids = np.unique(local_ids.numpy())
    asked = _asked.get(tensor.data_ptr())
    if asked is not None:
        mine = asked[ids] > 0
        asked[ids[mine]] -= 1
        ids = ids[~mine]
    if len(ids):
        layout.prefetch(rows, ids)


def _reads_ahead(rows: Any) -> bool:
    """Whether rows of this mapped file are read ahead: not those of a small file (a warming
    step's worth: its rows share few pages, and the server warms it first) unless the
    server does not warm."""
    return bool(rows.nbytes > reader.WARM_CHUNK or os.environ.get(WARM_ENV) == "0")


def read_ahead(tensor: Any, local_ids: Any) -> int:
    """Have the reader thread ask for ``tensor[local_ids]``'s pages (a mapped file's tensor
    larger than a warming step: else nothing), and mark those rows as asked for; the rows
    asked for."""
    rows = _arrays.get(tensor.data_ptr())
    if rows is None or not len(local_ids) or not _reads_ahead(rows):
        return 0
    ids = np.unique(local_ids.numpy())
    asked = _asked.get(tensor.data_ptr())
    if asked is None:
        asked = _asked[tensor.data_ptr()] = np.zeros(len(rows), dtype=np.int32)
    asked[ids] += 1
    found = layout.page_ranges(rows, ids)
    if found is None:
        return 0
    _reader.rows(*found)
    return len(ids)


class WillNeedRequest:
    """A trainer's word to another machine's server: these rows of node type ``ntype`` will
    be pulled soon; the server asks its disk for them (every mapped tensor of that type) and
    answers nothing. Registered with DGL's RPC (:data:`WILLNEED_SERVICE`) by :func:`install`
    in every process the patch runs in (DGL's RPC needs no more of it than this class has)."""

    def __init__(self, ntype: str, id_tensor: Any) -> None:
        self.ntype = ntype
        self.id_tensor = id_tensor

    def __getstate__(self) -> tuple[str, Any]:
        return self.ntype, self.id_tensor

    def __setstate__(self, state: tuple[str, Any]) -> None:
        self.ntype, self.id_tensor = state

    @property
    def service_id(self) -> int:
        return WILLNEED_SERVICE

    def process_request(self, server_state: Any) -> None:
        if all_in_memory():
            return None
        kv = server_state.kv_store
        policy_name = f"node~{self.ntype}"
        for name, data in kv.data_store.items():
            policy = kv.part_policy.get(name)
            if policy is not None and policy.policy_str == policy_name:
                read_ahead(data, policy.to_local(self.id_tensor))
        return None


def _input_nodes(batch: Any) -> dict[str, Any]:
    """A minibatch's input nodes by node type (DGL's node and edge collators put them
    first: a tensor of a homogeneous graph's ids, or a dict by type); {} when not known."""
    first = batch[0] if isinstance(batch, (tuple, list)) and batch else None
    if isinstance(first, dict):
        return {str(k): v for k, v in first.items()}
    if first is not None and hasattr(first, "dim") and first.dim() == 1:
        return {"_N": first}
    return {}


def _ahead(batch: Any) -> None:
    """A minibatch was sampled: its rows are to be asked for (:func:`_issue`)."""
    nodes = _input_nodes(batch)
    if nodes:
        _pending.append(nodes)
        _issue()


def _issue() -> None:
    """Ask for the rows of the minibatches sampled and not yet asked for: all of them when
    the pod's memory has room for the features, else one minibatch ahead of the one being
    gathered. Read further ahead under a limit, a minibatch's rows would push the earlier
    ones' out of the page cache before their gather (the kernel drops the oldest pages
    read and not yet used first), and the gather would read them again, one fault at a
    time."""
    if not _limited:
        total = sum(int(a.nbytes) for a in _arrays.values() if _reads_ahead(a))
        _limited.append(reader.room() < total)
    while _pending and (not _limited[0] or _in_flight[0] < 1):
        _ask(_pending.popleft())
        _in_flight[0] += 1


def _gathered() -> None:
    """A pull used up rows read ahead: the next minibatch's may be asked for."""
    _in_flight[0] = max(0, _in_flight[0] - 1)
    _issue()


def _ask(nodes: dict[str, Any]) -> None:
    """Ask for the rows of every mapped node tensor that these input nodes will pull: this
    machine's through the reader, the others' by a word to their server."""
    from dgl.distributed import kvstore, rpc

    client = kvstore.get_kvstore()
    if client is None:
        return
    started = time.perf_counter()
    here = not all_in_memory()  # (this pod's rows; the others' servers decide for theirs)
    per_machine = max(rpc.get_num_server_per_machine(), 1)
    for ntype, ids in nodes.items():
        tensors = [
            (data, client._part_policy[name])
            for name, data in client._data_store.items()
            if data.data_ptr() in _arrays
            and name in client._part_policy
            and client._part_policy[name].policy_str == f"node~{ntype}"
        ]
        if not tensors:
            continue
        policy = tensors[0][1]  # (every tensor of a node type is split alike)
        parts = policy.to_partid(ids)
        mine = parts == policy.part_id
        if here:
            local = policy.to_local(ids[mine])
            STATS["ahead_rows"] += max(read_ahead(data, local) for data, _ in tensors)
        for machine in parts[~mine].unique().tolist():  # one word names every tensor's rows
            rpc.send_request(machine * per_machine, WillNeedRequest(ntype, ids[parts == machine]))
            STATS["ahead_words"] += 1
    STATS["ahead_seconds"] += time.perf_counter() - started


def read_spans(ptr: int, spans: list[tuple[int, int]]) -> None:
    """Have the reader read these byte ranges of the mapped file whose tensor's data_ptr is
    ``ptr`` (buffer order's whole partitions)."""
    fd = _fds.get(ptr)
    if fd is not None:
        _reader.read(fd, spans)


def after_reads(job: Callable[[], None]) -> None:
    """Run ``job`` on the reading thread once the reads asked for before it are done."""
    _reader.call(job)


def _iter(self: Any) -> Any:
    """DGL's ``DistDataLoader.__iter__``; a training loader (one that shuffles) in buffer
    order walks its epoch state by state instead (:class:`outofcore.buffer.Buffered`)."""
    if not self.shuffle or buffer.order() != buffer.BUFFER:
        return _originals["__iter__"](self)
    walk = getattr(self, "_outofcore_buffer", None)
    if walk is None:
        walk = buffer.Buffered(self, buffer.BufferSettings.from_env(), _arrays)
        self._outofcore_buffer = walk
    return iter(walk)


def _next(self: Any) -> Any:
    """DGL's ``DistDataLoader.__next__``; then the minibatch's rows are asked for."""
    batch = _originals["__next__"](self)
    if _arrays:
        _ahead(batch)
    return batch


def _pull(self: Any, name: str, id_tensor: Any) -> Any:
    """DGL's ``KVClient.pull``; for a mapped tensor, this machine's rows' pages that no loader
    read ahead are asked for first, at once (:func:`prefetch`).

    The pull itself stays DGL's ``fast_pull``: it draws on DGL's random engine (which server
    of a machine to ask) that sampling draws on too, so a pull of another kind would change
    what the same seed samples."""
    data = self._data_store.get(name)
    rows = None if data is None else _arrays.get(data.data_ptr())
    if rows is not None and not all_in_memory():
        policy = self._part_policy[name]
        mine = id_tensor[policy.to_partid(id_tensor) == policy.part_id]
        prefetch(data, policy.to_local(mine))
    try:
        return _originals["pull"](self, name, id_tensor)
    finally:
        if rows is not None and _reads_ahead(rows):
            _gathered()  # (a minibatch's rows used: the next one's may be asked for)


def _default_pull_handler(target: Any, name: str, id_tensor: Any) -> Any:
    if not all_in_memory():
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
    from dgl.distributed import DistDataLoader, dist_graph, kvstore, rpc

    return (
        (dist_graph, "load_partition_feats", _load_partition_feats),
        (kvstore, "empty_shared_mem", _empty_shared_mem),
        (rpc, "copy_data_to_shared_memory", _copy_data_to_shared_memory),
        (kvstore.KVClient, "pull", _pull),
        (kvstore, "default_pull_handler", _default_pull_handler),
        (DistDataLoader, "__next__", _next),
        (DistDataLoader, "__iter__", _iter),
    )


def install() -> None:
    """Replace DGL's functions (:func:`_replaced`) and register :class:`WillNeedRequest`
    (idempotent)."""
    if _originals:
        return
    import dgl
    from dgl.distributed import rpc

    check_version(dgl.__version__)
    rpc.register_service(WILLNEED_SERVICE, WillNeedRequest, None)
    atexit.register(_report)
    atexit.register(buffer.report)
    for owner, name, replacement in _replaced():
        _originals[name] = getattr(owner, name)
        setattr(owner, name, replacement)


def _report() -> None:
    """A trainer's last line: what its loaders had read ahead."""
    if STATS["ahead_rows"] or STATS["ahead_words"]:
        say(
            f"out-of-core: read ahead {STATS['ahead_rows']:.0f} rows of this machine for the "
            f"minibatches sampled, and asked the other machines' servers for theirs "
            f"{STATS['ahead_words']:.0f} times, in {STATS['ahead_seconds']:.1f}s"
        )


def uninstall() -> None:
    """Put DGL's functions back (tests)."""
    if not _originals:
        return
    for owner, name, _ in _replaced():
        setattr(owner, name, _originals.pop(name))
    _names.clear()
