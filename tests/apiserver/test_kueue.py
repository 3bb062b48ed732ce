"""DGLJobs under the real Kueue, against the real API server: Kueue's manager (hack/kueue.sh,
DGLJob in its externalFrameworks) admits and preempts, the ``dgl-operator`` process runs with
``--kueue`` under exactly the RBAC the chart grants with ``kueue`` (tests/support/rbac.py).

No node runs here: the test plays the kubelet (its pods run and end as the test says), so what
is checked is the contract between the operator and Kueue: Workloads, admission, the waiting
said in Kueue's words, quota respected, preemption that stops the job and requeues it, the
Workload finished. Real training under Kueue is e2e/test_kueue.py's.
"""

from __future__ import annotations

import contextlib
import copy
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from controller.api import DGLJOBS
from controller.features import kueue as kq
from kubeclient import (
    EVENTS,
    LOCALQUEUES,
    PODS,
    PRIORITYCLASSES,
    WORKLOADS,
    AlreadyExists,
    Obj,
    RestClient,
)
from localcluster.cluster import ControlPlane
from localcluster.operator_process import OperatorProcess
from tests.support.apiserver import operator_identity
from tests.support.dgljobs import load_fixture
from tests.support.kueue import (
    CLUSTERQUEUES,
    FLAVOR_LABELS,
    FLAVOR_TOLERATION,
    cluster_queue,
    ensure,
    flavor,
    local_queue,
    running_kueue,
)
from tests.support.live import Kubelet, pod_ip
from tests.support.rbac import cluster_role
from tests.support.waiting import wait_for


@pytest.fixture(scope="module")
def kueue(control_plane: ControlPlane, api: RestClient, tmp_path_factory: Any) -> Iterator[None]:
    crds = tmp_path_factory.mktemp("kueue")
    with running_kueue(crds, control_plane.kubeconfig):
        from kubeclient import RESOURCEFLAVORS

        ensure(api, RESOURCEFLAVORS, None, flavor())
        for name, value in (("dgl-low", 10), ("dgl-high", 1000)):
            with contextlib.suppress(AlreadyExists):
                api.create(PRIORITYCLASSES, None, {"apiVersion": "scheduling.k8s.io/v1",
                           "kind": "PriorityClass", "metadata": {"name": name},
                           "value": value})  # fmt: skip
        yield


@contextlib.contextmanager
def kueue_operator(
    api: RestClient, control_plane: ControlPlane, namespace: str, tmp_path: Path, *flags: str
) -> Iterator[OperatorProcess]:
    """The operator with ``--kueue`` (and ``flags``) under the chart's RBAC with kueue."""
    role = cluster_role(kueue=True)
    with operator_identity(api, control_plane, role, tmp_path / "sa.kubeconfig") as (config, _):
        op = OperatorProcess(
            config,
            tmp_path / "operator.log",
            "--namespace",
            namespace,
            "--kueue",
            *flags,
            metrics=True,
        )
        try:
            # the Workload and LocalQueue informers synced: list and watch allowed
            op.start().wait_ready()
            yield op
        finally:
            op.stop()


@pytest.fixture
def operator(
    api: RestClient, control_plane: ControlPlane, namespace: str, kueue: None, tmp_path: Path
) -> Iterator[OperatorProcess]:
    with kueue_operator(api, control_plane, namespace, tmp_path) as op:
        yield op


@pytest.fixture
def mandatory_queue_operator(
    api: RestClient, control_plane: ControlPlane, namespace: str, kueue: None, tmp_path: Path
) -> Iterator[OperatorProcess]:
    """The operator as a platform team makes the queue mandatory (the chart's
    kueueManageJobsWithoutQueueName)."""
    flag = "--kueue-manage-jobs-without-queue-name"
    with kueue_operator(api, control_plane, namespace, tmp_path, flag) as op:
        yield op


