from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

import pytest

from tests.informers.helpers import Running


@pytest.fixture
def run_bg() -> Iterator[Callable[[Callable[[threading.Event], None]], Running]]:
    """Start ``target(stop)`` on a thread; every started one is stopped (and joined) on teardown."""
    started: list[Running] = []

    def start(target: Callable[[threading.Event], None]) -> Running:
        r = Running(target)
        started.append(r)
        return r

    yield start
    for r in started:
        r.stop.set()
    for r in started:
        r.thread.join(5)
    alive = [r for r in started if r.thread.is_alive()]
    assert not alive, "background run() did not stop after the stop event"
