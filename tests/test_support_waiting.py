"""The waiting helpers every test area uses: tests.support.waiting.wait_for and
tests.support.threads' barrier for a blocked thread (parked / wait_parked)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.threads import join, parked, start, wait_parked
from tests.support.waiting import wait_for


def test_wait_for_returns_the_first_truthy_value() -> None:
    values: Iterator[object] = iter([None, 0, [], {"phase": "Running"}, {"phase": "later"}])
    assert wait_for(lambda: next(values), what="a truthy value") == {"phase": "Running"}


def test_wait_for_fails_naming_what_the_timeout_and_the_last_value() -> None:
    with pytest.raises(AssertionError) as failure:
        wait_for(lambda: [], what="the pods", timeout=0.05)
    message = str(failure.value)
    assert message.startswith("timed out after 0.05s waiting for the pods (")
    assert message.endswith("polls, the last returned [])")


def test_wait_for_looks_once_more_at_the_deadline() -> None:
    start_ = time.monotonic()
    assert wait_for(lambda: time.monotonic() - start_ >= 0.05, what="the end", timeout=0.05)


def test_an_exception_from_the_predicate_ends_the_wait_at_once() -> None:
    calls: list[int] = []

    def failed() -> bool:
        calls.append(1)
        raise AssertionError("the job failed: nothing to wait for")

    with pytest.raises(AssertionError, match="nothing to wait for"):
        wait_for(failed, what="success", timeout=5)
    assert len(calls) == 1


def test_wait_for_takes_its_options_by_keyword_only() -> None:
    untyped: Any = wait_for
    with pytest.raises(TypeError):
        untyped(lambda: True, "what", 1.0)


def _block(event: threading.Event) -> None:
    event.wait()


def test_a_thread_waiting_on_an_event_is_parked_until_set() -> None:
    event = threading.Event()
    thread = start(lambda: _block(event))
    wait_parked(thread, where=_block)
    assert parked(thread, _block)
    assert not parked(thread, test_wait_for_returns_the_first_truthy_value)  # not from there
    event.set()
    join(thread)
    assert not parked(thread, _block)


def test_a_notified_thread_is_not_parked_even_before_it_runs() -> None:
    cond = threading.Condition()
    woken: list[bool] = []

    def waiter() -> None:
        with cond:
            woken.append(cond.wait(5))

    thread = start(waiter)
    wait_parked(thread, where=waiter)
    with cond:  # the waiter cannot run on while this holds the lock
        cond.notify()
        assert not parked(thread, waiter)
    join(thread)
    assert woken == [True]


def test_wait_parked_fails_when_the_thread_ends_instead() -> None:
    thread = start(lambda: None)
    join(thread)
    with pytest.raises(AssertionError, match="ended instead of blocking in _block"):
        wait_parked(thread, where=_block)
