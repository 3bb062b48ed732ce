"""Fixtures of the monitoring tests: promtool, prometheus and helm from hack/tools.sh
(tests/support/tools.py), and the real-API-server fixtures (tests/support/apiserver.py) for the
live test.

In CI (CI=true) a tool that cannot be found or installed fails the tests that need it;
elsewhere they are skipped with the reason.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.apiserver import api, crd, namespace  # noqa: F401
from tests.support.tools import tool_paths


@pytest.fixture(scope="session")
def promtool() -> Path:
    return tool_paths("promtool")["promtool"]


@pytest.fixture(scope="session")
def prometheus() -> Path:
    return tool_paths("prometheus")["prometheus"]


@pytest.fixture(scope="session")
def helm() -> Path:
    return tool_paths("helm")["helm"]