def queue_objects(api: RestClient, namespace: str, cq: Obj) -> str:
    """A ClusterQueue (named after the namespace) and LocalQueue ``lq``; the CQ's name."""
    cq = copy.deepcopy(cq)
    cq["metadata"]["name"] = f"cq-{namespace}"
    api.create(CLUSTERQUEUES, None, cq)
    api.create(LOCALQUEUES, namespace, local_queue("lq", namespace, cq["metadata"]["name"]))
    return str(cq["metadata"]["name"])


def job(namespace: str, name: str, queue: str | None = "lq", priority: str = "") -> Obj:
    """The seed job, each pod asking for 1 CPU (4 in all: partitioner, 2 workers, launcher)."""
    raw = load_fixture("seed_dgljob.yaml")
    raw["metadata"] = {"name": name, "namespace": namespace}
    if queue:
        raw["metadata"]["labels"] = {kq.QUEUE_LABEL: queue}
    for replica in raw["spec"]["dglReplicaSpecs"].values():
        main = replica["template"]["spec"]["containers"][0]
        main["resources"] = {"requests": {"cpu": "1", "memory": "64Mi"}}
    raw["spec"]["runPolicy"] = {"backoffLimit": 0}
    if priority:
        raw["spec"]["runPolicy"]["schedulingPolicy"] = {"priorityClass": priority}
    return raw


def pods(api: RestClient, namespace: str, job_name: str) -> dict[str, Obj]:
    return {
        p["metadata"]["name"]: p
        for p in api.list(PODS, namespace)["items"]
        if p["metadata"]["name"].startswith(f"{job_name}-")
    }


def condition(api: RestClient, namespace: str, name: str, kind: str) -> Obj:
    got = api.get(DGLJOBS, namespace, name)
    found = [c for c in (got.get("status") or {}).get("conditions") or [] if c["type"] == kind]
    return found[0] if found else {}


def workload_of(api: RestClient, namespace: str, name: str) -> Obj | None:
    owner = api.get(DGLJOBS, namespace, name)["metadata"]["uid"]
    items: list[Obj] = api.list(WORKLOADS, namespace)["items"]
    for wl in items:
        if any(o["uid"] == owner for o in wl["metadata"].get("ownerReferences") or []):
            return wl
    return None


def admitted(wl: Obj | None) -> bool:
    return wl is not None and kq.state(wl).admitted


def run_to_success(api: RestClient, namespace: str, name: str, start: int) -> None:
    """Play the kubelet: the workers and partitioner run, then the launcher runs and ends 0."""
    kubelet = Kubelet(api, namespace)
    first = [f"{name}-worker-0", f"{name}-worker-1", f"{name}-partitioner"]
    wait_for(lambda: set(first) <= set(pods(api, namespace, name)), what=f"{name}'s pods")
    for i, pod in enumerate(first):
        kubelet.run(pod, pod_ip(start + i))
    launcher = f"{name}-launcher"
    wait_for(lambda: launcher in pods(api, namespace, name), what=f"{name}'s launcher")
    kubelet.run(launcher, pod_ip(start + 3))
    kubelet.finish(launcher)
    wait_for(
        lambda: condition(api, namespace, name, "Succeeded").get("status") == "True",
        what=f"{name} Succeeded",
        timeout=30,
    )


