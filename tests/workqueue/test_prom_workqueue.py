from __future__ import annotations

from collections.abc import Callable
from typing import Any

from prometheus_client import CollectorRegistry

from clock import FakeClock
from controller.machinery.prom_workqueue import PrometheusWorkqueueMetricsProvider
from tests.support.waiting import wait_for
from tests.workqueue.helpers import take
from workqueue import ItemExponentialFailureRateLimiter, Queue, RateLimitingQueue

Track = Callable[[Any], Any]


def test_samples_follow_the_queue(clock: FakeClock, track: Track) -> None:
    registry = CollectorRegistry()
    q: RateLimitingQueue[str] = track(
        RateLimitingQueue(
            "jobs",
            clock=clock,
            metrics_provider=PrometheusWorkqueueMetricsProvider(registry),
            rate_limiter=ItemExponentialFailureRateLimiter(1.0, 10.0),
        )
    )

    def sample(name: str, **labels: str) -> float | None:
        return registry.get_sample_value(name, {"name": "jobs", **labels})

    q.add("a")
    q.add("b")
    assert sample("workqueue_adds_total") == 2
    assert sample("workqueue_depth") == 2

    clock.step(2.0)
    take(q)
    assert sample("workqueue_depth") == 1
    assert sample("workqueue_queue_duration_seconds_count") == 1
    assert sample("workqueue_queue_duration_seconds_sum") == 2.0
    assert sample("workqueue_queue_duration_seconds_bucket", le="1.0") == 0
    assert sample("workqueue_queue_duration_seconds_bucket", le="10.0") == 1
    assert sample("workqueue_queue_duration_seconds_bucket", le="+Inf") == 1

    clock.step(0.5)  # an unfinished-work update happens at t=2.5
    wait_for(
        lambda: sample("workqueue_longest_running_processor_seconds") == 0.5,
        what="the longest running processor gauge",
    )
    assert sample("workqueue_unfinished_work_seconds") == 0.5
    q.add_rate_limited("a")
    q.done("a")
    assert sample("workqueue_work_duration_seconds_count") == 1
    assert sample("workqueue_work_duration_seconds_sum") == 0.5
    assert sample("workqueue_retries_total") == 1

    clock.step(1.0)
    wait_for(lambda: sample("workqueue_depth") == 2, what="the rate-limited retry to be queued")


def test_buckets_are_powers_of_ten_from_10ns_to_10s() -> None:
    registry = CollectorRegistry()
    provider = PrometheusWorkqueueMetricsProvider(registry)
    provider.new_latency_metric("q").observe(0.001)
    bounds = [
        s.labels["le"]
        for metric in registry.collect()
        if metric.name == "workqueue_queue_duration_seconds"
        for s in metric.samples
        if s.name.endswith("_bucket")
    ]
    assert bounds == [
        "1e-08", "1e-07", "1e-06", "1e-05", "0.0001", "0.001", "0.01", "0.1", "1.0", "10.0",
        "+Inf",
    ]  # fmt: skip


def test_several_queues_and_providers_share_one_registry(clock: FakeClock, track: Track) -> None:
    registry = CollectorRegistry()
    first: Queue[str] = track(
        Queue("first", clock=clock, metrics_provider=PrometheusWorkqueueMetricsProvider(registry))
    )
    second: Queue[str] = track(
        Queue("second", clock=clock, metrics_provider=PrometheusWorkqueueMetricsProvider(registry))
    )
    first.add("a")
    second.add("a")
    second.add("b")
    assert registry.get_sample_value("workqueue_adds_total", {"name": "first"}) == 1
    assert registry.get_sample_value("workqueue_adds_total", {"name": "second"}) == 2
    # A fresh registry gets its own, empty families.
    other = CollectorRegistry()
    PrometheusWorkqueueMetricsProvider(other).new_adds_metric("first")
    assert other.get_sample_value("workqueue_adds_total", {"name": "first"}) == 0
