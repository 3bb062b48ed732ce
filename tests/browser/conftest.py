"""The ``browser`` fixture: one headless chromium for the session (tests.support.browser)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from tests.support.browser import running_browser

if TYPE_CHECKING:
    from selenium.webdriver import Chrome


@pytest.fixture(scope="session")
def browser() -> Iterator[Chrome]:
    with running_browser() as driver:
        yield driver
