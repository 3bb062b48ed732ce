"""List, then watch from the list's resourceVersion, forever (client-go tools/cache/reflector.go).

* Every event advances the last-seen resourceVersion; BOOKMARK only advances it.
* A watch that ends cleanly is re-opened from the last resourceVersion (no relist).
* "Expired"/410 (an in-stream ERROR or an HTTP 410 when opening) and "too large resource
  version" relist; the sink's ``replace`` turns objects that vanished meanwhile into tombstones.
* Connection errors and 429 back off (0.8 s doubling to RELIST_BACKOFF_MAX, 5 s, with jitter)
  and retry: client-go's 30 s cap would keep a job's status behind an API server that is back.
* A watch that ends at once with no events (shorter than ``short_watch`` seconds of the
  :class:`clock.Clock`'s ``now()``) backs off too instead of spinning.
"""

from __future__ import annotations

import random
import threading
from typing import Any, Protocol

import structlog

from clock import Clock, RealClock
from informers.backoff import Backoff
from informers.listwatch import ListerWatcher
from kubeclient import (
    ApiError,
    Obj,
    TooManyRequests,
    TransportError,
    WatchStream,
    error_from_status,
    is_expired,
    is_too_large_resource_version,
)

log = structlog.get_logger("informers.reflector")


# The longest pause between two failed list/watch attempts (before jitter, which may double
# it): client-go's 30 s would let a job's status lag up to a minute behind an API server that
# came back from a restart; a few reflectors asking every 5-10 s cost a recovering server
# little (issue 58: the status catches up within 30 s of the server's return).
RELIST_BACKOFF_MAX = 5.0


class ReflectorSink(Protocol):
    """Where a reflector delivers what it sees (the shared informer)."""

    def on_list(self, items: list[Obj], resource_version: str) -> None: ...

    def on_added(self, obj: Obj) -> None: ...

    def on_modified(self, obj: Obj) -> None: ...

    def on_deleted(self, obj: Obj) -> None: ...


class _Relist(Exception):
    """Internal: the watch cannot continue from the last resourceVersion."""


def _rv(obj: Any) -> str:
    if not isinstance(obj, dict):
        return ""
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")


class Reflector:
    def __init__(
        self,
        lw: ListerWatcher,
        sink: ReflectorSink,
        *,
        name: str = "",
        min_watch_timeout: float = 300.0,
        read_timeout_margin: float = 60.0,
        backoff: Backoff | None = None,
        short_watch: float = 1.0,
        clock: Clock | None = None,
    ) -> None:
        self.lw = lw
        self.sink = sink
        self.name = name or getattr(lw, "describe", lambda: "reflector")()
        self.min_watch_timeout = min_watch_timeout
        self.read_timeout_margin = read_timeout_margin
        self.short_watch = short_watch
        self._clock: Clock = clock or RealClock()
        self.backoff = backoff or Backoff(maximum=RELIST_BACKOFF_MAX, clock=self._clock)
        self._lock = threading.Lock()
        self._stream: WatchStream | None = None
        self.last_resource_version = ""
        self.lists = 0
        self.watches = 0

    # -- public ---------------------------------------------------------------------------

    def run(self, stop: threading.Event, *, closer: bool = True) -> None:
        """Blocks until ``stop`` is set. Never raises for API or transport errors.

        A thread of its own closes the open watch when ``stop`` is set; with ``closer=False``
        there is none, and whoever sets ``stop`` then calls :meth:`close_watch` (one thread
        for many reflectors: watcher-loop runs one per pod)."""
        if closer:
            threading.Thread(
                target=self._close_on_stop, args=(stop,), name=f"{self.name}-stop", daemon=True
            ).start()
        while not stop.is_set():
            try:
                self._list_and_watch(stop)
            except _Relist:
                # Like client-go's BackoffUntil, never relist in a tight loop (a watch cache
                # that keeps answering 410, a lagging server's "too large resource version").
                stop.wait(self.backoff.next())
                continue
            except Exception as e:  # every failure ends in a logged backoff
                if stop.is_set():
                    break
                self._pause(e, stop)

    def _pause(self, e: BaseException, stop: threading.Event) -> None:
        wait = self.backoff.next()
        if isinstance(e, TooManyRequests) and e.retry_after:
            wait = max(wait, e.retry_after)
        log.warning(
            "list/watch failed; backing off",
            reflector=self.name,
            error=str(e),
            error_type=type(e).__name__,
            retry_in=round(wait, 3),
        )
        stop.wait(wait)

    # -- internals ------------------------------------------------------------------------

    def close_watch(self) -> None:
        """Close the open watch, if any: called after ``stop`` is set, it ends :meth:`run`'s
        wait on the stream (a watch opened after this sees ``stop`` and closes itself)."""
        with self._lock:
            stream = self._stream
        if stream is not None:
            stream.close()

    def _close_on_stop(self, stop: threading.Event) -> None:
        stop.wait()
        self.close_watch()

    def _list_and_watch(self, stop: threading.Event) -> None:
        items, rv = self.lw.list()
        self.lists += 1
        self.sink.on_list(items, rv)
        self.last_resource_version = rv
        while not stop.is_set():
            timeout = int(self.min_watch_timeout * (1.0 + random.random()))
            opened = self._clock.now()
            try:
                stream = self.lw.watch(
                    self.last_resource_version, timeout, timeout + self.read_timeout_margin
                )
            except ApiError as e:
                if is_expired(e) or is_too_large_resource_version(e):
                    log.info("watch cannot resume; relisting", reflector=self.name, error=str(e))
                    raise _Relist() from e
                if isinstance(e, TooManyRequests) or e.status >= 500:
                    self._pause(e, stop)
                    continue
                raise
            except TransportError as e:
                self._pause(e, stop)
                continue
            self.watches += 1
            with self._lock:
                self._stream = stream
            if stop.is_set():
                stream.close()
                return
            try:
                events = self._consume(stream, stop)
            except ApiError as e:
                if is_expired(e) or is_too_large_resource_version(e):
                    log.info("watch expired; relisting", reflector=self.name, error=str(e))
                    raise _Relist() from e
                raise
            except TransportError as e:
                if stop.is_set():
                    return
                # Re-watch from the last resourceVersion after a pause; a 410 then relists.
                self._pause(e, stop)
                continue
            finally:
                stream.close()
                with self._lock:
                    self._stream = None
            if stop.is_set():
                return
            if events == 0 and self._clock.now() - opened < self.short_watch:
                # The server keeps closing at once: back off instead of spinning.
                self._pause(TransportError("watch closed immediately with no events"), stop)
                continue
            self.backoff.reset()

    def _consume(self, stream: WatchStream, stop: threading.Event) -> int:
        n = 0
        for event in stream:
            if stop.is_set():
                break
            etype = event.get("type")
            obj = event.get("object")
            if etype == "ERROR":
                status = obj if isinstance(obj, dict) else {}
                raise error_from_status(int(status.get("code") or 500), status)
            if not isinstance(obj, dict):
                log.warning("watch event without object", reflector=self.name, type=etype)
                continue
            rv = _rv(obj)
            if etype == "BOOKMARK":
                if rv:
                    self.last_resource_version = rv
                continue
            if etype == "ADDED":
                self.sink.on_added(obj)
            elif etype == "MODIFIED":
                self.sink.on_modified(obj)
            elif etype == "DELETED":
                self.sink.on_deleted(obj)
            else:
                log.warning("unknown watch event type", reflector=self.name, type=etype)
                continue
            n += 1
            if rv:
                self.last_resource_version = rv
        return n
