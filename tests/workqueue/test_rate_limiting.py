from __future__ import annotations

import random
import threading
import time
from collections import Counter
from collections.abc import Callable

from clock import FakeClock
from tests.support.waiting import wait_for
from tests.workqueue.helpers import settle, take
from workqueue import ItemExponentialFailureRateLimiter, RateLimitingQueue

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
        wait_for(lambda: len(q) == 1, what=f"retry {attempt} after {delay}s")

    assert take(q) == "a"
    q.forget("a")  # the sync succeeded
    q.done("a")
    assert q.num_requeues("a") == 0
    q.add_rate_limited("a")
    clock.step(1.0)
    wait_for(lambda: len(q) == 1, what="backoff restarts at the base delay after forget")


def test_default_rate_limiter_uses_the_queue_clock(clock: FakeClock, track: Track) -> None:
    q = track(RateLimitingQueue[str](clock=clock))
    settle(clock, 1)
    q.add_rate_limited("a")
    assert q.num_requeues("a") == 1
    settle(clock, 1)
    assert len(q) == 0
    clock.step(0.005)
    wait_for(lambda: len(q) == 1, what="the 5 ms default first retry")


def test_add_rate_limited_after_shut_down_is_ignored(clock: FakeClock) -> None:
    q = RateLimitingQueue[str](clock=clock)
    q.shut_down()
    q.add_rate_limited("a")
    clock.step(10.0)
    assert q.get() == (None, True)


def test_workers_retry_failures_until_success_and_drain_on_shutdown() -> None:
    """The controller's loop with 4 workers on the real clock: each key fails a few times
    (add_rate_limited), then succeeds (forget); adds keep arriving meanwhile. No key is ever
    handled by two workers at once, every key ends with a success after its last add, and
    shut_down_with_drain returns only when no worker holds a key."""
    q = RateLimitingQueue[str](rate_limiter=ItemExponentialFailureRateLimiter(0.001, 0.01))
    keys = [f"ns/job-{i}" for i in range(8)]
    failures_left = {k: 3 for k in keys}
    lock = threading.Lock()
    active: Counter[str] = Counter()
    overlaps: list[str] = []
    succeeded_at: dict[str, float] = {}
    holding = threading.Event()

    def sync(key: str) -> bool:
        with lock:
            active[key] += 1
            if active[key] > 1:
                overlaps.append(key)
            fail = failures_left[key] > 0
            if fail:
                failures_left[key] -= 1
        holding.set()
        time.sleep(0.0005)
        with lock:
            active[key] -= 1
            if not fail:
                succeeded_at[key] = time.monotonic()
        return not fail

    def worker() -> None:
        while True:
            key, shutdown = q.get()
            if shutdown:
                return
            assert key is not None
            try:
                if sync(key):
                    q.forget(key)
                else:
                    q.add_rate_limited(key)
            finally:
                q.done(key)

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(4)]
    for t in threads:
        t.start()
    rng = random.Random(7)
    last_add: dict[str, float] = {}
    for _ in range(400):
        key = rng.choice(keys)
        last_add[key] = time.monotonic()
        q.add(key)
        time.sleep(0.0002)
    wait_for(
        lambda: all(succeeded_at.get(k, 0) > last_add.get(k, 0) for k in keys),
        what="every key synced successfully after its last add",
    )
    q.shut_down_with_drain()
    with lock:
        assert sum(active.values()) == 0, "drain returned while a worker held a key"
    for t in threads:
        t.join(5)
        assert not t.is_alive()
    assert overlaps == [], f"keys handled by two workers at once: {sorted(set(overlaps))}"
    assert all(n == 0 for n in failures_left.values())
    assert all(q.num_requeues(k) == 0 for k in keys), "a success must forget the key"
    assert holding.is_set()
