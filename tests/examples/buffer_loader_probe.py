"""Run with the DGL interpreter (PYTHONPATH: the checkout): buffer order's training loader
(outofcore.buffer, through outofcore.patch's ``DistDataLoader.__iter__``) on a real DGL 2.1
DistGraph, standalone (one process, one part): one epoch of a shuffled DistNodeDataLoader in
buffer order (4 physical partitions, a buffer of 2), what it yielded, and what it refuses.
With ``--broken-mask`` every state's mask is rewritten to all ones after the loader wrote it
(the twin: the loader's own count of input rows outside the buffer must see it). Prints one
JSON object.

    python buffer_loader_probe.py WORKDIR [--broken-mask]
"""

from __future__ import annotations

import json
import os
import sys

os.environ.setdefault("DGLBACKEND", "pytorch")
os.environ["DGL_DIST_MODE"] = "standalone"
os.environ["DGL_OUT_OF_CORE_ORDER"] = "Buffer"
os.environ["DGL_OUT_OF_CORE_PARTITIONS"] = "4"
os.environ["DGL_OUT_OF_CORE_CAPACITY"] = "2"

import dgl
import torch
from dgl.distributed import DistGraph, partition_graph

from outofcore import buffer, patch
from outofcore.order import State

NODES, EDGES, SEED, BATCH = 400, 8000, 0, 50


def main() -> None:
    work = sys.argv[1]
    torch.manual_seed(SEED)
    partition_graph(dgl.rand_graph(NODES, EDGES), "g", 1, work)
    config = os.path.join(work, "g.json")
    patch.install()
    dgl.distributed.initialize(config)
    g = DistGraph("g", part_config=config)
    if "--broken-mask" in sys.argv:
        enter = buffer.Buffered._enter

        def broken(self: buffer.Buffered, state: State, following: State | None) -> None:
            enter(self, state, following)
            g.edata[buffer.MASK][torch.arange(g.num_edges())] = torch.ones(g.num_edges())

        setattr(buffer.Buffered, "_enter", broken)  # noqa: B010
    nodes = torch.arange(NODES)
    sampler = dgl.dataloading.NeighborSampler([5, 5])
    loader = dgl.dataloading.DistNodeDataLoader(g, nodes, sampler, batch_size=BATCH, shuffle=True)
    seeds = [batch[1] for batch in loader]
    trained = torch.cat(seeds)
    seen = {
        "minibatches": len(seeds),
        "seeds": int(trained.numel()),
        "distinct_seeds": int(trained.unique().numel()),
        "prob_after": sampler.prob,  # (the loader's sampler as it was, after the epoch)
        "stats": dict(buffer.STATS),
    }
    exact = dgl.dataloading.DistNodeDataLoader(g, nodes, sampler, batch_size=BATCH)
    seen["unshuffled_minibatches"] = sum(1 for _ in exact)  # DGL's own order, not buffered
    seen["epochs_after_unshuffled"] = buffer.STATS["epochs"]
    refusals = []
    g.edata["w"] = torch.ones(g.num_edges())
    weighted = dgl.dataloading.NeighborSampler([5], prob="w")
    bad = dgl.dataloading.DistNodeDataLoader(g, nodes, weighted, batch_size=BATCH, shuffle=True)
    try:
        iter(bad)
    except buffer.BufferError as e:
        refusals.append(str(e))
    seen["refusals"] = refusals
    print(json.dumps(seen))


if __name__ == "__main__":
    main()
