"""Metrics provider interface (no Prometheus dependency) and the per-queue metrics bookkeeping."""

from __future__ import annotations

from collections.abc import Hashable
from typing import Generic, Protocol, TypeVar

from clock import Clock

T = TypeVar("T", bound=Hashable)


class GaugeMetric(Protocol):
    """A value that goes up and down."""

    def inc(self) -> None: ...

    def dec(self) -> None: ...

    def set(self, value: float, /) -> None: ...


class SettableGaugeMetric(Protocol):
    """A gauge that is only ever set."""

    def set(self, value: float, /) -> None: ...


class CounterMetric(Protocol):
    """A monotonically increasing count."""

    def inc(self) -> None: ...


class HistogramMetric(Protocol):
    """A distribution of observed values (seconds here)."""

    def observe(self, value: float, /) -> None: ...


class MetricsProvider(Protocol):
    """Creates the metrics of one queue, identified by its name."""

    def new_depth_metric(self, name: str) -> GaugeMetric: ...

    def new_adds_metric(self, name: str) -> CounterMetric: ...

    def new_latency_metric(self, name: str) -> HistogramMetric: ...

    def new_work_duration_metric(self, name: str) -> HistogramMetric: ...

    def new_unfinished_work_seconds_metric(self, name: str) -> SettableGaugeMetric: ...

    def new_longest_running_processor_seconds_metric(self, name: str) -> SettableGaugeMetric: ...

    def new_retries_metric(self, name: str) -> CounterMetric: ...


class _NoopMetric:
    def inc(self) -> None:
        pass

    def dec(self) -> None:
        pass

    def set(self, value: float, /) -> None:
        pass

    def observe(self, value: float, /) -> None:
        pass


_NOOP = _NoopMetric()


class NoopMetricsProvider:
    """Provider whose metrics discard everything; queues skip metrics entirely with it."""

    def new_depth_metric(self, name: str) -> GaugeMetric:
        return _NOOP

    def new_adds_metric(self, name: str) -> CounterMetric:
        return _NOOP

    def new_latency_metric(self, name: str) -> HistogramMetric:
        return _NOOP

    def new_work_duration_metric(self, name: str) -> HistogramMetric:
        return _NOOP

    def new_unfinished_work_seconds_metric(self, name: str) -> SettableGaugeMetric:
        return _NOOP

    def new_longest_running_processor_seconds_metric(self, name: str) -> SettableGaugeMetric:
        return _NOOP

    def new_retries_metric(self, name: str) -> CounterMetric:
        return _NOOP


def _active(provider: MetricsProvider | None, name: str) -> MetricsProvider | None:
    # As in client-go, an unnamed queue or the noop provider means "no metrics at all".
    if provider is None or not name or isinstance(provider, NoopMetricsProvider):
        return None
    return provider


class QueueMetrics(Generic[T]):
    """Metrics bookkeeping of one queue; the queue calls it with its lock held.

    Tracks when each item was added (for queue latency) and when its processing started (for
    work duration, unfinished work and the longest running processor).
    """

    def __init__(self, provider: MetricsProvider, name: str, clock: Clock) -> None:
        self._clock = clock
        self._depth = provider.new_depth_metric(name)
        self._adds = provider.new_adds_metric(name)
        self._latency = provider.new_latency_metric(name)
        self._work_duration = provider.new_work_duration_metric(name)
        self._unfinished_work = provider.new_unfinished_work_seconds_metric(name)
        self._longest_running = provider.new_longest_running_processor_seconds_metric(name)
        self._add_times: dict[T, float] = {}
        self._processing_start_times: dict[T, float] = {}

    def add(self, item: T) -> None:
        self._adds.inc()
        self._depth.inc()
        self._add_times.setdefault(item, self._clock.now())

    def get(self, item: T) -> None:
        now = self._clock.now()
        self._depth.dec()
        self._processing_start_times[item] = now
        added = self._add_times.pop(item, None)
        if added is not None:
            self._latency.observe(now - added)

    def done(self, item: T) -> None:
        started = self._processing_start_times.pop(item, None)
        if started is not None:
            self._work_duration.observe(self._clock.now() - started)

    def update_unfinished_work(self) -> None:
        now = self._clock.now()
        ages = [now - started for started in self._processing_start_times.values()]
        self._unfinished_work.set(sum(ages))
        self._longest_running.set(max(ages, default=0.0))


def new_queue_metrics(
    provider: MetricsProvider | None, name: str, clock: Clock
) -> QueueMetrics[T] | None:
    """The queue's metrics, or None when disabled (which keeps them off the hot path)."""
    active = _active(provider, name)
    return None if active is None else QueueMetrics(active, name, clock)


def new_retries_metric(provider: MetricsProvider | None, name: str) -> CounterMetric | None:
    """The delaying queue's retries counter, or None when metrics are disabled."""
    active = _active(provider, name)
    return None if active is None else active.new_retries_metric(name)
