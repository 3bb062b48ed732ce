"""The operator against a real API server, and a test "kubelet" that writes pod status.

There is no kubelet in these tests (as with envtest): the test moves pods through their
phases by patching ``pods/status`` the way a kubelet would.
"""

from __future__ import annotations

import contextlib
import threading
import time
from datetime import UTC, datetime

from controller.controller import Controller
from controller.machinery.events import EventRecorder
from controller.metrics import Metrics
from controller.watched_nodes import NODE_LOSS_CONFIRM_SECONDS
from informers.factory import SharedInformerFactory
from kubeclient import PODS, Conflict, Invalid, NotFound, Obj, RestClient


def stamp(offset: float = 0.0) -> str:
    return datetime.fromtimestamp(time.time() + offset, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class InProcessOperator:
    """The real controller (informers, workqueue, workers), in this process."""

    def __init__(
        self,
        kubeconfig: str,
        namespace: str | None = None,
        workers: int = 2,
        node_loss_confirm: float = NODE_LOSS_CONFIRM_SECONDS,
    ) -> None:
        # the client reports each request to the metrics, as main.py wires it: tests read
        # rest_client_requests_total (the 409s of a status write that collided)
        self.metrics = Metrics()
        self.client = RestClient.from_config(
            kubeconfig, pool_size=32, observer=self.metrics.observe_request
        )
        self.factory = SharedInformerFactory(self.client, namespace=namespace)
        self.ctrl = Controller(
            self.client,
            self.factory,
            metrics=self.metrics,
            recorder=EventRecorder(self.client),
            node_loss_confirm=node_loss_confirm,
        )
        self.stop_event = threading.Event()
        self.workers = workers

    def __enter__(self) -> InProcessOperator:
        self.factory.start(self.stop_event)
        if not self.factory.wait_for_cache_sync(self.stop_event, timeout=30):
            raise AssertionError("informer caches did not sync against the API server")
        self.ctrl.start_workers(self.workers)
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop_event.set()
        self.ctrl.shutdown(timeout=10)
        self.factory.join(10)


class Kubelet:
    """Pod status writes, as a kubelet would make them."""

    def __init__(self, api: RestClient, namespace: str) -> None:
        self.api = api
        self.ns = namespace

    def _patch(self, name: str, status: Obj) -> None:
        for _ in range(20):
            try:
                self.api.patch(PODS, self.ns, name, {"status": status}, subresource="status")
                return
            except Conflict:
                time.sleep(0.05)

    def _container(self, pod: Obj, state: Obj, ready: bool, name: str | None = None) -> Obj:
        c = pod["spec"]["containers"][0]
        return {
            "name": name or c["name"],
            "image": c["image"],
            "imageID": "",
            "ready": ready,
            "restartCount": 0,
            "state": state,
        }

    def run(self, name: str, ip: str) -> None:
        pod = self.api.get(PODS, self.ns, name)
        self._patch(
            name,
            {
                "phase": "Running",
                "podIP": ip,
                "podIPs": [{"ip": ip}],
                "startTime": stamp(),
                "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": stamp()}],
                "containerStatuses": [
                    self._container(pod, {"running": {"startedAt": stamp()}}, True)
                ],
            },
        )

    def init_running(self, name: str, ip: str) -> None:
        """The pod runs its init containers (the launcher waiting for workers/partitioner)."""
        self._patch(name, {"phase": "Pending", "podIP": ip, "podIPs": [{"ip": ip}]})

    def finish(self, name: str, exit_code: int = 0, seconds: float = 10.0) -> None:
        try:
            pod = self.api.get(PODS, self.ns, name)
        except NotFound:
            return
        term = {
            "exitCode": exit_code,
            "reason": "Completed" if exit_code == 0 else "Error",
            "startedAt": stamp(-seconds),
            "finishedAt": stamp(),
        }
        status = {
            "phase": "Succeeded" if exit_code == 0 else "Failed",
            "conditions": [{"type": "Ready", "status": "False", "lastTransitionTime": stamp()}],
            "containerStatuses": [self._container(pod, {"terminated": term}, False)],
        }
        with contextlib.suppress(Invalid):  # already terminal
            self._patch(name, status)


def pod_ip(index: int) -> str:
    return f"10.200.{index // 250}.{index % 250 + 2}"
