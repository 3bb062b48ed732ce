"""Run with the DGL interpreter (PYTHONPATH: the checkout): buffer mode's sampling on a real
DGL 2.1 DistGraph (standalone: one process, one part). For every state of
``outofcore.order.plan_epoch``, an edge mask (a DistTensor) marks the edges whose source node
is resident, ``sample_neighbors(..., prob=MASK)`` samples the state's trained nodes, and the
probe counts the sampled edges and those whose source is not resident. With ``--no-mask``
it samples without the mask (the twin). Prints one JSON object.

    python buffer_probe.py WORKDIR NUM_LOGICAL PER_PHYSICAL CAPACITY [--no-mask]
"""

from __future__ import annotations

import json
import os
import sys

os.environ.setdefault("DGLBACKEND", "pytorch")
os.environ["DGL_DIST_MODE"] = "standalone"

import dgl
import torch
from dgl.distributed import DistGraph, DistTensor, partition_graph, sample_neighbors

from outofcore.order import plan_epoch

NODES, EDGES, FANOUT, SEED = 400, 8000, 10, 0
MASK = "resident"


def main() -> None:
    work, num_logical, per_physical, capacity = sys.argv[1], *map(int, sys.argv[2:5])
    masked = "--no-mask" not in sys.argv
    torch.manual_seed(SEED)
    partition_graph(dgl.rand_graph(NODES, EDGES), "g", 1, work)
    config = os.path.join(work, "g.json")
    dgl.distributed.initialize(config)
    g = DistGraph("g", part_config=config)
    every = torch.arange(g.num_edges())
    src, _ = g.find_edges(every)
    logical_of = torch.arange(NODES) * num_logical // NODES  # contiguous row ranges
    policy = g.get_edge_partition_policy(g.canonical_etypes[0])
    g.edata[MASK] = DistTensor((g.num_edges(),), torch.float32, name=MASK, part_policy=policy)
    states = []
    for state in plan_epoch(num_logical, per_physical, capacity, seed=SEED, epoch=0):
        resident = torch.isin(logical_of, torch.tensor(state.resident))
        g.edata[MASK][every] = resident[src].float()  # the state's mask, rewritten
        seeds = torch.nonzero(torch.isin(logical_of, torch.tensor(state.train))).flatten()
        sub = sample_neighbors(g, seeds, FANOUT, prob=MASK if masked else None)
        sampled, _ = sub.edges()
        states.append(
            {
                "seeds": int(seeds.numel()),
                "sampled": int(sampled.numel()),
                "outside": int((~resident[sampled]).sum()),
            }
        )
    print(json.dumps({"states": states}))


if __name__ == "__main__":
    main()
