from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import pytest

from clock import FakeClock
from workqueue import Queue

Q = TypeVar("Q", bound=Queue[Any])


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def track() -> Iterator[Callable[[Q], Q]]:
    """Register a queue to be shut down after the test (stops its background threads)."""
    created: list[Queue[Any]] = []

    def register(queue: Q) -> Q:
        created.append(queue)
        return queue

    yield register
    for queue in created:
        queue.shut_down()
