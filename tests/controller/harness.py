"""The whole controller (informers, queue, workers, sync) over the in-memory FakeKube.

Tests play the kubelet by writing pod status, as envtest users do against a real API server.
Time is one ``clock.FakeClock``: the controller's queue waits on it (requeue-afters,
rate-limited retries), the sync and the Events read it, FakeKube stamps objects with it. It
moves only when a test calls :meth:`Harness.step`, so a deadline or TTL fires exactly when
the test moves time past it, and a failed sync's rate-limited retry waits for a step too
(informers, watches and the test's own polling run in real time).
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable
from typing import Any

import pytest

from clock import FakeClock
from controller.api import DGLJOBS
from controller.builders import ATTEMPT_ANNOTATION, BuildOptions
from controller.controller import Controller
from controller.features import registry
from controller.machinery.events import EventRecorder
from controller.metrics import Metrics
from controller.status.conditions import now_rfc3339
from controller.status.pod_state import is_terminating as terminating
from controller.watched_nodes import NODE_LOSS_CONFIRM_SECONDS
from informers.factory import SharedInformerFactory
from kubeclient import CONFIGMAPS, EVENTS, NODES, PODS, Conflict, Obj, Resource
from podcontract import report
from tests.fakekube import FakeKube
from tests.support.dgljobs import load_fixture
from tests.support.waiting import wait_for

NS = "dgl-operator"
MAIN = "dgl-graphsage"
QUEUE = "dgljob"  # the controller's work queue (its metrics' name label)


EPOCH = 1_700_000_000.0  # where the fake time starts (a whole second: timestamps are exact)
# threads of the controller that wait on the clock: the queue's delaying loop and its
# unfinished-work metrics loop
CLOCK_WAITERS = 2


def fake_clock() -> FakeClock:
    return FakeClock(start=EPOCH)


class Harness:
    def __init__(
        self,
        *,
        options: BuildOptions | None = None,
        resync: float = 0.0,
        wrap: Callable[[FakeKube], Any] | None = None,
    ) -> None:
        self.clock = fake_clock()
        self.kube = FakeKube(clock=self.clock)
        # what the controller talks to (the test itself always uses self.kube directly)
        self.client = wrap(self.kube) if wrap else self.kube
        self.factory = SharedInformerFactory(self.client, resync_period=resync)
        self.metrics = Metrics()
        self.recorder = EventRecorder(self.client, clock=self.clock)
        self.ctrl = Controller(
            self.client,
            self.factory,
            options=options or BuildOptions(),
            metrics=self.metrics,
            recorder=self.recorder,
            clock=self.clock,
        )
        self.stop_event = threading.Event()
        # what each dglrun reported so far: (job, reporter, attempt) -> its status fields
        self._reported: dict[tuple[str, str, int], dict[str, Any]] = {}

    # -- lifecycle ------------------------------------------------------------------------

    def start(self, workers: int = 2) -> Harness:
        self.factory.start(self.stop_event)
        assert self.factory.wait_for_cache_sync(self.stop_event, timeout=5)
        self.ctrl.start_workers(workers)
        self._clock_idle()
        return self

    def close(self) -> None:
        self.stop_event.set()
        self.ctrl.shutdown(timeout=5)
        self.factory.join(5)

    def settle(self, timeout: float = 5.0) -> None:
        """Wait until the controller has done all it will do before the test writes again or
        moves the clock: a barrier, not a pause, so negative asserts after it are sound.

        Quiet means: every informer's reflector has seen the API's current resourceVersion
        (every write so far reached its store and its handlers), every handler has consumed
        its notifications (every key they queue is queued), every key queued has been synced
        (the queue's adds equal its dones), the recorded Events were written, and all of that
        wrote nothing new. Keys waiting on the clock (requeue-afters, retries) stay waiting.
        """
        wait_for(self._quiet, what="the controller to settle", timeout=timeout)

    def _quiet(self) -> bool:
        rv = self.kube.resource_version
        # an informer whose resource saw no write since its last event catches up to rv
        self.kube.send_bookmark()
        informers = self.ctrl.informers()
        if any(int(inf.reflector.last_resource_version or 0) < rv for inf in informers):
            return False
        if not all(inf.handlers_idle() for inf in informers):
            return False
        # dones before adds: equal, they say every key added by now has been synced
        done = self._queue_sample("workqueue_work_duration_seconds_count")
        if done != self._queue_sample("workqueue_adds_total"):
            return False
        return self.recorder.flush() and self.kube.resource_version == rv

    # -- time -----------------------------------------------------------------------------

    def step(self, seconds: float) -> None:
        """Move the fake time on; once this returns, every key that became due is queued."""
        self.clock.step(seconds)
        self._clock_idle()

    def _clock_idle(self) -> None:
        """Wait until every thread waiting on the clock has looked at the time and waits
        again (the delaying loop has queued what was due)."""
        wait_for(
            lambda: self.clock.waiters() == CLOCK_WAITERS, what="the queue to wait on the clock"
        )

    def due(self, name: str = MAIN) -> float | None:
        """When the job's key waits to be queued again (seconds of the fake time)."""
        return self.ctrl.queue.ready_at(f"{NS}/{name}")

    def requeued_at(self, t: float, name: str = MAIN) -> None:
        """Assert that the job's key waits to be queued again at fake time ``t``."""
        wait_for(lambda: self.due(name) is not None, what=f"{name} to be requeued")
        assert self.due(name) == pytest.approx(t)

    def sample(self, name: str, **labels: str) -> float:
        value = self.metrics.registry.get_sample_value(name, labels)
        return 0.0 if value is None else value

    def _queue_sample(self, metric: str) -> float:
        value = self.metrics.registry.get_sample_value(metric, {"name": QUEUE})
        return 0.0 if value is None else value

    # -- jobs -----------------------------------------------------------------------------

    def create_job(self, raw: Obj) -> Obj:
        body = copy.deepcopy(raw)
        body["metadata"].setdefault("namespace", NS)
        return self.kube.create(DGLJOBS, body["metadata"]["namespace"], body)

    def job(self, name: str = "dgl-graphsage") -> Obj:
        return self.kube.get(DGLJOBS, NS, name)

    def edit_job(self, edit: Callable[[Obj], None], name: str = "dgl-graphsage") -> Obj:
        """A user's edit of the job's spec: read, ``edit`` in place, replace; on a 409 (the
        operator wrote the status between the read and the write) read again and redo it, as
        client-go's RetryOnConflict does."""
        for _ in range(50):
            raw = self.job(name)
            edit(raw)
            try:
                return self.kube.replace(DGLJOBS, NS, name, raw)
            except Conflict:
                continue
        raise AssertionError(f"50 conflicts in a row replacing dgljob {name}")

    def status(self, name: str = "dgl-graphsage") -> Obj:
        st: Obj = self.job(name).get("status") or {}
        return st

    def condition(self, ctype: str, name: str = "dgl-graphsage") -> Obj | None:
        for c in self.status(name).get("conditions") or []:
            if c["type"] == ctype:
                return dict(c)
        return None

    def wait_condition(self, ctype: str, name: str = "dgl-graphsage", timeout: float = 5.0) -> Obj:
        def true() -> Obj | None:
            c = self.condition(ctype, name)
            return c if c and c["status"] == "True" else None

        found: Obj = wait_for(true, what=f"condition {ctype}=True on {name}", timeout=timeout)
        return found

    def wait_condition_status(
        self,
        ctype: str,
        status: str,
        *,
        reason: str | None = None,
        name: str = "dgl-graphsage",
        timeout: float = 5.0,
    ) -> Obj:
        """The condition once it has ``status`` (and ``reason``, if given)."""

        def seen() -> Obj | None:
            c = self.condition(ctype, name)
            if c and c["status"] == status and reason in (None, c.get("reason")):
                return c
            return None

        what = f"condition {ctype}={status}" + (f" ({reason})" if reason else "")
        found: Obj = wait_for(seen, what=f"{what} on {name}", timeout=timeout)
        return found

    def wait_phase(self, phase: str, name: str = "dgl-graphsage", timeout: float = 5.0) -> None:
        wait_for(
            lambda: self.status(name).get("phase") == phase, what=f"phase {phase}", timeout=timeout
        )

    def report_progress(
        self, text: str, name: str = "dgl-graphsage", reporter: str = "launcher", **fields: Any
    ) -> None:
        """What dglrun sends: its whole report (every field it reported in this attempt, and
        these) to its key of the job's report ConfigMap; then the operator, which alone writes
        the status, copies it there."""
        attempt = registry.attempt(self.status(name))
        sent = self._reported.setdefault((name, reporter, attempt), {})
        sent.update({"progress": text, **fields})
        where = report.report_name(name)
        wait_for(lambda: self.kube.get(CONFIGMAPS, NS, where) is not None, what=f"{where}")
        doc = report.document(attempt, sent, [])
        self.kube.patch(CONFIGMAPS, NS, where, {"data": {reporter: doc}})
        wait_for(
            lambda: self.status(name).get("progress") == text, what="the progress in the status"
        )

    # -- pods (playing the kubelet) -------------------------------------------------------

    def pods(self) -> dict[str, Obj]:
        return {p["metadata"]["name"]: p for p in self.kube.objects(PODS, NS)}

    def names(self, res: Resource) -> list[str]:
        return sorted(o["metadata"]["name"] for o in self.kube.objects(res, NS))

    def wait_pods(self, *names: str, timeout: float = 5.0) -> None:
        wait_for(lambda: set(names) <= set(self.pods()), what=f"pods {names}", timeout=timeout)

    def set_status(self, name: str, status: Obj) -> None:
        self.kube.patch(PODS, NS, name, {"status": status})

    def run_pod(self, name: str, ip: str, *, ready: bool = True) -> None:
        pod = self.pods()[name]
        main = pod["spec"]["containers"][0]["name"]
        self.set_status(
            name,
            {
                "phase": "Running",
                "podIP": ip,
                "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
                "containerStatuses": [
                    {
                        "name": main,
                        "state": {"running": {"startedAt": now_rfc3339(self.clock.wall())}},
                    }
                ],
            },
        )

    def launcher_waiting_in_init(self, name: str, ip: str) -> None:
        """The launcher pod runs its init containers (phase Pending, main not started)."""
        self.set_status(name, {"phase": "Pending", "podIP": ip, "initContainerStatuses": []})

    def finish_pod(
        self,
        name: str,
        *,
        exit_code: int = 0,
        container: str | None = None,
        reason: str = "",
        seconds: float = 30.0,
        init: bool = False,
        message: str = "",
    ) -> None:
        pod = self.pods()[name]
        main = container or pod["spec"]["containers"][0]["name"]
        end = self.clock.wall()
        terminated = {
            "exitCode": exit_code,
            "reason": reason or ("Completed" if exit_code == 0 else "Error"),
            "startedAt": now_rfc3339(end - seconds),
            "finishedAt": now_rfc3339(end),
        }
        if message:
            terminated["message"] = message  # the container's termination message
        key = "initContainerStatuses" if init else "containerStatuses"
        status: Obj = {
            "phase": "Succeeded" if exit_code == 0 else "Failed",
            "podIP": (pod.get("status") or {}).get("podIP", "10.9.9.9"),
            "conditions": [{"type": "Ready", "status": "False"}],
            key: [{"name": main, "state": {"terminated": terminated}}],
        }
        self.set_status(name, status)

    def events(self) -> list[Obj]:
        """The Events of every sync so far (a status a test waited for may be written before
        the same sync records its Event)."""
        self.settle()
        return self.kube.objects(EVENTS, NS)

    def event_reasons(self) -> list[str]:
        return [e["reason"] for e in sorted(self.events(), key=lambda e: e["metadata"]["name"])]


# -- the seed job (MAIN) driven to Training ----------------------------------------------------

W0, W1 = f"{MAIN}-worker-0", f"{MAIN}-worker-1"
PART, LAUNCH = f"{MAIN}-partitioner", f"{MAIN}-launcher"


def seed(**spec: Any) -> dict[str, Any]:
    """The seed DGLJob (tests/support/fixtures) with ``spec`` fields replaced."""
    raw = load_fixture("seed_dgljob.yaml")
    raw["spec"].update(spec)
    return raw


def bring_up(h: Harness) -> None:
    """Workers and partitioner run with IPs; the launcher gets created."""
    h.wait_pods(W0, W1, PART)
    h.run_pod(W1, "10.0.0.2")
    h.run_pod(W0, "10.0.0.1")
    h.run_pod(PART, "10.0.0.3")
    h.wait_pods(LAUNCH)


def wait_attempt(h: Harness, attempt: int) -> None:
    """Wait until the workers and the partitioner are pods of ``attempt`` (after a restart
    the old attempt's pods may still be there, being deleted)."""

    def current() -> bool:
        pods = h.pods()
        return all(
            name in pods
            and not terminating(pods[name])
            and pods[name]["metadata"].get("annotations", {}).get(ATTEMPT_ANNOTATION)
            == str(attempt)
            for name in (W0, W1, PART)
        )

    wait_for(current, what=f"the pods of attempt {attempt}")


def train(h: Harness) -> None:
    bring_up(h)
    h.launcher_waiting_in_init(LAUNCH, "10.0.0.4")
    h.finish_pod(PART, seconds=42)
    h.wait_phase("Partitioned")
    h.run_pod(LAUNCH, "10.0.0.4")
    h.wait_phase("Training")


def poke(h: Harness, name: str = MAIN) -> None:
    """Touch the job so that it is synced again."""
    h.kube.patch(DGLJOBS, NS, name, {"metadata": {"annotations": {"poke": str(h.clock.wall())}}})


# -- nodes (the node lifecycle controller's part, as a test plays it) ------------------------

STOPPED = "Kubelet stopped posting node status."


def add_nodes(h: Harness, *names: str) -> None:
    for name in names:
        h.kube.create(
            NODES,
            None,
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": name},
                "status": {"conditions": [{"type": "Ready", "status": "True"}]},
            },
        )


def bind(h: Harness, placement: dict[str, str]) -> None:
    for pod, node in placement.items():
        h.kube.patch(PODS, NS, pod, {"spec": {"nodeName": node}})


def node_unknown(h: Harness, name: str) -> None:
    ready = {"type": "Ready", "status": "Unknown", "reason": "NodeStatusUnknown"}
    h.kube.patch(NODES, None, name, {"status": {"conditions": [{**ready, "message": STOPPED}]}})


def node_ready(h: Harness, name: str) -> None:
    h.kube.patch(
        NODES, None, name, {"status": {"conditions": [{"type": "Ready", "status": "True"}]}}
    )


def confirm_silence(h: Harness) -> None:
    """The nodes silent by now have stayed so long enough to count as lost."""
    h.settle()
    h.step(NODE_LOSS_CONFIRM_SECONDS)
