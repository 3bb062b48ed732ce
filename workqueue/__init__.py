"""Controller work queues, a port of client-go's util/workqueue (standard library and the
clock package only; their time comes from a ``clock.Clock``)."""

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
    "CounterMetric",
    "DelayingQueue",
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
    "SettableGaugeMetric",
    "default_controller_rate_limiter",
]
