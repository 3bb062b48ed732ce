"""Reliability against the real API server: kill -9, API server restarts, watch expiry,
concurrent status writers."""

from __future__ import annotations

import random
import threading
import time
from collections import defaultdict
from pathlib import Path

from controller.api import DGLJOBS
from informers.listwatch import ListWatch
from informers.reflector import Reflector
from informers.shared import EventHandler, SharedInformer
from informers.store import DeletedFinalStateUnknown
from kubeclient import PODS, Conflict, KubeError, NotFound, Obj, RestClient
from localcluster.cluster import ControlPlane
from localcluster.operator_process import OperatorProcess
from tests.support.dgljobs import make_job
from tests.support.live import InProcessOperator, Kubelet, pod_ip
from tests.support.waiting import LIVE_TIMEOUT, wait_for


class SimulatedNodes:
    """A kubelet stand-in for many jobs: moves every pod of the namespace along, idempotently
    (so it survives operator restarts), and records every pod UID it ever saw by name."""

    def __init__(self, api: RestClient, ns: str) -> None:
        self.api = api
        self.kubelet = Kubelet(api, ns)
        self.ns = ns
        self.uids: dict[str, set[str]] = defaultdict(set)
        self.stop = threading.Event()
        self.errors: list[str] = []
        self._ips: dict[str, str] = {}
        self.thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> SimulatedNodes:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(10)

    def _ip(self, name: str) -> str:
        if name not in self._ips:
            self._ips[name] = pod_ip(len(self._ips))
        return self._ips[name]

    def _loop(self) -> None:
        while not self.stop.wait(0.2):
            try:
                self._step()
            except KubeError as e:  # API server restarts, races with deletions
                self.errors.append(str(e))

    def _step(self) -> None:
        pods = {p["metadata"]["name"]: p for p in self.api.list(PODS, self.ns)["items"]}
        for name, pod in pods.items():
            self.uids[name].add(pod["metadata"]["uid"])
        for name, pod in pods.items():
            st = pod.get("status") or {}
            phase = st.get("phase")
            rtype = pod["metadata"]["labels"].get("dgl-replica-type")
            job = name.rsplit("-", 2)[0] if rtype == "Worker" else name.rsplit("-", 1)[0]
            if pod["metadata"].get("deletionTimestamp") or phase in ("Succeeded", "Failed"):
                continue
            if rtype in ("Worker", "Partitioner") and phase == "Pending":
                self.kubelet.run(name, self._ip(name))
            elif rtype == "Partitioner" and phase == "Running":
                launcher = pods.get(f"{job}-launcher")
                if launcher and (launcher.get("status") or {}).get("podIP"):
                    self.kubelet.finish(name, seconds=1)
            elif rtype == "Launcher" and phase == "Pending":
                partitioner = pods.get(f"{job}-partitioner") or {}
                if not st.get("podIP"):
                    self.kubelet.init_running(name, self._ip(name))
                elif (partitioner.get("status") or {}).get("phase") == "Succeeded":
                    self.kubelet.run(name, self._ip(name))
            elif rtype == "Launcher" and phase == "Running":
                self.kubelet.finish(name, seconds=2)


def job_conditions(api: RestClient, ns: str) -> dict[str, set[str]]:
    out = {}
    for j in api.list(DGLJOBS, ns)["items"]:
        conds = (j.get("status") or {}).get("conditions") or []
        out[j["metadata"]["name"]] = {c["type"] for c in conds if c["status"] == "True"}
    return out


def assert_clean_finish(api: RestClient, ns: str, nodes: SimulatedNodes, jobs: int) -> None:
    def all_succeeded() -> bool:
        conds = job_conditions(api, ns)
        return len(conds) == jobs and all("Succeeded" in c for c in conds.values())

    wait_for(all_succeeded, what=f"all {jobs} jobs to succeed", timeout=240, interval=0.5)
    twice = {n: u for n, u in nodes.uids.items() if len(u) > 1}
    assert twice == {}, f"pods created more than once: {sorted(twice)}"
    job_uids = {j["metadata"]["uid"] for j in api.list(DGLJOBS, ns)["items"]}
    for pod in api.list(PODS, ns)["items"]:
        refs = pod["metadata"].get("ownerReferences") or []
        owner = next(r["uid"] for r in refs if r.get("controller"))
        assert owner in job_uids, f"orphan pod {pod['metadata']['name']}"
    for name, conds in job_conditions(api, ns).items():
        assert "Failed" not in conds, f"{name} failed"


def test_kill_9_at_random_points(
    api: RestClient, namespace: str, control_plane: ControlPlane, tmp_path: Path
) -> None:
    log = tmp_path / "operator.log"
    op = OperatorProcess(str(control_plane.kubeconfig), log, "--namespace", namespace).start()
    rng = random.Random(4)
    try:
        with SimulatedNodes(api, namespace) as nodes:
            for i in range(20):
                make_job(api, namespace, f"job-{i}")
            for _ in range(10):
                time.sleep(rng.uniform(0.3, 2.0))
                op.kill()
                op.start()
            assert_clean_finish(api, namespace, nodes, 20)
        assert op.terminate() == 0, log.read_text()[-3000:]
    finally:
        op.stop()  # a failed assertion must not leave the operator running


