"""Shared informer: one cache per resource, many handlers (client-go shared_informer.go).

The reflector feeds the informer; the informer updates its indexed store and hands a
notification to every registered handler. Each handler has its own unbounded buffer and thread
(client-go's processorListener), so a slow handler never blocks the watch or other handlers.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import structlog

from informers.listwatch import ListerWatcher
from informers.reflector import Reflector
from informers.store import (
    NAMESPACE_INDEX,
    DeletedFinalStateUnknown,
    IndexFunc,
    ThreadSafeStore,
    meta_namespace_key,
    namespace_index,
)
from kubeclient import Obj

log = structlog.get_logger("informers.shared")

Transform = Callable[[Obj], Obj]


def strip_managed_fields(obj: Obj) -> Obj:
    """Default transform: managedFields are large and never read by the operator."""
    meta = obj.get("metadata")
    if isinstance(meta, dict) and "managedFields" in meta:
        del meta["managedFields"]
    return obj


@dataclass
class EventHandler:
    on_add: Callable[[Obj], None] | None = None
    on_update: Callable[[Obj, Obj], None] | None = None
    on_delete: Callable[[Obj | DeletedFinalStateUnknown], None] | None = None


class _Listener:
    """Delivers notifications to one handler, in order, from its own thread.

    The thread takes everything pending at once and is woken only when it waits: in a burst
    the informer's thread appends without waking anyone (a wake-up per notification was a
    tenth of the operator's CPU)."""

    def __init__(self, handler: EventHandler, name: str) -> None:
        self.handler = handler
        self.name = name
        self._cond = threading.Condition()
        self._pending: deque[tuple[str, Any, Any]] = deque()
        self._stopped = False
        self._busy = False
        self._waiting = False
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
            self._thread.start()

    def push(self, kind: str, a: Any, b: Any = None) -> None:
        with self._cond:
            self._pending.append((kind, a, b))
            if self._waiting:
                self._cond.notify()

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify_all()

    def idle(self) -> bool:
        with self._cond:
            return not self._pending and not self._busy

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._pending and not self._stopped:
                    self._waiting = True
                    try:
                        self._cond.wait()
                    finally:
                        self._waiting = False
                if self._stopped:
                    return
                batch, self._pending = self._pending, deque()
                self._busy = True
            try:
                for kind, a, b in batch:
                    try:
                        self._dispatch(kind, a, b)
                    except Exception:  # a handler bug must not kill delivery
                        log.exception("event handler failed", listener=self.name, notification=kind)
            finally:
                with self._cond:
                    self._busy = False

    def _dispatch(self, kind: str, a: Any, b: Any) -> None:
        h = self.handler
        if kind == "add" and h.on_add:
            h.on_add(a)
        elif kind == "update" and h.on_update:
            h.on_update(a, b)
        elif kind == "delete" and h.on_delete:
            h.on_delete(a)


