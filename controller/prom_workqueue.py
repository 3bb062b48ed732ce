"""Prometheus metrics for work queues, named as client-go / controller-runtime name them."""

from __future__ import annotations

import threading
import weakref
from dataclasses import dataclass

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge, Histogram

from workqueue import (
    CounterMetric,
    GaugeMetric,
    HistogramMetric,
    SettableGaugeMetric,
)

DURATION_BUCKETS = tuple(float(f"1e{exp}") for exp in range(-8, 2))
"""1e-8 s .. 10 s, one bucket per power of ten (ExponentialBuckets(10e-9, 10, 10))."""


@dataclass(frozen=True)
class _Families:
    depth: Gauge
    adds: Counter
    latency: Histogram
    work_duration: Histogram
    unfinished_work: Gauge
    longest_running: Gauge
    retries: Counter


def _new_families(registry: CollectorRegistry) -> _Families:
    labels = ("name",)
    return _Families(
        depth=Gauge("workqueue_depth", "Current depth of workqueue", labels, registry=registry),
        adds=Counter(
            "workqueue_adds_total",
            "Total number of adds handled by workqueue",
            labels,
            registry=registry,
        ),
        latency=Histogram(
            "workqueue_queue_duration_seconds",
            "How long in seconds an item stays in workqueue before being requested",
            labels,
            registry=registry,
            buckets=DURATION_BUCKETS,
        ),
        work_duration=Histogram(
            "workqueue_work_duration_seconds",
            "How long in seconds processing an item from workqueue takes",
            labels,
            registry=registry,
            buckets=DURATION_BUCKETS,
        ),
        unfinished_work=Gauge(
            "workqueue_unfinished_work_seconds",
            "Seconds of work in progress not yet observed by work_duration; large values "
            "indicate stuck threads",
            labels,
            registry=registry,
        ),
        longest_running=Gauge(
            "workqueue_longest_running_processor_seconds",
            "How many seconds the longest running processor for workqueue has been running",
            labels,
            registry=registry,
        ),
        retries=Counter(
            "workqueue_retries_total",
            "Total number of retries handled by workqueue",
            labels,
            registry=registry,
        ),
    )


# Families are registered once per registry, however many providers point at it.
_families_lock = threading.Lock()
_families_by_registry: weakref.WeakKeyDictionary[CollectorRegistry, _Families] = (
    weakref.WeakKeyDictionary()
)


def _families_for(registry: CollectorRegistry) -> _Families:
    with _families_lock:
        families = _families_by_registry.get(registry)
        if families is None:
            families = _families_by_registry[registry] = _new_families(registry)
        return families


class PrometheusWorkqueueMetricsProvider:
    """``workqueue.MetricsProvider`` exporting ``workqueue_*`` metrics labelled by queue name."""

    def __init__(self, registry: CollectorRegistry = REGISTRY) -> None:
        self._families = _families_for(registry)

    def new_depth_metric(self, name: str) -> GaugeMetric:
        return self._families.depth.labels(name=name)

    def new_adds_metric(self, name: str) -> CounterMetric:
        return self._families.adds.labels(name=name)

    def new_latency_metric(self, name: str) -> HistogramMetric:
        return self._families.latency.labels(name=name)

    def new_work_duration_metric(self, name: str) -> HistogramMetric:
        return self._families.work_duration.labels(name=name)

    def new_unfinished_work_seconds_metric(self, name: str) -> SettableGaugeMetric:
        return self._families.unfinished_work.labels(name=name)

    def new_longest_running_processor_seconds_metric(self, name: str) -> SettableGaugeMetric:
        return self._families.longest_running.labels(name=name)

    def new_retries_metric(self, name: str) -> CounterMetric:
        return self._families.retries.labels(name=name)
