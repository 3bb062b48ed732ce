"""Delaying queue: ``add_after`` re-adds an item once a delay has passed on the queue's clock."""

from __future__ import annotations

import heapq
import itertools
import threading
from collections.abc import Hashable
from typing import TypeVar

from clock import Clock
from workqueue.metrics import CounterMetric, MetricsProvider, new_retries_metric
from workqueue.queue import Queue

T = TypeVar("T", bound=Hashable)


class DelayingQueue(Queue[T]):
    """A ``Queue`` whose items can also be added after a delay.

    A daemon thread keeps waiting items in a min-heap by ready time and ``add``s them when due.
    An item waits at most once: if it is already waiting, the earlier ready time wins.
    """

    def __init__(
        self,
        name: str = "",
        *,
        clock: Clock | None = None,
        metrics_provider: MetricsProvider | None = None,
    ) -> None:
        super().__init__(name, clock=clock, metrics_provider=metrics_provider)
        self._retries: CounterMetric | None = new_retries_metric(metrics_provider, name)
        self._waiting_cond = threading.Condition()
        self._waiting_stopped = False
        # Min-heap of (ready_at, seq, item). _waiting maps each waiting item to its live
        # (ready_at, seq); heap entries superseded by an earlier ready time are stale and skipped.
        self._heap: list[tuple[float, int, T]] = []
        self._waiting: dict[T, tuple[float, int]] = {}
        self._seq = itertools.count()
        self._waiting_thread = threading.Thread(
            target=self._waiting_loop, name=f"workqueue-waiting[{name}]", daemon=True
        )
        self._waiting_thread.start()

    def add_after(self, item: T, delay: float) -> None:
        """Add ``item`` once ``delay`` seconds have passed; ``delay <= 0`` adds it now."""
        if self.shutting_down():
            return
        if self._retries is not None:
            self._retries.inc()
        if delay <= 0:
            self.add(item)
            return
        with self._waiting_cond:
            if self._waiting_stopped:
                return
            ready_at = self._clock.now() + delay
            current = self._waiting.get(item)
            if current is not None and current[0] <= ready_at:
                return  # never postpone an item that is already waiting
            seq = next(self._seq)
            self._waiting[item] = (ready_at, seq)
            heapq.heappush(self._heap, (ready_at, seq, item))
            if self._heap[0][1] == seq:
                self._waiting_cond.notify()  # new earliest deadline: re-arm the wait

    def ready_at(self, item: T) -> float | None:
        """When the waiting ``item`` will be added (the queue clock's ``now()``), or None
        when it is not waiting."""
        with self._waiting_cond:
            waiting = self._waiting.get(item)
        return None if waiting is None else waiting[0]

    def shut_down(self) -> None:
        super().shut_down()
        self._stop_waiting()

    def shut_down_with_drain(self) -> None:
        self._stop_waiting()
        super().shut_down_with_drain()

    def _stop_waiting(self) -> None:
        with self._waiting_cond:
            self._waiting_stopped = True
            self._waiting_cond.notify_all()

    def _pop_ready_locked(self, now: float) -> list[T]:
        """Remove and return the items due at ``now``, in ready-time order; drop stale tops."""
        ready: list[T] = []
        heap = self._heap
        while heap:
            ready_at, seq, item = heap[0]
            if self._waiting.get(item) != (ready_at, seq):
                heapq.heappop(heap)
            elif ready_at <= now:
                heapq.heappop(heap)
                del self._waiting[item]
                ready.append(item)
            else:
                break
        return ready

    def _waiting_loop(self) -> None:
        while True:
            with self._waiting_cond:
                if self._waiting_stopped:
                    return
                now = self._clock.now()
                ready = self._pop_ready_locked(now)
                if not ready:
                    timeout = self._heap[0][0] - now if self._heap else None
                    self._clock.wait(self._waiting_cond, timeout)
                    continue
            for item in ready:
                self.add(item)
