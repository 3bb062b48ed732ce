from __future__ import annotations

import pytest

from clock import FakeClock
from workqueue import (
    BucketRateLimiter,
    ItemExponentialFailureRateLimiter,
    ItemFastSlowRateLimiter,
    MaxOfRateLimiter,
    default_controller_rate_limiter,
)


def test_exponential_doubles_per_failure_per_item() -> None:
    limiter = ItemExponentialFailureRateLimiter(0.005, 1000.0)
    assert [limiter.when("a") for _ in range(5)] == [0.005, 0.01, 0.02, 0.04, 0.08]
    assert limiter.num_requeues("a") == 5
    assert limiter.when("b") == 0.005, "items are tracked separately"
    assert limiter.num_requeues("b") == 1


def test_exponential_forget_resets() -> None:
    limiter = ItemExponentialFailureRateLimiter(0.005, 1000.0)
    limiter.when("a")
    limiter.when("a")
    limiter.forget("a")
    assert limiter.num_requeues("a") == 0
    assert limiter.when("a") == 0.005
    limiter.forget("never-seen")  # no error


def test_exponential_is_capped_and_never_overflows() -> None:
    limiter = ItemExponentialFailureRateLimiter(1.0, 10.0)
    assert [limiter.when("a") for _ in range(6)] == [1.0, 2.0, 4.0, 8.0, 10.0, 10.0]
    for _ in range(3000):  # 2**3000 does not fit in a float
        delay = limiter.when("a")
    assert delay == 10.0
    assert limiter.num_requeues("a") == 3006


def test_exponential_defaults_match_client_go() -> None:
    limiter = ItemExponentialFailureRateLimiter()
    assert limiter.when("a") == 0.005
    for _ in range(100):
        limiter.when("a")
    assert limiter.when("a") == 1000.0


def test_bucket_burst_is_free_then_debt_grows() -> None:
    clock = FakeClock()
    limiter = BucketRateLimiter(qps=10.0, burst=100, clock=clock)
    assert [limiter.when(i) for i in range(100)] == [0.0] * 100
    assert [limiter.when("x") for _ in range(3)] == pytest.approx([0.1, 0.2, 0.3])
    assert limiter.num_requeues("x") == 0
    limiter.forget("x")  # no-op: the bucket is shared


def test_bucket_refills_with_time() -> None:
    clock = FakeClock()
    limiter = BucketRateLimiter(qps=4.0, burst=100, clock=clock)  # 0.25 s per token, exact
    for i in range(103):
        limiter.when(i)  # 3 tokens of debt
    clock.step(0.75)  # repays the debt exactly
    assert limiter.when("x") == 0.25
    clock.step(1.5)  # 6 tokens: 1 repays the debt, 5 are free
    assert [limiter.when("x") for _ in range(5)] == [0.0] * 5
    assert limiter.when("x") == 0.25


def test_bucket_refill_is_capped_at_burst() -> None:
    clock = FakeClock()
    limiter = BucketRateLimiter(qps=10.0, burst=5, clock=clock)
    clock.step(1000.0)
    assert [limiter.when("x") for _ in range(5)] == [0.0] * 5
    assert limiter.when("x") == pytest.approx(0.1)


@pytest.mark.parametrize("qps,burst", [(0.0, 10), (-1.0, 10), (10.0, 0)])
def test_bucket_rejects_invalid_arguments(qps: float, burst: int) -> None:
    with pytest.raises(ValueError):
        BucketRateLimiter(qps=qps, burst=burst)


def test_fast_slow() -> None:
    limiter = ItemFastSlowRateLimiter(fast_delay=0.01, slow_delay=10.0, max_fast_attempts=3)
    assert [limiter.when("a") for _ in range(5)] == [0.01, 0.01, 0.01, 10.0, 10.0]
    assert limiter.num_requeues("a") == 5
    assert limiter.when("b") == 0.01
    limiter.forget("a")
    assert limiter.num_requeues("a") == 0
    assert limiter.when("a") == 0.01


def test_max_of_takes_the_longest_delay_and_tracks_in_all() -> None:
    fast_slow = ItemFastSlowRateLimiter(fast_delay=0.05, slow_delay=10.0, max_fast_attempts=2)
    exponential = ItemExponentialFailureRateLimiter(0.01, 100.0)
    limiter = MaxOfRateLimiter(fast_slow, exponential)
    # exponential: 0.01 0.02 0.04 0.08; fast/slow: 0.05 0.05 10 10
    assert [limiter.when("a") for _ in range(4)] == [0.05, 0.05, 10.0, 10.0]
    exponential.when("a")
    assert limiter.num_requeues("a") == 5, "num_requeues is the max over the limiters"
    limiter.forget("a")
    assert fast_slow.num_requeues("a") == 0
    assert exponential.num_requeues("a") == 0
    assert MaxOfRateLimiter[str]().when("a") == 0.0


def test_default_controller_rate_limiter() -> None:
    clock = FakeClock()
    limiter = default_controller_rate_limiter(clock)
    assert [limiter.when("a") for _ in range(3)] == [0.005, 0.01, 0.02]
    assert limiter.num_requeues("a") == 3
    for i in range(97):
        assert limiter.when(i) == 0.005  # within the burst: per-item backoff only
    assert limiter.when("b") == pytest.approx(0.1), "the overall bucket is in debt now"
    limiter.forget("a")
    assert limiter.num_requeues("a") == 0
