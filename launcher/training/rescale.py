"""An elastic attempt in dglrun: the partitioner's count, and the stop for a grow at an epoch
boundary.

The partitioner is made while the operator chooses the attempt's workers (so that it holds its
room); :func:`wait_for_count` reads their number from ``status.elastic.members``.

The operator asks for a grow in ``status.elastic.growTo`` (standby workers run: room freed).
dglrun reads it every ``interval`` seconds while the trainers run; once asked, it waits for
the next epoch boundary, which is the next *whole* checkpoint (its digest written: see
launcher/checkpoints.py) newer than the newest when it was asked. It then stops every DGL
process and exits with ``RESCALE_EXIT_CODE``. The next attempt, with more workers, resumes
from that checkpoint, so no finished epoch is trained twice.

A job that never checkpoints never stops for a grow: it trains on to its end. Nor does one
whose next checkpoint is its last epoch's: that run is finishing.

Standard library only (dglrun's layer).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from launcher.checkpoints import newest_finished
from launcher.console import PhaseError

LOOK_EVERY = 0.5  # seconds between looks at the checkpoints' folder once asked


class RescaleStop(Exception):
    """The trainers were stopped at an epoch boundary for a rescale; ``str()`` says when. Not
    a phase's failure (no LauncherError): it passes every phase's error handling, and dglrun
    ends with RESCALE_EXIT_CODE."""


def wait_for_count(
    ask: Callable[[], list[str] | None] | None,
    say: Callable[[str], None],
    *,
    interval: float = 2.0,
    sleep: Callable[[float], None] = time.sleep,
) -> int:
    """An elastic partitioner's count: the attempt's members, once the operator has chosen
    them (it was made before, to hold its room). No limit of its own: the pod goes with the
    attempt, and the job's deadlines apply."""
    if ask is None:
        raise PhaseError(
            "an elastic job's partitioner reads its partition count from the DGLJob's status: "
            "it needs kubectl and the job's name (the operator's env)"
        )
    told = False
    while True:
        members = ask()
        if members:
            say(f"elastic: the attempt's {len(members)} workers: {', '.join(members)}")
            return len(members)
        if not told:
            say("elastic: waiting for the operator to choose this attempt's workers")
            told = True
        sleep(interval)


class GrowWatch:
    """:meth:`check` (called often) says when to stop: the reason, or None to go on."""

    def __init__(
        self,
        ask: Callable[[], int | None],
        checkpoints: Path,
        *,
        interval: float = 3.0,
        clock: Callable[[], float] = time.monotonic,
        last_epoch: int | None = None,
    ) -> None:
        self._ask = ask
        self._last_epoch = last_epoch  # its checkpoint ends the run: no stop for a grow there
        self._folder = checkpoints
        self._interval = interval
        self._clock = clock
        self._next_ask = clock()  # (asked at once: a request may be older than this run)
        self.asked: int | None = None  # the workers asked for, once asked
        self._since_epoch = 0  # the newest whole checkpoint's epoch when asked
        self._next_look = 0.0

    def check(self) -> str | None:
        now = self._clock()
        if self.asked is None:
            if now < self._next_ask:
                return None
            self._next_ask = now + self._interval
            wanted = self._ask()
            if wanted is None:
                return None
            self.asked = wanted
            self._since_epoch = newest_finished(self._folder)
            return None
        if now < self._next_look:
            return None
        self._next_look = now + LOOK_EVERY
        done = newest_finished(self._folder)
        if done <= self._since_epoch:
            return None
        if self._last_epoch is not None and done >= self._last_epoch:
            return None  # (the run is finishing: a new attempt would have nothing to train)
        return (
            f"stopped at the epoch boundary after epoch {done} (checkpoint epoch-{done}.pt) "
            f"for a rescale to {self.asked} workers"
        )
