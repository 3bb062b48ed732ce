from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from kubeclient import KubeClient
from tests.fakekube import FakeKube
from tests.watcher_loop.helpers import Running
from watcher_loop.config import WatcherConfig


@pytest.fixture
def kube() -> FakeKube:
    return FakeKube()


@pytest.fixture
def start() -> Iterator[Callable[[WatcherConfig, KubeClient], Running]]:
    """Start run() on a thread; every started one is stopped and joined on teardown."""
    started: list[Running] = []

    def go(config: WatcherConfig, client: KubeClient) -> Running:
        r = Running(config, client)
        started.append(r)
        return r

    yield go
    for r in started:
        r.stop.set()
    for r in started:
        r.thread.join(5)
    assert not [r for r in started if r.thread.is_alive()], "run() did not stop"
