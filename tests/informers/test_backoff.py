"""informers.backoff.Backoff: doubling with a cap, jitter, reset after a quiet while."""

from __future__ import annotations

import pytest

from clock import FakeClock
from informers.backoff import Backoff


def test_doubles_up_to_the_cap() -> None:
    b = Backoff(initial=0.8, maximum=30.0, jitter=0)
    got = [b.next() for _ in range(9)]
    assert got == pytest.approx([0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 30.0, 30.0, 30.0])


def test_custom_factor() -> None:
    b = Backoff(initial=1.0, maximum=10.0, factor=3.0, jitter=0)
    assert [b.next() for _ in range(4)] == pytest.approx([1.0, 3.0, 9.0, 10.0])


def test_defaults_match_client_go_reflector() -> None:
    b = Backoff(rand=lambda: 0.0)
    assert b.next() == pytest.approx(0.8)
    for _ in range(20):
        last = b.next()
    assert last == pytest.approx(30.0)


@pytest.mark.parametrize("r", [0.0, 0.25, 0.999999])
def test_jitter_adds_up_to_jitter_times_step(r: float) -> None:
    b = Backoff(initial=1.0, maximum=8.0, jitter=0.5, rand=lambda: r)
    got = [b.next() for _ in range(6)]
    steps = [1.0, 2.0, 4.0, 8.0, 8.0, 8.0]
    assert got == pytest.approx([s * (1 + 0.5 * r) for s in steps])
    for g, s in zip(got, steps, strict=True):
        assert s <= g <= s * 1.5


def test_jitter_bounds_with_extreme_rand() -> None:
    lo = Backoff(initial=2.0, maximum=4.0, jitter=1.0, rand=lambda: 0.0)
    hi = Backoff(initial=2.0, maximum=4.0, jitter=1.0, rand=lambda: 1.0)
    assert [lo.next() for _ in range(3)] == pytest.approx([2.0, 4.0, 4.0])
    # never more than maximum * (1 + jitter)
    assert [hi.next() for _ in range(3)] == pytest.approx([4.0, 8.0, 8.0])


def test_jitter_uses_real_random_within_bounds() -> None:
    b = Backoff(initial=1.0, maximum=1.0, jitter=1.0)
    for _ in range(200):
        assert 1.0 <= b.next() <= 2.0


def test_resets_after_a_quiet_while() -> None:
    clock = FakeClock(start=1000.0)
    b = Backoff(initial=1.0, maximum=60.0, jitter=0, reset_after=120.0, clock=clock)
    assert [b.next() for _ in range(4)] == pytest.approx([1.0, 2.0, 4.0, 8.0])
    clock.step(120.0)  # exactly reset_after: not yet quiet long enough
    assert b.next() == pytest.approx(16.0)
    clock.step(120.5)
    assert b.next() == pytest.approx(1.0)
    assert b.next() == pytest.approx(2.0)


def test_failures_close_together_keep_growing() -> None:
    clock = FakeClock(start=1000.0)
    b = Backoff(initial=1.0, maximum=60.0, jitter=0, reset_after=10.0, clock=clock)
    got = []
    for _ in range(5):
        got.append(b.next())
        clock.step(9.0)  # each gap shorter than reset_after
    assert got == pytest.approx([1.0, 2.0, 4.0, 8.0, 16.0])


def test_reset() -> None:
    b = Backoff(initial=0.5, maximum=10.0, jitter=0)
    for _ in range(4):
        b.next()
    assert b.next() == pytest.approx(8.0)
    b.reset()
    assert b.next() == pytest.approx(0.5)
    assert b.next() == pytest.approx(1.0)


def test_test_backoff_used_by_reflector_tests_is_fast() -> None:
    b = Backoff(initial=0.01, maximum=0.05, jitter=0)
    assert [b.next() for _ in range(5)] == pytest.approx([0.01, 0.02, 0.04, 0.05, 0.05])


def test_a_reflector_asks_again_within_ten_seconds_however_long_the_server_was_away() -> None:
    """Issue 58: a job's status catches up within 30 s of an API server's return. client-go's
    30 s cap (the twin: Backoff's own default, above) would pause a reflector up to 60 s with
    jitter; the reflector's own backoff pauses at most RELIST_BACKOFF_MAX * 2."""
    from informers.reflector import RELIST_BACKOFF_MAX, Reflector

    reflector = Reflector(object(), object(), name="r")  # type: ignore[arg-type]
    reflector.backoff._rand = lambda: 0.999999
    waits = [reflector.backoff.next() for _ in range(30)]  # (an outage of minutes)
    assert max(waits) <= 2 * RELIST_BACKOFF_MAX <= 10.0, waits
    client_go = Backoff(rand=lambda: 0.999999)
    assert max(client_go.next() for _ in range(30)) > 30.0  # (what it replaces)
