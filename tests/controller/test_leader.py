"""Lease-based leader election over FakeKube (Lease semantics: get/create/replace with RV)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from clock import FakeClock
from controller.machinery.leader import LeaderConfig, LeaderElector
from kubeclient import LEASES, ServerError
from tests.controller.harness import fake_clock
from tests.fakekube import FakeKube
from tests.support.waiting import wait_for

NS = "dgl-system"


class CountingElector(LeaderElector):
    """A LeaderElector that records when each of its acquire-or-renew attempts ended and
    whether it got (or kept) the Lease."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.attempts: list[tuple[float, bool]] = []

    def try_acquire_or_renew(self) -> bool:
        got = super().try_acquire_or_renew()
        self.attempts.append((time.monotonic(), got))
        return got

    def attempts_since(self, t: float) -> list[bool]:
        return [got for at, got in list(self.attempts) if at > t]


def elector(
    kube: FakeKube,
    ident: str,
    started: Callable[[], None],
    stopped: Callable[[], None],
    lease_duration: float = 0.6,
    renew_deadline: float = 0.4,
) -> CountingElector:
    cfg = LeaderConfig(
        NS, "dgl-operator-leader", ident, lease_duration, renew_deadline, retry_period=0.05
    )
    return CountingElector(kube, cfg, on_started_leading=started, on_stopped_leading=stopped)


class Candidate:
    def __init__(self, kube: FakeKube, ident: str, **timing: float) -> None:
        self.leading = threading.Event()
        self.lost = threading.Event()
        self.stop = threading.Event()
        self.elector = elector(kube, ident, self.leading.set, self.lost.set, **timing)
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
    wait_for(lambda: holder(kube) in ("a", "b"), what="the Lease to name the leader")
    # The other candidate keeps trying. Once it has seen the Lease, a record nobody renewed
    # would expire for it within a lease duration: the second of its attempts after that
    # began after the expiry, so its failures show that the renewals kept the Lease.
    seen = time.monotonic()
    wait_for(lambda: other.elector.attempts_since(seen), what="the other candidate to try")
    expiry = time.monotonic() + leader.elector.config.lease_duration

    wait_for(
        lambda: len(other.elector.attempts_since(expiry)) >= 2 or other.leading.is_set(),
        what="the other candidate to try twice after a lease duration",
    )
    assert not other.leading.is_set(), "the other candidate took the Lease: renewals must keep it"
    assert not any(other.elector.attempts_since(expiry))
    assert holder(kube) == leader.elector.config.identity
    assert leader.elector.is_leader and not other.elector.is_leader
    for c in (a, b):
        c.stop.set()
        c.thread.join(2)


class Partitioned:
    """One replica's view of the API: its Lease updates fail while ``cut`` is set (a node
    cut off from the API server; the other replicas still reach it)."""

    def __init__(self, kube: FakeKube) -> None:
        self._kube = kube
        self.cut = threading.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._kube, name)

    def replace(self, *args: Any, **kwargs: Any) -> Any:
        if self.cut.is_set():
            raise ServerError(500, "InternalError", "cut off")
        return self._kube.replace(*args, **kwargs)


def test_leader_that_cannot_renew_stops_and_another_takes_over() -> None:
    kube = FakeKube()
    view = Partitioned(kube)
    a = Candidate(view, "a").start()  # type: ignore[arg-type]
    wait_for(a.leading.is_set, what="a leads")
    b = Candidate(kube, "b").start()
    view.cut.set()  # a's renewals now fail, b's writes do not
    wait_for(a.lost.is_set, what="a gives up after the renew deadline", timeout=3)
    assert not a.elector.is_leader
    wait_for(b.leading.is_set, what="b takes over after the lease expires", timeout=5)
    assert holder(kube) == "b"
    lease = kube.get(LEASES, NS, "dgl-operator-leader")
    assert lease["spec"]["leaseTransitions"] == 1
    # a sees b's record: its run() returns (the operator then exits, to start its next
    # term fresh), never to lead again in this process
    a.thread.join(3)
    assert not a.thread.is_alive() and a.elector.taken_over == "b"
    assert a.elector.terms == 1
    for c in (a, b):
        c.stop.set()
        c.thread.join(2)