class SharedInformer:
    def __init__(
        self,
        lw: ListerWatcher,
        *,
        name: str = "",
        resync_period: float = 0.0,
        indexers: dict[str, IndexFunc] | None = None,
        transform: Transform | None = strip_managed_fields,
        reflector_factory: Callable[[ListerWatcher, SharedInformer], Reflector] | None = None,
    ) -> None:
        self.name = name or getattr(lw, "describe", lambda: "informer")()
        self.lw = lw
        self.resync_period = resync_period
        self.transform = transform
        all_indexers: dict[str, IndexFunc] = {NAMESPACE_INDEX: namespace_index}
        all_indexers.update(indexers or {})
        self.store = ThreadSafeStore(all_indexers)
        self._lock = threading.RLock()  # orders store writes with notification fan-out
        self._listeners: list[_Listener] = []
        self._synced = threading.Event()
        self._started = False
        self._stop: threading.Event | None = None
        factory = reflector_factory or (lambda lw_, sink: Reflector(lw_, sink, name=self.name))
        self.reflector = factory(lw, self)

    # -- handlers ------------------------------------------------------------------------

    def add_event_handler(self, handler: EventHandler) -> None:
        """Register a handler; one added after start first gets every cached object as an add."""
        with self._lock:
            listener = _Listener(handler, f"{self.name}-handler-{len(self._listeners)}")
            self._listeners.append(listener)
            if self._started:
                for obj in self.store.list():
                    listener.push("add", obj)
                listener.start()

    def _fan_out(self, kind: str, a: Any, b: Any = None) -> None:
        for listener in self._listeners:
            listener.push(kind, a, b)

    # -- ReflectorSink --------------------------------------------------------------------

    def _prepare(self, obj: Obj) -> Obj:
        return self.transform(obj) if self.transform else obj

    def on_list(self, items: list[Obj], resource_version: str) -> None:
        new = {meta_namespace_key(o): self._prepare(o) for o in items}
        with self._lock:
            old_items = {meta_namespace_key(o): o for o in self.store.list()}
            self.store.replace(new)
            for key, obj in new.items():
                old = old_items.get(key)
                if old is None:
                    self._fan_out("add", obj)
                else:
                    self._fan_out("update", old, obj)
            for key, old in old_items.items():
                if key not in new:
                    self._fan_out("delete", DeletedFinalStateUnknown(key, old))
        self._synced.set()

    def on_added(self, obj: Obj) -> None:
        """ADDED or MODIFIED: what the handlers get depends on the cache, not the event type."""
        obj = self._prepare(obj)
        with self._lock:
            old = self.store.put(meta_namespace_key(obj), obj)
            if old is None:
                self._fan_out("add", obj)
            else:
                self._fan_out("update", old, obj)

    on_modified = on_added

    def on_deleted(self, obj: Obj) -> None:
        obj = self._prepare(obj)
        with self._lock:
            self.store.delete(meta_namespace_key(obj))
            self._fan_out("delete", obj)

    # -- running --------------------------------------------------------------------------

    def has_synced(self) -> bool:
        return self._synced.is_set()

    def wait_for_sync(self, timeout: float | None = None) -> bool:
        return self._synced.wait(timeout)

    def handlers_idle(self) -> bool:
        """True when every handler has consumed every notification (for tests and drains)."""
        with self._lock:
            return all(listener.idle() for listener in self._listeners)

    def run(self, stop: threading.Event) -> None:
        """Blocks until ``stop`` is set."""
        with self._lock:
            if self._started:
                raise RuntimeError(f"informer {self.name} already started")
            self._started = True
            self._stop = stop
            for listener in self._listeners:
                listener.start()
        resync: threading.Thread | None = None
        if self.resync_period > 0:
            resync = threading.Thread(
                target=self._resync_loop, args=(stop,), name=f"{self.name}-resync", daemon=True
            )
            resync.start()
        try:
            self.reflector.run(stop)
        finally:
            with self._lock:
                for listener in self._listeners:
                    listener.stop()

    def start(self, stop: threading.Event) -> threading.Thread:
        t = threading.Thread(target=self.run, args=(stop,), name=self.name, daemon=True)
        t.start()
        return t

    def resync(self) -> None:
        """Replay the cache to every handler as updates with old == new (no API call)."""
        with self._lock:
            for obj in self.store.list():
                self._fan_out("update", obj, obj)

    def _resync_loop(self, stop: threading.Event) -> None:
        while not stop.wait(self.resync_period):
            if self.has_synced():
                self.resync()


def wait_for_cache_sync(
    stop: threading.Event, *informers: SharedInformer, timeout: float | None = None
) -> bool:
    """Wait until every informer has delivered its first list; False on stop or timeout."""
    deadline = None if timeout is None else time.monotonic() + timeout
    for inf in informers:
        while not inf.has_synced():
            if stop.is_set():
                return False
            remaining = 0.1 if deadline is None else min(0.1, deadline - time.monotonic())
            if remaining <= 0:
                return False
            inf.wait_for_sync(remaining)
    return True
