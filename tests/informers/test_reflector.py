"""Reflector driven by a scripted ListerWatcher (tests/informers/helpers.py)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from clock import FakeClock
from informers.backoff import Backoff
from informers.reflector import Reflector
from informers.shared import SharedInformer
from informers.store import meta_namespace_key
from kubeclient import Gone, Obj, ServerError, TooManyRequests, TransportError, error_from_status
from tests.informers.helpers import (
    RecordingSink,
    Running,
    ScriptedLW,
    ScriptedStream,
    bookmark,
    error_event,
    ev,
    make_reflector,
    obj,
)
from tests.support.threads import wait_parked
from tests.support.waiting import wait_for

RunBg = Callable[[Callable[[threading.Event], None]], Running]


def start(run_bg: RunBg, lw: ScriptedLW, sink: Any = None, **kw: Any) -> tuple[Reflector, Any]:
    sink = sink if sink is not None else RecordingSink()
    refl = make_reflector(lw, sink, **kw)
    run_bg(refl.run)
    return refl, sink


def too_large_rv() -> ServerError:
    err = error_from_status(
        504,
        {
            "kind": "Status",
            "status": "Failure",
            "reason": "Timeout",
            "message": "Too large resource version: 99, current: 10",
            "code": 504,
            "details": {
                "causes": [
                    {"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}
                ],
                "retryAfterSeconds": 1,
            },
        },
    )
    assert isinstance(err, ServerError)
    return err


def test_lists_then_watches_from_the_list_rv(run_bg: RunBg) -> None:
    lw = ScriptedLW(lists=[([obj("a", 3), obj("b", 5)], "7")])
    refl, sink = start(run_bg, lw)
    wait_for(lambda: lw.watch_count() >= 1, what="the first watch")
    assert sink.snapshot() == [("list", (["a", "b"], "7"))]
    assert lw.watch_rvs == ["7"]
    assert lw.list_calls == 1
    assert refl.last_resource_version == "7"
    # server timeout drawn from [min_watch_timeout, 2*min_watch_timeout); read timeout adds margin
    _, timeout, read_timeout = lw.watch_args[0]
    assert 1 <= timeout < 2
    assert read_timeout == pytest.approx(timeout + refl.read_timeout_margin)


def test_every_event_advances_the_rv_of_the_next_watch(run_bg: RunBg) -> None:
    s1 = ScriptedStream(
        [
            ev("ADDED", obj("c", 11)),
            ev("MODIFIED", obj("a", 12)),
            ev("DELETED", obj("b", 13)),
        ]
    )
    s2 = ScriptedStream([ev("ADDED", obj("d", 20))])
    lw = ScriptedLW(lists=[([obj("a", 3), obj("b", 5)], "10")], watches=[s1, s2])
    refl, sink = start(run_bg, lw)
    wait_for(lambda: lw.watch_count() >= 3, what="a third watch")
    assert lw.watch_rvs[:3] == ["10", "13", "20"]
    assert sink.snapshot() == [
        ("list", (["a", "b"], "10")),
        ("added", ("c", "11")),
        ("modified", ("a", "12")),
        ("deleted", ("b", "13")),
        ("added", ("d", "20")),
    ]
    assert refl.last_resource_version == "20"
    assert lw.list_calls == 1


def test_bookmark_advances_rv_but_never_reaches_the_sink(run_bg: RunBg) -> None:
    s1 = ScriptedStream([bookmark(15), ev("ADDED", obj("x", 16)), bookmark(30)])
    lw = ScriptedLW(lists=[([], "10")], watches=[s1])
    refl, sink = start(run_bg, lw)
    wait_for(lambda: lw.watch_count() >= 2, what="a re-watch after the bookmarks")
    assert lw.watch_rvs[:2] == ["10", "30"]
    assert sink.snapshot() == [("list", ([], "10")), ("added", ("x", "16"))]
    assert refl.last_resource_version == "30"
    assert lw.list_calls == 1


def test_bookmark_only_watch_advances_rv(run_bg: RunBg) -> None:
    lw = ScriptedLW(lists=[([], "10")], watches=[ScriptedStream([bookmark(42)])])
    _, sink = start(run_bg, lw)
    wait_for(lambda: lw.watch_count() >= 2, what="a re-watch after a bookmark-only watch")
    assert lw.watch_rvs[:2] == ["10", "42"]
    assert sink.snapshot() == [("list", ([], "10"))]


def test_clean_end_rewatches_from_last_rv_without_relist(run_bg: RunBg) -> None:
    lw = ScriptedLW(
        lists=[([obj("a", 1)], "5")],
        watches=[
            ScriptedStream([ev("MODIFIED", obj("a", 6))]),
            ScriptedStream([ev("MODIFIED", obj("a", 7))]),
            ScriptedStream([ev("ADDED", obj("b", 8))]),
        ],
    )
    refl, sink = start(run_bg, lw)
    wait_for(lambda: lw.watch_count() >= 4, what="four watches")
    assert lw.watch_rvs[:4] == ["5", "6", "7", "8"]
    assert lw.list_calls == 1
    assert refl.lists == 1
    assert sink.count("list") == 1
    assert all(s.close_calls >= 1 for s in lw.streams[:3]), "every finished stream is closed"


@pytest.mark.parametrize(
    ("code", "reason"),
    [(410, "Expired"), (410, "Gone"), (None, "Expired"), (500, "Expired")],
    ids=["410-Expired", "410-Gone", "no-code-Expired", "500-Expired"],
)
def test_in_stream_expired_error_relists(run_bg: RunBg, code: int | None, reason: str) -> None:
    s1 = ScriptedStream([ev("ADDED", obj("b", 6)), error_event(code, reason)])
    lw = ScriptedLW(
        lists=[([obj("a", 1)], "5"), ([obj("a", 1), obj("b", 6), obj("c", 9)], "9")],
        watches=[s1],
    )
    refl, sink = start(run_bg, lw)
    wait_for(lambda: lw.watch_count() >= 2, what="the watch after the relist")
    assert lw.list_calls == 2
    assert lw.watch_rvs[:2] == ["5", "9"]
    assert sink.snapshot() == [
        ("list", (["a"], "5")),
        ("added", ("b", "6")),
        ("list", (["a", "b", "c"], "9")),
    ]
    assert refl.lists == 2
    assert s1.close_calls >= 1


def test_http_410_when_opening_the_watch_relists(run_bg: RunBg) -> None:
    lw = ScriptedLW(
        lists=[([obj("a", 1)], "5"), ([obj("a", 1)], "50")],
        watches=[Gone(410, "Expired", "too old resource version: 5 (40)")],
    )
    _, sink = start(run_bg, lw)
    wait_for(lambda: lw.watch_count() >= 2, what="the watch after the relist")
    assert lw.list_calls == 2
    assert lw.watch_rvs[:2] == ["5", "50"]
    assert sink.count("list") == 2


def test_too_large_resource_version_relists(run_bg: RunBg) -> None:
    lw = ScriptedLW(
        lists=[([], "99"), ([obj("a", 10)], "10")],
        watches=[too_large_rv()],
    )
    _, sink = start(run_bg, lw)
    wait_for(lambda: lw.watch_count() >= 2, what="the watch after the relist")
    assert lw.list_calls == 2
    assert lw.watch_rvs[:2] == ["99", "10"]
    assert sink.snapshot() == [("list", ([], "99")), ("list", (["a"], "10"))]


def test_too_large_resource_version_in_stream_relists(run_bg: RunBg) -> None:
    status = error_event(504, "Timeout", "Too large resource version: 99, current: 10")
    status["object"]["details"] = {"causes": [{"reason": "ResourceVersionTooLarge"}]}
    lw = ScriptedLW(
        lists=[([], "99"), ([], "10")],
        watches=[ScriptedStream([status])],
    )
    start(run_bg, lw)
    wait_for(lambda: lw.watch_count() >= 2, what="the watch after the relist")
    assert lw.list_calls == 2
    assert lw.watch_rvs[:2] == ["99", "10"]


def test_transport_error_mid_stream_backs_off_and_rewatches_without_relist(
    run_bg: RunBg,
) -> None:
    s1 = ScriptedStream(
        [
            ev("ADDED", obj("b", 6)),
            ev("MODIFIED", obj("b", 7)),
            TransportError("watch stream broke: connection reset by peer"),
        ]
    )
    s2 = ScriptedStream([ev("DELETED", obj("b", 8))], block=True)
    lw = ScriptedLW(lists=[([], "5")], watches=[s1, s2])
    _, sink = start(run_bg, lw)
    wait_for(lambda: sink.count("deleted") == 1, what="the event from the second watch")
    assert lw.watch_rvs[:2] == ["5", "7"]
    assert lw.list_calls == 1
    # there was a pause (backoff) between the broken watch and the next one
    assert lw.watch_times[1] - lw.watch_times[0] >= 0.009
    assert s1.close_calls >= 1
    assert sink.snapshot() == [
        ("list", ([], "5")),
        ("added", ("b", "6")),
        ("modified", ("b", "7")),
        ("deleted", ("b", "8")),
    ]


def test_transport_error_opening_watch_retries_same_rv(run_bg: RunBg) -> None:
    lw = ScriptedLW(
        lists=[([], "5")],
        watches=[TransportError("refused"), TransportError("refused")],
    )
    refl, _ = start(run_bg, lw)
    wait_for(lambda: lw.watch_count() >= 3, what="the third watch attempt")
    assert lw.watch_rvs[:3] == ["5", "5", "5"]
    assert lw.list_calls == 1
    # backoff grows: 0.01 then 0.02
    gaps = [b - a for a, b in zip(lw.watch_times, lw.watch_times[1:], strict=False)]
    assert gaps[0] >= 0.009 and gaps[1] >= 0.019
    assert refl.lists == 1


def test_server_error_opening_watch_backs_off_without_relist(run_bg: RunBg) -> None:
    lw = ScriptedLW(
        lists=[([], "5")],
        watches=[error_from_status(500, {"message": "etcd unavailable"})],
    )
    start(run_bg, lw)
    wait_for(lambda: lw.watch_count() >= 2, what="the retried watch")
    assert lw.watch_rvs[:2] == ["5", "5"]
    assert lw.list_calls == 1


def test_too_many_requests_on_watch_waits_retry_after(run_bg: RunBg) -> None:
    lw = ScriptedLW(
        lists=[([], "5")],
        watches=[TooManyRequests(429, "TooManyRequests", "slow down", retry_after=0.2)],
    )
    start(run_bg, lw)
    wait_for(lambda: lw.watch_count() >= 2, what="the watch after the 429")
    assert lw.watch_times[1] - lw.watch_times[0] >= 0.199
    assert lw.watch_rvs[:2] == ["5", "5"]
    assert lw.list_calls == 1


def test_too_many_requests_on_list_waits_retry_after(run_bg: RunBg) -> None:
    lw = ScriptedLW(
        lists=[TooManyRequests(429, "TooManyRequests", "slow down", retry_after=0.2), ([], "5")]
    )
    _, sink = start(run_bg, lw)
    wait_for(lambda: lw.watch_count() >= 1, what="the watch after the retried list")
    assert lw.list_calls == 2
    assert lw.list_times[1] - lw.list_times[0] >= 0.199
    assert sink.snapshot() == [("list", ([], "5"))]


def test_list_failures_back_off_and_retry(run_bg: RunBg) -> None:
    lw = ScriptedLW(
        lists=[
            TransportError("connection refused"),
            error_from_status(500, {"message": "boom"}),
            error_from_status(403, {"reason": "Forbidden", "message": "no"}),
            ([obj("a", 1)], "4"),
        ]
    )
    refl, sink = start(run_bg, lw)
    wait_for(lambda: lw.watch_count() >= 1, what="the watch after the successful list")
    assert lw.list_calls == 4
    assert refl.lists == 1
    assert lw.watch_rvs == ["4"]
    assert sink.snapshot() == [("list", (["a"], "4"))]
    gaps = [b - a for a, b in zip(lw.list_times, lw.list_times[1:], strict=False)]
    assert gaps[0] >= 0.009 and gaps[1] >= 0.019 and gaps[2] >= 0.039, gaps


def test_out_of_order_initial_list_gives_store_equal_to_list(run_bg: RunBg) -> None:
    items = [obj("zeta", 7), obj("alpha", 42), obj("mid", 3), obj("beta", 1, namespace="aaa")]
    lw = ScriptedLW(lists=[(items, "50")])
    inf = SharedInformer(lw, reflector_factory=lambda lw_, sink: make_reflector(lw_, sink))
    run_bg(inf.run)
    wait_for(inf.has_synced, what="the informer to sync")
    wait_for(lambda: lw.watch_count() >= 1, what="the watch")
    assert sorted(inf.store.list_keys()) == sorted(meta_namespace_key(o) for o in items)
    for o in items:
        assert inf.store.get(meta_namespace_key(o)) == o
    assert lw.watch_rvs == ["50"]  # the list's RV, not the largest item RV
    assert inf.reflector.last_resource_version == "50"


def test_stop_ends_run_promptly_while_blocked_in_watch() -> None:
    blocked = ScriptedStream([ev("ADDED", obj("a", 6))], block=True)
    lw = ScriptedLW(lists=[([], "5")], watches=[blocked])
    sink = RecordingSink()
    refl = make_reflector(lw, sink)
    stop = threading.Event()
    t = threading.Thread(target=refl.run, args=(stop,), daemon=True)
    t.start()
    wait_for(blocked.exhausted.is_set, what="the reflector to block inside the stream")
    assert sink.count("added") == 1
    stopped_at = time.monotonic()
    stop.set()
    t.join(2)
    assert not t.is_alive(), "run() did not return after stop"
    assert time.monotonic() - stopped_at < 1.0
    assert blocked.closed.is_set() and blocked.close_calls >= 1, "the stream was not closed"
    assert lw.watch_count() == 1


def test_without_a_closer_thread_close_watch_ends_the_blocked_watch() -> None:
    """``run(stop, closer=False)`` starts no thread of its own; setting ``stop`` alone leaves it
    in the stream (the twin), and :meth:`Reflector.close_watch` then ends it."""
    blocked = ScriptedStream([ev("ADDED", obj("a", 6))], block=True)
    lw = ScriptedLW(lists=[([], "5")], watches=[blocked])
    refl = make_reflector(lw, RecordingSink())
    stop = threading.Event()
    before = threading.active_count()
    t = threading.Thread(target=refl.run, args=(stop,), kwargs={"closer": False}, daemon=True)
    t.start()
    wait_for(blocked.exhausted.is_set, what="the reflector to block inside the stream")
    assert threading.active_count() == before + 1  # its own thread only
    stop.set()
    t.join(0.5)
    assert t.is_alive(), "nothing closed the stream, yet run() returned"
    refl.close_watch()
    t.join(2)
    assert not t.is_alive(), "run() did not return after close_watch"
    assert blocked.closed.is_set()


def test_stop_during_backoff_ends_run_promptly() -> None:
    lw = ScriptedLW(lists=[TransportError("down")] * 100)
    refl = make_reflector(lw, RecordingSink(), backoff=None)  # default 0.8 s first step
    stop = threading.Event()
    t = threading.Thread(target=refl.run, args=(stop,), daemon=True)
    t.start()
    wait_for(lambda: lw.list_calls >= 1, what="the first list")
    stop.set()
    t.join(1.0)
    assert not t.is_alive(), "run() did not return while backing off"


def test_immediately_closing_watch_does_not_spin(run_bg: RunBg) -> None:
    lw = ScriptedLW(lists=[([], "5")], watches=[ScriptedStream() for _ in range(1000)])
    refl, _ = start(run_bg, lw)
    wait_for(lambda: lw.watch_count() >= 1, what="the first watch")
    time.sleep(0.3)  # observation window, not synchronisation
    n = lw.watch_count()
    # backoff 0.01, 0.02, 0.04, 0.05, ... allows about 8 watches in 0.3 s; a spin makes thousands
    assert 2 <= n <= 15, f"{n} watches in 0.3 s"
    assert set(lw.watch_rvs) == {"5"}
    assert lw.list_calls == 1
    assert refl.watches == n or refl.watches == n - 1


class QuietStream(ScriptedStream):
    """An empty watch that lasts ``seconds`` of ``clock`` (a quiet resource's watch timing out)."""

    def __init__(self, clock: FakeClock, seconds: float) -> None:
        super().__init__()
        self.clock, self.seconds = clock, seconds

    def __iter__(self) -> Iterator[Obj]:
        self.clock.step(self.seconds)
        return super().__iter__()


@pytest.mark.parametrize(("lasted", "rewatched"), [(2.0, True), (0.5, False)])
def test_an_empty_watch_is_short_by_the_reflectors_clock(
    run_bg: RunBg, lasted: float, rewatched: bool
) -> None:
    # short_watch (1 s) is measured on the clock: an empty watch that lasted longer re-watches
    # at once; one that ended sooner backs off (here 60 s: no second watch within the test)
    clock = FakeClock(start=100.0)
    lw = ScriptedLW(lists=[([], "5")], watches=[QuietStream(clock, lasted) for _ in range(3)])
    refl = make_reflector(lw, RecordingSink(), clock=clock, backoff=Backoff(initial=60.0, jitter=0))
    running = run_bg(refl.run)
    if rewatched:
        wait_for(lambda: lw.watch_count() >= 4, what="three quiet watches and the next one")
    else:
        # the reflector blocks in its backoff pause (60 s) instead of watching again
        wait_parked(running.thread, where=Reflector._pause)
        assert lw.watch_count() == 1, "a watch shorter than short_watch backs off"
    assert lw.list_calls == 1


@pytest.mark.parametrize("kind", ["http-410", "in-stream-410", "too-large-rv"])
def test_watch_that_keeps_expiring_does_not_relist_in_a_tight_loop(
    run_bg: RunBg, kind: str
) -> None:
    # E.g. a lagging API server behind a load balancer answering every watch with "too large
    # resource version", or a broken watch cache answering 410: relists must back off too.
    def failure() -> ScriptedStream | BaseException:
        if kind == "http-410":
            return Gone(410, "Expired", "too old resource version")
        if kind == "in-stream-410":
            return ScriptedStream([error_event(410, "Expired")])
        return too_large_rv()

    lw = ScriptedLW(lists=[([obj("a", 1)], "5")], watches=[failure() for _ in range(1000)])
    _, sink = start(run_bg, lw)
    wait_for(lambda: lw.list_calls >= 2, what="the first relist")
    time.sleep(0.3)  # observation window, not synchronisation
    n = lw.list_calls
    assert n <= 15, f"{n} lists in about 0.3 s: relisting in a tight loop"
    assert sink.count("list") == n
