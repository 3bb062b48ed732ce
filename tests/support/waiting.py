"""Polling until a condition holds, for tests whose other side runs on its own (a thread, a
real API server, a process, a cluster): the one ``wait_for`` of tests/ and e2e/."""

from __future__ import annotations

import time
from typing import Literal, Protocol, TypeVar

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)

# What a real API server, process or cluster is given when a call names no timeout of its
# own: the default is for in-process threads, which answer in milliseconds.
LIVE_TIMEOUT = 30.0

FIRST_INTERVAL = 0.001  # the first pause between two polls


class Predicate(Protocol[T_co]):
    """Anything called with no arguments (``lambda key=key: ...`` too) whose falsy values
    (None, False, 0, empty) mean "not yet" and whose truthy value is the answer."""

    def __call__(self) -> T_co | Literal[False] | None: ...


def wait_for(
    predicate: Predicate[T],
    *,
    what: str,
    timeout: float = 5.0,
    interval: float = 0.05,
) -> T:
    """``predicate()``'s first truthy value, polling until ``timeout`` seconds have passed.

    ``predicate`` is called at once, then again after a pause that starts at 1 ms and doubles
    up to ``interval``: a condition a thread meets within milliseconds is seen within
    milliseconds, and one a real server meets in seconds is asked about every ``interval``
    (a process per poll, such as kubectl, wants a larger one). The last call is made at or
    after the deadline, so a slow machine that overslept a pause still gets its last look.

    An exception from ``predicate`` propagates at once (a predicate may fail the wait early,
    e.g. when what it waits for can no longer happen). After ``timeout`` an AssertionError
    names ``what``, the timeout, the number of polls and the last (falsy) value.
    """
    deadline = time.monotonic() + timeout
    pause = min(FIRST_INTERVAL, interval)
    polls = 0
    while True:
        value = predicate()
        polls += 1
        if value:
            return value
        now = time.monotonic()
        if now >= deadline:
            last = repr(value)
            if len(last) > 200:
                last = last[:200] + "..."
            raise AssertionError(
                f"timed out after {timeout}s waiting for {what} "
                f"({polls} polls, the last returned {last})"
            )
        time.sleep(min(pause, deadline - now))
        pause = min(pause * 2, interval)
