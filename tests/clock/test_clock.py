"""clock.FakeClock (steps, waits that only a step or a notify ends) and clock.RealClock."""

from __future__ import annotations

import threading
import time

from clock import FakeClock, RealClock
from tests.support.threads import join, parked, start, wait_parked
from tests.support.waiting import wait_for


def test_fake_clock_step_and_set_time() -> None:
    clock = FakeClock(start=10.0)
    assert clock.now() == 10.0
    clock.step(2.5)
    assert clock.now() == 12.5
    clock.set_time(3.0)
    assert clock.now() == 3.0
    assert clock.wall() == 3.0  # one fake time: the wall reading moves with it


def test_fake_clock_wait_blocks_until_step() -> None:
    clock = FakeClock()
    cond = threading.Condition()
    woke = threading.Event()

    def waiter() -> None:
        with cond:
            clock.now()
            clock.wait(cond, 0.001)
        woke.set()

    thread = start(waiter)
    wait_for(lambda: clock.waiters() == 1, what="the waiter to block", timeout=5.0)
    wait_parked(thread, where=FakeClock.wait)
    # The property is about real time passing, so this one pause stays: 50x the timeout, in
    # which a wait on real time would have ended (and left the condition's waiters).
    time.sleep(0.05)
    assert parked(thread, FakeClock.wait), "FakeClock.wait must not time out on real time"
    assert not woke.is_set()
    clock.step(0.001)
    join(thread)
    assert clock.waiters() == 0


def test_fake_clock_wait_wakes_on_notify() -> None:
    clock = FakeClock()
    cond = threading.Condition()

    def waiter() -> None:
        with cond:
            clock.wait(cond, None)

    thread = start(waiter)
    wait_for(lambda: clock.waiters() == 1, what="the waiter to block", timeout=5.0)
    with cond:
        cond.notify_all()
    join(thread)


def test_fake_clock_step_wakes_untimed_waiters_and_set_time_wakes_too() -> None:
    clock = FakeClock()
    cond = threading.Condition()
    threads = [start(lambda: _wait_once(clock, cond, None)) for _ in range(3)]
    wait_for(lambda: clock.waiters() == 3, what="three waiters", timeout=5.0)
    clock.set_time(0.0)
    assert clock.waiters() == 0  # woken waiters no longer count
    for thread in threads:
        join(thread)


def test_fake_clock_wait_returns_at_once_if_time_moved_since_now() -> None:
    clock = FakeClock()
    cond = threading.Condition()

    def stale_waiter() -> None:
        with cond:
            clock.now()
            clock.step(1.0)  # a step between the caller's now() and its wait() ...
            clock.wait(cond, 5.0)  # ... must not be lost: returns instead of blocking
            clock.wait(cond, 0.0)  # non-positive timeouts never block

    join(start(stale_waiter))
    assert clock.waiters() == 0


def test_real_clock() -> None:
    clock = RealClock()
    before, wall_before = clock.now(), clock.wall()
    cond = threading.Condition()
    with cond:
        clock.wait(cond, 0.01)
    assert clock.now() - before >= 0.005
    assert wall_before <= clock.wall() and abs(clock.wall() - time.time()) < 1.0


def _wait_once(clock: FakeClock, cond: threading.Condition, timeout: float | None) -> None:
    with cond:
        clock.now()
        clock.wait(cond, timeout)
