"""SharedInformerFactory end to end over the in-memory FakeKube API."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from informers.backoff import Backoff
from informers.factory import SharedInformerFactory
from informers.lister import Lister
from informers.reflector import Reflector
from informers.shared import EventHandler, SharedInformer
from informers.store import CONTROLLER_UID_INDEX, DeletedFinalStateUnknown, controller_uid_index
from kubeclient import CONFIGMAPS, PODS, TransportError
from tests.fakekube import FakeKube
from tests.informers.helpers import HandlerLog
from tests.support.waiting import wait_for

NS = "team"


class GatedBackoff(Backoff):
    """A fast backoff whose ``next()`` blocks while the gate is closed.

    Closing the gate keeps a reflector "away" (stuck in its retry pause) after a broken watch,
    so a test can change the API deterministically before it comes back.
    """

    def __init__(self) -> None:
        super().__init__(initial=0.01, maximum=0.05, jitter=0)
        self.gate = threading.Event()
        self.gate.set()
        self.waiting = threading.Event()

    def next(self) -> float:
        if not self.gate.is_set():
            self.waiting.set()
            assert self.gate.wait(10), "gate never reopened"
            self.waiting.clear()
        return super().next()


def speed_up(inf: SharedInformer, backoff: Backoff | None = None) -> Backoff:
    """Swap the informer's reflector (before start) for one with a fast test backoff."""
    b = backoff or Backoff(initial=0.01, maximum=0.05, jitter=0)
    inf.reflector = Reflector(inf.lw, inf, name=inf.name, backoff=b, min_watch_timeout=60)
    return b


def pod(name: str, labels: dict[str, str] | None = None, **extra: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if labels is not None:
        meta["labels"] = labels
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, **extra}


def list_actions(kube: FakeKube, res: str = "pods") -> int:
    return sum(1 for a in kube.actions if a.verb == "list" and a.resource == res)


def watch_actions(kube: FakeKube, res: str = "pods") -> int:
    return sum(1 for a in kube.actions if a.verb == "watch" and a.resource == res)


def log_handler(inf: SharedInformer) -> HandlerLog:
    log = HandlerLog()
    inf.add_event_handler(
        EventHandler(on_add=log.on_add, on_update=log.on_update, on_delete=log.on_delete)
    )
    return log


@pytest.fixture
def kube() -> FakeKube:
    return FakeKube()


@pytest.fixture
def stop() -> Iterator[threading.Event]:
    ev = threading.Event()
    yield ev
    ev.set()


@pytest.fixture
def factory(kube: FakeKube, stop: threading.Event) -> Iterator[SharedInformerFactory]:
    f = SharedInformerFactory(kube)
    yield f
    stop.set()
    f.join(5)
    assert not any(t.is_alive() for t in f._threads.values()), "informer threads still running"


def keys(inf: SharedInformer) -> list[str]:
    return sorted(inf.store.list_keys())


def start_synced(factory: SharedInformerFactory, stop: threading.Event) -> None:
    factory.start(stop)
    assert factory.wait_for_cache_sync(stop, timeout=5), "informers did not sync"
    assert factory.has_synced()


def test_informer_for_is_shared_per_resource_and_selector(factory: SharedInformerFactory) -> None:
    a = factory.informer_for(PODS)
    assert factory.informer_for(PODS) is a
    b = factory.informer_for(PODS, label_selector="app=dgl")
    assert b is not a
    assert factory.informer_for(PODS, label_selector="app=dgl") is b
    c = factory.informer_for(CONFIGMAPS)
    assert c is not a and c is not b
    assert len(factory.informers()) == 3


def test_informer_for_adds_indexers_to_an_existing_informer(
    kube: FakeKube, factory: SharedInformerFactory, stop: threading.Event
) -> None:
    owner = {"apiVersion": "v1", "kind": "ConfigMap", "name": "o", "uid": "u-1", "controller": True}
    kube.create(PODS, NS, pod("w0"))
    kube.patch(PODS, NS, "w0", {"metadata": {"ownerReferences": [owner]}})
    inf = factory.informer_for(PODS)
    speed_up(inf)
    start_synced(factory, stop)
    again = factory.informer_for(PODS, indexers={CONTROLLER_UID_INDEX: controller_uid_index})
    assert again is inf
    assert [o["metadata"]["name"] for o in Lister(inf.store).controlled_by("u-1")] == ["w0"]


