"""Lease-based leader election (client-go tools/leaderelection, coordination.k8s.io/v1 Lease).

A candidate acquires the Lease when it is free or its holder has not renewed it for
``lease_duration`` (judged by *our* clock since we last saw the record change, so clock skew
between replicas does not matter), then renews it every ``retry_period``. If renewing fails
for ``renew_deadline`` the leader gives up and ``on_stopped_leading`` runs: the operator
pauses its workers.

Unlike controller-runtime, which exits there, the elector then campaigns again. The API server
away for a while (a restart) is the common cause: when it answers again and the Lease still
names us (nobody took over), we lead again at once, ``on_started_leading`` runs again and the
operator resumes with its caches, instead of restarting and waiting out its own Lease (15 s)
on top of the outage. Once another holder is seen after we led, :meth:`LeaderElector.run`
returns and the operator exits (a fresh process for the next term: nothing remembered from
before another leader's).

Time is read from a ``clock.Clock`` (``now()`` for the lease's expiry and the renew
deadline, ``wall()`` for the times written in the Lease); the pauses between attempts are
waits on the stop event, in real seconds.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

import structlog

from clock import Clock, RealClock
from kubeclient import LEASES, Conflict, KubeClient, KubeError, NotFound, Obj

log = structlog.get_logger("controller.leader")


def _micro_time(now: float) -> str:
    return datetime.fromtimestamp(now, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass(frozen=True)
class LeaderConfig:
    namespace: str
    name: str
    identity: str
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0


class LeaderElector:
    def __init__(
        self,
        client: KubeClient,
        config: LeaderConfig,
        *,
        on_started_leading: Callable[[], None],
        on_stopped_leading: Callable[[], None],
        clock: Clock | None = None,
    ) -> None:
        if config.renew_deadline >= config.lease_duration:
            raise ValueError("renew_deadline must be shorter than lease_duration")
        self.client = client
        self.config = config
        self.on_started_leading = on_started_leading
        self.on_stopped_leading = on_stopped_leading
        # now(): the lease's expiry and the renew deadline; wall(): the times in the Lease
        self._clock: Clock = clock or RealClock()
        self._observed: Obj | None = None  # last lease spec seen
        self._observed_at = 0.0
        self._leading = threading.Event()
        self.terms = 0  # how many times we became leader

    @property
    def is_leader(self) -> bool:
        return self._leading.is_set()

    def run(self, stop: threading.Event) -> None:
        """Acquire, lead, renew; after a lost renewal, campaign again (see the module's
        docstring). Returns when ``stop`` is set or, once we led, another holder is seen."""
        while self._acquire(stop):
            self._leading.set()
            self.terms += 1
            log.info("became leader", identity=self.config.identity, term=self.terms)
            threading.Thread(target=self.on_started_leading, name="leading", daemon=True).start()
            try:
                self._renew_loop(stop)
            finally:
                self._leading.clear()
                if stop.is_set():
                    self._release()
                log.info("stopped leading", identity=self.config.identity)
                self.on_stopped_leading()
            if stop.is_set():
                return

    @property
    def taken_over(self) -> str:
        """The holder seen after we led ('' while nobody else held the Lease since)."""
        holder = str((self._observed or {}).get("holderIdentity") or "")
        return holder if self.terms and holder not in ("", self.config.identity) else ""

    def _acquire(self, stop: threading.Event) -> bool:
        while not stop.is_set():
            if self.try_acquire_or_renew():
                return True
            if self.taken_over:
                log.warning("another replica holds the lease", holder=self.taken_over)
                return False
            stop.wait(self.config.retry_period * (1.0 + 0.2 * random.random()))
        return False

    def _renew_loop(self, stop: threading.Event) -> None:
        last_renew = self._clock.now()
        while not stop.wait(self.config.retry_period):
            started = self._clock.now()
            left = self.config.renew_deadline - (started - last_renew)
            if self._renew_within(left):
                last_renew = started  # the renewTime written is no later than this
                continue
            if self._clock.now() - last_renew >= self.config.renew_deadline:
                log.error("failed to renew the lease in time", deadline=self.config.renew_deadline)
                return

    def _renew_within(self, seconds: float) -> bool:
        """One renewal that must finish within ``seconds``, as client-go bounds each renewal
        by the renew deadline: a request that hangs (the client's own timeout is longer than
        the lease) would otherwise keep us leading after another replica took over."""
        if seconds <= 0:
            return False
        done = threading.Event()
        result: list[bool] = []

        def attempt() -> None:
            try:
                result.append(self.try_acquire_or_renew())
            finally:
                done.set()

        threading.Thread(target=attempt, name="lease-renew", daemon=True).start()
        if done.wait(seconds):
            return bool(result and result[0])
        log.error("renewing the lease did not finish within the renew deadline", seconds=seconds)
        return False

    def try_acquire_or_renew(self) -> bool:
        cfg = self.config
        wall = _micro_time(self._clock.wall())
        try:
            lease = self.client.get(LEASES, cfg.namespace, cfg.name)
        except NotFound:
            body = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": cfg.name, "namespace": cfg.namespace},
                "spec": {
                    "holderIdentity": cfg.identity,
                    "leaseDurationSeconds": int(cfg.lease_duration),
                    "acquireTime": wall,
                    "renewTime": wall,
                    "leaseTransitions": 0,
                },
            }
            try:
                created = self.client.create(LEASES, cfg.namespace, body)
            except KubeError as e:
                log.info("could not create the lease", error=str(e))
                return False
            self._see(created)
            return True
        except KubeError as e:
            log.warning("could not read the lease", error=str(e))
            return False
        spec = dict(lease.get("spec") or {})
        if spec != self._observed:
            self._see(lease)
        holder = spec.get("holderIdentity") or ""
        duration = float(spec.get("leaseDurationSeconds") or cfg.lease_duration)
        if holder and holder != cfg.identity and self._clock.now() - self._observed_at < duration:
            return False
        new_spec = dict(spec)
        if holder != cfg.identity:
            new_spec["acquireTime"] = wall
            new_spec["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + (
                1 if holder else 0
            )
        new_spec.update(
            holderIdentity=cfg.identity,
            leaseDurationSeconds=int(cfg.lease_duration),
            renewTime=wall,
        )
        body = dict(lease)
        body["spec"] = new_spec
        try:
            updated = self.client.replace(LEASES, cfg.namespace, cfg.name, body)
        except Conflict:
            return False
        except KubeError as e:
            log.warning("could not update the lease", error=str(e))
            return False
        self._see(updated)
        return True

    def _see(self, lease: Obj) -> None:
        self._observed = dict(lease.get("spec") or {})
        self._observed_at = self._clock.now()

    def _release(self) -> None:
        """Hand the lease over at once on a clean shutdown."""
        cfg = self.config
        try:
            lease = self.client.get(LEASES, cfg.namespace, cfg.name)
            spec = dict(lease.get("spec") or {})
            if spec.get("holderIdentity") != cfg.identity:
                return
            spec.update(holderIdentity="", leaseDurationSeconds=1)
            body = dict(lease)
            body["spec"] = spec
            self.client.replace(LEASES, cfg.namespace, cfg.name, body)
        except KubeError as e:
            log.info("could not release the lease", error=str(e))
