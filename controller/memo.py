"""What one operator process remembers about each job between its syncs: one record per job
key (:class:`JobMemo`), made on first use and dropped whole by :meth:`JobMemos.forget` when
the job is deleted. Nothing else in the sync keeps anything per job (the expectations, which
the informers' handlers share, are forgotten at the same time).

Everything here is a memo: a new leader starts without it and only repeats a little work (a
blind create that finds the object, a Warning said again).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import TypeVar

from controller.machinery.mutation_cache import OwnWrite

T = TypeVar("T")


@dataclass
class JobMemo:
    # our last status write of the job, and of its ConfigMap, until the caches show them
    job_written: OwnWrite = field(default_factory=OwnWrite)
    config_written: OwnWrite = field(default_factory=OwnWrite)
    # the uid of the job whose transfer Secret this process created or found
    secret_made_for: str = ""
    # the uid of the job whose storage claim this process created or found
    claim_ready_for: str = ""
    # the uid of the job told (a Warning) that its spec.storage.claimName does not exist
    claim_missing_told: str = ""
    # dglrun's report: the last Event recorded per (attempt, reporter), by its seq; the
    # refusal last told (a Warning once per message)
    report_events: dict[tuple[int, str], int] = field(default_factory=dict)
    report_refusal_told: str = ""
    # (namespace, reason) counted in the jobs-waiting gauge for the job
    waiting: tuple[str, str] | None = None
    # what a feature's step remembers of the job, one record of its own type each (:meth:`of`)
    _features: dict[type, object] = field(default_factory=dict)

    def of(self, kind: type[T]) -> T:
        """A feature's own record of the job (a ``kind()`` made on first use)."""
        found = self._features.get(kind)
        if not isinstance(found, kind):
            found = self._features[kind] = kind()
        return found


class JobMemos:
    """Job key -> :class:`JobMemo`. One key is synced by one worker at a time (the work
    queue's promise), so a record needs no lock; the map does."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_key: dict[str, JobMemo] = {}

    def __getitem__(self, key: str) -> JobMemo:
        """The job's record, made empty on first use."""
        with self._lock:
            memo = self._by_key.get(key)
            if memo is None:
                memo = self._by_key[key] = JobMemo()
            return memo

    def peek(self, key: str) -> JobMemo | None:
        """The job's record if it has one (none is made)."""
        with self._lock:
            return self._by_key.get(key)

    def forget(self, key: str) -> JobMemo | None:
        """Drop the job's record; returns what it held."""
        with self._lock:
            return self._by_key.pop(key, None)

    def __contains__(self, key: object) -> bool:
        with self._lock:
            return key in self._by_key

    def __len__(self) -> int:
        with self._lock:
            return len(self._by_key)
