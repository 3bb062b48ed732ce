"""Lease-based leader election over FakeKube (Lease semantics: get/create/replace with RV)."""

from __future__ import annotations

import threading
from collections.abc import Callable

from controller.leader import LeaderConfig, LeaderElector
from informers.errors import ServerError
from informers.resources import LEASES
from tests.controller.harness import wait_for
from tests.fakekube import FakeKube

NS = "dgl-system"


def elector(
    kube: FakeKube, ident: str, started: Callable[[], None], stopped: Callable[[], None]
) -> LeaderElector:
    cfg = LeaderConfig(
        NS, "dgl-operator-leader", ident, lease_duration=0.6, renew_deadline=0.4, retry_period=0.05
    )
    return LeaderElector(kube, cfg, on_started_leading=started, on_stopped_leading=stopped)


class Candidate:
    def __init__(self, kube: FakeKube, ident: str) -> None:
        self.leading = threading.Event()
        self.lost = threading.Event()
        self.stop = threading.Event()
        self.elector = elector(kube, ident, self.leading.set, self.lost.set)
        self.thread = threading.Thread(target=self.elector.run, args=(self.stop,), daemon=True)

    def start(self) -> Candidate:
        self.thread.start()
        return self


def holder(kube: FakeKube) -> str:
    return str(kube.get(LEASES, NS, "dgl-operator-leader")["spec"].get("holderIdentity") or "")


def test_one_of_two_candidates_leads() -> None:
    kube = FakeKube()
    a, b = Candidate(kube, "a").start(), Candidate(kube, "b").start()
    wait_for(lambda: a.leading.is_set() or b.leading.is_set(), what="a leader")
    leader, other = (a, b) if a.leading.is_set() else (b, a)
    wait_for(lambda: holder(kube) in ("a", "b"))
    threading.Event().wait(0.8)  # longer than a lease: renewals keep it
    assert not other.leading.is_set()
    assert holder(kube) == leader.elector.config.identity
    assert leader.elector.is_leader and not other.elector.is_leader
    for c in (a, b):
        c.stop.set()
        c.thread.join(2)


def test_leader_that_cannot_renew_stops_and_another_takes_over() -> None:
    kube = FakeKube()
    a = Candidate(kube, "a").start()
    wait_for(a.leading.is_set, what="a leads")
    b = Candidate(kube, "b").start()
    # a's renewals now fail (API trouble for a only: b is not yet trying to write)
    kube.fail_next("update", LEASES, ServerError(500, "InternalError", "etcd down"), times=1000)
    wait_for(a.lost.is_set, timeout=3, what="a gives up after the renew deadline")
    assert not a.elector.is_leader
    kube.clear_faults()  # b can only acquire once writes work again
    wait_for(b.leading.is_set, timeout=5, what="b takes over after the lease expires")
    assert holder(kube) == "b"
    lease = kube.get(LEASES, NS, "dgl-operator-leader")
    assert lease["spec"]["leaseTransitions"] == 1
    for c in (a, b):
        c.stop.set()
        c.thread.join(2)


def test_clean_stop_releases_the_lease_at_once() -> None:
    kube = FakeKube()
    a = Candidate(kube, "a").start()
    wait_for(a.leading.is_set)
    a.stop.set()
    a.thread.join(2)
    assert holder(kube) == ""
    assert a.lost.is_set(), "on_stopped_leading runs on a clean stop too"
    b = Candidate(kube, "b").start()
    wait_for(b.leading.is_set, timeout=1, what="b acquires at once, without waiting a lease")
    b.stop.set()
    b.thread.join(2)
