"""What the sync knows of nodes (:class:`WatchedNodes`): the Node cache, and since when this
process has seen each node unwell in its present way (node_loss.unwell: silent, or reported
NotReady by its own kubelet), so that such a node counts as lost only once it has stayed so
``confirm`` seconds. A node deleted or being deleted is lost at once.

Why wait: the node lifecycle controller marks the nodes of one monitor pass one write after
another, so the operator could see the first node of a full disruption before the others; a
node whose lease went stale while the API server was away turns Ready again once its kubelet
renews, seconds after the server's return; and a kubelet that was stopped for a while (a hung
or starved kubelet, a paused VM) reports its own NotReady for one status update when it goes
on ("container runtime is down": its runtime check is older than its threshold) while its
containers never stopped (ci14: a job failed NodeLost that way once its kubelet went on). A
real dead node costs ``confirm`` more seconds (dglrun has mostly failed on its own by then).

The Node informer's handler writes (:meth:`observe`, :meth:`forget`); the sync reads
(:meth:`pending`). A new process starts empty: a node already unwell is timed from its first
event (the initial list), as a memo would be.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from clock import Clock
from controller.machinery import objects as ob
from controller.status.node_loss import unwell
from informers.lister import Lister
from kubeclient import Obj

NODE_LOSS_CONFIRM_SECONDS = 20.0


class UnwellNodes:
    def __init__(self, clock: Clock, confirm: float = NODE_LOSS_CONFIRM_SECONDS) -> None:
        self._clock = clock
        self.confirm = confirm
        self._lock = threading.Lock()
        self._since: dict[str, tuple[str, float]] = {}  # name -> (how unwell, since)

    def observe(self, node: Obj) -> bool:
        """Note a node's state; True when it has just turned unwell, or unwell in another way
        (its jobs look again ``confirm`` seconds later)."""
        name, how = ob.name(node), unwell(node)
        with self._lock:
            if how is None:
                self._since.pop(name, None)
                return False
            seen = self._since.get(name)
            if seen is not None and seen[0] == how:
                return False
            self._since[name] = (how, self._clock.now())
            return True

    def forget(self, name: str) -> None:
        with self._lock:
            self._since.pop(name, None)

    def pending(self, node: Obj) -> float:
        """Seconds until unwell ``node`` counts as lost (0: it does now). Unwell in a way the
        handler has not seen yet, it waits the whole ``confirm`` (its event, on its way,
        starts the time and has its jobs look again)."""
        now = self._clock.now()
        with self._lock:
            seen = self._since.get(ob.name(node))
        if seen is None or seen[0] != unwell(node):
            return self.confirm
        return max(0.0, seen[1] + self.confirm - now)


@dataclass(frozen=True)
class WatchedNodes:
    """The Node cache and the unwell nodes: built once by the controller, read by the sync."""

    lister: Lister
    unwell: UnwellNodes
