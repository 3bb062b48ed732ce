"""Buffer order (``spec.outOfCore.order: Buffer``, dglrun's ``--out-of-core-order Buffer``):
MariusGNN's disk-based training on DGL 2.1's distributed loaders (issue 59, part 3).

A trainer's training loader (a ``DistNodeDataLoader`` that shuffles: evaluation loaders keep
DGL's order and sample every neighbour they are asked to) no longer walks its seeds in one
shuffled pass. Each epoch follows :func:`outofcore.order.plan_epoch`, the same plan on every
machine (a function of the epoch and :data:`SEED_ENV` alone):

* every machine's rows are :data:`PER_PHYSICAL` x P logical partitions (contiguous row ranges
  of its part: :meth:`Buffered.keys`), P the physical partitions (:data:`PARTITIONS_ENV`),
  and a buffer of c of them is in memory (:data:`CAPACITY_ENV`, which dglrun sets from the
  memory plan's page cache share; else what the pod's free memory holds when the trainers
  start, :func:`capacity`, the smallest over the trainers);
* on entering a state, the trainers meet at a barrier, each writes its share of its machine's
  edge mask (1 where the edge's source node is resident on its own machine), and meet again;
  the loader's sampler samples with ``prob=`` the mask, so no neighbour outside any machine's
  buffer is sampled;
* each of this trainer's training nodes is a seed once an epoch, in one of the states its
  partition is resident in, drawn at random (:func:`outofcore.order.residence`: a state
  trains a mix of its residents, not only the partition it loaded), and every trainer
  runs as many minibatches in a state as the one with most (others draw extra
  minibatches from their state's seeds: DDP's steps stay in step, and the barriers too);
* the first trainer of each machine has its pod's feature files read in whole logical
  partitions, sequential reads in row order (:class:`outofcore.reader.Reader`): the state's
  partitions on entering it, then the next state's, while this one trains. The partition
  that leaves the buffer is not dropped by hand: its clean pages are the least recently used
  and the kernel reclaims them first under the pod's limit. A state trains once its
  partitions are read on every machine (the barrier after the wait).

The losses differ from an in-memory run's (the neighbours are sampled from the buffer);
accuracy is what is compared. Each trainer says at exit what its buffer did (:func:`report`),
including how many input rows of its minibatches were outside the buffer: 0 unless the mask
failed. Homogeneous graphs only.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import podcontract as pc
from outofcore import order as orders
from podcontract.logline import say

ORDER_ENV = pc.OUT_OF_CORE_ORDER_ENV  # what dglrun sets on every DGL process: Buffer
EXACT, BUFFER, ORDERS = pc.ORDER_EXACT, pc.ORDER_BUFFER, pc.OUT_OF_CORE_ORDERS
PARTITIONS_ENV = pc.BUFFER_PARTITIONS_ENV  # physical partitions per machine
CAPACITY_ENV = pc.BUFFER_CAPACITY_ENV  # physical partitions in the buffer (else sized)
SEED_ENV = "DGL_OUT_OF_CORE_SEED"  # the plan's seed (every machine's the same)
DEFAULT_PARTITIONS = pc.BUFFER_PARTITIONS
PER_PHYSICAL = 2  # logical partitions per physical one (COMET's regrouping each epoch)
MASK = "outofcore_buffer_mask"  # the edge data the samplers sample with

STATS: dict[str, float] = {
    "epochs": 0,
    "states": 0,
    "minibatches": 0,
    "extra_minibatches": 0,
    "input_rows": 0,
    "outside_rows": 0,
    "read_bytes": 0,
    "read_wait_seconds": 0.0,
    "enter_seconds": 0.0,  # entering states: the reads' wait, the barriers, the mask
    "sample_seconds": 0.0,  # sampling the minibatches (DGL's collate, with the mask)
}


class BufferError(RuntimeError):
    """Buffer order cannot run as asked (a bad setting, a graph it does not train)."""


def order() -> str:
    """This process's order (:data:`ORDER_ENV`; Exact when unset)."""
    value = os.environ.get(ORDER_ENV) or EXACT
    if value not in ORDERS:
        raise BufferError(f"{ORDER_ENV}={value!r}: expected one of {', '.join(ORDERS)}")
    return value


