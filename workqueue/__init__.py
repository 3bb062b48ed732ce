"""Controller work queues, a port of client-go's util/workqueue (standard library only)."""

from workqueue.clock import Clock, FakeClock, RealClock
from workqueue.delaying import DelayingQueue
from workqueue.limiters import (
    BucketRateLimiter,
    ItemExponentialFailureRateLimiter,
    ItemFastSlowRateLimiter,
    MaxOfRateLimiter,
    RateLimiter,
    default_controller_rate_limiter,
)
from workqueue.metrics import (
    CounterMetric,
    GaugeMetric,
    HistogramMetric,
    MetricsProvider,
    NoopMetricsProvider,
    SettableGaugeMetric,
)
from workqueue.queue import Queue
from workqueue.rate_limiting import RateLimitingQueue

__all__ = [
    "BucketRateLimiter",
    "Clock",
    "CounterMetric",
    "DelayingQueue",
    "FakeClock",
    "GaugeMetric",
    "HistogramMetric",
    "ItemExponentialFailureRateLimiter",
    "ItemFastSlowRateLimiter",
    "MaxOfRateLimiter",
    "MetricsProvider",
    "NoopMetricsProvider",
    "Queue",
    "RateLimiter",
    "RateLimitingQueue",
    "RealClock",
    "SettableGaugeMetric",
    "default_controller_rate_limiter",
]
