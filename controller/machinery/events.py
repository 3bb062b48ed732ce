"""Kubernetes Events for a job's lifecycle (client-go tools/record, much simplified).

``record`` never blocks the sync: events go through a bounded queue to a sender thread; when
a burst overflows it, events are dropped, counted (``dgl_operator_events_dropped_total``) and
logged.
A repeat of the same (object, type, reason, message) within ``dedup_window`` bumps the
existing Event's count instead of creating a new one, as client-go's correlator does.
"""

from __future__ import annotations

import contextlib
import queue
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import structlog

from clock import Clock, RealClock
from controller.machinery.objects import now_rfc3339
from kubeclient import EVENTS, KubeClient, KubeError, NotFound, Obj

log = structlog.get_logger("controller.events")

NORMAL = "Normal"
WARNING = "Warning"


@dataclass(frozen=True)
class _Pending:
    ref: Obj
    type: str
    reason: str
    message: str
    at: float


class EventRecorder:
    def __init__(
        self,
        client: KubeClient,
        component: str = "dgl-operator",
        *,
        host: str | None = None,
        dedup_window: float = 600.0,
        max_queue: int = 10000,
        clock: Clock | None = None,
        on_drop: Callable[[], None] | None = None,
    ) -> None:
        self.client = client
        self.component = component
        self.host = host or socket.gethostname()
        self.dedup_window = dedup_window
        # wall(): the Events' timestamps and the dedup window; now(): the drop log's pace
        self._clock: Clock = clock or RealClock()
        self._queue: queue.Queue[_Pending | None] = queue.Queue(max_queue)
        self._seen: dict[tuple[str, str, str, str], tuple[str, int, float]] = {}
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self.dropped = 0
        self._on_drop = on_drop
        self._last_drop_log: float | None = None

    def start(self) -> None:
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="events", daemon=True)
                self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Send what is queued and stop the sender, within ``timeout`` seconds in all."""
        deadline = time.monotonic() + timeout
        self.flush(timeout)
        with self._lock:
            thread, self._thread = self._thread, None
        if thread is not None:
            with contextlib.suppress(queue.Full):  # still full: the sender is a daemon anyway
                self._queue.put(None, timeout=max(0.01, deadline - time.monotonic()))
            thread.join(max(0.0, deadline - time.monotonic()))

    def flush(self, timeout: float = 5.0) -> bool:
        """Wait until every recorded event was sent (or failed); False on timeout (real
        seconds, whatever the clock: it waits for the sender thread)."""
        deadline = time.monotonic() + timeout
        while self._queue.unfinished_tasks:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.005)
        return True

    def record(self, obj: Obj, type_: str, reason: str, message: str) -> None:
        meta = obj.get("metadata") or {}
        ref = {
            "apiVersion": obj.get("apiVersion", ""),
            "kind": obj.get("kind", ""),
            "namespace": meta.get("namespace", ""),
            "name": meta.get("name", ""),
            "uid": meta.get("uid", ""),
            "resourceVersion": meta.get("resourceVersion", ""),
        }
        log.info("event", type=type_, reason=reason, message=message, object=ref["name"])
        try:
            self._queue.put_nowait(_Pending(ref, type_, reason, message, self._clock.wall()))
        except queue.Full:
            # Like client-go's broadcaster: never block a sync for an event; but say so.
            self.dropped += 1
            if self._on_drop is not None:
                self._on_drop()
            stamp = self._clock.now()
            if self._last_drop_log is None or stamp - self._last_drop_log > 10.0:
                self._last_drop_log = stamp
                log.warning("event queue full; dropping events", dropped_so_far=self.dropped)

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            try:
                if item is None:
                    return
                self._send(item)
            except KubeError as e:
                log.warning(
                    "could not write event", reason=item.reason if item else "", error=str(e)
                )
            finally:
                self._queue.task_done()

    def _send(self, ev: _Pending) -> None:
        ref = ev.ref
        key = (str(ref["uid"]), ev.type, ev.reason, ev.message)
        stamp = now_rfc3339(ev.at)
        seen = self._seen.get(key)
        if seen and ev.at - seen[2] < self.dedup_window:
            name, count, first = seen
            try:
                self.client.patch(
                    EVENTS,
                    ref["namespace"],
                    name,
                    {"count": count + 1, "lastTimestamp": stamp},
                )
                self._seen[key] = (name, count + 1, first)
                return
            except NotFound:
                pass  # expired or deleted: create a fresh one
        name = f"{ref['name']}.{time.time_ns():x}"
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": name, "namespace": ref["namespace"]},
            "involvedObject": ref,
            "reason": ev.reason,
            "message": ev.message[:1024],
            "type": ev.type,
            "source": {"component": self.component, "host": self.host},
            "reportingComponent": self.component,
            "reportingInstance": self.host,
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "count": 1,
        }
        self.client.create(EVENTS, ref["namespace"], body, metadata_only=True)
        self._seen[key] = (name, 1, ev.at)
        if len(self._seen) > 4096:
            cutoff = ev.at - self.dedup_window
            self._seen = {k: v for k, v in self._seen.items() if v[2] >= cutoff}