def _whole(name: str, default: int | None) -> int | None:
    text = os.environ.get(name)
    if not text:
        return default
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise BufferError(f"{name}={text!r}: expected a whole number of at least 1")
    return value


@dataclass(frozen=True)
class BufferSettings:
    """Buffer order's settings, read once from the environment dglrun sets."""

    partitions: int = DEFAULT_PARTITIONS  # physical partitions per machine
    capacity: int | None = None  # physical partitions in the buffer; None: sized at start
    seed: int = 0

    @property
    def logical(self) -> int:
        return self.partitions * PER_PHYSICAL

    @classmethod
    def from_env(cls) -> BufferSettings:
        partitions = _whole(PARTITIONS_ENV, DEFAULT_PARTITIONS)
        assert partitions is not None
        seed_text = os.environ.get(SEED_ENV) or "0"
        try:
            seed = int(seed_text)
        except ValueError:
            raise BufferError(f"{SEED_ENV}={seed_text!r}: expected a whole number") from None
        return cls(partitions, _whole(CAPACITY_ENV, None), seed)


def capacity(feature_bytes: int, partitions: int, room: int) -> int:
    """The physical partitions a buffer holds in ``room`` bytes of page cache, one slot kept
    for the partition read ahead for the next state: at least 1, at most ``partitions``
    (then one state holds them all)."""
    if feature_bytes <= 0:
        return partitions
    return pc.buffer_holding(int(room // (feature_bytes / partitions)), partitions)


# A hop's resident neighbours against its fan-out below which a trainer warns. Measured (a
# uniform graph, 4 epochs, half of the features in memory, docs/user-guide.md): degree 30 and
# fan-out 10 (13.1 resident, 1.31x) kept the accuracy (0.8131 against 0.8138); degree 10 lost
# 3.0 points at fan-out 10 (0.44x) and 3.4 at fan-out 4 (1.09x); with every partition held,
# 0.7 (ordering alone).
MARGIN = 1.25


def thin_neighbourhoods(mean_degree: float, fanouts: list[int], held: int, partitions: int) -> str:
    """A warning when the buffer leaves a hop too few neighbours to sample from, else ''.

    In the buffer, a node's neighbours to sample from are its resident ones: about the resident
    share of its degree. A hop is thin where that is not :data:`MARGIN` times its fan-out or,
    for a hop that takes every neighbour in memory (a fan-out of -1 or above the degree), where
    the share is under 1 / :data:`MARGIN`: its minibatches see fewer and less varied
    neighbours than in memory, and the accuracy falls behind Exact order's."""
    if mean_degree <= 0 or not fanouts or held >= partitions:
        return ""
    share = held / partitions
    resident = share * mean_degree

    def thin(f: int) -> bool:
        if f < 0 or f >= mean_degree:
            return share * MARGIN < 1
        return resident < MARGIN * f

    if not any(thin(f) for f in fanouts):
        return ""
    fanout = ",".join(str(f) for f in fanouts)
    return (
        f"out-of-core: buffer order: a node has {mean_degree:.1f} in-neighbours on average, "
        f"{resident:.1f} of them in the buffer ({held} of {partitions} partitions), and the "
        f"sampler's fan-out is {fanout}: its minibatches sample from fewer neighbours than in "
        "memory, and the accuracy can fall short of Exact order's; a larger page cache "
        "fraction, a smaller fan-out or Exact order keeps them alike"
    )


def row_range(logical: int, num_logical: int, rows: int) -> tuple[int, int]:
    """The rows [start, end) of a part of ``rows`` rows that make logical partition
    ``logical``: those whose ``row * num_logical // rows`` is ``logical``."""
    return (-(-logical * rows // num_logical), -(-(logical + 1) * rows // num_logical))


def spans(
    parts: tuple[int, ...], num_logical: int, rows: int, row_bytes: int, offset: int
) -> list[tuple[int, int]]:
    """The byte ranges [start, end) of a feature file holding ``rows`` rows from ``offset``
    that make these logical partitions, neighbours joined (one read for a run of them)."""
    out: list[tuple[int, int]] = []
    for p in sorted(parts):
        first, last = row_range(p, num_logical, rows)
        start, end = offset + first * row_bytes, offset + last * row_bytes
        if end <= start:
            continue
        if out and out[-1][1] == start:
            out[-1] = (out[-1][0], end)
        else:
            out.append((start, end))
    return out


@dataclass
class _Machine:
    """What a trainer knows of its share of the graph, computed once, and where it is."""

    eids: Any  # the edges whose mask this trainer writes, by their source's key
    bounds: Any  # eids[bounds[k]:bounds[k + 1]]: those whose source node has key k
    seed_keys: Any  # the loader's seeds' keys (Buffered.keys)
    reads: bool  # whether this trainer reads its machine's partitions
    capacity: int
    epoch: int = 0
    masked: set[int] = field(default_factory=set)  # the keys the mask is 1 for now
    reading: dict[tuple[int, ...], threading.Event] = field(default_factory=dict)


SLICE = 1 << 19  # edges taken at a time when sorting a trainer's share by key


def release() -> None:
    """Give the memory freed so far back to the system (glibc's ``malloc_trim``): freed
    temporaries under glibc's mmap threshold stay in its heap, counted against the pod's
    limit (measured on a part of 3M edges: 0.16 GiB still held once they were freed, 0.02
    GiB, the ids kept, after the trim)."""
    import ctypes
    import ctypes.util

    with contextlib.suppress(OSError, AttributeError, TypeError):  # (not glibc: nothing to do)
        ctypes.CDLL(ctypes.util.find_library("c")).malloc_trim(0)


def _collectives() -> Any:
    """torch.distributed when the trainers form a process group, else None (one trainer)."""
    import torch.distributed as dist

    return dist if dist.is_available() and dist.is_initialized() else None


def _reduce(values: list[int], how: str) -> list[int]:
    import torch

    dist = _collectives()
    if dist is None:
        return values
    t = torch.tensor(values, dtype=torch.int64)
    dist.all_reduce(t, op=getattr(dist.ReduceOp, how))
    return [int(x) for x in t.tolist()]


def _barrier() -> None:
    dist = _collectives()
    if dist is not None:
        dist.barrier()


class Buffered:
    """One training loader's epochs in buffer order (see the module's docstring)."""

    def __init__(self, loader: Any, settings: BufferSettings, mapped: dict[int, Any]) -> None:
        collator: Any = getattr(loader, "collator", None)
        sampler: Any = getattr(collator, "graph_sampler", None)
        if sampler is None or not hasattr(sampler, "prob"):
            raise BufferError(
                "out-of-core Buffer order trains DistNodeDataLoaders with a NeighborSampler; "
                f"this loader is a {type(loader).__name__}: use Exact order"
            )
        if isinstance(collator.nids, dict):
            raise BufferError(
                "out-of-core Buffer order trains homogeneous graphs; this loader's nodes "
                "are by node type: use Exact order"
            )
        if sampler.prob not in (None, MASK):
            raise BufferError(
                f"out-of-core Buffer order samples with its own edge mask; this loader's "
                f"sampler already samples with prob={sampler.prob!r}: use Exact order"
            )
        self.loader = loader
        self.collator = collator
        self.sampler = sampler
        self.settings = settings
        self.mapped = mapped  # the process's mapped feature files: data_ptr -> numpy memmap
        self.starts: Any = None  # each part's first node id (and the total last), once known
        self.sizes: Any = None  # each part's node count
        self.machine: _Machine | None = None

    # -- the layout, once
    def keys(self, nodes: Any) -> Any:
        """Each node's (part, logical partition) as one key: part x logical + logical."""
        part = self.collator.g.get_partition_book().nid2partid(nodes)
        size = self.sizes[part]
        logical = (nodes - self.starts[part]) * self.settings.logical // size.clamp(min=1)
        return part * self.settings.logical + logical

    def _setup(self) -> _Machine:
        import torch
        from dgl.distributed import DistTensor

        from outofcore import reader

        g = self.collator.g
        pb = g.get_partition_book()
        sizes = torch.tensor([int(meta["num_nodes"]) for meta in pb.metadata()])
        self.sizes = sizes
        self.starts = torch.cat([torch.zeros(1, dtype=sizes.dtype), sizes.cumsum(0)])
        dist = _collectives()
        me = int(pb.partid)
        if dist is None:
            share = (0, 1)
        else:
            parts = [torch.zeros(1, dtype=torch.int64) for _ in range(dist.get_world_size())]
            dist.all_gather(parts, torch.tensor([me]))
            mates = [rank for rank, p in enumerate(parts) if int(p) == me]
            share = (mates.index(dist.get_rank()), len(mates))
        lg = g.local_partition
        eids, bounds = self._edges_by_key(lg, *share)
        if MASK not in g.edata:  # (collective: every trainer creates it together)
            policy = g.get_edge_partition_policy(g.canonical_etypes[0])
            g.edata[MASK] = DistTensor(
                (g.num_edges(),), torch.float32, name=MASK, part_policy=policy
            )
        given = self.settings.capacity
        if given is None:
            features = sum(int(rows.nbytes) for rows in self.mapped.values())
            # (the trainers' working set is in use already: the slot kept for the partition
            # read ahead is the reserve; warming's reserve would halve a small buffer)
            given = capacity(features, self.settings.partitions, reader.free())
        (held,) = _reduce([min(given, self.settings.partitions)], "MIN")
        self.machine = m = _Machine(
            eids=eids,
            bounds=bounds,
            seed_keys=self.keys(self.collator.dataset),
            reads=share[0] == 0,
            capacity=held,
        )
        say(
            f"out-of-core: buffer order: {self.settings.partitions} physical partitions of "
            f"{self.settings.logical // self.settings.partitions} logical ones per machine, "
            f"a buffer of {m.capacity}"
        )
        inner_nodes = int(lg.ndata["inner_node"].sum())
        degree = int(lg.edata["inner_edge"].sum()) / max(inner_nodes, 1)
        fanouts = [int(f) for f in getattr(self.sampler, "fanouts", None) or []]
        warning = thin_neighbourhoods(degree, fanouts, m.capacity, self.settings.partitions)
        if warning:
            say(warning)
        return m

    def _edges_by_key(self, lg: Any, k: int, n: int) -> tuple[Any, list[int]]:
        """This trainer's share of its machine's edges (the inner edges whose id is k modulo
        n, of the machine's n trainers), sorted by their source's key, and where each key's
        run starts: taken in slices of :data:`SLICE` edges, so that the keys' arithmetic
        never holds more than a slice, and the memory it freed given back (:func:`release`).
        Sorted all at once, a trainer held 0.35 GiB more after it (a part of 3M edges); so,
        0.07 GiB."""
        import dgl
        import torch

        inner, eid, nid = lg.edata["inner_edge"], lg.edata[dgl.EID], lg.ndata[dgl.NID]
        src, _ = lg.edges()
        key_slices, eid_slices = [], []
        for start in range(0, len(src), SLICE):
            part = slice(start, start + SLICE)
            mine = inner[part].bool() & (eid[part] % n == k)
            key_slices.append(self.keys(nid[src[part][mine]]).to(torch.int32))
            eid_slices.append(eid[part][mine])
        key, ids = torch.cat(key_slices), torch.cat(eid_slices)
        del key_slices, eid_slices
        by_key = torch.sort(key, stable=True)
        every_key = torch.arange(len(self.sizes) * self.settings.logical + 1, dtype=torch.int32)
        bounds = torch.searchsorted(by_key.values, every_key).tolist()
        ids = ids[by_key.indices]
        del key, by_key
        release()
        return ids, bounds

    # -- an epoch
    def __iter__(self) -> Any:
        m = self.machine or self._setup()
        s = self.settings
        plan = orders.plan_epoch(s.logical, PER_PHYSICAL, m.capacity, s.seed, m.epoch)
        m.epoch += 1
        m.reading.clear()  # (the last epoch's reads)
        STATS["epochs"] += 1
        when = self._spread(plan)
        saved, self.sampler.prob = self.sampler.prob, MASK
        try:
            for i, state in enumerate(plan):
                started = time.monotonic()
                self._enter(state, plan[i + 1] if i + 1 < len(plan) else None)
                STATS["enter_seconds"] += time.monotonic() - started
                yield from self._minibatches(i, state, when)
        finally:
            self.sampler.prob = saved

    def _enter(self, state: orders.State, following: orders.State | None) -> None:
        import torch

        m = self.machine
        assert m is not None
        STATS["states"] += 1
        if m.reads:
            loaded = self._read(state.load)
            if following is not None:
                self._read(following.load)
            started = time.monotonic()
            loaded.wait()  # (read while the state before trained: at once, but the first)
            STATS["read_wait_seconds"] += time.monotonic() - started
        resident = set(self._keys_of(state.resident).tolist())
        # only the edges whose source came into the buffer or left it are written: a state
        # swaps one physical partition (the mask starts all 0, as a DistTensor does)
        changed = sorted(resident ^ m.masked)
        ids = [m.eids[m.bounds[key] : m.bounds[key + 1]] for key in changed]
        values = [
            torch.full((len(i),), float(key in resident))
            for key, i in zip(changed, ids, strict=True)
        ]
        _barrier()  # every trainer has sampled the state before, every machine read it
        if sum(len(i) for i in ids):
            self.collator.g.edata[MASK][torch.cat(ids)] = torch.cat(values)
        m.masked = resident
        _barrier()  # every machine's mask is written

    def _spread(self, plan: list[orders.State]) -> Any:
        """The state each of the loader's seeds trains in this epoch: one of those its
        partition is resident in, drawn at random (:func:`outofcore.order.residence`)."""
        import torch

        m = self.machine
        assert m is not None
        logical = m.seed_keys % self.settings.logical
        when = torch.empty(len(logical), dtype=torch.int64)
        for p, states in enumerate(orders.residence(plan, self.settings.logical)):
            chosen = logical == p
            pick = torch.randint(len(states), (int(chosen.sum()),))
            when[chosen] = torch.tensor(states, dtype=torch.int64)[pick]
        return when

    def _minibatches(self, index: int, state: orders.State, when: Any) -> Any:
        import torch

        m = self.machine
        assert m is not None
        seeds = self.collator.dataset
        mine = seeds[when == index]
        mine = mine[torch.randperm(len(mine))]
        size = self.loader.batch_size
        batches = list(torch.split(mine, size)) if len(mine) else []
        (count,) = _reduce([len(batches)], "MAX")
        resident = self._keys_of(state.resident)
        pool = mine if len(mine) else seeds[torch.isin(m.seed_keys, resident)]
        pool = pool if len(pool) else seeds
        while len(batches) < count:  # extra minibatches: every trainer steps alike
            batches.append(pool[torch.randint(len(pool), (min(size, len(pool)),))])
            STATS["extra_minibatches"] += 1
        for ids in batches:
            started = time.monotonic()
            batch = self.collator.collate(ids)
            STATS["sample_seconds"] += time.monotonic() - started
            inputs = batch[0]
            STATS["minibatches"] += 1
            STATS["input_rows"] += len(inputs)
            STATS["outside_rows"] += int((~torch.isin(self.keys(inputs), resident)).sum())
            yield batch

    def _keys_of(self, logical_parts: tuple[int, ...]) -> Any:
        import torch

        n = self.settings.logical
        return torch.tensor([p * n + r for p in range(len(self.sizes)) for r in logical_parts])

    def _read(self, parts: tuple[int, ...]) -> threading.Event:
        """Have the reader read these logical partitions of every mapped feature file, once
        an epoch (a partition read for the state ahead is not asked for again): an Event set
        once they are read."""
        from outofcore import layout, patch

        m = self.machine
        assert m is not None
        key = (m.epoch, *parts)
        if key in m.reading:
            return m.reading[key]
        done = m.reading[key] = threading.Event()
        for ptr, rows in self.mapped.items():
            if rows.ndim == 0 or not len(rows):
                continue
            row_bytes = int(rows.nbytes // len(rows))
            found = spans(parts, self.settings.logical, len(rows), row_bytes, layout.DATA_OFFSET)
            patch.read_spans(ptr, found)
            STATS["read_bytes"] += sum(end - start for start, end in found)
        patch.after_reads(done.set)
        return done


def report() -> None:
    """A trainer's last line in buffer order: what its buffer did."""
    if not STATS["epochs"]:
        return
    say(
        f"out-of-core: buffer order: {STATS['epochs']:.0f} epoch(s), {STATS['states']:.0f} "
        f"buffer states, {STATS['minibatches']:.0f} minibatches "
        f"({STATS['extra_minibatches']:.0f} extra, to keep the trainers in step), "
        f"{STATS['read_bytes'] / 2**20:.1f} MiB read in whole partitions "
        f"(waited {STATS['read_wait_seconds']:.1f}s for them), "
        f"{STATS['outside_rows']:.0f} of {STATS['input_rows']:.0f} input rows outside the buffer; "
        f"{STATS['enter_seconds']:.1f}s entering states, {STATS['sample_seconds']:.1f}s sampling"
    )
