from __future__ import annotations

import random
from collections.abc import Callable

import pytest

from clock import FakeClock
from tests.support.threads import wait_parked
from tests.support.waiting import wait_for
from tests.workqueue.helpers import settle, take, thread_alive, thread_named
from workqueue import DelayingQueue


@pytest.fixture
def q(
    clock: FakeClock, track: Callable[[DelayingQueue[str]], DelayingQueue[str]]
) -> DelayingQueue[str]:
    queue = track(DelayingQueue[str](clock=clock))
    settle(clock, 1)  # the waiting thread is up and blocked on the clock
    return queue


def drain(q: DelayingQueue[str]) -> list[str]:
    items = []
    while len(q):
        item = take(q)
        q.done(item)
        items.append(item)
    return items


def test_add_after_with_non_positive_delay_is_a_plain_add(q: DelayingQueue[str]) -> None:
    q.add_after("a", 0)
    q.add_after("b", -1.0)
    assert len(q) == 2  # synchronously, no clock involved
    assert drain(q) == ["a", "b"]


def test_add_after_becomes_ready_when_the_clock_reaches_it(
    q: DelayingQueue[str], clock: FakeClock
) -> None:
    q.add_after("a", 1.0)
    settle(clock, 1)
    assert len(q) == 0
    clock.step(0.5)
    settle(clock, 1)
    assert len(q) == 0
    clock.step(0.5)
    wait_for(lambda: len(q) == 1, what="the item to become ready at t=1")
    assert drain(q) == ["a"]


def test_ready_at_says_when_a_waiting_item_is_added(
    q: DelayingQueue[str], clock: FakeClock
) -> None:
    clock.step(10.0)
    q.add_after("a", 2.5)
    q.add_after("b", 0)
    assert q.ready_at("a") == 12.5
    assert q.ready_at("b") is None  # added at once: not waiting
    assert q.ready_at("c") is None
    clock.step(2.5)
    wait_for(lambda: len(q) == 2, what="the item to become ready at t=12.5")
    assert q.ready_at("a") is None
    assert drain(q) == ["b", "a"]


@pytest.mark.parametrize("first,second", [(2.0, 1.0), (1.0, 2.0)])
def test_earliest_add_after_wins(
    q: DelayingQueue[str], clock: FakeClock, first: float, second: float
) -> None:
    q.add_after("a", first)
    q.add_after("a", second)
    clock.step(1.0)
    wait_for(lambda: len(q) == 1, what="the item to become ready at the earlier time")
    assert drain(q) == ["a"]
    clock.step(1.0)
    settle(clock, 1)
    assert len(q) == 0, "the later add_after must not fire again"


def test_add_after_of_a_fired_item_schedules_again_and_dedups_when_it_fires(
    q: DelayingQueue[str], clock: FakeClock
) -> None:
    q.add_after("a", 1.0)
    clock.step(1.0)
    wait_for(lambda: len(q) == 1, what="the item to become ready")
    q.add_after("a", 1.0)  # no longer waiting: schedules a new, independent add
    clock.step(1.0)
    settle(clock, 1)
    assert drain(q) == ["a"], "queued item and fired item deduplicate"


def test_add_after_of_a_queued_item_deduplicates_when_it_fires(
    q: DelayingQueue[str], clock: FakeClock
) -> None:
    q.add("a")
    q.add_after("a", 1.0)
    clock.step(1.0)
    settle(clock, 1)
    assert len(q) == 1
    assert drain(q) == ["a"]


def test_add_after_of_an_item_in_processing_is_deferred_until_done(
    q: DelayingQueue[str], clock: FakeClock
) -> None:
    q.add("a")
    take(q)
    q.add_after("a", 1.0)
    clock.step(1.0)
    settle(clock, 1)
    assert len(q) == 0
    q.done("a")
    assert drain(q) == ["a"]


def test_items_come_out_in_ready_time_order(q: DelayingQueue[str], clock: FakeClock) -> None:
    delays = list(range(1, 21))
    random.Random(7).shuffle(delays)
    for delay in delays:
        q.add_after(f"item-{delay:02d}", float(delay))
    expected = [f"item-{d:02d}" for d in range(1, 21)]

    clock.step(5.0)
    wait_for(lambda: len(q) == 5, what="the five items due by t=5")
    settle(clock, 1)
    assert drain(q) == expected[:5]

    clock.step(100.0)  # everything else at once still comes out in ready-time order
    wait_for(lambda: len(q) == 15, what="the remaining items")
    assert drain(q) == expected[5:]


def test_add_after_after_shut_down_is_ignored_and_the_thread_exits(clock: FakeClock) -> None:
    q = DelayingQueue[str]("delaying-shutdown-test", clock=clock)
    q.add_after("a", 1.0)
    q.shut_down()
    q.add_after("b", 0)
    q.add_after("c", 1.0)
    wait_for(
        lambda: not thread_alive("workqueue-waiting[delaying-shutdown-test]"),
        what="the waiting thread to exit",
    )
    clock.step(5.0)
    assert len(q) == 0
    assert q.get() == (None, True)


def test_shut_down_with_drain_stops_the_waiting_thread(clock: FakeClock) -> None:
    q = DelayingQueue[str]("delaying-drain-test", clock=clock)
    q.add_after("a", 1.0)
    q.shut_down_with_drain()
    wait_for(
        lambda: not thread_alive("workqueue-waiting[delaying-drain-test]"),
        what="the waiting thread to exit",
    )


def test_real_clock_an_earlier_item_re_arms_the_wait(
    track: Callable[[DelayingQueue[str]], DelayingQueue[str]],
) -> None:
    q = track(DelayingQueue[str]("rearm-test"))
    q.add_after("late", 60.0)  # the waiting thread now sleeps for a minute ...
    wait_parked(thread_named("workqueue-waiting[rearm-test]"), where=DelayingQueue._waiting_loop)
    q.add_after("soon", 0.01)  # ... and must wake up early for this one
    wait_for(lambda: len(q) == 1, what="the earlier item on real time", timeout=2.0)
    assert drain(q) == ["soon"]
