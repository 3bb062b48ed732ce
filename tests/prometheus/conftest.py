"""Fixtures of the monitoring tests: promtool, prometheus and helm from hack/tools.sh, and the
real-API-server fixtures of tests/apiserver (re-exported for the live test).

In CI (CI=true) a tool that cannot be found or installed fails the tests that need it;
elsewhere they are skipped with the reason.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import NoReturn

import pytest

from tests.apiserver.conftest import api, crd, namespace  # noqa: F401
from tests.prometheus.promql import REPO


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def _unavailable(reason: str) -> NoReturn:
    if in_ci():
        pytest.fail(f"{reason} (CI=true: the monitoring tests need it)")
    pytest.skip(reason)


def tool_paths(*tools: str) -> dict[str, Path]:
    """Paths printed by hack/tools.sh (name=path lines); fails or skips when it cannot."""
    try:
        out = subprocess.run(
            [str(REPO / "hack" / "tools.sh"), *tools],
            capture_output=True,
            text=True,
            timeout=900,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        _unavailable(f"hack/tools.sh {' '.join(tools)} did not run: {e}")
    if out.returncode != 0:
        _unavailable(
            f"hack/tools.sh {' '.join(tools)} failed ({out.returncode}): {out.stderr.strip()}"
        )
    paths: dict[str, Path] = {}
    for line in out.stdout.splitlines():
        name, sep, value = line.partition("=")
        if sep:
            paths[name.strip()] = Path(value.strip())
    for tool in tools:
        path = paths.get(tool)
        if path is None or not os.access(path, os.X_OK):
            _unavailable(f"{tool} is not available (hack/tools.sh printed {out.stdout!r})")
    return paths


@pytest.fixture(scope="session")
def promtool() -> Path:
    return tool_paths("promtool")["promtool"]


@pytest.fixture(scope="session")
def prometheus() -> Path:
    return tool_paths("prometheus")["prometheus"]


@pytest.fixture(scope="session")
def helm() -> Path:
    return tool_paths("helm")["helm"]