def test_start_sync_and_live_changes(
    kube: FakeKube, factory: SharedInformerFactory, stop: threading.Event
) -> None:
    kube.create(PODS, NS, pod("a"))
    kube.create(PODS, "other", pod("b"))
    pods = factory.informer_for(PODS)
    cms = factory.informer_for(CONFIGMAPS)
    speed_up(pods)
    speed_up(cms)
    log = log_handler(pods)
    assert not factory.has_synced()
    start_synced(factory, stop)
    assert keys(pods) == ["other/b", "team/a"]
    assert keys(cms) == []
    assert kube.wait_for_watches(2)

    kube.create(PODS, NS, pod("c"))
    kube.patch(PODS, NS, "a", {"metadata": {"labels": {"x": "1"}}})
    kube.delete(PODS, "other", "b")
    kube.create(CONFIGMAPS, NS, {"metadata": {"name": "cm"}, "data": {"k": "v"}})

    wait_for(lambda: keys(pods) == ["team/a", "team/c"], what="pods cache to follow the API")
    wait_for(lambda: keys(cms) == ["team/cm"], what="configmaps cache to follow the API")
    a = pods.store.get("team/a")
    assert a is not None
    assert a["metadata"]["labels"] == {"x": "1"}
    assert a == kube.get(PODS, NS, "a")
    cm = cms.store.get("team/cm")
    assert cm is not None and cm["data"] == {"k": "v"}
    wait_for(lambda: len(log.snapshot()) == 5, what="five notifications")
    assert [k for k, _ in log.snapshot()] == ["add", "add", "add", "update", "delete"]
    deleted = log.of("delete")[0]
    assert not isinstance(deleted, DeletedFinalStateUnknown)
    assert deleted["metadata"]["name"] == "b"
    assert list_actions(kube) == 1


def test_label_selector_filters_the_cache(
    kube: FakeKube, factory: SharedInformerFactory, stop: threading.Event
) -> None:
    kube.create(PODS, NS, pod("in-1", {"app": "dgl"}))
    kube.create(PODS, NS, pod("out-1", {"app": "web"}))
    inf = factory.informer_for(PODS, label_selector="app=dgl")
    every = factory.informer_for(PODS)
    speed_up(inf)
    speed_up(every)
    log = log_handler(inf)
    start_synced(factory, stop)
    assert keys(inf) == ["team/in-1"]
    assert keys(every) == ["team/in-1", "team/out-1"]

    kube.create(PODS, NS, pod("out-2", {"app": "web"}))
    kube.create(PODS, NS, pod("in-2", {"app": "dgl"}))
    kube.patch(PODS, NS, "out-1", {"metadata": {"labels": {"app": "dgl"}}})  # relabelled in
    kube.patch(PODS, NS, "in-1", {"metadata": {"labels": {"app": "web"}}})  # relabelled out

    wait_for(lambda: keys(inf) == ["team/in-2", "team/out-1"], what="the selector's view of pods")
    wait_for(lambda: len(every.store) == 4, what="the unfiltered informer to see all 4 pods")
    wait_for(lambda: len(log.snapshot()) == 4, what="4 notifications")
    seen = {
        (k, (p if isinstance(p, dict) else p[1])["metadata"]["name"]) for k, p in log.snapshot()
    }
    assert seen == {("add", "in-1"), ("add", "in-2"), ("add", "out-1"), ("delete", "in-1")}
    assert all("out-2" not in name for _, name in seen)


