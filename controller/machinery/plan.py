"""What one sync of a job decided (:class:`Plan`): the new status, the events and metrics to
emit once it is written, and when to look at the job again. The sync handler's steps
(controller/lifecycle/) fill it; only the status write acts on it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from kubeclient import Obj


@dataclass
class Plan:
    """What a sync decided: the new status, and what to announce once it is written."""

    obj: Obj
    status: Obj
    events: list[tuple[str, str, str]] = field(default_factory=list)
    on_written: list[Callable[[], None]] = field(default_factory=list)
    requeue_after: float | None = None
    cleared: set[str] = field(default_factory=set)
    # the status our write was applied to (the newest we read: after a conflict, the API's)
    seen_status: Obj = field(default_factory=dict)
    # why the job's pods wait (the PodsReady reason), for the jobs-waiting gauge
    waiting: str | None = None

    def announce(self, type_: str, reason: str, message: str) -> None:
        self.events.append((type_, reason, message))

    def clear(self, key: str) -> None:
        """Remove a status field other writers set (dglrun's progress), even one our cached
        copy does not show yet: it stays removed when the write is re-applied to a newer
        object after a conflict."""
        self.status.pop(key, None)
        self.cleared.add(key)

    def requeue(self, seconds: float) -> None:
        seconds = max(seconds, 0.0)
        if self.requeue_after is None or seconds < self.requeue_after:
            self.requeue_after = seconds