def test_one_job_at_a_time_within_the_quota_and_each_workload_finished(
    api: RestClient, namespace: str, operator: OperatorProcess
) -> None:
    """A ClusterQueue that fits one job: three jobs submitted at once run one after the other,
    never two admitted, and each Workload ends Finished; a job whose label names a missing
    LocalQueue waits saying so; a job without the label runs at once, untouched by Kueue."""
    queue_objects(api, namespace, cluster_queue("cq", "4"))
    names = ["first", "second", "third"]
    for name in names:
        api.create(DGLJOBS, namespace, job(namespace, name))
    api.create(DGLJOBS, namespace, job(namespace, "lost", queue="no-such-queue"))
    api.create(DGLJOBS, namespace, job(namespace, "free", queue=None))
    wait_for(
        lambda: all(workload_of(api, namespace, n) for n in [*names, "lost"]),
        what="a Workload per queued job",
        timeout=30,
    )
    wl = workload_of(api, namespace, "first")
    assert wl is not None
    assert wl["spec"]["queueName"] == "lq"
    assert [(s["name"], s["count"]) for s in wl["spec"]["podSets"]] == [
        ("partitioner", 1), ("worker", 2), ("launcher", 1)
    ]  # fmt: skip
    # without the label: no Workload, its pods at once though the quota is taken
    assert workload_of(api, namespace, "free") is None
    wait_for(lambda: "free-worker-0" in pods(api, namespace, "free"), what="free's pods")
    # the missing LocalQueue, in Kueue's words; no pod
    wait_for(
        lambda: "no-such-queue" in condition(api, namespace, "lost", "Queued").get("message", ""),
        what="lost's Queued condition naming its LocalQueue",
        timeout=30,
    )
    lost = condition(api, namespace, "lost", "Queued")
    assert lost["status"] == "True", lost
    assert api.get(DGLJOBS, namespace, "lost")["status"]["phase"] == "Queued"
    assert pods(api, namespace, "lost") == {}
    order = []
    for k in range(len(names)):
        running = wait_for(
            lambda: [
                n for n in names if n not in order and admitted(workload_of(api, namespace, n))
            ],
            what=f"admission {k + 1}",
            timeout=60,
        )
        assert len(running) == 1, f"more admitted than the quota allows: {running}"
        (name,) = running
        waiting = [n for n in names if n not in order and n != name]
        for other in waiting:
            said = condition(api, namespace, other, "Queued")
            assert said.get("status") == "True" and pods(api, namespace, other) == {}, said
        made = wait_for(
            lambda n=name: (lambda got: got if len(got) == 3 else None)(pods(api, namespace, n)),
            what=f"{name}'s first pods",
        )
        for pod in made.values():  # the admitted flavor's placement
            assert pod["spec"]["nodeSelector"] == FLAVOR_LABELS, pod["spec"].get("nodeSelector")
            assert FLAVOR_TOLERATION in pod["spec"]["tolerations"]
        run_to_success(api, namespace, name, 10 * k)
        order.append(name)
        wait_for(
            lambda n=name: "Finished" in str((workload_of(api, namespace, n) or {}).get("status")),
            what=f"{name}'s Workload Finished",
            timeout=30,
        )
    done = [workload_of(api, namespace, n) for n in order]
    finished = [kq.condition(w, "Finished") for w in done if w is not None]
    assert [f["reason"] for f in finished] == ["Succeeded"] * 3
    print(f"Kueue admitted the three jobs in the order {order}")


def test_a_higher_priority_job_preempts_and_the_preempted_one_comes_back(
    api: RestClient, namespace: str, operator: OperatorProcess
) -> None:
    queue_objects(api, namespace, cluster_queue("cq", "4", preemption=True))
    api.create(DGLJOBS, namespace, job(namespace, "low", priority="dgl-low"))
    wait_for(lambda: admitted(workload_of(api, namespace, "low")), what="low admitted", timeout=60)
    low = workload_of(api, namespace, "low")
    assert low is not None and low["spec"]["priority"] == 10
    kubelet = Kubelet(api, namespace)
    first = ["low-worker-0", "low-worker-1", "low-partitioner"]
    wait_for(lambda: set(first) <= set(pods(api, namespace, "low")), what="low's pods")
    for i, pod in enumerate(first):
        kubelet.run(pod, pod_ip(40 + i))
    wait_for(lambda: "low-launcher" in pods(api, namespace, "low"), what="low's launcher")
    kubelet.run("low-launcher", pod_ip(43))
    wait_for(
        lambda: (
            "PodsReady" in str((workload_of(api, namespace, "low") or {}).get("status"))
            and kq.condition(workload_of(api, namespace, "low") or {}, "PodsReady").get("status")
            == "True"
        ),
        what="PodsReady True on low's Workload",
        timeout=30,
    )
    api.create(DGLJOBS, namespace, job(namespace, "high", priority="dgl-high"))
    asked = time.monotonic()
    wait_for(
        lambda: condition(api, namespace, "low", "Queued").get("reason") == "EvictedPreempted",
        what="low evicted",
        timeout=60,
    )
    wait_for(lambda: pods(api, namespace, "low") == {}, what="low's pods gone", timeout=30)
    gone = time.monotonic() - asked
    wait_for(
        lambda: admitted(workload_of(api, namespace, "high")), what="high admitted", timeout=60
    )
    evicted = workload_of(api, namespace, "low")
    assert evicted is not None and not kq.state(evicted).admitted
    run_to_success(api, namespace, "high", 50)
    # the low job is admitted again, and runs from the start of a new attempt
    wait_for(
        lambda: admitted(workload_of(api, namespace, "low")), what="low readmitted", timeout=60
    )
    wait_for(
        lambda: condition(api, namespace, "low", "Queued").get("status") == "False",
        what="low's Queued False again",
        timeout=30,
    )
    run_to_success(api, namespace, "low", 60)
    print(f"preemption: the low job's pods were gone {gone:.1f}s after the high job came")


