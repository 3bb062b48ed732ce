"""Polling until a condition holds, for tests whose other side runs on its own (a real API
server, a process, a thread)."""

from __future__ import annotations

import time
from typing import Any


def wait_for(
    pred: Any, timeout: float = 30.0, what: str = "condition", interval: float = 0.05
) -> Any:
    """``pred()``'s first truthy value; AssertionError naming ``what`` after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = pred()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)
