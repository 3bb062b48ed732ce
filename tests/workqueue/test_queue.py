from __future__ import annotations

import itertools
import random
import threading
import time
from collections import Counter
from collections.abc import Callable

import pytest

from tests.support.threads import join, start, wait_parked
from tests.workqueue.helpers import take
from workqueue import Queue


@pytest.fixture
def q(track: Callable[[Queue[str]], Queue[str]]) -> Queue[str]:
    return track(Queue[str]())


def test_fifo_order(q: Queue[str]) -> None:
    for item in "abc":
        q.add(item)
    assert [take(q) for _ in range(3)] == ["a", "b", "c"]


def test_add_of_waiting_item_is_deduplicated(q: Queue[str]) -> None:
    q.add("a")
    q.add("b")
    q.add("a")
    assert len(q) == 2
    assert [take(q), take(q)] == ["a", "b"]
    assert len(q) == 0


def test_add_while_processing_is_deferred_until_done(q: Queue[str]) -> None:
    q.add("a")
    assert take(q) == "a"
    for _ in range(3):
        q.add("a")  # many adds while processing collapse into one more pass
    assert len(q) == 0, "must not be handed out while being processed"
    q.done("a")
    assert len(q) == 1
    assert take(q) == "a"
    q.done("a")
    assert len(q) == 0, "processed exactly once more"


def test_done_without_new_add_does_not_requeue(q: Queue[str]) -> None:
    q.add("a")
    take(q)
    q.done("a")
    assert len(q) == 0
    q.add("a")
    assert len(q) == 1


def test_get_blocks_until_add(q: Queue[str]) -> None:
    got: list[tuple[str | None, bool]] = []
    getter = start(lambda: got.append(q.get()))
    wait_parked(getter, where=Queue.get)
    assert got == []
    q.add("a")
    join(getter)
    assert got == [("a", False)]


def test_shut_down_wakes_blocked_getters(q: Queue[str]) -> None:
    got: list[tuple[str | None, bool]] = []
    getters = [start(lambda: got.append(q.get())) for _ in range(3)]
    for getter in getters:
        wait_parked(getter, where=Queue.get)
    q.shut_down()
    for getter in getters:
        join(getter)
    assert got == [(None, True)] * 3
    assert q.shutting_down()


def test_add_after_shut_down_is_ignored(q: Queue[str]) -> None:
    q.shut_down()
    q.add("a")
    assert len(q) == 0
    assert q.get() == (None, True)


def test_get_drains_remaining_items_after_shut_down(q: Queue[str]) -> None:
    q.add("a")
    q.add("b")
    q.shut_down()
    q.shut_down()  # idempotent
    assert q.get() == ("a", False)
    assert q.get() == ("b", False)
    assert q.get() == (None, True)
    assert q.get() == (None, True)


def test_item_deferred_before_shut_down_is_still_handed_out(q: Queue[str]) -> None:
    q.add("a")
    take(q)
    q.add("a")
    q.shut_down()
    q.done("a")
    assert q.get() == ("a", False)
    q.done("a")
    assert q.get() == (None, True)


def test_shut_down_with_drain_waits_for_in_flight_items(q: Queue[str]) -> None:
    q.add("a")
    q.add("b")
    take(q)
    take(q)
    drainer = start(q.shut_down_with_drain)
    wait_parked(drainer, where=Queue.shut_down_with_drain)
    assert q.shutting_down()
    q.add("c")  # ignored: already shutting down
    q.done("a")
    # had done() woken the drainer, it must have gone back to waiting ("b" is still out)
    wait_parked(drainer, where=Queue.shut_down_with_drain)
    q.done("b")
    join(drainer)
    assert q.get() == (None, True)


def test_shut_down_with_drain_returns_at_once_when_nothing_is_processing(q: Queue[str]) -> None:
    q.add("a")  # queued but not handed out: does not hold up the drain
    q.shut_down_with_drain()
    assert q.shutting_down()
    assert q.get() == ("a", False)


def test_shut_down_ends_a_pending_drain(q: Queue[str]) -> None:
    q.add("a")
    take(q)
    drainer = start(q.shut_down_with_drain)
    wait_parked(drainer, where=Queue.shut_down_with_drain)
    q.shut_down()
    join(drainer)


def test_no_item_is_processed_concurrently_and_no_add_is_lost() -> None:
    q = Queue[str]()
    keys = [f"key-{i}" for i in range(5)]
    lock = threading.Lock()
    seq = itertools.count()
    active: Counter[str] = Counter()
    max_active: Counter[str] = Counter()
    last_add: dict[str, int] = {}
    last_get: dict[str, int] = {}
    gets = 0

    def worker() -> None:
        nonlocal gets
        while True:
            key, shutdown = q.get()
            if shutdown:
                return
            assert key is not None
            try:
                with lock:
                    gets += 1
                    last_get[key] = next(seq)
                    active[key] += 1
                    max_active[key] = max(max_active[key], active[key])
                time.sleep(0)  # let other workers run while this key is "being processed"
                with lock:
                    active[key] -= 1
            finally:
                q.done(key)

    workers = [start(worker) for _ in range(4)]
    rng = random.Random(1234)
    adds = 5000
    for i in range(adds):
        key = rng.choice(keys)
        with lock:
            last_add[key] = next(seq)
        q.add(key)
        if i % 50 == 0:
            time.sleep(0)
    q.shut_down()
    for thread in workers:
        join(thread, timeout=20)

    assert max(max_active.values()) == 1, f"a key was processed concurrently: {max_active}"
    for key, added in last_add.items():
        assert last_get.get(key, -1) > added, f"last add of {key} was never processed"
    assert 0 < gets <= adds
    assert len(q) == 0
