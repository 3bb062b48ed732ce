"""A missing prerequisite (a tool, root, a virtualenv) fails the test in CI (``CI=true``) and
skips it elsewhere, saying why."""

from __future__ import annotations

import os
from typing import NoReturn

import pytest


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def unavailable(reason: str) -> NoReturn:
    """Fail in CI, skip elsewhere."""
    if in_ci():
        pytest.fail(f"prerequisite missing in CI: {reason}", pytrace=False)
    pytest.skip(reason)


def require(condition: bool, why: str) -> None:
    """:func:`unavailable` unless ``condition`` holds."""
    if not condition:
        unavailable(why)
