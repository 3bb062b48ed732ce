from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest

from clock import FakeClock
from tests.support.waiting import wait_for
from tests.workqueue.helpers import take, thread_alive
from workqueue import DelayingQueue, NoopMetricsProvider, Queue, RateLimitingQueue


class RecordingMetric:
    def __init__(self) -> None:
        self.value = 0.0
        self.observations: list[float] = []

    def inc(self) -> None:
        self.value += 1

    def dec(self) -> None:
        self.value -= 1

    def set(self, value: float, /) -> None:
        self.value = value

    def observe(self, value: float, /) -> None:
        self.observations.append(value)


class RecordingProvider:
    """Records every metric created, by (kind, queue name)."""

    def __init__(self) -> None:
        self.metrics: dict[tuple[str, str], RecordingMetric] = {}
        self._lock = threading.Lock()

    def _new(self, kind: str, name: str) -> RecordingMetric:
        with self._lock:
            return self.metrics.setdefault((kind, name), RecordingMetric())

    def new_depth_metric(self, name: str) -> RecordingMetric:
        return self._new("depth", name)

    def new_adds_metric(self, name: str) -> RecordingMetric:
        return self._new("adds", name)

    def new_latency_metric(self, name: str) -> RecordingMetric:
        return self._new("latency", name)

    def new_work_duration_metric(self, name: str) -> RecordingMetric:
        return self._new("work_duration", name)

    def new_unfinished_work_seconds_metric(self, name: str) -> RecordingMetric:
        return self._new("unfinished_work", name)

    def new_longest_running_processor_seconds_metric(self, name: str) -> RecordingMetric:
        return self._new("longest_running", name)

    def new_retries_metric(self, name: str) -> RecordingMetric:
        return self._new("retries", name)


@pytest.fixture
def provider() -> RecordingProvider:
    return RecordingProvider()


Track = Callable[[Any], Any]


def test_depth_adds_latency_and_work_duration(
    clock: FakeClock, provider: RecordingProvider, track: Track
) -> None:
    q: Queue[str] = track(Queue("jobs", clock=clock, metrics_provider=provider))
    depth = provider.metrics["depth", "jobs"]
    adds = provider.metrics["adds", "jobs"]
    latency = provider.metrics["latency", "jobs"]
    work = provider.metrics["work_duration", "jobs"]

    q.add("a")
    q.add("b")
    q.add("a")  # deduplicated: not counted
    assert (adds.value, depth.value) == (2, 2)

    clock.step(1.0)
    take(q)  # "a" waited 1 s
    assert depth.value == 1
    assert latency.observations == [1.0]

    clock.step(2.0)
    q.done("a")  # "a" was processed for 2 s
    assert work.observations == [2.0]

    take(q)  # "b" waited 3 s
    q.add("b")  # deferred while processing, but counted (it is dirty)
    assert (adds.value, depth.value) == (3, 1)
    clock.step(0.5)
    q.done("b")
    take(q)  # the deferred add waited 0.5 s, since it was made
    assert depth.value == 0
    assert latency.observations == [1.0, 3.0, 0.5]
    assert work.observations == [2.0, 0.5]


def test_unfinished_work_and_longest_running_processor(
    clock: FakeClock, provider: RecordingProvider, track: Track
) -> None:
    q: Queue[str] = track(Queue("jobs", clock=clock, metrics_provider=provider))
    unfinished = provider.metrics["unfinished_work", "jobs"]
    longest = provider.metrics["longest_running", "jobs"]
    q.add("a")
    q.add("b")
    take(q)  # "a" starts at t=0
    clock.step(0.25)
    take(q)  # "b" starts at t=0.25
    clock.step(0.25)  # the 0.5 s update period elapses
    wait_for(lambda: unfinished.value == pytest.approx(0.75), what="unfinished work 0.5 + 0.25")
    assert longest.value == pytest.approx(0.5)

    q.done("a")
    q.done("b")
    clock.step(0.5)
    wait_for(lambda: unfinished.value == 0.0, what="unfinished work back to 0")
    assert longest.value == 0.0


def test_retries_are_counted(clock: FakeClock, provider: RecordingProvider, track: Track) -> None:
    q: RateLimitingQueue[str] = track(
        RateLimitingQueue("jobs", clock=clock, metrics_provider=provider)
    )
    retries = provider.metrics["retries", "jobs"]
    q.add_rate_limited("a")
    q.add_rate_limited("b")
    assert retries.value == 2
    q.add_after("c", 1.0)  # as in client-go, every add_after counts as a retry
    assert retries.value == 3
    q.add("d")
    assert retries.value == 3


def test_metrics_and_background_thread_stop_on_shut_down(
    clock: FakeClock, provider: RecordingProvider
) -> None:
    q = DelayingQueue[str]("stopping", clock=clock, metrics_provider=provider)
    assert thread_alive("workqueue-metrics[stopping]")
    q.shut_down()
    wait_for(
        lambda: not thread_alive("workqueue-metrics[stopping]"), what="the metrics thread to exit"
    )


def test_unnamed_queue_or_noop_provider_has_no_metrics(
    clock: FakeClock, provider: RecordingProvider, track: Track
) -> None:
    unnamed: Queue[str] = track(Queue(clock=clock, metrics_provider=provider))
    noop: Queue[str] = track(Queue("noop", clock=clock, metrics_provider=NoopMetricsProvider()))
    for q in (unnamed, noop):
        q.add("a")
        take(q)
        q.done("a")
    assert provider.metrics == {}
    assert not thread_alive("workqueue-metrics[]")
    assert not thread_alive("workqueue-metrics[noop]")
