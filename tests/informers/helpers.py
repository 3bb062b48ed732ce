"""Shared test helpers for the informers tests: polling, scripted list/watch, recording sinks."""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from informers.backoff import Backoff
from informers.reflector import Reflector, ReflectorSink
from informers.store import DeletedFinalStateUnknown
from kubeclient import Obj


def fast_backoff() -> Backoff:
    return Backoff(initial=0.01, maximum=0.05, jitter=0)


def obj(
    name: str,
    rv: int | str,
    namespace: str = "ns",
    labels: dict[str, str] | None = None,
    **extra: Any,
) -> Obj:
    meta: Obj = {"name": name, "namespace": namespace, "resourceVersion": str(rv)}
    if labels is not None:
        meta["labels"] = labels
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, **extra}


def ev(etype: str, o: Obj) -> Obj:
    return {"type": etype, "object": o}


def bookmark(rv: int | str) -> Obj:
    return ev(
        "BOOKMARK", {"kind": "Pod", "apiVersion": "v1", "metadata": {"resourceVersion": str(rv)}}
    )


def error_event(code: int | None, reason: str, message: str = "too old resource version") -> Obj:
    status: Obj = {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "reason": reason,
        "message": message,
    }
    if code is not None:
        status["code"] = code
    return ev("ERROR", status)


class ScriptedStream:
    """A ``WatchStream`` yielding scripted events (exceptions in the script are raised).

    After the script: ends cleanly, or with ``block=True`` blocks until :meth:`close`.
    """

    def __init__(self, script: Iterable[Obj | BaseException] = (), *, block: bool = False):
        self.script = list(script)
        self.block = block
        self.closed = threading.Event()
        self.close_calls = 0
        self.exhausted = threading.Event()

    def __iter__(self) -> Iterator[Obj]:
        for item in self.script:
            if self.closed.is_set():
                return
            if isinstance(item, BaseException):
                self.exhausted.set()
                raise item
            yield item
        self.exhausted.set()
        # A real watch blocks on the socket until the client closes it.
        if self.block and not self.closed.wait(10):
            raise AssertionError("blocking stream was never closed")

    def close(self) -> None:
        self.close_calls += 1
        self.closed.set()


ListResult = tuple[list[Obj], str]


class ScriptedLW:
    """A ``ListerWatcher`` that plays back scripted list results/errors and watch streams.

    When the list script runs out the last list result is repeated; when the watch script runs
    out, a stream that blocks until closed is returned (the reflector parks there).
    """

    def __init__(
        self,
        lists: Iterable[ListResult | BaseException] = (),
        watches: Iterable[ScriptedStream | BaseException] = (),
    ) -> None:
        self._lists: deque[ListResult | BaseException] = deque(lists)
        self._watches: deque[ScriptedStream | BaseException] = deque(watches)
        self._last_list: ListResult = ([], "1")
        self._lock = threading.Lock()
        self.list_calls = 0
        self.list_times: list[float] = []
        self.watch_rvs: list[str] = []
        self.watch_times: list[float] = []
        self.watch_args: list[tuple[str, int, float]] = []
        self.streams: list[ScriptedStream] = []

    def describe(self) -> str:
        return "scripted"

    def add_watches(self, *items: ScriptedStream | BaseException) -> None:
        with self._lock:
            self._watches.extend(items)

    def list(self) -> ListResult:
        with self._lock:
            self.list_calls += 1
            self.list_times.append(time.monotonic())
            item = self._lists.popleft() if self._lists else self._last_list
        if isinstance(item, BaseException):
            raise item
        self._last_list = item
        items, rv = item
        # Hand out fresh dicts like a real client would (the informer may transform them).
        return [dict(o, metadata=dict(o["metadata"])) for o in items], rv

    def watch(self, resource_version: str, timeout_seconds: int, read_timeout: float) -> Any:
        with self._lock:
            self.watch_rvs.append(resource_version)
            self.watch_times.append(time.monotonic())
            self.watch_args.append((resource_version, timeout_seconds, read_timeout))
            item = self._watches.popleft() if self._watches else ScriptedStream(block=True)
            if isinstance(item, ScriptedStream):
                self.streams.append(item)
        if isinstance(item, BaseException):
            raise item
        return item

    def watch_count(self) -> int:
        with self._lock:
            return len(self.watch_rvs)


class RecordingSink:
    """A ``ReflectorSink`` that records every call in order."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.calls: list[tuple[str, Any]] = []

    def on_list(self, items: list[Obj], resource_version: str) -> None:
        with self._lock:
            self.calls.append(("list", ([o["metadata"]["name"] for o in items], resource_version)))

    def on_added(self, o: Obj) -> None:
        self._record("added", o)

    def on_modified(self, o: Obj) -> None:
        self._record("modified", o)

    def on_deleted(self, o: Obj) -> None:
        self._record("deleted", o)

    def _record(self, kind: str, o: Obj) -> None:
        with self._lock:
            self.calls.append((kind, (o["metadata"]["name"], o["metadata"]["resourceVersion"])))

    def snapshot(self) -> list[tuple[str, Any]]:
        with self._lock:
            return list(self.calls)

    def count(self, kind: str) -> int:
        return sum(1 for k, _ in self.snapshot() if k == kind)


class Running:
    """Runs a reflector (or anything with ``run(stop)``) on a thread; stops it on teardown."""

    def __init__(self, target: Callable[[threading.Event], None]) -> None:
        self.stop = threading.Event()
        self.thread = threading.Thread(target=target, args=(self.stop,), daemon=True)
        self.thread.start()

    def shutdown(self, timeout: float = 3.0) -> None:
        self.stop.set()
        self.thread.join(timeout)
        assert not self.thread.is_alive(), f"run() still running {timeout}s after stop"


def make_reflector(lw: Any, sink: ReflectorSink, **kw: Any) -> Reflector:
    kw.setdefault("backoff", fast_backoff())
    kw.setdefault("min_watch_timeout", 1.0)
    return Reflector(lw, sink, name="test", **kw)


class HandlerLog:
    """An event handler recording (kind, payload) notifications, thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.events: list[tuple[str, Any]] = []

    def on_add(self, o: Obj) -> None:
        with self._lock:
            self.events.append(("add", o))

    def on_update(self, old: Obj, new: Obj) -> None:
        with self._lock:
            self.events.append(("update", (old, new)))

    def on_delete(self, o: Obj | DeletedFinalStateUnknown) -> None:
        with self._lock:
            self.events.append(("delete", o))

    def snapshot(self) -> list[tuple[str, Any]]:
        with self._lock:
            return list(self.events)

    def of(self, kind: str) -> list[Any]:
        return [p for k, p in self.snapshot() if k == kind]
