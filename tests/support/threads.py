"""Threads a test starts and joins: daemon threads, and a join that fails instead of hanging."""

from __future__ import annotations

import threading
from collections.abc import Callable


def start(target: Callable[[], object]) -> threading.Thread:
    """``target`` running on a new daemon thread."""
    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread


def join(thread: threading.Thread, timeout: float = 5.0) -> None:
    """Join ``thread``; AssertionError if it is still running after ``timeout`` seconds."""
    thread.join(timeout)
    assert not thread.is_alive(), f"thread still running after {timeout}s"