def test_api_server_restart_mid_run(
    api: RestClient, namespace: str, control_plane: ControlPlane
) -> None:
    with (
        InProcessOperator(str(control_plane.kubeconfig), namespace) as op,
        SimulatedNodes(api, namespace) as nodes,
    ):
        for i in range(5):
            make_job(api, namespace, f"job-{i}", workers=2)
        wait_for(
            lambda: len(api.list(PODS, namespace)["items"]) >= 5,
            what="first pods",
            timeout=LIVE_TIMEOUT,
        )
        control_plane.restart_apiserver(down_for=2)
        for i in range(5, 8):
            make_job(api, namespace, f"job-{i}", workers=2)
        assert_clean_finish(api, namespace, nodes, 8)
        assert op.ctrl.job_informer.reflector.watches >= 2


class GatedBackoff:
    """Backoff whose next() blocks while the gate is closed: holds the reflector away."""

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.gate.set()
        self.waiting = threading.Event()

    def next(self) -> float:
        self.waiting.set()
        self.gate.wait()
        return 0.01

    def reset(self) -> None:
        pass


def test_watch_expiry_relists_and_sees_what_was_deleted_meanwhile(
    api: RestClient, namespace: str, control_plane: ControlPlane
) -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    }
    for name in ("keep", "gone"):
        api.create(PODS, namespace, {**pod, "metadata": {"name": name}})
    backoff = GatedBackoff()
    deleted: list[Obj | DeletedFinalStateUnknown] = []
    lw = ListWatch(api, PODS, namespace=namespace)
    informer = SharedInformer(
        lw,
        reflector_factory=lambda lw_, sink: Reflector(lw_, sink, backoff=backoff),  # type: ignore[arg-type]
    )
    informer.add_event_handler(EventHandler(on_delete=deleted.append))
    stop = threading.Event()
    informer.start(stop)
    try:
        assert informer.wait_for_sync(30)
        wait_for(
            lambda: informer.reflector.watches >= 1,
            what="the informer's watch",
            timeout=LIVE_TIMEOUT,
        )
        backoff.gate.clear()
        control_plane.restart_apiserver()  # breaks the watch; the reflector waits at the gate
        wait_for(backoff.waiting.is_set, what="the reflector to be held away", timeout=LIVE_TIMEOUT)
        api.delete(PODS, namespace, "gone", grace_period_seconds=0)
        for i in range(5):  # move the revision on, then compact past the watch's RV
            api.create(PODS, namespace, {**pod, "metadata": {"name": f"churn-{i}"}})
        control_plane.compact()
        control_plane.restart_apiserver()  # a fresh watch cache: the old RV is too old
        lists_before = informer.reflector.lists
        backoff.gate.set()
        wait_for(
            lambda: any(
                isinstance(d, DeletedFinalStateUnknown) and d.key.endswith("/gone") for d in deleted
            ),
            what="the tombstone for 'gone'",
            timeout=60,
        )
        assert informer.reflector.lists > lists_before, "it did not relist"
        assert informer.store.get(f"{namespace}/gone") is None
        assert informer.store.get(f"{namespace}/keep") is not None
        wait_for(
            lambda: informer.store.get(f"{namespace}/churn-4") is not None,
            what="the informer to see churn-4 after the relist",
            timeout=LIVE_TIMEOUT,
        )
    finally:
        stop.set()


def test_concurrent_status_writer_loses_nothing(
    api: RestClient, namespace: str, control_plane: ControlPlane
) -> None:
    """Another writer (a launcher reporting progress) updates the status all along."""
    stop = threading.Event()
    written: list[str] = []
    conflicts = [0]

    def progress_writer() -> None:
        i = 0
        while not stop.is_set():
            try:
                job = api.get(DGLJOBS, namespace, "job-0")
            except NotFound:
                time.sleep(0.05)
                continue
            job.setdefault("status", {})["progress"] = f"step {i}"
            try:
                api.replace(DGLJOBS, namespace, "job-0", job, subresource="status")
                written.append(f"step {i}")
                i += 1
            except Conflict:
                conflicts[0] += 1
            time.sleep(0.01)

    writer = threading.Thread(target=progress_writer, daemon=True)
    with (
        InProcessOperator(str(control_plane.kubeconfig), namespace) as op,
        SimulatedNodes(api, namespace) as nodes,
    ):
        make_job(api, namespace, "job-0", workers=2)
        writer.start()
        assert_clean_finish(api, namespace, nodes, 1)
        stop.set()
        writer.join(5)
    st = api.get(DGLJOBS, namespace, "job-0")["status"]
    assert st["progress"] == written[-1], "the other writer's last value was lost"
    assert st["phase"] == "Completed" and st["trainingSeconds"] == 2
    assert (
        op.metrics.registry.get_sample_value(
            "dgl_operator_jobs_successful_total", {"namespace": namespace}
        )
        == 1
    )
    assert len(written) > 10
    # the two writers did collide (else this test proves nothing): the operator's status
    # updates were refused with 409 and retried, or the other writer's were
    labels = {"verb": "update", "resource": "dgljobs.qihoo.net", "code": "409"}
    refused = op.metrics.registry.get_sample_value("rest_client_requests_total", labels)
    assert (refused or 0) + conflicts[0] > 0, "no write conflict happened"