def test_an_elastic_job_is_admitted_partially_and_starts_with_the_count_admitted(
    api: RestClient, namespace: str, operator: OperatorProcess
) -> None:
    """minReplicas 1, maxReplicas 3 on a quota of 3 CPUs (the partitioner and the launcher
    take 2): Kueue admits one worker of the three, and the job makes only that one."""
    queue_objects(api, namespace, cluster_queue("cq", "3"))
    raw = job(namespace, "elastic")
    raw["spec"]["dglReplicaSpecs"]["Worker"]["replicas"] = 3
    raw["spec"]["elasticPolicy"] = {"minReplicas": 1, "maxReplicas": 3}
    raw["spec"]["storage"] = {"claimName": "results"}
    api.create(DGLJOBS, namespace, raw)
    wait_for(lambda: admitted(workload_of(api, namespace, "elastic")), what="admitted", timeout=60)
    wl = workload_of(api, namespace, "elastic")
    assert wl is not None
    (worker,) = [s for s in wl["spec"]["podSets"] if s["name"] == "worker"]
    assert (worker["count"], worker["minCount"]) == (3, 1)
    counts = {a["name"]: a["count"] for a in wl["status"]["admission"]["podSetAssignments"]}
    assert counts == {"partitioner": 1, "worker": 1, "launcher": 1}, counts
    kubelet = Kubelet(api, namespace)
    wait_for(lambda: "elastic-partitioner" in pods(api, namespace, "elastic"), what="partitioner")
    kubelet.run("elastic-partitioner", pod_ip(70))  # (placed: the workers come next)
    wait_for(lambda: "elastic-worker-0" in pods(api, namespace, "elastic"), what="worker-0")
    kubelet.run("elastic-worker-0", pod_ip(71))

    def elastic() -> Obj:
        status = api.get(DGLJOBS, namespace, "elastic").get("status") or {}
        return dict(status.get("elastic") or {})

    # the barrier: the operator chose the attempt's members, from the workers it made for the
    # count admitted; a worker it would make beyond that count is made by then
    wait_for(lambda: elastic().get("workers") == 1, what="the attempt's members", timeout=60)
    assert elastic().get("desiredWorkers") == 1, elastic()
    made = sorted(p for p in pods(api, namespace, "elastic") if "-worker-" in p)
    assert made == ["elastic-worker-0"], made


def events_of(api: RestClient, namespace: str, name: str, reason: str) -> list[str]:
    return [
        str(e.get("message"))
        for e in api.list(EVENTS, namespace)["items"]
        if e["reason"] == reason and e["involvedObject"]["name"] == name
    ]


