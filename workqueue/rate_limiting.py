"""Rate-limiting queue: retries go through a ``RateLimiter`` before re-entering the queue."""

from __future__ import annotations

from collections.abc import Hashable
from typing import TypeVar

from clock import Clock
from workqueue.delaying import DelayingQueue
from workqueue.limiters import RateLimiter, default_controller_rate_limiter
from workqueue.metrics import MetricsProvider

T = TypeVar("T", bound=Hashable)


class RateLimitingQueue(DelayingQueue[T]):
    """A ``DelayingQueue`` with ``add_rate_limited``/``forget``/``num_requeues``.

    Typical worker: on error ``add_rate_limited(key)``, on success ``forget(key)``, and always
    ``done(key)``.
    """

    def __init__(
        self,
        name: str = "",
        *,
        clock: Clock | None = None,
        metrics_provider: MetricsProvider | None = None,
        rate_limiter: RateLimiter[T] | None = None,
    ) -> None:
        super().__init__(name, clock=clock, metrics_provider=metrics_provider)
        self._rate_limiter: RateLimiter[T] = (
            rate_limiter if rate_limiter is not None else default_controller_rate_limiter(clock)
        )

    def add_rate_limited(self, item: T) -> None:
        """Add ``item`` after the delay the rate limiter asks for (counted as a retry)."""
        self.add_after(item, self._rate_limiter.when(item))

    def forget(self, item: T) -> None:
        """Clear the rate limiter's memory of ``item``; ``done`` must still be called."""
        self._rate_limiter.forget(item)

    def num_requeues(self, item: T) -> int:
        """How many times ``item`` has been rate-limited since it was last forgotten."""
        return self._rate_limiter.num_requeues(item)
