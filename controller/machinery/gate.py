"""The workers' gate: open, they sync; closed, they wait (the leader Lease lost for a while,
the API server away); shut, they end.

A replica that could not renew its Lease stops syncing at once but keeps its caches and its
place: when it leads again (its own Lease still naming it, nobody took over) the gate opens
and the keys queued meanwhile are synced, with no restart, no relist and no wait for the
Lease to expire.
"""

from __future__ import annotations

import threading


class Gate:
    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._open = True
        self._shut = False

    def is_open(self) -> bool:
        with self._cond:
            return self._open

    def close(self) -> None:
        with self._cond:
            self._open = False

    def open(self) -> None:
        with self._cond:
            self._open = True
            self._cond.notify_all()

    def shut(self) -> None:
        """Waiting workers end (an open gate lets them drain the queue first)."""
        with self._cond:
            self._shut = True
            self._cond.notify_all()

    def wait(self) -> bool:
        """Once open: True; shut while closed: False."""
        with self._cond:
            self._cond.wait_for(lambda: self._open or self._shut)
            return self._open
