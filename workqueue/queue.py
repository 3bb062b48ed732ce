"""Work queue: FIFO with dedup that never hands one item to two workers at once."""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Hashable
from typing import Generic, TypeVar

from clock import Clock, RealClock
from workqueue.metrics import MetricsProvider, QueueMetrics, new_queue_metrics

T = TypeVar("T", bound=Hashable)

UNFINISHED_WORK_UPDATE_PERIOD = 0.5
"""Seconds (of the queue's clock) between updates of the unfinished-work metrics."""


class Queue(Generic[T]):
    """A FIFO of hashable items with a ``dirty`` set (to do) and a ``processing`` set.

    * ``add`` of an item already waiting is a no-op; of an item being processed, it is deferred
      until ``done`` (so many adds collapse into one more pass, never a concurrent one).
    * ``get`` blocks until an item is available or the queue is shut down; workers must call
      ``done`` for every item they got, preferably in a ``finally``.
    """

    def __init__(
        self,
        name: str = "",
        *,
        clock: Clock | None = None,
        metrics_provider: MetricsProvider | None = None,
    ) -> None:
        self.name = name
        self._clock: Clock = clock if clock is not None else RealClock()
        self._queue: deque[T] = deque()
        self._dirty: set[T] = set()
        self._processing: set[T] = set()
        self._shutting_down = False
        self._drain = False
        # One lock, one condition per kind of waiter so a notify always reaches the right one.
        self._lock = threading.Lock()
        self._item_ready = threading.Condition(self._lock)  # getters
        self._idle = threading.Condition(self._lock)  # shut_down_with_drain
        self._stopped = threading.Condition(self._lock)  # unfinished-work loop
        self._getters_waiting = 0  # lets add/done skip notify() when nobody waits
        self._metrics: QueueMetrics[T] | None = new_queue_metrics(
            metrics_provider, name, self._clock
        )
        if self._metrics is not None:
            first_tick = self._clock.now() + UNFINISHED_WORK_UPDATE_PERIOD
            threading.Thread(
                target=self._update_unfinished_work_loop,
                args=(first_tick,),
                name=f"workqueue-metrics[{name}]",
                daemon=True,
            ).start()

    def add(self, item: T) -> None:
        """Mark ``item`` as needing processing."""
        with self._lock:
            if self._shutting_down or item in self._dirty:
                return
            if self._metrics is not None:
                self._metrics.add(item)
            self._dirty.add(item)
            if item in self._processing:
                return  # re-queued by done()
            self._queue.append(item)
            if self._getters_waiting:
                self._item_ready.notify()

    def __len__(self) -> int:
        with self._lock:
            return len(self._queue)

    def get(self) -> tuple[T | None, bool]:
        """Block until an item can be processed; return ``(item, False)``.

        Returns ``(None, True)`` once the queue is shut down and empty.
        """
        with self._lock:
            while not self._queue and not self._shutting_down:
                self._getters_waiting += 1
                try:
                    self._item_ready.wait()
                finally:
                    self._getters_waiting -= 1
            if not self._queue:
                return None, True
            item = self._queue.popleft()
            if self._metrics is not None:
                self._metrics.get(item)
            self._processing.add(item)
            self._dirty.discard(item)
            return item, False

    def done(self, item: T) -> None:
        """Mark ``item`` as processed; if it was added meanwhile, queue it again."""
        with self._lock:
            if self._metrics is not None:
                self._metrics.done(item)
            self._processing.discard(item)
            if item in self._dirty:
                self._queue.append(item)
                if self._getters_waiting:
                    self._item_ready.notify()
            if self._drain and not self._processing:
                self._idle.notify_all()

    def shut_down(self) -> None:
        """Ignore further adds and wake every waiter; getters drain what is left, then stop."""
        with self._lock:
            self._drain = False
            self._shut_down_locked()

    def shut_down_with_drain(self) -> None:
        """Like ``shut_down`` but block until every item handed out has been ``done``.

        A concurrent ``shut_down`` ends the wait early.
        """
        with self._lock:
            self._drain = True
            self._shut_down_locked()
            while self._processing and self._drain:
                self._idle.wait()

    def shutting_down(self) -> bool:
        with self._lock:
            return self._shutting_down

    def _shut_down_locked(self) -> None:
        self._shutting_down = True
        self._item_ready.notify_all()
        self._idle.notify_all()
        self._stopped.notify_all()

    def _update_unfinished_work_loop(self, next_tick: float) -> None:
        with self._lock:
            while not self._shutting_down:
                now = self._clock.now()
                if now < next_tick:
                    self._clock.wait(self._stopped, next_tick - now)
                    continue
                if self._metrics is not None:
                    self._metrics.update_unfinished_work()
                next_tick = now + UNFINISHED_WORK_UPDATE_PERIOD
