"""Test helpers: settling fake-clock waiters, finding a queue's threads, taking queued items."""

from __future__ import annotations

import threading
from collections.abc import Hashable
from typing import TypeVar

from clock import FakeClock
from tests.support.waiting import wait_for
from workqueue import Queue

T = TypeVar("T", bound=Hashable)


def settle(clock: FakeClock, waiters: int) -> None:
    """Wake all clock waiters without moving time and wait until ``waiters`` block again.

    Afterwards every background thread waiting on ``clock`` has re-examined its state (e.g. the
    delaying queue has moved everything due into the queue), so negative asserts are sound.
    """
    clock.step(0)
    wait_for(
        lambda: clock.waiters() == waiters, what=f"{waiters} thread(s) waiting on the fake clock"
    )


def thread_alive(name: str) -> bool:
    return any(t.name == name and t.is_alive() for t in threading.enumerate())


def thread_named(name: str) -> threading.Thread:
    """The running thread called ``name`` (a queue's threads are named after the queue)."""
    (thread,) = [t for t in threading.enumerate() if t.name == name and t.is_alive()]
    return thread


def take(queue: Queue[T]) -> T:
    """``get`` an item that must already be queued (fails instead of blocking forever)."""
    assert len(queue) > 0, "the queue is empty: get() would block"
    item, shutdown = queue.get()
    assert not shutdown
    assert item is not None
    return item
