"""A manually advanced clock for tests (client-go's k8s.io/utils/clock/testing FakeClock)."""

from __future__ import annotations

import threading


class FakeClock:
    """Manually advanced clock for tests: ``now()`` and ``wall()`` both read its one time
    (start it at a realistic epoch when the wall time is written anywhere).

    ``wait`` never times out by itself: only a notify of the condition or a ``step``/``set_time``
    wakes it. A waiter whose thread last read ``now()`` before a step returns at once (a spurious
    wakeup), so a step landing between a caller's ``now()`` and its ``wait()`` is never lost.
    """

    def __init__(self, start: float = 0.0) -> None:
        self._lock = threading.Lock()
        self._time = start
        self._generation = 0  # bumped by every step/set_time
        self._seen = threading.local()  # generation each thread last observed in now()
        self._waiting: dict[object, threading.Condition] = {}  # token -> condition

    def now(self) -> float:
        with self._lock:
            self._seen.generation = self._generation
            return self._time

    def wall(self) -> float:
        # (not a read that a wait() after it depends on: the generation is left alone)
        with self._lock:
            return self._time

    def step(self, seconds: float) -> None:
        """Advance time by ``seconds`` and wake every waiter."""
        with self._lock:
            self._time += seconds
            conds = self._take_waiters_locked()
        _notify_all(conds)

    def set_time(self, t: float) -> None:
        """Set the time to ``t`` and wake every waiter."""
        with self._lock:
            self._time = t
            conds = self._take_waiters_locked()
        _notify_all(conds)

    def _take_waiters_locked(self) -> list[threading.Condition]:
        self._generation += 1
        conds = list(self._waiting.values())
        # Woken waiters stop counting in waiters() until they wait again.
        self._waiting.clear()
        return conds

    def waiters(self) -> int:
        """Number of threads blocked in ``wait`` that no step has woken yet."""
        with self._lock:
            return len(self._waiting)

    def wait(self, cond: threading.Condition, timeout: float | None) -> None:
        if timeout is not None and timeout <= 0:
            return
        token = object()
        with self._lock:
            if timeout is not None and getattr(self._seen, "generation", -1) != self._generation:
                return  # time moved since the caller computed its timeout
            self._waiting[token] = cond
        try:
            cond.wait()
        finally:
            with self._lock:
                self._waiting.pop(token, None)


def _notify_all(conds: list[threading.Condition]) -> None:
    # Acquiring each condition first means a waiter registered before the step is already
    # inside cond.wait() (it registers while holding cond), so the notify cannot be missed.
    for cond in conds:
        with cond:
            cond.notify_all()
