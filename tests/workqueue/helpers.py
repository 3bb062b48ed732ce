"""Test helpers: bounded polling for background threads and settling fake-clock waiters."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable
from typing import TypeVar

from clock import FakeClock
from tests.support.waiting import wait_for as support_wait_for
from workqueue import Queue

T = TypeVar("T", bound=Hashable)


def wait_for(predicate: Callable[[], object], what: str, timeout: float = 5.0) -> None:
    """tests.support's wait_for, polling every 0.001 s (this area's other side is a thread)."""
    support_wait_for(predicate, timeout, what, interval=0.001)


def settle(clock: FakeClock, waiters: int) -> None:
    """Wake all clock waiters without moving time and wait until ``waiters`` block again.

    Afterwards every background thread waiting on ``clock`` has re-examined its state (e.g. the
    delaying queue has moved everything due into the queue), so negative asserts are sound.
    """
    clock.step(0)
    wait_for(lambda: clock.waiters() == waiters, f"{waiters} thread(s) waiting on the fake clock")


def thread_alive(name: str) -> bool:
    return any(t.name == name and t.is_alive() for t in threading.enumerate())


def assert_blocked(thread: threading.Thread) -> None:
    """Give ``thread`` a moment to run and assert it is still blocked."""
    time.sleep(0.02)
    assert thread.is_alive(), "expected the thread to be blocked"


def take(queue: Queue[T]) -> T:
    """``get`` an item that must already be queued (fails instead of blocking forever)."""
    assert len(queue) > 0, "the queue is empty: get() would block"
    item, shutdown = queue.get()
    assert not shutdown
    assert item is not None
    return item
