"""Creations and deletions made but not yet seen in the cache (k8s controller_utils.go).

A sync that runs before the informer has caught up with our own writes would otherwise see
a pod "missing" and create it twice, or see a deleted pod still there. Until every expected
event has been observed (or the expectation expired) the job's key is "unsatisfied" and the
sync must not create or delete children.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass, field

from clock import Clock, RealClock

ADD = "add"
DELETE = "delete"


@dataclass
class _Record:
    pending: set[tuple[str, str, str]] = field(default_factory=set)  # (op, kind, name)
    stamp: float = 0.0


class Expectations:
    def __init__(self, ttl: float = 300.0, clock: Clock | None = None) -> None:
        self.ttl = ttl  # seconds of the clock's now()
        self._clock: Clock = clock or RealClock()
        self._lock = threading.Lock()
        self._records: dict[str, _Record] = {}

    def expect(self, key: str, op: str, kind: str, names: Iterable[str]) -> None:
        with self._lock:
            rec = self._records.setdefault(key, _Record())
            rec.pending.update((op, kind, n) for n in names)
            rec.stamp = self._clock.now()

    def observe(self, key: str, op: str, kind: str, name: str) -> None:
        with self._lock:
            rec = self._records.get(key)
            if rec is not None:
                rec.pending.discard((op, kind, name))

    # A failed API call will never produce the event we wait for.
    lower = observe

    def satisfied(self, key: str) -> bool:
        with self._lock:
            rec = self._records.get(key)
            if rec is None or not rec.pending:
                return True
            if self._clock.now() - rec.stamp > self.ttl:
                rec.pending.clear()
                return True
            return False

    def pending(self, key: str) -> list[tuple[str, str, str]]:
        with self._lock:
            rec = self._records.get(key)
            return sorted(rec.pending) if rec else []

    def forget(self, key: str) -> None:
        with self._lock:
            self._records.pop(key, None)
