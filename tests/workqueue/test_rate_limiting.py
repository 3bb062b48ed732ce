from __future__ import annotations

from collections.abc import Callable

from tests.workqueue.helpers import settle, take, wait_for
from workqueue import FakeClock, ItemExponentialFailureRateLimiter, RateLimitingQueue

Track = Callable[[RateLimitingQueue[str]], RateLimitingQueue[str]]


def test_failing_item_is_retried_with_backoff_until_forgotten(
    clock: FakeClock, track: Track
) -> None:
    q = track(
        RateLimitingQueue[str](
            clock=clock, rate_limiter=ItemExponentialFailureRateLimiter(1.0, 100.0)
        )
    )
    settle(clock, 1)
    q.add("a")
    for attempt, delay in enumerate([1.0, 2.0, 4.0], start=1):
        assert take(q) == "a"
        q.add_rate_limited("a")  # the sync failed
        q.done("a")
        assert q.num_requeues("a") == attempt
        clock.step(delay - 0.5)
        settle(clock, 1)
        assert len(q) == 0, f"retry {attempt} must wait {delay}s"
        clock.step(0.5)
        wait_for(lambda: len(q) == 1, f"retry {attempt} after {delay}s")

    assert take(q) == "a"
    q.forget("a")  # the sync succeeded
    q.done("a")
    assert q.num_requeues("a") == 0
    q.add_rate_limited("a")
    clock.step(1.0)
    wait_for(lambda: len(q) == 1, "backoff restarts at the base delay after forget")


def test_default_rate_limiter_uses_the_queue_clock(clock: FakeClock, track: Track) -> None:
    q = track(RateLimitingQueue[str](clock=clock))
    settle(clock, 1)
    q.add_rate_limited("a")
    assert q.num_requeues("a") == 1
    settle(clock, 1)
    assert len(q) == 0
    clock.step(0.005)
    wait_for(lambda: len(q) == 1, "the 5 ms default first retry")


def test_add_rate_limited_after_shut_down_is_ignored(clock: FakeClock) -> None:
    q = RateLimitingQueue[str](clock=clock)
    q.shut_down()
    q.add_rate_limited("a")
    clock.step(10.0)
    assert q.get() == (None, True)
