"""What the multi-node e2e tests share: the cluster's size and the handle the ``multinode``
fixture (conftest.py) gives them."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from localcluster.node import COSCHEDULER, start_node, stop_node

NODES = 3


@dataclass
class MultiNode:
    """What tests need of the running cluster."""

    dir: Path
    kubeconfig: Path
    nodes: list[str]  # dgl-node, dgl-node-2, dgl-node-3 (the first is node 1)
    scheduler: str = COSCHEDULER  # the Coscheduling scheduler's schedulerName

    def stop_node(self, name: str) -> None:
        """Power ``name`` off as a crash would (localcluster.node.stop_node): its kubelet,
        containerd and containers are killed; its Node and pods stay in the API. It stays
        down until :meth:`start_node`."""
        stop_node(self.dir, name)

    def start_node(self, name: str) -> None:
        """Power ``name`` on again (localcluster.node.start_node): returns once it is Ready."""
        start_node(self.dir, name)
