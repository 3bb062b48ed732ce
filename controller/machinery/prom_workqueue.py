"""Prometheus metrics for work queues, named as client-go / controller-runtime name them.

The queue updates its metrics on every add, get and done, with its lock held; prometheus_client's
own metric objects cost three times the queue itself there (a lock per value, a linear bucket
search, exemplar checks). So the values live in plain fields here (``_Value``, ``_Histogram``
with a bisected bucket; the queue's lock serialises their updates) and a collector turns them
into the ``workqueue_*`` families when Prometheus scrapes, which is rare next to the queue's
traffic.
"""

from __future__ import annotations

import bisect
import threading
import weakref
from collections.abc import Iterator

from prometheus_client import REGISTRY, CollectorRegistry
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from workqueue import (
    CounterMetric,
    GaugeMetric,
    HistogramMetric,
    SettableGaugeMetric,
)

DURATION_BUCKETS = tuple(float(f"1e{exp}") for exp in range(-8, 2))
"""1e-8 s .. 10 s, one bucket per power of ten (ExponentialBuckets(10e-9, 10, 10))."""
_LE = (*(repr(bound) for bound in DURATION_BUCKETS), "+Inf")
"""The buckets' ``le`` labels as prometheus_client writes them (1e-08, 0.0001, 1.0, +Inf)."""


class _Value:
    """A gauge's or counter's value. No lock: the queue updates its metrics with its own lock
    held (``workqueue.metrics.QueueMetrics``), which serialises every update of one queue."""

    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = 0.0

    def inc(self) -> None:
        self.value += 1.0

    def dec(self) -> None:
        self.value -= 1.0

    def set(self, value: float, /) -> None:
        self.value = float(value)


class _LockedValue(_Value):
    """A counter updated outside the queue's lock (retries: ``DelayingQueue.add_after``)."""

    __slots__ = ("_lock",)

    def __init__(self) -> None:
        super().__init__()
        self._lock = threading.Lock()

    def inc(self) -> None:
        with self._lock:
            self.value += 1.0


class _Histogram:
    """Counts per bucket (not cumulative: summed when collected) and the sum; updated with
    the queue's lock held, like ``_Value``."""

    __slots__ = ("counts", "sum")

    def __init__(self) -> None:
        self.counts = [0] * (len(DURATION_BUCKETS) + 1)  # the last: above every bound
        self.sum = 0.0

    def observe(self, value: float, /) -> None:
        self.counts[bisect.bisect_left(DURATION_BUCKETS, value)] += 1  # le: first bound >= value
        self.sum += value

    def snapshot(self) -> tuple[list[tuple[str, float]], float]:
        counts, total = list(self.counts), self.sum
        buckets, running = [], 0
        for le, n in zip(_LE, counts, strict=True):
            running += n
            buckets.append((le, float(running)))
        return buckets, total


# (family name, help, type) of every workqueue family, in exposition order
_FAMILIES = {
    "depth": ("workqueue_depth", "Current depth of workqueue", "gauge"),
    "adds": ("workqueue_adds", "Total number of adds handled by workqueue", "counter"),
    "latency": (
        "workqueue_queue_duration_seconds",
        "How long in seconds an item stays in workqueue before being requested",
        "histogram",
    ),
    "work_duration": (
        "workqueue_work_duration_seconds",
        "How long in seconds processing an item from workqueue takes",
        "histogram",
    ),
    "unfinished_work": (
        "workqueue_unfinished_work_seconds",
        "Seconds of work in progress not yet observed by work_duration; large values "
        "indicate stuck threads",
        "gauge",
    ),
    "longest_running": (
        "workqueue_longest_running_processor_seconds",
        "How many seconds the longest running processor for workqueue has been running",
        "gauge",
    ),
    "retries": ("workqueue_retries", "Total number of retries handled by workqueue", "counter"),
}


class WorkqueueCollector(Collector):
    """The values of every queue pointed at one registry, collected as ``workqueue_*``."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        # family key -> queue name -> value (one per queue name, however often it is asked
        # for: two live queues of one name in one registry would share, and race on, it)
        self._values: dict[str, dict[str, _Value | _Histogram]] = {k: {} for k in _FAMILIES}

    def value(self, family: str, name: str) -> _Value:
        out = self._child(family, name, _LockedValue if family == "retries" else _Value)
        assert isinstance(out, _Value)
        return out

    def histogram(self, family: str, name: str) -> _Histogram:
        out = self._child(family, name, _Histogram)
        assert isinstance(out, _Histogram)
        return out

    def _child(self, family: str, name: str, make: type[_Value] | type[_Histogram]) -> object:
        with self._lock:
            children = self._values[family]
            if name not in children:
                children[name] = make()
            return children[name]

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            values = {k: dict(v) for k, v in self._values.items()}
        for key, (family, help_text, kind) in _FAMILIES.items():
            metric: CounterMetricFamily | GaugeMetricFamily | HistogramMetricFamily
            if kind == "histogram":
                metric = HistogramMetricFamily(family, help_text, labels=["name"])
                for name, child in sorted(values[key].items()):
                    assert isinstance(child, _Histogram)
                    buckets, total = child.snapshot()
                    metric.add_metric([name], buckets, total)
            else:
                make = CounterMetricFamily if kind == "counter" else GaugeMetricFamily
                metric = make(family, help_text, labels=["name"])
                for name, child in sorted(values[key].items()):
                    assert isinstance(child, _Value)
                    metric.add_metric([name], child.value)
            yield metric

    def describe(self) -> Iterator[Metric]:
        return self.collect()  # (a registry asks once, to reserve the names)


# One collector per registry, however many providers point at it.
_collectors_lock = threading.Lock()
_collectors: weakref.WeakKeyDictionary[CollectorRegistry, WorkqueueCollector] = (
    weakref.WeakKeyDictionary()
)


def _collector_for(registry: CollectorRegistry) -> WorkqueueCollector:
    with _collectors_lock:
        collector = _collectors.get(registry)
        if collector is None:
            collector = _collectors[registry] = WorkqueueCollector()
            registry.register(collector)
        return collector


class PrometheusWorkqueueMetricsProvider:
    """``workqueue.MetricsProvider`` exporting ``workqueue_*`` metrics labelled by queue name."""

    def __init__(self, registry: CollectorRegistry = REGISTRY) -> None:
        self._collector = _collector_for(registry)

    def new_depth_metric(self, name: str) -> GaugeMetric:
        return self._collector.value("depth", name)

    def new_adds_metric(self, name: str) -> CounterMetric:
        return self._collector.value("adds", name)

    def new_latency_metric(self, name: str) -> HistogramMetric:
        return self._collector.histogram("latency", name)

    def new_work_duration_metric(self, name: str) -> HistogramMetric:
        return self._collector.histogram("work_duration", name)

    def new_unfinished_work_seconds_metric(self, name: str) -> SettableGaugeMetric:
        return self._collector.value("unfinished_work", name)

    def new_longest_running_processor_seconds_metric(self, name: str) -> SettableGaugeMetric:
        return self._collector.value("longest_running", name)

    def new_retries_metric(self, name: str) -> CounterMetric:
        return self._collector.value("retries", name)