def test_a_leader_that_could_not_renew_leads_again_at_once_on_its_own_lease() -> None:
    """The API server away past the renew deadline (a restart): the leader stops leading
    (the operator pauses its workers), keeps campaigning, and once writes work again renews
    the Lease that still names it without waiting for it to expire (60 s here): a second
    term, no transition. (Before, run() returned and the operator restarted: a fresh
    identity then waited out the whole lease.)"""
    kube = FakeKube()
    a = Candidate(kube, "a", lease_duration=60.0, renew_deadline=0.3)
    started: list[float] = []
    a.elector.on_started_leading = lambda: started.append(time.monotonic())
    a.start()
    wait_for(lambda: started, what="a leads")
    kube.fail_next("update", LEASES, ServerError(503, "ServiceUnavailable", "away"), times=1000)
    wait_for(a.lost.is_set, what="a gives up after the renew deadline", timeout=3)
    assert not a.elector.is_leader and a.thread.is_alive(), "a stopped campaigning"
    back = time.monotonic()
    kube.clear_faults()
    wait_for(lambda: len(started) == 2, what="a to lead again", timeout=10)
    assert started[1] - back < 10, "a waited for its own lease to expire"
    assert a.elector.terms == 2 and a.elector.taken_over == ""
    assert holder(kube) == "a"
    assert kube.get(LEASES, NS, "dgl-operator-leader")["spec"]["leaseTransitions"] == 0
    a.stop.set()
    a.thread.join(2)
    assert not a.thread.is_alive()


def test_clean_stop_releases_the_lease_at_once() -> None:
    kube = FakeKube()
    a = Candidate(kube, "a").start()
    wait_for(a.leading.is_set, what="a to lead")
    a.stop.set()
    a.thread.join(2)
    assert holder(kube) == ""
    assert a.lost.is_set(), "on_stopped_leading runs on a clean stop too"
    b = Candidate(kube, "b").start()
    wait_for(b.leading.is_set, what="b acquires at once, without waiting a lease", timeout=1)
    b.stop.set()
    b.thread.join(2)


class HangingWrites(FakeKube):
    """Lease updates hang (a half-open connection) once ``hang`` is set, until ``release``."""

    def __init__(self) -> None:
        super().__init__()
        self.hang = threading.Event()
        self.release = threading.Event()

    def replace(self, *args: Any, **kwargs: Any) -> Any:
        if self.hang.is_set():
            self.release.wait(30)
        return super().replace(*args, **kwargs)


def test_a_hanging_renewal_ends_leadership_within_the_renew_deadline() -> None:
    """The client's own request timeout (30 s) is longer than the lease: the elector must not
    wait for it, or a second replica leads while this one still runs its workers."""
    kube = HangingWrites()
    leading, lost, stop = threading.Event(), threading.Event(), threading.Event()
    cfg = LeaderConfig(NS, "lease", "a", lease_duration=8, renew_deadline=1, retry_period=0.05)
    a = LeaderElector(kube, cfg, on_started_leading=leading.set, on_stopped_leading=lost.set)
    thread = threading.Thread(target=a.run, args=(stop,), daemon=True)
    thread.start()
    wait_for(leading.is_set, what="a leads")
    kube.hang.set()
    hung_at = time.monotonic()
    wait_for(lost.is_set, what="a gives up while its renewal still hangs", timeout=20)
    # another replica may take the Lease lease_duration after a's last renewal
    assert time.monotonic() - hung_at < cfg.lease_duration, "a led past the lease's expiry"
    assert not a.is_leader and not kube.release.is_set()
    kube.release.set()
    stop.set()
    thread.join(2)


def test_a_lease_expires_on_the_candidates_clock() -> None:
    """try_acquire_or_renew reads the elector's clock: the Lease's times from wall(), the
    holder's expiry (from when we last saw its record change) from now()."""
    kube = FakeKube()

    def candidate(ident: str, clock: FakeClock) -> LeaderElector:
        cfg = LeaderConfig(NS, "dgl-operator-leader", ident, 15.0, 10.0, 2.0)
        return LeaderElector(
            kube, cfg, on_started_leading=lambda: None, on_stopped_leading=lambda: None, clock=clock
        )

    clock = fake_clock()
    a, b = candidate("a", fake_clock()), candidate("b", clock)
    assert a.try_acquire_or_renew()
    spec = kube.get(LEASES, NS, "dgl-operator-leader")["spec"]
    assert spec["acquireTime"] == spec["renewTime"] == "2023-11-14T22:13:20.000000Z"  # EPOCH
    assert not b.try_acquire_or_renew()  # b sees a's record now: it expires 15 s later
    clock.step(14.9)
    assert not b.try_acquire_or_renew()
    clock.step(0.1)
    assert b.try_acquire_or_renew() and holder(kube) == "b"
    spec = kube.get(LEASES, NS, "dgl-operator-leader")["spec"]
    assert spec["renewTime"] == "2023-11-14T22:13:35.000000Z" and spec["leaseTransitions"] == 1
