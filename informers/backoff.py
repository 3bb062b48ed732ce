"""Exponential backoff with jitter that resets after a quiet while (client-go wait.Backoff).

The quiet while is measured on a :class:`clock.Clock`'s ``now()``.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from clock import Clock, RealClock


class Backoff:
    def __init__(
        self,
        initial: float = 0.8,
        maximum: float = 30.0,
        factor: float = 2.0,
        jitter: float = 1.0,
        reset_after: float = 120.0,
        clock: Clock | None = None,
        rand: Callable[[], float] = random.random,
    ) -> None:
        self.initial = initial
        self.maximum = maximum
        self.factor = factor
        self.jitter = jitter
        self.reset_after = reset_after
        self._clock: Clock = clock or RealClock()
        self._rand = rand
        self._current = initial
        self._last: float | None = None

    def next(self) -> float:
        """The next wait: the current step plus up to ``jitter`` times the step of random extra."""
        now = self._clock.now()
        if self._last is not None and now - self._last > self.reset_after:
            self._current = self.initial
        self._last = now
        step = self._current
        self._current = min(self._current * self.factor, self.maximum)
        return min(step * (1.0 + self.jitter * self._rand()), self.maximum * (1.0 + self.jitter))

    def reset(self) -> None:
        self._current = self.initial
        self._last = None
