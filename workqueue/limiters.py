"""Rate limiters: how long to wait before an item may be retried."""

from __future__ import annotations

import math
import threading
from collections.abc import Hashable
from typing import Generic, Protocol, TypeVar

from clock import Clock, RealClock

T = TypeVar("T", bound=Hashable)
T_contra = TypeVar("T_contra", bound=Hashable, contravariant=True)


class RateLimiter(Protocol[T_contra]):
    """Decides the retry delay of items."""

    def when(self, item: T_contra) -> float:
        """Seconds to wait before ``item`` is processed again; records one more failure."""
        ...

    def forget(self, item: T_contra) -> None:
        """Stop tracking ``item`` (it succeeded or was given up on)."""
        ...

    def num_requeues(self, item: T_contra) -> int:
        """Number of failures recorded for ``item``."""
        ...


class ItemExponentialFailureRateLimiter:
    """Per-item exponential backoff: ``base_delay * 2**failures``, capped at ``max_delay``."""

    def __init__(self, base_delay: float = 0.005, max_delay: float = 1000.0) -> None:
        self._base_delay = base_delay
        self._max_delay = max_delay
        self._lock = threading.Lock()
        self._failures: dict[Hashable, int] = {}

    def when(self, item: Hashable) -> float:
        with self._lock:
            exp = self._failures.get(item, 0)
            self._failures[item] = exp + 1
        try:
            backoff = math.ldexp(self._base_delay, exp)  # exact base * 2**exp
        except OverflowError:
            return self._max_delay
        return min(backoff, self._max_delay)

    def forget(self, item: Hashable) -> None:
        with self._lock:
            self._failures.pop(item, None)

    def num_requeues(self, item: Hashable) -> int:
        with self._lock:
            return self._failures.get(item, 0)


class BucketRateLimiter:
    """Overall token bucket (``qps`` refill, ``burst`` capacity), shared by all items.

    Like ``golang.org/x/time/rate`` ``Reserve()``: every ``when`` takes a token even if the
    bucket is empty, going into debt, and returns how long until that token exists. It never
    blocks. Items are not tracked, so ``forget`` does nothing and ``num_requeues`` is 0.
    """

    def __init__(self, qps: float = 10.0, burst: int = 100, clock: Clock | None = None) -> None:
        if qps <= 0 or burst < 1:
            raise ValueError(f"need qps > 0 and burst >= 1, got qps={qps} burst={burst}")
        self._qps = qps
        self._burst = burst
        self._clock: Clock = clock if clock is not None else RealClock()
        self._lock = threading.Lock()
        self._tokens = float(burst)
        self._last = self._clock.now()

    def when(self, item: Hashable) -> float:
        if math.isinf(self._qps):
            return 0.0
        with self._lock:
            now = self._clock.now()
            elapsed = max(0.0, now - self._last)
            tokens = min(float(self._burst), self._tokens + elapsed * self._qps) - 1.0
            self._tokens = tokens
            self._last = now
        return -tokens / self._qps if tokens < 0 else 0.0

    def forget(self, item: Hashable) -> None:
        pass

    def num_requeues(self, item: Hashable) -> int:
        return 0


class ItemFastSlowRateLimiter:
    """``fast_delay`` for an item's first ``max_fast_attempts`` failures, then ``slow_delay``."""

    def __init__(self, fast_delay: float, slow_delay: float, max_fast_attempts: int) -> None:
        self._fast_delay = fast_delay
        self._slow_delay = slow_delay
        self._max_fast_attempts = max_fast_attempts
        self._lock = threading.Lock()
        self._failures: dict[Hashable, int] = {}

    def when(self, item: Hashable) -> float:
        with self._lock:
            failures = self._failures.get(item, 0) + 1
            self._failures[item] = failures
        return self._fast_delay if failures <= self._max_fast_attempts else self._slow_delay

    def forget(self, item: Hashable) -> None:
        with self._lock:
            self._failures.pop(item, None)

    def num_requeues(self, item: Hashable) -> int:
        with self._lock:
            return self._failures.get(item, 0)


class MaxOfRateLimiter(Generic[T]):
    """Combines limiters: the longest delay wins; every limiter records every failure."""

    def __init__(self, *limiters: RateLimiter[T]) -> None:
        self._limiters = limiters

    def when(self, item: T) -> float:
        return max([limiter.when(item) for limiter in self._limiters], default=0.0)

    def forget(self, item: T) -> None:
        for limiter in self._limiters:
            limiter.forget(item)

    def num_requeues(self, item: T) -> int:
        return max([limiter.num_requeues(item) for limiter in self._limiters], default=0)


def default_controller_rate_limiter(clock: Clock | None = None) -> MaxOfRateLimiter[Hashable]:
    """client-go's default: per-item exponential 5 ms..1000 s, overall 10 qps with burst 100."""
    return MaxOfRateLimiter(
        ItemExponentialFailureRateLimiter(0.005, 1000.0),
        BucketRateLimiter(qps=10.0, burst=100, clock=clock),
    )
