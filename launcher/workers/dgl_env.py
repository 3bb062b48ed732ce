"""The process/environment contract of DGL distributed training (DGL 2.1), as pure functions.

Per worker pod: ``num_servers`` servers (server k binds port+k) and ``num_trainers`` trainers.
A wrong DGL_NUM_CLIENT hangs the servers (too high) or breaks group formation (too low);
without DGL_DIST_MODE=distributed a trainer runs standalone and the servers wait forever.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Topology:
    num_workers: int
    num_servers: int = 1
    num_trainers: int = 1
    num_samplers: int = 0
    omp_threads: int = 1

    @property
    def num_clients(self) -> int:
        return self.num_trainers * (1 + self.num_samplers) * self.num_workers

    @property
    def world_size(self) -> int:
        return self.num_trainers * self.num_workers


def _common(topo: Topology, ip_config: str, part_config: str) -> dict[str, str]:
    return {
        "DGL_NUM_SERVER": str(topo.num_servers),
        "DGL_NUM_SAMPLER": str(topo.num_samplers),
        "DGL_NUM_CLIENT": str(topo.num_clients),
        "DGL_IP_CONFIG": ip_config,
        "DGL_CONF_PATH": part_config,
        "DGL_GRAPH_FORMAT": "csc",
        "OMP_NUM_THREADS": str(topo.omp_threads),
        "OUTDATED_IGNORE": "1",  # ogb's import-time PyPI check: slow exits, network calls
    }


def server_env(
    topo: Topology, worker: int, local_index: int, ip_config: str, part_config: str
) -> dict[str, str]:
    env = _common(topo, ip_config, part_config)
    env.update(
        DGL_ROLE="server",
        DGL_SERVER_ID=str(worker * topo.num_servers + local_index),
    )
    return env


def trainer_env(
    topo: Topology,
    worker: int,
    local_rank: int,
    ip_config: str,
    part_config: str,
    master_addr: str,
    master_port: int,
) -> dict[str, str]:
    env = _common(topo, ip_config, part_config)
    env.update(
        DGL_ROLE="client",
        DGL_DIST_MODE="distributed",
        DGL_GROUP_ID="0",
        MASTER_ADDR=master_addr,
        MASTER_PORT=str(master_port),
        WORLD_SIZE=str(topo.world_size),
        RANK=str(worker * topo.num_trainers + local_rank),
        LOCAL_RANK=str(local_rank),
    )
    return env