def test_watch_expiry_relists_and_delivers_tombstone(
    kube: FakeKube, factory: SharedInformerFactory, stop: threading.Event
) -> None:
    for n in ("a", "b", "c"):
        kube.create(PODS, NS, pod(n))
    kube.patch(PODS, NS, "b", {"metadata": {"labels": {"last": "known"}}})
    inf = factory.informer_for(PODS)
    backoff = GatedBackoff()
    speed_up(inf, backoff)
    log = log_handler(inf)
    start_synced(factory, stop)
    assert kube.wait_for_watches(1)
    assert list_actions(kube) == 1

    # The watch breaks and the reflector is kept away while the API moves on.
    backoff.gate.clear()
    kube.break_watches()
    wait_for(backoff.waiting.is_set, what="the reflector to back off after the broken watch")
    kube.delete(PODS, NS, "b")
    kube.create(PODS, NS, pod("d"))
    kube.patch(PODS, NS, "c", {"metadata": {"labels": {"v": "2"}}})
    kube.compact()  # the reflector's resourceVersion is gone from the history
    backoff.gate.set()

    wait_for(lambda: keys(inf) == ["team/a", "team/c", "team/d"], what="the cache after the relist")
    wait_for(lambda: any(k == "delete" for k, _ in log.snapshot()), what="the tombstone")
    assert list_actions(kube) == 2, "expired watch must relist"
    deletes = log.of("delete")
    assert len(deletes) == 1
    tomb = deletes[0]
    assert isinstance(tomb, DeletedFinalStateUnknown)
    assert tomb.key == "team/b"
    assert tomb.obj["metadata"]["labels"] == {"last": "known"}  # the last state we saw
    assert inf.store.get("team/b") is None
    c = inf.store.get("team/c")
    assert c is not None and c["metadata"]["labels"] == {"v": "2"}
    assert inf.reflector.last_resource_version == str(kube.resource_version)


def test_broken_watch_resumes_from_history_without_relist(
    kube: FakeKube, factory: SharedInformerFactory, stop: threading.Event
) -> None:
    kube.create(PODS, NS, pod("a"))
    inf = factory.informer_for(PODS)
    backoff = GatedBackoff()
    speed_up(inf, backoff)
    log = log_handler(inf)
    start_synced(factory, stop)
    assert kube.wait_for_watches(1)
    watches_before = watch_actions(kube)

    backoff.gate.clear()
    kube.break_watches()  # "the API server restarted"
    wait_for(backoff.waiting.is_set, what="the reflector to back off after the broken watch")
    kube.create(PODS, NS, pod("b"))
    kube.delete(PODS, NS, "a")
    backoff.gate.set()

    wait_for(lambda: keys(inf) == ["team/b"], what="the events written while the watch was down")
    assert list_actions(kube) == 1, "history still available: no relist"
    assert watch_actions(kube) == watches_before + 1
    wait_for(lambda: len(log.snapshot()) == 3, what="add a, add b, delete a")
    kinds = [k for k, _ in log.snapshot()]
    assert kinds == ["add", "add", "delete"]
    assert not isinstance(log.of("delete")[0], DeletedFinalStateUnknown)

    # and it keeps watching live
    assert kube.wait_for_watches(1)
    kube.create(PODS, NS, pod("c"))
    wait_for(lambda: keys(inf) == ["team/b", "team/c"], what="a live event after the resume")


def test_broken_watch_with_live_writes_loses_nothing(
    kube: FakeKube, factory: SharedInformerFactory, stop: threading.Event
) -> None:
    # A real list never returns resourceVersion "0"; FakeKube does for an empty store, and a
    # watch from "0" means "from now" to it. Make the RV non-zero first.
    kube.create(CONFIGMAPS, NS, {"metadata": {"name": "bump"}})
    inf = factory.informer_for(PODS)
    speed_up(inf)
    start_synced(factory, stop)
    assert inf.reflector.last_resource_version == "1"
    for i in range(30):
        kube.create(PODS, NS, pod(f"p{i}"))
        if i % 7 == 0:
            kube.break_watches()
    expected = [f"team/p{i}" for i in range(30)]
    wait_for(lambda: keys(inf) == sorted(expected), what="all 30 pods despite broken watches")
    assert list_actions(kube) == 1


def test_clean_server_end_rewatches_without_relist(
    kube: FakeKube, factory: SharedInformerFactory, stop: threading.Event
) -> None:
    kube.create(CONFIGMAPS, NS, {"metadata": {"name": "bump"}})  # RV > 0 (see above)
    inf = factory.informer_for(PODS)
    speed_up(inf)
    start_synced(factory, stop)
    assert kube.wait_for_watches(1)
    kube.create(PODS, NS, pod("a"))
    wait_for(lambda: keys(inf) == ["team/a"], what="the first pod")
    kube.end_watches()
    kube.create(PODS, NS, pod("b"))
    wait_for(lambda: keys(inf) == ["team/a", "team/b"], what="the pod written after the clean end")
    assert list_actions(kube) == 1
    assert watch_actions(kube) >= 2


