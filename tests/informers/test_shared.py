"""SharedInformer: cache + fan-out to handlers, relist tombstones, resync, sync waiting."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from informers.shared import EventHandler, SharedInformer, wait_for_cache_sync
from informers.store import DeletedFinalStateUnknown
from kubeclient import TransportError
from tests.informers.helpers import (
    HandlerLog,
    Running,
    ScriptedLW,
    ScriptedStream,
    error_event,
    ev,
    make_reflector,
    obj,
)
from tests.support.waiting import wait_for

RunBg = Callable[[Callable[[threading.Event], None]], Running]


def informer(lw: ScriptedLW, **kw: Any) -> SharedInformer:
    return SharedInformer(lw, reflector_factory=lambda lw_, sink: make_reflector(lw_, sink), **kw)


def handler(log: HandlerLog) -> EventHandler:
    return EventHandler(on_add=log.on_add, on_update=log.on_update, on_delete=log.on_delete)


def rv(o: Any) -> str:
    return str(o["metadata"]["resourceVersion"])


def name(o: Any) -> str:
    return str(o["metadata"]["name"])


def idle(inf: SharedInformer) -> None:
    wait_for(inf.handlers_idle, what="handlers to drain")


def test_initial_list_delivered_as_adds(run_bg: RunBg) -> None:
    lw = ScriptedLW(lists=[([obj("a", 1), obj("b", 2), obj("c", 3)], "3")])
    inf = informer(lw)
    log = HandlerLog()
    inf.add_event_handler(handler(log))
    run_bg(inf.run)
    wait_for(lambda: len(log.snapshot()) == 3, what="three adds")
    assert [k for k, _ in log.snapshot()] == ["add"] * 3
    assert sorted(name(o) for o in log.of("add")) == ["a", "b", "c"]
    assert sorted(inf.store.list_keys()) == ["ns/a", "ns/b", "ns/c"]
    # handlers get the cached object itself (shared, read-only)
    for o in log.of("add"):
        assert inf.store.get(f"ns/{name(o)}") is o


def test_watch_events_become_add_update_delete(run_bg: RunBg) -> None:
    stream = ScriptedStream(
        [
            ev("ADDED", obj("b", 4)),
            ev("MODIFIED", obj("a", 5, spec={"x": 1})),
            ev("DELETED", obj("b", 6)),
            ev("MODIFIED", obj("new", 7)),  # MODIFIED for an unknown object is an add
            ev("ADDED", obj("a", 8)),  # ADDED for a known object is an update
        ],
        block=True,
    )
    lw = ScriptedLW(lists=[([obj("a", 1)], "3")], watches=[stream])
    inf = informer(lw)
    log = HandlerLog()
    inf.add_event_handler(handler(log))
    run_bg(inf.run)
    wait_for(lambda: len(log.snapshot()) == 6, what="six notifications")
    kinds = [(k, p) for k, p in log.snapshot()]
    assert kinds[0][0] == "add" and name(kinds[0][1]) == "a"
    assert kinds[1][0] == "add" and rv(kinds[1][1]) == "4"
    k, (old, new) = kinds[2]
    assert k == "update" and (rv(old), rv(new)) == ("1", "5") and new["spec"] == {"x": 1}
    k, gone = kinds[3]
    assert k == "delete" and not isinstance(gone, DeletedFinalStateUnknown)
    assert (name(gone), rv(gone)) == ("b", "6")
    assert kinds[4][0] == "add" and name(kinds[4][1]) == "new"
    k, (old, new) = kinds[5]
    assert k == "update" and (rv(old), rv(new)) == ("5", "8")
    assert sorted(inf.store.list_keys()) == ["ns/a", "ns/new"]
    a = inf.store.get("ns/a")
    assert a is not None and rv(a) == "8"


def test_relist_delivers_tombstones_and_updates(run_bg: RunBg) -> None:
    stream = ScriptedStream(
        [ev("MODIFIED", obj("b", 4, spec={"last": "known"})), error_event(410, "Expired")]
    )
    lw = ScriptedLW(
        lists=[
            ([obj("a", 1), obj("b", 2), obj("c", 3)], "3"),
            ([obj("a", 9), obj("c", 3), obj("d", 10)], "10"),
        ],
        watches=[stream],
    )
    inf = informer(lw)
    log = HandlerLog()
    inf.add_event_handler(handler(log))
    run_bg(inf.run)
    wait_for(lambda: lw.list_calls == 2 and lw.watch_count() >= 2, what="the relist and next watch")
    idle(inf)
    events = log.snapshot()[4:]  # after the 3 initial adds and the MODIFIED
    tombstones = [p for k, p in events if k == "delete"]
    assert len(tombstones) == 1
    tomb = tombstones[0]
    assert isinstance(tomb, DeletedFinalStateUnknown)
    assert tomb.key == "ns/b"
    assert rv(tomb.obj) == "4" and tomb.obj["spec"] == {"last": "known"}  # last known state
    updates = {name(p[1]): (rv(p[0]), rv(p[1])) for k, p in events if k == "update"}
    assert updates == {"a": ("1", "9"), "c": ("3", "3")}  # c unchanged: a resync-style update
    adds = [name(p) for k, p in events if k == "add"]
    assert adds == ["d"]
    assert sorted(inf.store.list_keys()) == ["ns/a", "ns/c", "ns/d"]
    assert inf.store.get("ns/b") is None


def test_has_synced_only_after_first_list(run_bg: RunBg) -> None:
    gate = threading.Event()
    listing = threading.Event()
    lw = ScriptedLW(lists=[([obj("a", 1)], "1")])
    real_list = lw.list

    def slow_list() -> Any:
        listing.set()
        assert gate.wait(5), "gate never opened"
        return real_list()

    lw.list = slow_list  # type: ignore[method-assign]
    inf = informer(lw)
    assert not inf.has_synced()
    run_bg(inf.run)
    wait_for(listing.is_set, what="the reflector to start listing")  # and block on the gate
    assert not inf.has_synced()
    assert not inf.wait_for_sync(0.05)
    gate.set()
    assert inf.wait_for_sync(5)
    assert inf.has_synced()
    assert inf.store.list_keys() == ["ns/a"]


def test_has_synced_stays_false_while_list_fails(run_bg: RunBg) -> None:
    lw = ScriptedLW(lists=[TransportError("down")] * 1000)
    inf = informer(lw)
    run_bg(inf.run)
    wait_for(lambda: lw.list_calls >= 3, what="several failed lists")
    assert not inf.has_synced()


def test_wait_for_cache_sync(run_bg: RunBg) -> None:
    never = informer(ScriptedLW(lists=[TransportError("down")] * 1000))
    run_bg(never.run)
    stop = threading.Event()
    t0 = time.monotonic()
    assert wait_for_cache_sync(stop, never, timeout=0.2) is False
    assert 0.15 <= time.monotonic() - t0 < 2.0

    synced = informer(ScriptedLW(lists=[([obj("a", 1)], "1")]))
    run_bg(synced.run)
    assert wait_for_cache_sync(stop, synced, timeout=5) is True
    # all informers must be synced
    assert wait_for_cache_sync(stop, synced, never, timeout=0.1) is False

    stop.set()
    t0 = time.monotonic()
    assert wait_for_cache_sync(stop, never, timeout=5) is False
    assert time.monotonic() - t0 < 1.0, "a set stop must end the wait promptly"


def test_wait_for_cache_sync_returns_false_when_stop_set_while_waiting(run_bg: RunBg) -> None:
    never = informer(ScriptedLW(lists=[TransportError("down")] * 1000))
    run_bg(never.run)
    stop = threading.Event()
    result: list[bool] = []
    t = threading.Thread(target=lambda: result.append(wait_for_cache_sync(stop, never)))
    t.start()
    wait_for(lambda: t.is_alive(), what="the waiter to start")
    stop.set()
    t.join(2)
    assert not t.is_alive(), "wait_for_cache_sync ignored stop"
    assert result == [False]


def test_handler_added_after_start_gets_cached_objects_as_adds(run_bg: RunBg) -> None:
    stream = ScriptedStream([ev("ADDED", obj("c", 5))], block=True)
    lw = ScriptedLW(lists=[([obj("a", 1), obj("b", 2)], "3")], watches=[stream])
    inf = informer(lw)
    run_bg(inf.run)
    wait_for(lambda: len(inf.store) == 3, what="the cache to hold 3 objects")
    late = HandlerLog()
    inf.add_event_handler(handler(late))
    wait_for(lambda: len(late.snapshot()) == 3, what="the late handler to get the cache")
    assert [k for k, _ in late.snapshot()] == ["add"] * 3
    assert sorted(name(o) for o in late.of("add")) == ["a", "b", "c"]


def test_slow_handler_does_not_delay_fast_handler_or_store(run_bg: RunBg) -> None:
    release = threading.Event()
    slow_seen: list[str] = []

    def slow_add(o: Any) -> None:
        release.wait(5)  # stuck until the test releases it
        slow_seen.append(name(o))

    stream = ScriptedStream([ev("ADDED", obj(f"p{i}", 10 + i)) for i in range(5)], block=True)
    lw = ScriptedLW(lists=[([obj("a", 1)], "3")], watches=[stream])
    inf = informer(lw)
    fast = HandlerLog()
    inf.add_event_handler(EventHandler(on_add=slow_add))
    inf.add_event_handler(handler(fast))
    run_bg(inf.run)
    wait_for(lambda: len(fast.snapshot()) == 6, what="the fast handler to get all 6 adds")
    wait_for(lambda: len(inf.store) == 6, what="the store to hold all 6 objects")
    assert slow_seen == []
    assert not inf.handlers_idle()
    release.set()
    wait_for(lambda: len(slow_seen) == 6, what="the slow handler to catch up")
    assert slow_seen == ["a", "p0", "p1", "p2", "p3", "p4"]  # in order
    idle(inf)


def test_handler_exception_does_not_stop_later_deliveries(run_bg: RunBg) -> None:
    seen: list[str] = []

    def flaky_add(o: Any) -> None:
        seen.append(name(o))
        if name(o) == "boom":
            raise RuntimeError("handler bug")

    stream = ScriptedStream([ev("ADDED", obj("boom", 2)), ev("ADDED", obj("after", 3))], block=True)
    lw = ScriptedLW(lists=[([obj("first", 1)], "1")], watches=[stream])
    inf = informer(lw)
    other = HandlerLog()
    inf.add_event_handler(EventHandler(on_add=flaky_add))
    inf.add_event_handler(handler(other))
    run_bg(inf.run)
    wait_for(lambda: len(seen) == 3, what="the flaky handler to get all three adds")
    assert seen == ["first", "boom", "after"]
    wait_for(lambda: len(other.snapshot()) == 3, what="the other handler to get all three adds")


def test_resync_replays_cache_as_updates_without_api_calls(run_bg: RunBg) -> None:
    lw = ScriptedLW(lists=[([obj("a", 1), obj("b", 2)], "2")])
    inf = informer(lw, resync_period=0.05)
    log = HandlerLog()
    inf.add_event_handler(handler(log))
    run_bg(inf.run)

    def resynced_both() -> bool:
        return {name(new) for old, new in log.of("update")} >= {"a", "b"}

    wait_for(resynced_both, what="resync updates for a and b")
    for old, new in log.of("update"):
        assert old is new, "a resync update carries the cached object as both old and new"
        assert inf.store.get(f"ns/{name(new)}") is new
    assert lw.list_calls == 1
    assert lw.watch_count() == 1
    assert log.of("delete") == []


def test_resync_is_not_run_before_sync(run_bg: RunBg) -> None:
    lw = ScriptedLW(lists=[TransportError("down")] * 1000)
    inf = informer(lw, resync_period=0.01)
    log = HandlerLog()
    inf.add_event_handler(handler(log))
    run_bg(inf.run)
    wait_for(lambda: lw.list_calls >= 3, what="several failed lists")
    assert log.snapshot() == []


def test_resync_method_directly() -> None:
    inf = informer(ScriptedLW(lists=[([obj("a", 1)], "1")]))
    log = HandlerLog()
    inf.add_event_handler(handler(log))
    inf.on_list([obj("a", 1)], "1")
    inf.resync()
    # Not started: the listener thread is not running, so nothing is delivered yet.
    assert log.snapshot() == []
    stop = threading.Event()
    # run() starts listeners; the reflector then blocks on the scripted watch
    t = inf.start(stop)
    try:
        wait_for(lambda: len(log.snapshot()) >= 3, what="the queued notifications and the list")
        assert log.snapshot()[0][0] == "add"
        k, (old, new) = log.snapshot()[1]
        assert k == "update" and old is new
        k, (old, new) = log.snapshot()[2]  # the reflector's list: same object again
        assert k == "update" and rv(old) == rv(new) == "1"
    finally:
        stop.set()
        t.join(3)
    assert not t.is_alive()


def test_default_transform_strips_managed_fields(run_bg: RunBg) -> None:
    managed = [{"manager": "kubectl", "operation": "Update", "fieldsV1": {"f:spec": {}}}]

    def with_managed(n: str, r: int) -> dict[str, Any]:
        o = obj(n, r)
        o["metadata"]["managedFields"] = managed
        return o

    stream = ScriptedStream([ev("ADDED", with_managed("w", 5))], block=True)
    lw = ScriptedLW(lists=[([with_managed("l", 1)], "1")], watches=[stream])
    inf = informer(lw)
    log = HandlerLog()
    inf.add_event_handler(handler(log))
    run_bg(inf.run)
    wait_for(lambda: len(log.snapshot()) == 2, what="two adds")
    for key in ("ns/l", "ns/w"):
        cached = inf.store.get(key)
        assert cached is not None
        assert "managedFields" not in cached["metadata"]
        assert cached["metadata"]["name"] == key.split("/")[1]
    for o in log.of("add"):
        assert "managedFields" not in o["metadata"]


def test_transform_none_keeps_managed_fields(run_bg: RunBg) -> None:
    o = obj("l", 1)
    o["metadata"]["managedFields"] = [{"manager": "x"}]
    lw = ScriptedLW(lists=[([o], "1")])
    inf = informer(lw, transform=None)
    run_bg(inf.run)
    wait_for(inf.has_synced, what="sync")
    cached = inf.store.get("ns/l")
    assert cached is not None and cached["metadata"]["managedFields"] == [{"manager": "x"}]


def test_handlers_idle(run_bg: RunBg) -> None:
    release = threading.Event()
    entered = threading.Event()

    def blocking_add(o: Any) -> None:
        entered.set()
        release.wait(5)

    lw = ScriptedLW(lists=[([obj("a", 1), obj("b", 2)], "2")])
    inf = informer(lw)
    assert inf.handlers_idle()  # no handlers at all
    inf.add_event_handler(EventHandler(on_add=blocking_add))
    run_bg(inf.run)
    wait_for(entered.is_set, what="the handler to start")
    assert not inf.handlers_idle()  # busy with "a", "b" still pending
    release.set()
    wait_for(inf.handlers_idle, what="the handler to finish")
    assert inf.handlers_idle()


def test_custom_indexers_are_maintained(run_bg: RunBg) -> None:
    def by_phase(o: Any) -> list[str]:
        phase = (o.get("status") or {}).get("phase")
        return [phase] if phase else []

    stream = ScriptedStream([ev("MODIFIED", obj("a", 5, status={"phase": "Running"}))], block=True)
    lw = ScriptedLW(
        lists=[([obj("a", 1, status={"phase": "Pending"}), obj("b", 2)], "2")], watches=[stream]
    )
    inf = informer(lw, indexers={"phase": by_phase})
    run_bg(inf.run)
    wait_for(lambda: inf.store.index_keys("phase", "Running") == ["ns/a"], what="a to be Running")
    assert inf.store.index_keys("phase", "Pending") == []
    assert inf.store.index_keys("namespace", "ns") == ["ns/a", "ns/b"]


def test_run_twice_is_rejected(run_bg: RunBg) -> None:
    inf = informer(ScriptedLW(lists=[([], "1")]))
    run_bg(inf.run)
    wait_for(inf.has_synced, what="sync")
    with pytest.raises(RuntimeError, match="already started"):
        inf.run(threading.Event())
