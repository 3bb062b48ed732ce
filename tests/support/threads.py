"""Threads a test starts and joins: daemon threads, a join that fails instead of hanging, and
a barrier for "this thread is blocked" that needs no sleep."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable

from tests.support.waiting import wait_for

_CONDITION_WAIT = threading.Condition.wait.__code__


def start(target: Callable[[], object]) -> threading.Thread:
    """``target`` running on a new daemon thread."""
    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread


def join(thread: threading.Thread, timeout: float = 5.0) -> None:
    """Join ``thread``; AssertionError if it is still running after ``timeout`` seconds."""
    thread.join(timeout)
    assert not thread.is_alive(), f"thread still running after {timeout}s"


def parked(thread: threading.Thread, where: Callable[..., object]) -> bool:
    """Whether ``thread`` is blocked in a ``threading.Condition.wait`` (a Condition's, an
    Event's, a ``queue.Queue``'s) that ``where`` called, directly or not, and no notify has
    released it yet.

    Until a notify (or the wait's own timeout, if it has one) the thread cannot move, so what
    it has not done by then it will not do on its own: a negative assert after this is sound
    on any machine. A notified thread that has not run yet is not parked (it is no longer in
    the condition's waiters), so a wake-up never goes unseen. CPython: it reads the thread's
    frames (``sys._current_frames``) and the condition's waiters.
    """
    if thread.ident is None:
        return False
    frame = sys._current_frames().get(thread.ident)
    if frame is None or frame.f_code is not _CONDITION_WAIT:
        return False
    local = frame.f_locals
    # (a tuple first: a notify may change the deque meanwhile, and tuple() copies it at once)
    waiters = tuple(getattr(local.get("self"), "_waiters", ()))
    if "waiter" not in local or not any(w is local["waiter"] for w in waiters):
        return False
    code = getattr(where, "__code__", None)
    caller = frame.f_back
    while caller is not None:
        if caller.f_code is code:
            return True
        caller = caller.f_back
    return False


def wait_parked(
    thread: threading.Thread, *, where: Callable[..., object], timeout: float = 5.0
) -> None:
    """Wait until :func:`parked` holds for ``thread`` in ``where``; AssertionError if the
    thread ends first or does not park within ``timeout`` seconds."""

    name = getattr(where, "__qualname__", repr(where))

    def check() -> bool:
        if not thread.is_alive():
            raise AssertionError(f"{thread.name} ended instead of blocking in {name}")
        return parked(thread, where)

    wait_for(check, what=f"{thread.name} to block in {name}", timeout=timeout)