def test_list_failure_at_start_still_syncs_after_backoff(
    kube: FakeKube, factory: SharedInformerFactory, stop: threading.Event
) -> None:
    kube.create(PODS, NS, pod("a"))
    kube.fail_next("list", PODS, TransportError("connection refused (fake)"), times=2)
    inf = factory.informer_for(PODS)
    speed_up(inf)
    factory.start(stop)
    assert factory.wait_for_cache_sync(stop, timeout=5)
    assert keys(inf) == ["team/a"]
    assert list_actions(kube) == 3  # two failed, one good


def test_list_failure_with_default_backoff_still_syncs(
    kube: FakeKube, factory: SharedInformerFactory, stop: threading.Event
) -> None:
    kube.create(PODS, NS, pod("a"))
    kube.fail_next("list", PODS, TransportError("connection refused (fake)"))
    inf = factory.informer_for(PODS)  # production reflector: 0.8-1.6 s first backoff
    factory.start(stop)
    assert factory.wait_for_cache_sync(stop, timeout=5)
    assert keys(inf) == ["team/a"]
    assert list_actions(kube) == 2


def test_bookmarks_do_not_create_store_entries(
    kube: FakeKube, factory: SharedInformerFactory, stop: threading.Event
) -> None:
    kube.create(PODS, NS, pod("a"))
    inf = factory.informer_for(PODS)
    speed_up(inf)
    log = log_handler(inf)
    start_synced(factory, stop)
    assert kube.wait_for_watches(1)
    # Writes to another resource move the global resourceVersion past the pods' one.
    for i in range(3):
        kube.create(CONFIGMAPS, NS, {"metadata": {"name": f"cm{i}"}})
    kube.send_bookmark()
    target = str(kube.resource_version)
    wait_for(lambda: inf.reflector.last_resource_version == target, what="the bookmark's RV")
    assert keys(inf) == ["team/a"]
    assert len(inf.store) == 1
    wait_for(inf.handlers_idle, what="handlers idle")
    assert [k for k, _ in log.snapshot()] == ["add"]

    # the next watch resumes from the bookmark
    kube.end_watches()
    wait_for(lambda: watch_actions(kube) >= 2, what="a re-watch")
    kube.create(PODS, NS, pod("b"))
    wait_for(lambda: keys(inf) == ["team/a", "team/b"], what="a pod after the bookmark")
    assert list_actions(kube) == 1


def test_namespaced_factory_only_sees_its_namespace(kube: FakeKube, stop: threading.Event) -> None:
    kube.create(PODS, NS, pod("mine"))
    kube.create(PODS, "elsewhere", pod("theirs"))
    f = SharedInformerFactory(kube, namespace=NS)
    inf = f.informer_for(PODS)
    speed_up(inf)
    try:
        f.start(stop)
        assert f.wait_for_cache_sync(stop, timeout=5)
        assert keys(inf) == ["team/mine"]
        assert kube.wait_for_watches(1)
        kube.create(PODS, "elsewhere", pod("theirs-2"))
        kube.create(PODS, NS, pod("mine-2"))
        wait_for(lambda: keys(inf) == ["team/mine", "team/mine-2"], what="the namespaced view")
    finally:
        stop.set()
        f.join(5)
    assert all(a.namespace in (NS, None) for a in kube.actions if a.verb in ("list", "watch"))


def test_factory_start_is_idempotent_and_picks_up_new_informers(
    kube: FakeKube, factory: SharedInformerFactory, stop: threading.Event
) -> None:
    pods = factory.informer_for(PODS)
    speed_up(pods)
    start_synced(factory, stop)
    factory.start(stop)  # again: must not start pods twice (run() would raise)
    cms = factory.informer_for(CONFIGMAPS)
    speed_up(cms)
    assert not factory.has_synced()
    start_synced(factory, stop)
    assert cms.has_synced()
    assert list_actions(kube, "pods") == 1
    assert list_actions(kube, "configmaps") == 1


def test_factory_stop_ends_all_informer_threads(kube: FakeKube) -> None:
    stop = threading.Event()
    f = SharedInformerFactory(kube)
    for res in (PODS, CONFIGMAPS):
        speed_up(f.informer_for(res))
    f.start(stop)
    assert f.wait_for_cache_sync(stop, timeout=5)
    assert kube.wait_for_watches(2)
    stop.set()
    f.join(3)
    assert not any(t.is_alive() for t in f._threads.values())
    wait_for(lambda: kube.open_watches() == 0, what="every watch closed")
