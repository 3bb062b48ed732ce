"""Kueue's contract (--kueue): the Workload of a queued DGLJob and what its status means, as
pure functions (controller/features/kueue.py), then through the whole controller over FakeKube, the
test playing Kueue (it writes the Workload's admission and eviction as Kueue's scheduler
would). Real Kueue runs in e2e/test_kueue.py."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from controller.api import DGLJOBS, LAUNCHER, PARTITIONER, WORKER, Placement, parse_job
from controller.builders import BuildOptions
from controller.builders import workload as built
from controller.builders.desired import desired
from controller.features import kueue
from kubeclient import LOCALQUEUES, PODS, RESOURCEFLAVORS, WORKLOADS, Obj
from tests.controller.harness import LAUNCH, MAIN, NS, PART, W0, W1, Harness, bring_up, seed
from tests.controller.kueue_fixtures import (
    FLAVOR,
    T,
    admission,
    admitted_status,
    cond,
    kueue_writes,
    local_queue,
    parsed,
    queued,
    workload,
)
from tests.support.waiting import wait_for

# -- the Workload ------------------------------------------------------------------------------


def test_the_workload_asks_for_the_jobs_pods_in_its_queue_with_its_priority() -> None:
    raw = queued(runPolicy={"schedulingPolicy": {"priorityClass": "high"}})
    job = parsed(raw)
    wl = built.workload(job, BuildOptions(), priority=1000)
    meta = wl["metadata"]
    sets_hash = meta["annotations"][kueue.POD_SETS_HASH_ANNOTATION]
    assert meta["name"] == built.workload_name(job, sets_hash)
    assert meta["name"].startswith(f"dgljob-{MAIN}-") and len(meta["name"]) == len(MAIN) + 19
    # a job whose pod templates changed gets a Workload of another name (Kueue's cache may
    # still hold the old name as admitted: a replacement of the same name was never admitted)
    grown = copy.deepcopy(raw)
    main = grown["spec"]["dglReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    main["resources"] = {"requests": {"cpu": "2"}}
    other = built.workload(parsed(grown), BuildOptions(), priority=1000)["metadata"]["name"]
    assert other != meta["name"] and other[: len(MAIN) + 13] == meta["name"][: len(MAIN) + 13]
    assert meta["labels"] == {"dgl.qihoo.net/job-name": MAIN, kueue.JOB_UID_LABEL: job.uid}
    (owner,) = meta["ownerReferences"]
    assert (owner["kind"], owner["uid"], owner["controller"]) == ("DGLJob", job.uid, True)
    spec = wl["spec"]
    assert spec["queueName"] == "team-a" and spec["active"] is True
    assert spec["priorityClassRef"] == {
        "group": "scheduling.k8s.io",
        "kind": "PriorityClass",
        "name": "high",
    }
    assert spec["priority"] == 1000
    sets = {s["name"]: s for s in spec["podSets"]}
    assert [s["name"] for s in spec["podSets"]] == ["partitioner", "worker", "launcher"]
    assert {n: s["count"] for n, s in sets.items()} == {
        "partitioner": 1,
        "worker": 2,
        "launcher": 1,
    }
    assert all("minCount" not in s for s in sets.values())
    want = desired(job, BuildOptions())
    # each template is the pod the operator makes: its spec whole, of its metadata only the
    # labels and annotations (all Kueue allows there)
    for name, pod in (
        ("partitioner", want.partitioner),
        ("worker", want.workers[0]),
        ("launcher", want.launcher),
    ):
        assert pod is not None
        template = sets[name]["template"]
        assert set(template["metadata"]) == {"labels", "annotations"}
        assert template["metadata"]["labels"] == pod["metadata"]["labels"]
        assert template["spec"] == pod["spec"]


def test_an_elastic_job_may_be_admitted_partially_down_to_min_replicas() -> None:
    raw = queued(
        storage={"claimName": "results"},
        elasticPolicy={"minReplicas": 1, "maxReplicas": 3},
    )
    raw["spec"]["dglReplicaSpecs"]["Worker"]["replicas"] = 3
    wl = built.workload(parsed(raw), BuildOptions())
    (worker,) = [s for s in wl["spec"]["podSets"] if s["name"] == "worker"]
    assert (worker["count"], worker["minCount"]) == (3, 1)
    assert "priority" not in wl["spec"] and "priorityClassRef" not in wl["spec"]


def test_a_job_without_the_label_is_not_queued() -> None:
    assert kueue.queue_name(seed()) is None
    assert kueue.queue_name(queued("lq")) == "lq"


def test_a_job_without_the_label_takes_its_namespaces_local_queue_named_default() -> None:
    """Kueue's LocalQueueDefaulting: only a job with no queue of its own (no label, no
    Workload, none recorded) goes to ``default``, and only where that LocalQueue is."""
    free, labelled = parsed(seed()), parsed(queued("team-a"))
    assert kueue.queue_of(free, []) == (None, None)  # (the check can fail: no default queue)
    assert kueue.queue_of(free, [], default_queue=True) == ("default", None)
    assert kueue.defaulted(free, "default")
    # a label, a Workload or a recorded queue wins over the default
    assert kueue.queue_of(labelled, [], default_queue=True) == ("team-a", None)
    assert not kueue.defaulted(labelled, "team-a")
    wl = {"metadata": {"name": "w"}, "spec": {"queueName": "team-b"}}
    assert kueue.queue_of(free, [wl], default_queue=True) == ("team-b", wl)
    was = parsed({**seed(), "status": {"queue": {"localQueue": "team-c", "workload": "w"}}})
    assert kueue.queue_of(was, [], default_queue=True) == ("team-c", None)
    # a label that named default is not a default's: its removal is said as ever
    assert not kueue.defaulted(parsed(queued("default")), "default")
    assert kueue.is_default_queue(local_queue())
    assert not kueue.is_default_queue(local_queue("team-a"))


def test_the_refusal_of_a_job_without_a_queue_names_the_label_and_the_way_out() -> None:
    said = kueue.queue_name_missing(parsed(seed()))
    for part in (
        "the label kueue.x-k8s.io/queue-name is required",
        "--kueue-manage-jobs-without-queue-name",
        f"the namespace {NS} has no LocalQueue named default",
        "without pods",
    ):
        assert part in said, said


# -- what Kueue wrote --------------------------------------------------------------------------


# fmt: off
STATES = [
        ({}, False, "Pending", "waiting for Kueue to consider the Workload"),
        (
            {"conditions": [cond("QuotaReserved", False, "Inadmissible",
                                 "LocalQueue team-a doesn't exist")]},
            False, "Inadmissible", "LocalQueue team-a doesn't exist",
        ),
        (
            {"conditions": [cond("QuotaReserved", False, "Pending",
                                 "couldn't assign flavors to pod set worker: insufficient "
                                 "unused quota for cpu in flavor on-demand, 1 more needed")]},
            False, "Pending", "couldn't assign flavors to pod set worker: insufficient unused "
            "quota for cpu in flavor on-demand, 1 more needed",
        ),
        (
            {"admission": admission(), "conditions": [
                cond("QuotaReserved", True, "QuotaReserved"),
                cond("Admitted", False, "UnsatisfiedChecks", "not all checks ready")],
             "admissionChecks": [
                 {"name": "prov", "state": "Pending", "message": "waiting for capacity"},
                 {"name": "ok", "state": "Ready", "message": ""}]},
            False, "UnsatisfiedChecks", "admission check prov is Pending: waiting for capacity",
        ),
        (admitted_status(), True, "Admitted", "The workload is admitted"),
        (
            admitted_status() | {"conditions": [
                *admitted_status()["conditions"],
                cond("Evicted", True, "Preempted", "Preempted to accommodate a workload")]},
            False, "EvictedPreempted", "Preempted to accommodate a workload",
        ),
    ]
# fmt: on


@pytest.mark.parametrize(
    ("status", "admitted", "reason", "message"),
    STATES,
    ids=["new", "no-local-queue", "quota", "check-pending", "admitted", "evicted"],
)
def test_the_state_says_why_the_job_waits_in_kueues_words(
    status: Obj, admitted: bool, reason: str, message: str
) -> None:
    st = kueue.state({"metadata": {"name": "w"}, "status": status})
    assert (st.admitted, st.reason, st.message) == (admitted, reason, message)


def test_the_placement_is_the_flavors_and_the_checks_updates_per_replica_type() -> None:
    status = admitted_status(
        admissionChecks=[
            {
                "name": "prov",
                "state": "Ready",
                "message": "",
                "podSetUpdates": [
                    {
                        "name": "worker",
                        "labels": {"team": "a"},
                        "annotations": {"prov": "yes"},
                        "nodeSelector": {"zone": "z1"},
                    }
                ],
            }
        ]
    )
    wl = {"metadata": {"name": "w"}, "status": status}
    assert kueue.flavor_names(wl) == {"on-demand"}
    placed = kueue.placement(wl, {"on-demand": FLAVOR})
    tol = tuple(FLAVOR["spec"]["tolerations"])
    assert placed[LAUNCHER] == Placement({"pool": "on-demand"}, tol, count=1)
    assert placed[PARTITIONER] == Placement({"pool": "on-demand"}, tol, count=1)
    assert placed[WORKER] == Placement(
        {"pool": "on-demand", "zone": "z1"}, tol, {"team": "a"}, {"prov": "yes"}, count=2
    )
    # the pods the operator makes with it; the job's own spec is left as it was
    job = parsed(queued())
    want = desired(kueue.admitted(job, placed), BuildOptions())
    assert want.partitioner is not None
    for pod in [*want.workers, want.partitioner, want.launcher]:
        assert pod["spec"]["nodeSelector"]["pool"] == "on-demand"
        assert pod["spec"]["tolerations"][-1] == FLAVOR["spec"]["tolerations"][0]
    assert [w["metadata"]["labels"]["team"] for w in want.workers] == ["a", "a"]
    assert [w["spec"]["nodeSelector"]["zone"] for w in want.workers] == ["z1", "z1"]
    assert "team" not in want.launcher["metadata"]["labels"]
    assert "nodeSelector" not in desired(job, BuildOptions()).launcher["spec"]


def test_an_elastic_job_runs_no_more_workers_than_admitted() -> None:
    raw = queued(storage={"claimName": "r"}, elasticPolicy={"minReplicas": 1, "maxReplicas": 3})
    raw["spec"]["dglReplicaSpecs"]["Worker"]["replicas"] = 3
    job = parsed(raw)
    for count, workers in ((2, 2), (3, 3), (5, 3), (0, 1)):
        run = kueue.admitted(job, {WORKER: Placement(count=count)})
        assert run.spec.workers == workers, count
        # the launcher's Role, made once at the first admission, lets it read every worker a
        # later, larger admission may bring (maxReplicas as declared)
        role = next(o for o in desired(run, BuildOptions()).rbac if o["kind"] == "Role")
        reads = next(r for r in role["rules"] if r["resources"] == ["pods"])
        assert reads["resourceNames"][:3] == [f"{job.name}-worker-{i}" for i in range(3)], count
        # admitted twice (a replaced Workload): still the declared ceiling
        again = kueue.admitted(run, {WORKER: Placement(count=1)})
        assert again.every_worker_name() == job.every_worker_name(), count


# -- what the job's side writes ----------------------------------------------------------------


def conditions_of(patch: Obj) -> dict[str, Obj]:
    return {c["type"]: c for c in patch["status"]["conditions"]}


def test_an_evicted_workload_gets_its_reservation_cleared_so_kueue_queues_it_again() -> None:
    wl = {
        "metadata": {"name": "w", "resourceVersion": "7", "generation": 1},
        "status": admitted_status()
        | {
            "conditions": [
                *admitted_status()["conditions"],
                cond("Evicted", True, "Preempted", "Preempted to accommodate a workload"),
            ]
        },
    }
    patch = kueue.clear_reservation(wl, T)
    assert patch is not None
    assert patch["metadata"] == {"resourceVersion": "7"}  # a conflict if Kueue wrote since
    assert patch["status"]["admission"] is None
    conds = conditions_of(patch)
    assert (conds["QuotaReserved"]["status"], conds["QuotaReserved"]["reason"]) == (
        "False",
        "Pending",
    )
    assert conds["QuotaReserved"]["message"] == "Preempted to accommodate a workload"
    assert (conds["Admitted"]["status"], conds["Admitted"]["reason"]) == ("False", "NoReservation")
    assert (conds["Requeued"]["status"], conds["Requeued"]["reason"]) == ("True", "Preempted")
    assert conds["Evicted"]["status"] == "True"  # Kueue's to clear
    cleared = {**wl, "status": {**wl["status"], **patch["status"]}}
    assert kueue.clear_reservation(cleared, T) is None
    assert kueue.clear_reservation({"metadata": {}, "status": admitted_status()}, T) is None


def test_pods_ready_and_finished_are_worded_as_kueues_reconciler_does() -> None:
    wl: Obj = {"metadata": {"name": "w", "resourceVersion": "3"}, "status": admitted_status()}
    patch = kueue.pods_ready(wl, False, T)
    assert patch is not None and conditions_of(patch)["PodsReady"]["reason"] == "WaitForStart"
    wl["status"] = {**wl["status"], **patch["status"]}
    assert kueue.pods_ready(wl, False, T) is None  # said already
    patch = kueue.pods_ready(wl, True, T)
    assert patch is not None and conditions_of(patch)["PodsReady"]["reason"] == "Started"
    wl["status"] = {**wl["status"], **patch["status"]}
    patch = kueue.pods_ready(wl, False, T)
    assert patch is not None and conditions_of(patch)["PodsReady"]["reason"] == "WaitForRecovery"
    wl["status"] = {**wl["status"], **patch["status"]}
    patch = kueue.pods_ready(wl, True, T)
    assert patch is not None and conditions_of(patch)["PodsReady"]["reason"] == "Recovered"
    done = kueue.finished(wl, False, "worker-1 exited with code 1", T)
    assert done is not None
    finished = conditions_of(done)["Finished"]
    assert (finished["status"], finished["reason"]) == ("True", "Failed")
    assert finished["message"] == "worker-1 exited with code 1"
    wl["status"] = {**wl["status"], **done["status"]}
    assert kueue.finished(wl, True, "", T) is None


# -- through the whole controller ----------------------------------------------------------------


@pytest.fixture
def h() -> Any:
    harness = Harness(options=BuildOptions(kueue=True))
    harness.kube.create(RESOURCEFLAVORS, None, copy.deepcopy(FLAVOR))
    harness.start()
    yield harness
    harness.close()


def complete_once_admitted(h: Harness, what: str) -> None:
    """Kueue admits the job; its pods run, the launcher succeeds, the Workload is Finished."""
    kueue_writes(h, admitted_status())
    h.wait_pods(W0, W1, PART)
    bring_up(h)
    h.run_pod(LAUNCH, "10.0.0.4")
    h.finish_pod(LAUNCH)
    h.wait_phase("Completed")
    wait_for(lambda: "Finished" in conditions_of({"status": workload(h)["status"]}), what=what)


def test_a_queued_job_runs_only_while_admitted_and_its_workload_follows_it(h: Harness) -> None:
    h.create_job(queued())
    wait_for(lambda: h.kube.objects(WORKLOADS, NS), what="the Workload")
    h.settle()
    assert h.pods() == {}, "no pod before the admission"
    assert h.status()["phase"] == "Queued"
    q = h.condition("Queued")
    assert q is not None and (q["status"], q["reason"]) == ("True", "Pending")
    # the LocalQueue is missing: the job says so, in Kueue's words
    kueue_writes(
        h,
        {
            "conditions": [
                cond("QuotaReserved", False, "Inadmissible", "LocalQueue team-a doesn't exist")
            ]
        },
    )
    h.wait_condition_status("Queued", "True", reason="Inadmissible")
    assert h.condition("Queued")["message"] == "LocalQueue team-a doesn't exist"  # type: ignore[index]
    assert h.pods() == {}
    # admitted: the pods come, with the flavor's nodeSelector and tolerations
    kueue_writes(h, admitted_status())
    h.wait_pods(W0, W1, PART)
    for pod in h.pods().values():
        assert pod["spec"]["nodeSelector"] == {"pool": "on-demand"}
        assert FLAVOR["spec"]["tolerations"][0] in pod["spec"]["tolerations"]
    h.wait_condition_status("Queued", "False", reason="Admitted")
    assert "DGLJobAdmitted" in h.event_reasons()
    wait_for(
        lambda: "PodsReady" in conditions_of({"status": workload(h)["status"]}),
        what="the Workload's PodsReady",
    )
    assert conditions_of({"status": workload(h)["status"]})["PodsReady"]["reason"] == "WaitForStart"
    bring_up(h)
    h.run_pod(LAUNCH, "10.0.0.4")
    wait_for(
        lambda: conditions_of({"status": workload(h)["status"]})["PodsReady"]["status"] == "True",
        what="PodsReady True on the Workload",
    )
    # preempted: the pods go; once they are gone the reservation is cleared
    evicted = admitted_status()
    evicted["conditions"].append(
        cond("Evicted", True, "Preempted", "Preempted to accommodate a workload")
    )
    h.kube.clear_actions()
    kueue_writes(h, evicted)
    h.wait_condition_status("Queued", "True", reason="EvictedPreempted")
    h.settle()
    deleted = {a.name: a.grace_period_seconds for a in h.kube.actions if a.verb == "delete"}
    assert deleted == {n: 5 for n in (W0, W1, PART, LAUNCH)}, deleted  # not the pods' 30 s
    assert all(p["metadata"].get("deletionTimestamp") for p in h.pods().values()) or h.pods() == {}
    h.kube.collect_garbage()
    for name in list(h.pods()):
        h.kube.delete(PODS, NS, name, grace_period_seconds=0)
    wait_for(lambda: workload(h)["status"].get("admission") is None, what="the reservation cleared")
    wl_conds = conditions_of({"status": workload(h)["status"]})
    assert (wl_conds["QuotaReserved"]["status"], wl_conds["QuotaReserved"]["reason"]) == (
        "False",
        "Pending",
    )
    assert wl_conds["Requeued"]["status"] == "True"
    assert h.status()["phase"] == "Queued" and "startTime" not in h.status()
    # admitted again (Kueue drops Evicted when it admits): a new attempt's pods; then done
    complete_once_admitted(h, "the Workload Finished")
    finished = conditions_of({"status": workload(h)["status"]})["Finished"]
    assert (finished["status"], finished["reason"]) == ("True", "Succeeded")


def test_a_job_without_the_label_runs_as_ever_and_has_no_workload(h: Harness) -> None:
    h.create_job(seed())
    h.wait_pods(W0, W1, PART)
    h.settle()
    assert h.kube.objects(WORKLOADS, NS) == []
    assert h.condition("Queued") is None


# -- a job without the label (issue 57: LocalQueueDefaulting, manageJobsWithoutQueueName) -------


def test_a_job_without_the_label_is_queued_in_the_namespaces_local_queue_default(
    h: Harness,
) -> None:
    """Kueue's LocalQueueDefaulting, always on with --kueue: no pod before the admission, a
    Workload in LocalQueue default, and no "label removed" Warning (it never had one)."""
    h.kube.create(LOCALQUEUES, NS, local_queue())
    h.kube.create(LOCALQUEUES, NS, local_queue("team-a"))
    h.settle()
    h.create_job(seed())
    wait_for(lambda: h.kube.objects(WORKLOADS, NS), what="the Workload")
    h.settle()
    assert workload(h)["spec"]["queueName"] == "default"
    assert h.pods() == {}, "the job ran outside Kueue"
    assert h.status()["phase"] == "Queued"
    assert h.status()["queue"]["localQueue"] == "default"
    said = [e["message"] for e in h.events() if e["reason"] == "DGLJobQueued"]
    assert any("no label kueue.x-k8s.io/queue-name" in m for m in said), said
    assert "QueueLabelRemoved" not in h.event_reasons()
    complete_once_admitted(h, "the Workload Finished")


def test_why_a_job_without_the_label_is_queued_is_said_when_its_workload_was_made_before() -> None:
    """The sync that makes the Workload may lose its status write (and its Event) to a
    conflict; the next one finds the Workload made. The Queued condition and its Event still
    say why a job without the label is queued (CI saw only Kueue's words, once). The twin: a
    job labelled ``default`` is not told it has no label."""
    for raw, says in ((seed(), True), (queued("default"), False)):
        h = Harness(options=BuildOptions(kueue=True))
        try:
            h.kube.create(RESOURCEFLAVORS, None, copy.deepcopy(FLAVOR))
            h.kube.create(LOCALQUEUES, NS, local_queue())
            made = h.create_job(raw)
            wl = built.workload(parse_job(made), BuildOptions(kueue=True), None, "default")
            h.kube.create(WORKLOADS, NS, wl)  # (made by a sync whose status was lost)
            h.start()
            h.wait_condition_status("Queued", "True")
            h.settle()
            message = (h.condition("Queued") or {})["message"]
            said = [e["message"] for e in h.events() if e["reason"] == "DGLJobQueued"]
            assert len(h.kube.objects(WORKLOADS, NS)) == 1  # (that one: none made again)
            assert ("no label kueue.x-k8s.io/queue-name" in message) is says, message
            assert any("no label kueue.x-k8s.io/queue-name" in m for m in said) is says, said
        finally:
            h.close()


def test_the_default_local_queue_made_later_takes_the_jobs_waiting_for_a_queue() -> None:
    """--kueue-manage-jobs-without-queue-name: a job without the label, where no LocalQueue
    named default is, waits without pods, said with the label's name (a Warning); once the
    platform makes that LocalQueue the job is queued there at once (its creation queues the
    namespace's jobs), and runs when admitted."""
    h = Harness(options=BuildOptions(kueue=True, kueue_manage_jobs_without_queue_name=True))
    h.kube.create(RESOURCEFLAVORS, None, copy.deepcopy(FLAVOR))
    h.kube.create(LOCALQUEUES, NS, local_queue("team-a"))  # (not default: no help)
    h.start()
    try:
        h.create_job(seed())
        h.wait_condition_status("Queued", "True", reason="QueueNameMissing")
        h.settle()
        assert h.pods() == {}, "the job ran outside Kueue"
        assert h.kube.objects(WORKLOADS, NS) == []
        assert h.status()["phase"] == "Queued"
        q = h.condition("Queued")
        assert q is not None and "kueue.x-k8s.io/queue-name" in q["message"], q
        warned = [e for e in h.events() if e["type"] == "Warning"]
        assert any("kueue.x-k8s.io/queue-name" in e["message"] for e in warned), warned
        h.kube.create(LOCALQUEUES, NS, local_queue())
        wait_for(lambda: h.kube.objects(WORKLOADS, NS), what="the Workload in default")
        assert workload(h)["spec"]["queueName"] == "default"
        h.wait_condition_status("Queued", "True", reason="Pending")
        complete_once_admitted(h, "the Workload Finished")
    finally:
        h.close()


def test_a_default_local_queue_made_later_stops_an_unlabelled_job_running_outside_kueue(
    h: Harness,
) -> None:
    """A job without the label runs unqueued while its namespace has no LocalQueue default
    (the twin: the check can fail); once one is made it is queued there, its pods stopped
    until Kueue admits it (it no longer runs outside the quota)."""
    h.create_job(seed())
    h.wait_pods(W0, W1, PART)
    bring_up(h)
    h.settle()
    assert h.kube.objects(WORKLOADS, NS) == []
    h.kube.create(LOCALQUEUES, NS, local_queue())
    wait_for(lambda: h.kube.objects(WORKLOADS, NS), what="the Workload in default")
    assert workload(h)["spec"]["queueName"] == "default"
    h.wait_condition_status("Queued", "True", reason="Pending")
    h.settle()
    assert all(p["metadata"].get("deletionTimestamp") for p in h.pods().values()), h.pods()


def test_a_job_waiting_for_a_queue_is_queued_once_labelled() -> None:
    h = Harness(options=BuildOptions(kueue=True, kueue_manage_jobs_without_queue_name=True))
    h.kube.create(RESOURCEFLAVORS, None, copy.deepcopy(FLAVOR))
    h.start()
    try:
        h.create_job(seed())
        h.wait_condition_status("Queued", "True", reason="QueueNameMissing")
        h.kube.patch(
            DGLJOBS, NS, "dgl-graphsage", {"metadata": {"labels": {kueue.QUEUE_LABEL: "team-a"}}}
        )
        wait_for(lambda: h.kube.objects(WORKLOADS, NS), what="the Workload")
        assert workload(h)["spec"]["queueName"] == "team-a"
        h.settle()
        assert h.pods() == {}
        assert "QueueLabelRemoved" not in h.event_reasons()
        complete_once_admitted(h, "the Workload Finished")
    finally:
        h.close()


# -- no way around the queue (issue 42) ---------------------------------------------------------


def test_a_queued_job_whose_label_is_removed_stays_queued(h: Harness) -> None:
    """Removing the queue label does not let a waiting job run beside the quota: it stays in
    its LocalQueue (said once, a Warning) and runs only once admitted; its Workload is
    Finished at the end as ever."""
    h.create_job(queued())
    wait_for(lambda: h.kube.objects(WORKLOADS, NS), what="the Workload")
    h.settle()
    assert h.status()["queue"] == {
        "localQueue": "team-a",
        "workload": workload(h)["metadata"]["name"],
    }
    h.kube.patch(DGLJOBS, NS, "dgl-graphsage", {"metadata": {"labels": None}})
    wait_for(lambda: "QueueLabelRemoved" in h.event_reasons(), what="the Warning")
    h.settle()
    assert h.pods() == {}, "the job ran without its admission"
    assert h.status()["phase"] == "Queued"
    assert h.condition("Queued")["status"] == "True"  # type: ignore[index]
    assert len(h.kube.objects(WORKLOADS, NS)) == 1
    complete_once_admitted(h, "the Workload Finished, the label gone")
    assert h.event_reasons().count("QueueLabelRemoved") == 1


def test_templates_changed_while_admitted_stop_the_attempt_and_queue_a_new_workload(
    h: Harness,
) -> None:
    """An admitted job whose templates ask for more than was admitted does not run so: its
    pods go, its Workload is replaced by one that asks for what the job now wants, and the
    job waits for that one's admission."""
    h.create_job(queued())
    wait_for(lambda: h.kube.objects(WORKLOADS, NS), what="the Workload")
    kueue_writes(h, admitted_status())
    h.wait_pods(W0, W1, PART)
    first = workload(h)

    def more(raw: dict[str, Any]) -> None:
        main = raw["spec"]["dglReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
        main["resources"] = {"requests": {"cpu": "8", "memory": "64Gi"}}

    h.edit_job(more)  # (retried on a 409: the operator writes the status meanwhile)
    wait_for(
        lambda: (
            [w["metadata"]["uid"] for w in h.kube.objects(WORKLOADS, NS)]
            not in ([], [first["metadata"]["uid"]])
        ),
        what="a new Workload",
    )
    wait_for(lambda: "WorkloadChanged" in h.event_reasons(), what="the WorkloadChanged Warning")
    h.wait_condition_status("Queued", "True", reason="Pending")  # (in the new Workload)
    for name in list(h.pods()):  # (the kubelet ends the stopped attempt's pods)
        assert h.pods()[name]["metadata"].get("deletionTimestamp"), name
        h.kube.delete(PODS, NS, name, grace_period_seconds=0)
    h.settle()
    assert h.pods() == {}, "pods ran without the new Workload's admission"
    (new,) = h.kube.objects(WORKLOADS, NS)
    worker = next(ps for ps in new["spec"]["podSets"] if ps["name"] == "worker")
    resources = worker["template"]["spec"]["containers"][0]["resources"]
    assert resources["requests"] == {"cpu": "8", "memory": "64Gi"}
    assert (
        new["metadata"]["annotations"][kueue.POD_SETS_HASH_ANNOTATION]
        != (first["metadata"]["annotations"][kueue.POD_SETS_HASH_ANNOTATION])
    )
    kueue_writes(h, admitted_status())
    h.wait_pods(W0, W1, PART)


def test_a_workload_of_the_jobs_name_that_it_does_not_own_is_never_used() -> None:
    """A Workload planted under the name the job's would have (owned by someone else, its
    labels naming the job) is not the job's: its admission runs nothing."""
    harness = Harness(options=BuildOptions(kueue=True))
    harness.kube.create(RESOURCEFLAVORS, None, copy.deepcopy(FLAVOR))
    try:
        created = harness.create_job(queued())
        job = parsed(created)
        planted = built.workload(job, BuildOptions())
        planted["metadata"]["ownerReferences"] = []
        harness.kube.create(WORKLOADS, NS, planted)
        kueue_writes(harness, admitted_status())  # "admitted"
        harness.start()
        wait_for(
            lambda: "ErrResourceExists" in harness.event_reasons(),
            what="the Workload's name found taken",
        )
        harness.settle()
        assert harness.pods() == {}, "the job ran on a Workload it does not own"
    finally:
        harness.close()