def test_no_way_around_the_queue(
    api: RestClient, namespace: str, operator: OperatorProcess
) -> None:
    """Issue 42, under the real Kueue: a waiting job whose queue label is removed stays
    queued (it does not run beside the job that holds the quota); an admitted job whose pod
    templates grow is stopped and queued again with a Workload that asks for the new size,
    which Kueue admits only once there is room for it."""
    queue_objects(api, namespace, cluster_queue("cq", "4"))
    api.create(DGLJOBS, namespace, job(namespace, "holder"))
    wait_for(lambda: admitted(workload_of(api, namespace, "holder")), what="holder admitted")
    api.create(DGLJOBS, namespace, job(namespace, "waiter"))
    wait_for(
        lambda: condition(api, namespace, "waiter", "Queued").get("status") == "True",
        what="waiter queued",
        timeout=30,
    )
    api.patch(DGLJOBS, namespace, "waiter", {"metadata": {"labels": None}})
    wait_for(
        lambda: events_of(api, namespace, "waiter", "QueueLabelRemoved"),
        what="the QueueLabelRemoved Warning",
        timeout=30,
    )
    # (the operator has acted on the label's removal: still no pod, still queued)
    assert pods(api, namespace, "waiter") == {}
    assert condition(api, namespace, "waiter", "Queued").get("status") == "True"
    assert not admitted(workload_of(api, namespace, "waiter"))
    # the holder grows while admitted: 2 CPUs a worker, 6 in all, more than the queue has
    first = workload_of(api, namespace, "holder")
    assert first is not None
    wait_for(lambda: len(pods(api, namespace, "holder")) == 3, what="holder's first pods")
    raw = api.get(DGLJOBS, namespace, "holder")
    main = raw["spec"]["dglReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    main["resources"] = {"requests": {"cpu": "2", "memory": "64Mi"}}
    # a merge patch, as kubectl's: a replace of what was read conflicts with the operator's
    # status writes meanwhile (each bumps the resourceVersion; CI failed so once)
    grown = {"template": {"spec": {"containers": [main]}}}
    api.patch(DGLJOBS, namespace, "holder", {"spec": {"dglReplicaSpecs": {"Worker": grown}}})
    wait_for(
        lambda: (
            (w := workload_of(api, namespace, "holder")) is not None
            and w["metadata"]["uid"] != first["metadata"]["uid"]
        ),
        what="holder's new Workload",
        timeout=60,
    )
    wait_for(  # (Events come from the recorder's own thread)
        lambda: events_of(api, namespace, "holder", "WorkloadChanged"),
        what="the WorkloadChanged Event", timeout=60,
    )  # fmt: skip
    new = workload_of(api, namespace, "holder")
    assert new is not None
    worker = next(ps for ps in new["spec"]["podSets"] if ps["name"] == "worker")
    assert worker["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] == "2"
    # the old attempt's pods are stopped (the kubelet here is the test: it ends them)
    wait_for(
        lambda: all(
            p["metadata"].get("deletionTimestamp") for p in pods(api, namespace, "holder").values()
        ),
        what="holder's pods stopped",
        timeout=30,
    )
    for name in pods(api, namespace, "holder"):
        with contextlib.suppress(Exception):
            api.delete(PODS, namespace, name, grace_period_seconds=0)
    # 6 CPUs do not fit the queue's 4: the waiter (4) is admitted instead, the holder waits
    wait_for(
        lambda: admitted(workload_of(api, namespace, "waiter")), what="waiter admitted", timeout=60
    )
    assert not admitted(workload_of(api, namespace, "holder"))
    assert condition(api, namespace, "holder", "Queued").get("status") == "True"


# -- a job without the queue label (issue 57) ---------------------------------------------------


def test_a_job_without_the_label_is_queued_in_the_local_queue_default_within_its_quota(
    api: RestClient, namespace: str, operator: OperatorProcess
) -> None:
    """The attack: a job without the queue label, in a namespace whose LocalQueue is named
    ``default``, ran outside Kueue beside the job that held the quota. The twin first (the
    check can fail): with no LocalQueue ``default`` such a job runs unqueued. Once the
    platform makes ``default`` (Kueue's LocalQueueDefaulting, always on with --kueue), that
    job is stopped and queued there, and a second one without the label waits, without pods,
    while the first holds the whole quota; it runs once the first is done."""
    cq = queue_objects(api, namespace, cluster_queue("cq", "4"))  # (and LocalQueue lq)
    api.create(DGLJOBS, namespace, job(namespace, "early", queue=None))
    wait_for(lambda: "early-worker-0" in pods(api, namespace, "early"), what="early's pods")
    assert workload_of(api, namespace, "early") is None  # runs outside Kueue: no default yet
    api.create(LOCALQUEUES, namespace, local_queue("default", namespace, cq))
    wait_for(
        lambda: (w := workload_of(api, namespace, "early")) and w["spec"]["queueName"],
        what="early's Workload",
        timeout=30,
    )
    assert (workload_of(api, namespace, "early") or {})["spec"]["queueName"] == "default"
    wait_for(lambda: admitted(workload_of(api, namespace, "early")), what="early admitted")
    api.create(DGLJOBS, namespace, job(namespace, "late", queue=None))
    wait_for(
        lambda: (w := workload_of(api, namespace, "late")) and w["spec"]["queueName"],
        what="late's Workload",
        timeout=30,
    )
    assert (workload_of(api, namespace, "late") or {})["spec"]["queueName"] == "default"
    wait_for(
        lambda: condition(api, namespace, "late", "Queued").get("status") == "True",
        what="late queued",
        timeout=30,
    )
    # Events are sent by the recorder's own thread, after the status that caused them: wait
    # (ci8 read the events the moment the condition showed and found none yet)
    wait_for(
        lambda: any(
            "no label kueue.x-k8s.io/queue-name" in m
            for m in events_of(api, namespace, "late", "DGLJobQueued")
        ),
        what="late's DGLJobQueued Event naming the missing label",
        timeout=30,
    )
    # the quota holds: early's 4 CPUs are the queue's all; late waits without pods
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        assert pods(api, namespace, "late") == {}, "late ran beyond the quota"
        assert not admitted(workload_of(api, namespace, "late"))
        time.sleep(0.5)
    run_to_success(api, namespace, "early", 80)
    wait_for(
        lambda: admitted(workload_of(api, namespace, "late")), what="late admitted", timeout=60
    )
    run_to_success(api, namespace, "late", 90)


def test_with_the_queue_mandatory_a_job_without_the_label_waits_naming_it(
    api: RestClient, namespace: str, mandatory_queue_operator: OperatorProcess
) -> None:
    """--kueue-manage-jobs-without-queue-name, no LocalQueue ``default``: a job without the
    label never runs outside Kueue: no pods, no Workload, ``Queued`` True QueueNameMissing
    and a Warning, both naming the label (its twin, the same job under an operator without
    the option, runs at once: test_one_job_at_a_time..., the job ``free``, and the first step
    of the test above). Labelled, it is queued and runs once admitted."""
    queue_objects(api, namespace, cluster_queue("cq", "4"))  # (LocalQueue lq, not default)
    api.create(DGLJOBS, namespace, job(namespace, "unnamed", queue=None))
    wait_for(
        lambda: condition(api, namespace, "unnamed", "Queued").get("reason") == "QueueNameMissing",
        what="unnamed refused",
        timeout=30,
    )
    said = condition(api, namespace, "unnamed", "Queued")
    assert said["status"] == "True" and kq.QUEUE_LABEL in said["message"], said
    assert api.get(DGLJOBS, namespace, "unnamed")["status"]["phase"] == "Queued"
    warned = wait_for(
        lambda: [
            e
            for e in api.list(EVENTS, namespace)["items"]
            if e["involvedObject"]["name"] == "unnamed" and e["type"] == "Warning"
        ],
        what="the Warning",
        timeout=30,
    )
    assert any(kq.QUEUE_LABEL in str(e.get("message")) for e in warned), warned
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:
        assert pods(api, namespace, "unnamed") == {}, "the job ran outside Kueue"
        assert workload_of(api, namespace, "unnamed") is None
        time.sleep(0.5)
    api.patch(DGLJOBS, namespace, "unnamed", {"metadata": {"labels": {kq.QUEUE_LABEL: "lq"}}})
    wait_for(lambda: admitted(workload_of(api, namespace, "unnamed")), what="admitted", timeout=60)
    run_to_success(api, namespace, "unnamed", 100)
