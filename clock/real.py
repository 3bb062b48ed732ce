"""What a clock is (:class:`Clock`) and the real one (:class:`RealClock`)."""

from __future__ import annotations

import threading
import time
from typing import Protocol


class Clock(Protocol):
    """Monotonic and wall time sources plus a timed wait on a condition variable."""

    def now(self) -> float:
        """Monotonic time in seconds."""
        ...

    def wall(self) -> float:
        """Wall time: seconds since the epoch."""
        ...

    def wait(self, cond: threading.Condition, timeout: float | None) -> None:
        """Wait on ``cond`` (held by the caller) for a notify or ``timeout`` seconds.

        Spurious returns are allowed: callers re-check their predicate.
        """
        ...


class RealClock:
    """Real time: ``time.monotonic`` and ``time.time``."""

    def now(self) -> float:
        return time.monotonic()

    def wall(self) -> float:
        return time.time()

    def wait(self, cond: threading.Condition, timeout: float | None) -> None:
        cond.wait(timeout)
