"""Fixtures of the launcher's tests: root (network namespaces), and nothing left behind."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.launcher.helpers import links, netns_names
from tests.support.prerequisites import require


@pytest.fixture
def root_needed() -> None:
    require(os.geteuid() == 0, "the local transport needs root (network namespaces)")


@pytest.fixture
def no_leftovers(root_needed: None) -> Iterator[None]:
    """The test must leave no network namespace, link or process of dglrun behind."""
    before_ns, before_links = netns_names(), links()
    yield
    assert netns_names() - before_ns == set(), "network namespaces left behind"
    assert {x for x in links() - before_links if x.startswith(("dgl", "dgv", "dgp"))} == set()
