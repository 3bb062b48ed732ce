"""A watch stream of the fake API server and the writes it is fed.

``FakeKube`` keeps every write as an :class:`Event` (its watch history) and offers it to each
open :class:`FakeWatch`, which turns it into what that watch sees: ADDED, MODIFIED or DELETED,
with selector transitions (an object that stops matching is sent as DELETED, one that starts
matching as ADDED). The stream and the fake share one lock (a ``Condition``).
"""

from __future__ import annotations

import copy
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from kubeclient import Obj, Resource, TransportError
from tests.fakekube.selectors import match_field_selector, match_label_selector, object_labels


@dataclass(frozen=True)
class Event:
    """One write as the watch history keeps it: the new object and, for updates, the old one."""

    rv: int
    resource: str
    namespace: str
    type: str
    obj: Obj
    prev: Obj | None


class FakeWatch:
    """A :class:`kubeclient.WatchStream` fed by ``FakeKube``.

    Iterating blocks until an event arrives. The stream ends (``StopIteration``) on
    :meth:`close` (from any thread), when the server-side ``timeout_seconds`` elapses, or after
    ``FakeKube.end_watches`` (events already queued are delivered first). After
    ``FakeKube.break_watches`` it raises :class:`TransportError`; with a ``read_timeout``
    and no event for that long it raises :class:`TransportError` too, like a client read
    timeout on a silent connection.
    """

    def __init__(
        self,
        cond: threading.Condition,
        unregister: Callable[[FakeWatch], None],
        res: Resource,
        namespace: str | None,
        label_selector: str,
        field_selector: str,
        timeout_seconds: int | None,
        read_timeout: float | None,
        allow_bookmarks: bool,
    ) -> None:
        self._cond = cond
        self._unregister = unregister
        self.resource = res
        self.namespace = namespace
        self.label_selector = label_selector
        self.field_selector = field_selector
        self.allow_bookmarks = allow_bookmarks
        self._pending: deque[Obj] = deque()
        self._closed = False  # closed by the client
        self._ended = False  # ended by the server: drain what is queued, then stop
        self._broken = False  # connection broke: raise TransportError
        self._finished = False  # the iterator has ended
        now = time.monotonic()
        self._deadline = now + timeout_seconds if timeout_seconds else None
        self._read_timeout = read_timeout
        self._last_activity = now

    # -- driven by FakeKube, under the shared lock -------------------------------------------

    def accepting(self, now: float) -> bool:
        """Still open: not closed, ended, broken, finished or past its server timeout."""
        if self._closed or self._ended or self._broken or self._finished:
            return False
        return self._deadline is None or now < self._deadline

    def _matches(self, obj: Obj) -> bool:
        if self.label_selector and not match_label_selector(
            self.label_selector, object_labels(obj)
        ):
            return False
        return not self.field_selector or match_field_selector(self.field_selector, obj)

    def push(self, event: Obj) -> None:
        """Queue a raw event (a BOOKMARK, an ERROR)."""
        self._pending.append(event)

    def end(self) -> None:
        """The server ends the stream cleanly: queued events are delivered, then it stops."""
        self._ended = True

    def sever(self) -> None:
        """The connection breaks: the next read raises :class:`TransportError`."""
        self._broken = True

    def offer(self, ev: Event) -> None:
        """Queue what this watch sees of the write ``ev`` (selector transitions included)."""
        if ev.resource != str(self.resource):
            return
        if self.namespace and ev.namespace != self.namespace:
            return
        cur = self._matches(ev.obj)
        if ev.type in ("ADDED", "DELETED") or ev.prev is None:
            if cur:
                self._pending.append({"type": ev.type, "object": ev.obj})
            return
        old = self._matches(ev.prev)
        if cur and old:
            self._pending.append({"type": "MODIFIED", "object": ev.obj})
        elif cur:
            self._pending.append({"type": "ADDED", "object": ev.obj})
        elif old:
            # Like the API server's watch cache: the previous content, the new resourceVersion.
            gone = copy.deepcopy(ev.prev)
            gone.setdefault("metadata", {})["resourceVersion"] = str(ev.rv)
            self._pending.append({"type": "DELETED", "object": gone})

    def _finish(self) -> None:
        self._finished = True
        self._unregister(self)

    # -- WatchStream --------------------------------------------------------------------------

    def __iter__(self) -> Iterator[Obj]:
        return self

    def __next__(self) -> Obj:
        with self._cond:
            while True:
                if self._closed or self._finished:
                    raise StopIteration
                if self._broken:
                    self._finish()
                    raise TransportError(
                        "watch stream broke: ('Connection broken: ConnectionResetError(104, "
                        "'Connection reset by peer')' (fake))"
                    )
                if self._pending:
                    self._last_activity = time.monotonic()
                    return copy.deepcopy(self._pending.popleft())
                if self._ended:
                    self._finish()
                    raise StopIteration
                now = time.monotonic()
                waits: list[float] = []
                if self._deadline is not None:
                    if now >= self._deadline:
                        self._finish()
                        raise StopIteration
                    waits.append(self._deadline - now)
                if self._read_timeout is not None:
                    read_deadline = self._last_activity + self._read_timeout
                    if now >= read_deadline:
                        self._finish()
                        raise TransportError(
                            "watch stream broke: Read timed out. "
                            f"(read timeout={self._read_timeout})"
                        )
                    waits.append(read_deadline - now)
                self._cond.wait(min(waits) if waits else None)

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._pending.clear()
            self._unregister(self)
            self._cond.notify_all()

    def __enter__(self) -> FakeWatch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
