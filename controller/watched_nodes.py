"""What the sync knows of nodes (:class:`WatchedNodes`): the Node cache, and when this process
first saw each node silent (node_loss.silent: Ready=Unknown or tainted
unreachable by missing heartbeats alone), so that a silent node counts as lost only once it
has stayed silent ``confirm`` seconds.

The node lifecycle controller marks the nodes of one monitor pass one write after another,
and a node whose lease went stale while the API server was away turns Ready again once its
kubelet renews, seconds after the server's return. Without the wait, the operator could see
the first node of a full disruption before the others (and fail its jobs), or fail the jobs
of a node silent for a moment. A silent node of a real dead node costs ``confirm`` more
seconds (the launcher's dglrun has mostly failed on its own already).

The Node informer's handler writes (:meth:`observe`, :meth:`forget`); the sync reads
(:meth:`pending`). A new process starts empty: a node already silent is timed from its first
event (the initial list), as a memo would be.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from clock import Clock
from controller.machinery import objects as ob
from controller.status.node_loss import silent
from informers.lister import Lister
from kubeclient import Obj

NODE_SILENCE_CONFIRM_SECONDS = 15.0


class NodeSilences:
    def __init__(self, clock: Clock, confirm: float = NODE_SILENCE_CONFIRM_SECONDS) -> None:
        self._clock = clock
        self.confirm = confirm
        self._lock = threading.Lock()
        self._since: dict[str, float] = {}

    def observe(self, node: Obj) -> bool:
        """Note a node's state; True when it has just turned silent (its jobs look again
        ``confirm`` seconds later)."""
        name = ob.name(node)
        with self._lock:
            if not silent(node):
                self._since.pop(name, None)
                return False
            if name in self._since:
                return False
            self._since[name] = self._clock.now()
            return True

    def forget(self, name: str) -> None:
        with self._lock:
            self._since.pop(name, None)

    def pending(self, name: str) -> float:
        """Seconds until silent node ``name`` counts as lost (0: it does now). One the
        handler has not seen silent yet waits the whole ``confirm`` (its event, on its way,
        starts the time and has its jobs look again)."""
        now = self._clock.now()
        with self._lock:
            since = self._since.get(name)
        return self.confirm if since is None else max(0.0, since + self.confirm - now)


@dataclass(frozen=True)
class WatchedNodes:
    """The Node cache and the silences: built once by the controller, read by the sync."""

    lister: Lister
    silences: NodeSilences
