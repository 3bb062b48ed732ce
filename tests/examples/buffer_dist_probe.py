"""A training entry point for dglrun (2 machines, real DGL 2.1 servers and trainers): buffer
mode's sampling across machines. Every machine's rows are ``LOGICAL`` logical partitions
(contiguous ranges of its part); in each state of ``outofcore.order.plan_epoch`` (one plan,
every machine's), each trainer writes the edge mask of its own part's edges (1.0 where the
edge's source is resident on its machine: sources on the other machine included), the
trainers meet at a barrier, and each samples its part's nodes trained in that state, once
with ``prob=MASK`` and once without (the twin). Rank 0 prints one line
``buffer-probe: {...}`` with the sums over the trainers, state by state.
"""

from __future__ import annotations

import argparse
import json
import os

os.environ.setdefault("DGLBACKEND", "pytorch")

import dgl
import torch
import torch.distributed as dist
from dgl.distributed import DistGraph, DistTensor, sample_neighbors

from outofcore.order import plan_epoch

LOGICAL, PER_PHYSICAL, CAPACITY, FANOUT, SEED = 8, 2, 2, 10, 0
MASK = "resident"


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--graph_name", required=True)
    p.add_argument("--ip_config", default=os.environ.get("DGL_IP_CONFIG", "ip_config.txt"))
    p.add_argument("--part_config", default=os.environ.get("DGL_CONF_PATH"))
    a, _ = p.parse_known_args()
    dgl.distributed.initialize(a.ip_config)  # (a server serves in here, then exits)
    dist.init_process_group("gloo")
    g = DistGraph(a.graph_name, part_config=a.part_config)
    pb = g.get_partition_book()
    me = pb.partid
    sizes = [int(m["num_nodes"]) for m in pb.metadata()]
    edge_sizes = [int(m["num_edges"]) for m in pb.metadata()]
    node_start = torch.tensor([0, *sizes]).cumsum(0)
    edge_start = torch.tensor([0, *edge_sizes]).cumsum(0)

    def logical(nodes: torch.Tensor) -> torch.Tensor:
        part = pb.nid2partid(nodes)
        return (nodes - node_start[part]) * LOGICAL // torch.tensor(sizes)[part]

    mine = torch.arange(int(edge_start[me]), int(edge_start[me + 1]))
    src, _ = g.find_edges(mine)
    src_logical = logical(src)
    nodes = torch.arange(int(node_start[me]), int(node_start[me + 1]))
    nodes_logical = logical(nodes)
    policy = g.get_edge_partition_policy(g.canonical_etypes[0])
    g.edata[MASK] = DistTensor((g.num_edges(),), torch.float32, name=MASK, part_policy=policy)
    rows = []
    for state in plan_epoch(LOGICAL, PER_PHYSICAL, CAPACITY, seed=SEED, epoch=0):
        resident = torch.tensor(state.resident)
        g.edata[MASK][mine] = torch.isin(src_logical, resident).float()
        dist.barrier()  # every machine's mask written before anyone samples
        seeds = nodes[torch.isin(nodes_logical, torch.tensor(state.train))]
        counts = [int(seeds.numel())]
        for prob in (MASK, None):
            sampled, _ = sample_neighbors(g, seeds, FANOUT, prob=prob).edges()
            outside = ~torch.isin(logical(sampled), resident)
            counts += [int(sampled.numel()), int(outside.sum())]
        total = torch.tensor(counts)
        dist.all_reduce(total)
        rows.append(dict(zip(("seeds", "sampled", "outside", "sampled_free", "outside_free"),
                             total.tolist(), strict=True)))  # fmt: skip
        dist.barrier()  # nobody rewrites the mask while another samples
    if dist.get_rank() == 0:
        print("buffer-probe: " + json.dumps({"nodes": g.num_nodes(), "states": rows}), flush=True)


if __name__ == "__main__":
    main()
