"""A DGLJob's whole life through informers, workqueue, workers and sync, over FakeKube."""

from __future__ import annotations

import copy
import re
import threading
import time
from typing import Any

import pytest
import structlog.testing

from controller.api import DGLJOBS
from controller.builders import ATTEMPT_ANNOTATION, JOB_NAME_LABEL
from controller.status.conditions import now_rfc3339, parse_time
from controller.status.pod_state import is_terminating as terminating
from kubeclient import (
    CONFIGMAPS,
    NETWORKPOLICIES,
    PODS,
    ROLEBINDINGS,
    ROLES,
    SECRETS,
    SERVICEACCOUNTS,
    SERVICES,
    Obj,
    Resource,
)
from kubeclient import (
    PERSISTENTVOLUMECLAIMS as PVCS,
)
from tests.controller.harness import (
    EPOCH,
    LAUNCH,
    MAIN,
    NS,
    PART,
    W0,
    W1,
    Harness,
    add_nodes,
    bring_up,
    poke,
    seed,
    train,
)
from tests.fakekube import FakeKube
from tests.support.waiting import wait_for

J = "dgl-graphsage"


def test_happy_path(h: Harness) -> None:
    """The seed's job whose manifest asks for the original operator's delivery (KubectlCp),
    which is served over HTTP (kubectl cp needs pods/exec, which no pod of a job holds): the
    partitioner serves, dglrun reports its partition time, the launcher trains."""
    h.create_job(seed(partitionTransfer="KubectlCp"))
    h.wait_pods(W0, W1, PART)
    h.wait_condition("Created")
    assert h.status()["phase"] == "Pending"
    assert LAUNCH not in h.pods(), "launcher must wait for workers (WaitForWorkersReady)"
    assert h.names(CONFIGMAPS) == [f"{J}-config", f"{J}-report"]  # (dglrun's report: empty)
    assert h.kube.get(CONFIGMAPS, NS, f"{J}-report").get("data") in (None, {})
    assert h.names(SERVICEACCOUNTS) == [LAUNCH, PART]
    assert h.names(ROLES) == [LAUNCH, PART]
    assert h.names(ROLEBINDINGS) == [LAUNCH, PART]
    assert h.names(SERVICES) == [f"{J}-worker"]  # one headless Service for every worker
    assert h.kube.get(CONFIGMAPS, NS, f"{J}-config")["data"]["hostfile"] == ""
    assert h.status()["startTime"]

    bring_up(h)
    data = h.kube.get(CONFIGMAPS, NS, f"{J}-config")["data"]
    assert data["hostfile"] == (f"10.0.0.1 30050 {W0} slots=1\n10.0.0.2 30050 {W1} slots=1\n")
    assert data["partfile"] == f"10.0.0.3 30050 {PART}\n"
    h.wait_phase("Partitioning")
    assert h.wait_condition("Running")["reason"] == "DGLJobRunning"

    h.launcher_waiting_in_init(LAUNCH, "10.0.0.4")
    wait_for(
        lambda: (
            h.kube.get(CONFIGMAPS, NS, f"{J}-config")["data"]["leadfile"]
            == f"10.0.0.4 30050 {LAUNCH}\n"
        ),
        what="leadfile with the launcher's IP",
    )
    assert h.status()["transferSecret"]  # (served over HTTP: the token)
    h.report_progress("2/5 deliver", reporter="partitioner", partitionSeconds=42)
    wait_for(lambda: h.status().get("partitionSeconds") == 42, what="the partition time")
    wait_for(
        lambda: (
            (h.ctrl.listers.jobs.get(NS, J) or {}).get("status", {}).get("partitionSeconds") == 42
        ),
        what="the controller's cache to hold dglrun's report",
    )
    h.run_pod(LAUNCH, "10.0.0.4")
    h.wait_phase("Training")
    assert h.status()["replicaStatuses"]["Worker"] == {
        "active": 2,
        "succeeded": 0,
        "failed": 0,
        "ready": "2/2",
    }

    h.finish_pod(LAUNCH, seconds=100)
    cond = h.wait_condition("Succeeded")
    assert cond["reason"] == "DGLJobSucceeded"
    st = h.status()
    assert st["phase"] == "Completed"
    assert st["completionTime"] and st["trainingSeconds"] == 100
    assert h.condition("Running")["status"] == "False"  # type: ignore[index]
    assert st["observedGeneration"] == 1
    # cleanPodPolicy Running: the running workers, the serving partitioner and the workers'
    # Service go, finished pods stay
    wait_for(lambda: set(h.pods()) == {LAUNCH}, what="running pods deleted")
    wait_for(lambda: h.names(SERVICES) == [], what="the workers' Service deleted")
    reasons = h.event_reasons()
    for r in (
        "DGLJobCreated",
        "SuccessfulCreate",
        "DGLJobPartitioning",
        "PartitionSucceeded",
        "DGLJobTraining",
        "DGLJobSucceeded",
        "SuccessfulDelete",
    ):
        assert r in reasons, f"no {r} event in {reasons}"
    h.settle()
    assert h.sample("dgl_operator_jobs_created_total", namespace=NS) == 1
    assert h.sample("dgl_operator_jobs_successful_total", namespace=NS) == 1
    assert h.sample("dgl_operator_job_training_duration_seconds_count", namespace=NS) == 1
    assert h.sample("dgl_operator_job_training_duration_seconds_sum", namespace=NS) == 100
    assert h.sample("dgl_operator_job_partition_duration_seconds_sum", namespace=NS) == 42
    assert h.sample("controller_runtime_reconcile_total", controller="dgljob", result="success") > 0


@pytest.mark.parametrize(
    ("policy", "left"),
    [("Running", {PART, LAUNCH}), ("All", set()), ("None", {W0, W1, PART, LAUNCH})],
)
def test_clean_pod_policy(h: Harness, policy: str, left: set[str]) -> None:
    h.create_job(seed(cleanPodPolicy=policy))
    train(h)
    h.finish_pod(LAUNCH)
    h.wait_condition("Succeeded")
    wait_for(lambda: set(h.pods()) == left, what=f"pods left by {policy}: {left}")
    h.settle()
    assert set(h.pods()) == left


@pytest.mark.parametrize(
    ("terminated", "reason"),
    [("Error", "WorkerFailed"), ("OOMKilled", "OOMKilled")],  # killed for memory: says so
)
def test_worker_failure_fails_the_job_naming_pod_and_container(
    h: Harness, terminated: str, reason: str
) -> None:
    h.create_job(seed())
    train(h)
    h.finish_pod(W1, exit_code=137, reason=terminated)
    cond = h.wait_condition("Failed")
    assert cond["reason"] == reason
    assert W1 in cond["message"] and "dgl-graphsage" in cond["message"]
    assert "137" in cond["message"] and f"({terminated})" in cond["message"], cond["message"]
    assert h.status()["phase"] == "Failed"
    assert h.status()["completionTime"]
    # Running policy: still-running pods stop; the failed worker stays for its logs
    wait_for(lambda: set(h.pods()) == {W1, PART}, what="active pods deleted")
    h.settle()
    assert h.sample("dgl_operator_jobs_failed_total", namespace=NS, reason=reason) == 1
    assert reason in h.event_reasons()


def test_a_job_from_before_the_one_service_keeps_its_per_worker_services_until_cleanup(
    h: Harness,
) -> None:
    """A job the previous version started has a Service per worker; this version adds the
    workers' one Service and cleans up every Service the job controls."""
    job = h.create_job(seed())
    h.wait_pods(W0, W1, PART)
    owner = {"apiVersion": job["apiVersion"], "kind": job["kind"], "name": J,
             "uid": job["metadata"]["uid"], "controller": True}  # fmt: skip
    for name in (W0, W1):
        old = {"apiVersion": "v1", "kind": "Service", "spec": {"clusterIP": "None"},
               "metadata": {"name": name, "labels": {"dgl.qihoo.net/job-name": J},
                            "ownerReferences": [owner]}}  # fmt: skip
        h.kube.create(SERVICES, NS, old)
    wait_for(lambda: h.names(SERVICES) == [f"{J}-worker", W0, W1], what="both kinds of Service")
    bring_up(h)
    h.finish_pod(PART, seconds=1)
    h.wait_phase("Partitioned")
    h.run_pod(LAUNCH, "10.0.0.4")
    h.finish_pod(LAUNCH, seconds=1)
    h.wait_condition("Succeeded")
    wait_for(lambda: h.names(SERVICES) == [], what="every Service of the job deleted")


def test_a_process_killed_for_memory_in_a_running_pod_fails_the_job_oomkilled(
    h: Harness,
) -> None:
    """The kernel killed a trainer inside worker 1 (its pod stays Running): dglrun's
    termination message says so, and the job fails OOMKilled naming that pod."""
    h.create_job(seed())
    train(h)
    why = (
        f"OOMKilled: trainer-0 in pod {W1} was killed for memory (over its container's "
        "memory limit, 900 MiB); train failed: trainer 0 on dgl-graphsage-worker-1 exited "
        "with code 137; stopped every DGL process on every worker"
    )
    h.finish_pod(LAUNCH, exit_code=1, message=why)
    cond = h.wait_condition("Failed")
    assert cond["reason"] == "OOMKilled"
    assert cond["message"].startswith(f"trainer-0 in pod {W1} was killed for memory"), cond
    assert cond["message"].endswith(f"(reported by launcher pod {LAUNCH})"), cond
    assert "OOMKilled" in h.event_reasons()


def test_partitioner_failure(h: Harness) -> None:
    h.create_job(seed())
    bring_up(h)
    h.finish_pod(PART, exit_code=1)
    cond = h.wait_condition("Failed")
    assert cond["reason"] == "PartitionerFailed"
    assert PART in cond["message"] and "exited with code 1" in cond["message"]


def test_a_memory_plan_that_does_not_fit_fails_at_once_without_restarts(h: Harness) -> None:
    """dglrun refused to partition (its termination message starts with "memory plan: "):
    another attempt would refuse again, whatever backoffLimit allows."""
    h.create_job(seed(runPolicy={"backoffLimit": 3}))
    bring_up(h)
    why = (
        "memory plan: the partition step needs ~9.1 GiB in the partitioner pod (the partition "
        "entry point, for 2,000,000 nodes, 40,000,000 edges, 411 B of data per node), more "
        "than its memory limit of 4.0 GiB"
    )
    h.finish_pod(PART, exit_code=1, message=why)
    cond = h.wait_condition("Failed")
    assert cond["reason"] == "MemoryPlanExceeded"
    assert PART in cond["message"] and "needs ~9.1 GiB" in cond["message"], cond["message"]
    assert int(h.status().get("restartCount") or 0) == 0
    wait_for(lambda: "MemoryPlanExceeded" in h.event_reasons(), what="the event")  # (after)


# dglrun's termination message when a trainer refused the checkpoint it was to resume from
# (launcher.workers.refusal.describe; the trainer's line as train_dist.py prints it)
CHECKPOINT = "/dgl_storage/runs/dgl-graphsage-1a2b3c4d/checkpoints/epoch-3.pt"
REFUSED = (
    f"refused: train_dist.py: error: [rank 0] checkpoint {CHECKPOINT} is refused: it holds "
    "more than tensors and plain values, and loading it could run code (Unsupported global: "
    "GLOBAL posix.system was not an allowed global by default.) (trainer 0 on "
    f"{W0} (10.0.0.1) exited with code 65: it refused a file it was to load, and would "
    "refuse it again on a restart); stopped every DGL process on every worker"
)


def test_a_refused_checkpoint_fails_the_job_at_once_quoting_the_refusal(h: Harness) -> None:
    """Every kept checkpoint overwritten with a pickle payload (its digest too): the trainers
    refuse it, dglrun's termination message quotes them, and the job fails FileRefused at
    once, naming the file in its condition and its Warning Event, whatever backoffLimit
    allows (the next attempt would read the same file)."""
    h.create_job(seed(runPolicy={"backoffLimit": 3}))
    train(h)
    h.finish_pod(LAUNCH, exit_code=1, message=REFUSED)
    cond = h.wait_condition("Failed")
    assert cond["reason"] == "FileRefused", cond
    assert cond["message"].startswith(f"train_dist.py: error: [rank 0] checkpoint {CHECKPOINT} "
                                      "is refused: it holds more than tensors"), cond  # fmt: skip
    assert "GLOBAL posix.system" in cond["message"], cond
    assert cond["message"].endswith(f"(reported by launcher pod {LAUNCH})"), cond
    assert int(h.status().get("restartCount") or 0) == 0
    assert h.status()["phase"] == "Failed"
    wait_for(lambda: "FileRefused" in h.event_reasons(), what="the event")
    (event,) = [e for e in h.events() if e["reason"] == "FileRefused"]
    assert event["type"] == "Warning" and CHECKPOINT in event["message"], event
    assert "is refused: it holds more than tensors" in event["message"], event
    assert "DGLJobRestarting" not in h.event_reasons()


def test_the_same_failure_without_the_refusal_is_retried(h: Harness) -> None:
    """The twin: the trainer's line as an ordinary failure (dglrun's message without the
    ``refused: `` start) restarts the job, as any failure within backoffLimit does."""
    h.create_job(seed(runPolicy={"backoffLimit": 3}))
    train(h)
    h.finish_pod(LAUNCH, exit_code=1, message=REFUSED.removeprefix("refused: "))
    cond = h.wait_condition("Restarting")
    assert "restart 1 of 3" in cond["message"] and CHECKPOINT in cond["message"], cond
    wait_for(lambda: h.status().get("restartCount") == 1, what="restartCount 1")
    assert h.condition("Failed") is None


def test_launcher_init_container_failure_is_named(h: Harness) -> None:
    h.create_job(seed())
    bring_up(h)
    h.finish_pod(LAUNCH, exit_code=3, container="watcher-loop-worker", init=True)
    cond = h.wait_condition("Failed")
    assert cond["reason"] == "LauncherFailed"
    assert "watcher-loop-worker" in cond["message"] and "code 3" in cond["message"]


def test_worker_deleted_while_training_fails_the_job(h: Harness) -> None:
    h.create_job(seed())
    train(h)
    pod = h.pods()[W0]
    h.kube.delete(PODS, NS, W0, uid=pod["metadata"]["uid"])
    cond = h.wait_condition("Failed")
    assert cond["reason"] == "WorkerFailed"
    assert W0 in cond["message"] and "deleted" in cond["message"]


def test_the_serving_partitioner_deleted_mid_delivery_restarts_at_once(h: Harness) -> None:
    """Over HTTP the partitioner serves the parts while the workers pull: deleted then, no pull
    can reach it again in this attempt, so the attempt ends at once (it used to end only when
    the pulls gave up, 90 s later on the local cluster). The twin: once the launcher reported
    the delivery, the partitioner may go (it would have exited anyway)."""
    h.create_job(seed(runPolicy={"backoffLimit": 1}))
    bring_up(h)
    h.run_pod(LAUNCH, "10.0.0.4")  # (dglrun dispatches: the workers pull from the partitioner)
    h.wait_phase("Training")
    h.report_progress("3/5 dispatch: 1/8 MB")
    h.kube.delete(PODS, NS, PART, uid=h.pods()[PART]["metadata"]["uid"])
    wait_for(lambda: h.status().get("restartCount") == 1, what="the restart")
    restarting = [e["message"] for e in h.events() if e["reason"] == "DGLJobRestarting"]
    assert restarting and PART in restarting[0] and "serving the partitions" in restarting[0]


def test_the_partitioner_gone_after_the_delivery_is_no_failure(h: Harness) -> None:
    h.create_job(seed(runPolicy={"backoffLimit": 1}))
    bring_up(h)
    h.run_pod(LAUNCH, "10.0.0.4")
    h.wait_phase("Training")
    h.report_progress("4/5 configure", deliveryBytes=8_000_000, deliverySeconds=1.0)
    h.kube.delete(PODS, NS, PART, uid=h.pods()[PART]["metadata"]["uid"])
    poke(h)
    h.settle()
    assert int(h.status().get("restartCount") or 0) == 0 and h.condition("Failed") is None
    h.finish_pod(LAUNCH, seconds=60)
    h.wait_condition("Succeeded")


def test_worker_deleted_before_training_is_recreated_and_hostfile_follows(h: Harness) -> None:
    h.create_job(seed(launcherCreationPolicy="AtStartup"))
    h.wait_pods(W0, W1, PART, LAUNCH)
    h.run_pod(W0, "10.0.0.1")
    h.run_pod(W1, "10.0.0.2")
    cm = f"{J}-config"
    wait_for(
        lambda: "10.0.0.2" in h.kube.get(CONFIGMAPS, NS, cm)["data"]["hostfile"],
        what="W1 in the hostfile",
    )
    old_uid = h.pods()[W1]["metadata"]["uid"]
    h.kube.delete(PODS, NS, W1, uid=old_uid)
    wait_for(
        lambda: (h.pods().get(W1) or {}).get("metadata", {}).get("uid") not in (None, old_uid),
        what="worker recreated",
    )
    wait_for(
        lambda: "10.0.0.2" not in h.kube.get(CONFIGMAPS, NS, cm)["data"]["hostfile"],
        what="stale IP removed from the hostfile",
    )
    h.run_pod(W1, "10.0.0.9")
    wait_for(
        lambda: (
            h.kube.get(CONFIGMAPS, NS, cm)["data"]["hostfile"]
            == f"10.0.0.1 30050 {W0} slots=1\n10.0.0.9 30050 {W1} slots=1\n"
        ),
        what="hostfile with the new IP",
    )
    assert h.condition("Failed") is None


def test_backoff_limit_restarts_then_fails(h: Harness) -> None:
    raw = seed(runPolicy={"backoffLimit": 1})
    h.create_job(raw)
    train(h)
    first_uids = {n: p["metadata"]["uid"] for n, p in h.pods().items()}
    h.report_progress("5/5 train: epoch 3/10")
    h.finish_pod(W0, exit_code=1)
    cond = h.wait_condition("Restarting")
    assert W0 in cond["message"] and "restart 1 of 1" in cond["message"]
    wait_for(lambda: h.status().get("restartCount") == 1, what="restartCount 1")
    assert "progress" not in h.status(), "the failed attempt's progress was kept"

    # every old pod goes, the new attempt's pods come back with attempt 1 (each look is one
    # listing: between the old pods' deletion and the new ones' creation the list is empty)
    def recreated() -> dict[str, Obj] | None:
        pods = h.pods()
        fresh = {W0, W1, PART} <= set(pods) and all(
            p["metadata"]["uid"] != first_uids.get(n) for n, p in pods.items()
        )
        return pods if fresh else None

    pods = wait_for(recreated, what="pods recreated")
    assert {p["metadata"]["annotations"][ATTEMPT_ANNOTATION] for p in pods.values()} == {"1"}
    train(h)
    assert h.condition("Restarting")["status"] == "False"  # type: ignore[index]
    assert h.condition("Running")["status"] == "True"  # type: ignore[index]
    h.finish_pod(W1, exit_code=2)
    cond = h.wait_condition("Failed")
    assert cond["reason"] == "BackoffLimitExceeded"
    assert W1 in cond["message"] and "backoffLimit 1" in cond["message"]
    assert h.status()["restartCount"] == 1
    h.settle()
    assert h.sample("dgl_operator_jobs_restarted_total", namespace=NS) == 1
    assert "DGLJobRestarting" in h.event_reasons()


def test_happy_path_over_http(h: Harness) -> None:
    """The default delivery: the partitioner serves (Running, Ready), dglrun reports the
    partition time and then the delivery, the launcher trains; nothing finishes the
    partitioner before the launcher runs."""
    # someone who may create Secrets in the namespace plants one of the name the operators
    # before used, with a token they know: it is never used
    planted = {"metadata": {"name": f"{J}-transfer"}, "data": {"token": "a25vd24="}}
    h.kube.create(SECRETS, NS, planted)
    h.create_job(seed())
    h.wait_pods(W0, W1, PART)
    assert h.names(NETWORKPOLICIES) == [f"{J}-pods"]
    name = wait_for(
        lambda: h.kube.get(DGLJOBS, NS, J).get("status", {}).get("transferSecret"),
        what="status.transferSecret",
    )
    assert re.fullmatch(rf"{J}-transfer-[0-9a-f]{{8}}", name), name
    secret = h.kube.get(SECRETS, NS, name)
    assert secret["metadata"]["ownerReferences"][0]["name"] == J
    assert len(secret["data"]["token"]) == 88
    for pod in (W0, W1, PART):
        volumes = h.kube.get(PODS, NS, pod)["spec"]["volumes"]
        mounted = [v["secret"]["secretName"] for v in volumes if "secret" in v]
        assert mounted == [name], (pod, mounted)
    bring_up(h)
    h.wait_phase("Partitioning")
    # dglrun in the partitioner: partitioned in 42 s, now serving
    h.report_progress("2/5 deliver", reporter="partitioner", partitionSeconds=42)
    # (in a cluster the report is seconds ahead: the launcher waits for the partitioner to be
    # Ready, which it becomes only after sending it)
    wait_for(
        lambda: (
            (h.ctrl.listers.jobs.get(NS, J) or {}).get("status", {}).get("partitionSeconds") == 42
        ),
        what="the controller's cache to hold dglrun's report",
    )
    h.run_pod(LAUNCH, "10.0.0.4")  # its watcher saw the partitioner Ready; dglrun pulls
    h.wait_phase("Training")
    wait_for(
        lambda: "Graph partitioned in 42s" in [e["message"] for e in h.events()],
        what="the PartitionSucceeded event (recorded after the status write)",
    )
    wait_for(
        lambda: h.sample("dgl_operator_job_partition_duration_seconds_sum", namespace=NS) == 42,
        what="the partition time observed",
    )
    h.report_progress("4/5 configure", deliveryBytes=420_000_000, deliverySeconds=2.5)
    assert h.status().get("deliveryBytes") == 420_000_000
    h.finish_pod(LAUNCH, seconds=100)
    h.wait_condition("Succeeded")
    wait_for(
        lambda: h.sample("dgl_operator_job_delivery_bytes_sum", namespace=NS) == 420_000_000,
        what="the delivery observed",
    )
    assert h.sample("dgl_operator_job_delivery_duration_seconds_count", namespace=NS) == 1
    assert h.sample("dgl_operator_job_delivery_duration_seconds_sum", namespace=NS) == 2.5
    assert h.sample("dgl_operator_job_partition_duration_seconds_count", namespace=NS) == 1
    # the partitioner still served when training ended: cleanPodPolicy Running stops it
    wait_for(lambda: PART not in h.pods(), what="the serving partitioner deleted")


def test_a_restart_observes_and_clears_the_attempts_delivery(h: Harness) -> None:
    h.create_job(seed(runPolicy={"backoffLimit": 1}))
    train(h)
    h.report_progress("5/5 train", deliveryBytes=1000, deliverySeconds=1.0)
    assert h.status().get("deliveryBytes") == 1000
    h.finish_pod(W0, exit_code=1)
    h.wait_condition("Restarting")
    wait_for(lambda: h.status().get("restartCount") == 1, what="restartCount 1")
    assert "deliveryBytes" not in h.status() and "deliverySeconds" not in h.status()
    wait_for(
        lambda: h.sample("dgl_operator_job_delivery_bytes_count", namespace=NS) == 1,
        what="the attempt's delivery observed (after the status write)",
    )


# -- time: the queue's requeue-afters on the fake clock (no poke: the controller wakes itself)


def test_active_deadline_fails_and_stops_every_pod(h: Harness) -> None:
    h.create_job(seed(cleanPodPolicy="None", runPolicy={"activeDeadlineSeconds": 100}))
    train(h)
    h.settle()
    assert parse_time(h.status()["startTime"]) == EPOCH
    h.requeued_at(EPOCH + 100)  # the sync asked to be woken at the deadline
    h.step(99)
    h.settle()
    assert h.condition("Failed") is None, "failed before its deadline"
    assert set(h.pods()) == {W0, W1, PART, LAUNCH}
    h.step(1)
    cond = h.wait_condition("Failed")
    assert cond["reason"] == "DeadlineExceeded"
    assert "activeDeadlineSeconds (100s)" in cond["message"]
    wait_for(lambda: set(h.pods()) == {PART}, what="active pods deleted despite policy None")
    h.settle()
    assert h.due() is None  # finished, no TTL: nothing more to wake up for


def test_the_deadline_counts_from_the_resume(h: Harness) -> None:
    h.create_job(seed(runPolicy={"suspend": True, "activeDeadlineSeconds": 100}))
    h.wait_condition("Suspended")
    h.settle()
    assert h.due() is None  # a suspended job has no deadline running
    h.step(1000)
    h.kube.patch(DGLJOBS, NS, J, {"spec": {"runPolicy": {"suspend": False}}})
    h.wait_pods(W0, W1, PART)
    h.settle()
    assert parse_time(h.status()["startTime"]) == EPOCH + 1000
    h.requeued_at(EPOCH + 1100)
    h.step(99)
    h.settle()
    assert h.condition("Failed") is None
    h.step(1)
    assert h.wait_condition("Failed")["reason"] == "DeadlineExceeded"


def test_ttl_deletes_the_finished_job(h: Harness) -> None:
    h.create_job(seed(runPolicy={"ttlSecondsAfterFinished": 30}))
    train(h)
    h.step(5)
    h.finish_pod(LAUNCH)
    h.wait_condition("Succeeded")
    h.settle()
    assert parse_time(h.status()["completionTime"]) == EPOCH + 5
    h.requeued_at(EPOCH + 35)  # woken when the TTL runs out
    h.step(29)
    h.settle()
    assert h.kube.objects(DGLJOBS, NS), "deleted before the TTL"
    h.step(1)
    wait_for(lambda: not h.kube.objects(DGLJOBS, NS), what="job deleted after its TTL")
    assert h.kube.collect_garbage() > 0  # the garbage collector takes the children
    assert h.kube.objects(CONFIGMAPS, NS) == []


def test_a_job_failed_by_its_deadline_goes_after_its_ttl(h: Harness) -> None:
    h.create_job(seed(runPolicy={"activeDeadlineSeconds": 50, "ttlSecondsAfterFinished": 20}))
    bring_up(h)
    h.settle()
    h.requeued_at(EPOCH + 50)
    h.step(50)
    assert h.wait_condition("Failed")["reason"] == "DeadlineExceeded"
    h.settle()
    assert parse_time(h.status()["completionTime"]) == EPOCH + 50
    h.requeued_at(EPOCH + 70)
    h.step(19)
    h.settle()
    assert h.kube.objects(DGLJOBS, NS), "deleted before the TTL"
    h.step(1)
    wait_for(lambda: not h.kube.objects(DGLJOBS, NS), what="job deleted after its TTL")


def test_a_finished_job_whose_spec_no_longer_parses_is_cleaned_up_and_deleted_after_its_ttl() -> (
    None
):
    """An operator upgrade whose API is stricter finds a job that finished before it, its pods
    still there: the finished check comes before the spec is parsed, and cleanPodPolicy and
    the TTL are read from the raw object, so the job is cleaned up and deleted all the same
    (and not failed again as InvalidSpec)."""
    h = Harness()
    try:
        # ParMETIS without spec.chunkedGraph: refused today (see the InvalidSpec test below)
        raw = seed(
            partitionMode="ParMETIS",
            cleanPodPolicy="All",
            runPolicy={"ttlSecondsAfterFinished": 30},
        )
        job = h.create_job(raw)
        finished = {
            "phase": "Completed",
            "completionTime": now_rfc3339(EPOCH - 10),
            "conditions": [{"type": "Succeeded", "status": "True", "reason": "DGLJobSucceeded"}],
        }
        h.kube.patch(DGLJOBS, NS, J, {"status": finished}, subresource="status")
        owner = {
            "apiVersion": job["apiVersion"],
            "kind": job["kind"],
            "name": J,
            "uid": job["metadata"]["uid"],
            "controller": True,
        }
        for name, phase in ((W0, "Running"), (W1, "Running"), (LAUNCH, "Succeeded")):
            pod = {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": name,
                    "labels": {JOB_NAME_LABEL: J},
                    "ownerReferences": [owner],
                },
                "spec": {"containers": [{"name": "dgl-graphsage", "image": "x"}]},
            }
            h.kube.create(PODS, NS, pod)
            h.set_status(name, {"phase": phase})
        h.start()
        wait_for(lambda: h.pods() == {}, what="cleanPodPolicy All applied to the finished job")
        h.settle()
        assert h.condition("Failed") is None, "a finished job is not judged on its spec again"
        h.requeued_at(EPOCH + 20)  # completionTime + 30 s
        h.step(19)
        h.settle()
        assert h.kube.objects(DGLJOBS, NS), "deleted before the TTL"
        h.step(1)
        wait_for(lambda: not h.kube.objects(DGLJOBS, NS), what="job deleted after its TTL")
    finally:
        h.close()


def test_ttl_zero_deletes_at_once(h: Harness) -> None:
    h.create_job(seed(runPolicy={"ttlSecondsAfterFinished": 0}))
    train(h)
    h.finish_pod(LAUNCH)
    wait_for(lambda: not h.kube.objects(DGLJOBS, NS), what="job deleted")


def test_suspend_and_resume(h: Harness) -> None:
    h.create_job(seed(runPolicy={"suspend": True}))
    cond = h.wait_condition("Suspended")
    assert cond["reason"] == "DGLJobSuspended"
    h.settle()
    assert h.pods() == {}
    assert h.status()["phase"] == "Suspended"
    assert "startTime" not in h.status()
    h.kube.patch(DGLJOBS, NS, J, {"spec": {"runPolicy": {"suspend": False}}})
    h.wait_pods(W0, W1, PART)
    wait_for(
        lambda: (h.condition("Suspended") or {}).get("reason") == "DGLJobResumed",
        what="Suspended False DGLJobResumed",
    )
    assert h.status()["startTime"]
    train(h)
    h.report_progress("5/5 train")
    h.kube.clear_actions()
    h.kube.patch(DGLJOBS, NS, J, {"spec": {"runPolicy": {"suspend": True}}})
    wait_for(lambda: not h.pods(), what="pods deleted on suspend")
    h.wait_phase("Suspended")
    # with a stopped attempt's grace (the workers' sleep would hold them 30 s)
    deleted = {a.name: a.grace_period_seconds for a in h.kube.actions if a.verb == "delete"}
    assert deleted == {W0: 5, W1: 5, LAUNCH: 5, PART: 5} or deleted == {W0: 5, W1: 5, LAUNCH: 5}
    assert "progress" not in h.status()
    assert h.condition("Running")["status"] == "False"  # type: ignore[index]
    assert "DGLJobResumed" in h.event_reasons()


def test_terminating_pods_do_not_hold_the_job_back(h: Harness) -> None:
    """Pods that take their grace period to go (a finalizer stands in for the kubelet here):
    the deletions the controller waits for are seen at the deletionTimestamp, as Kubernetes'
    own controllers do, so the job's status keeps moving while the pods terminate."""
    h.create_job(seed())
    train(h)
    for name in h.pods():
        h.kube.patch(PODS, NS, name, {"metadata": {"finalizers": ["test.dgl/grace-period"]}})
    h.kube.patch(DGLJOBS, NS, J, {"spec": {"runPolicy": {"suspend": True}}})
    h.wait_phase("Suspended")
    wait_for(
        lambda: (pods := h.pods()) and all(map(terminating, pods.values())),
        what="every pod terminating",
    )
    h.kube.patch(DGLJOBS, NS, J, {"spec": {"runPolicy": {"suspend": False}}})
    # resumed at once, though every old pod is still there (terminating)
    wait_for(
        lambda: (h.condition("Suspended") or {}).get("reason") == "DGLJobResumed",
        what="Suspended False DGLJobResumed",
    )
    assert h.status()["phase"] == "Pending"
    assert len(h.pods()) == 4 and all(map(terminating, h.pods().values()))
    for name in list(h.pods()):  # the grace periods end: the pods go and come back
        h.kube.patch(PODS, NS, name, {"metadata": {"finalizers": None}})
    wait_for(
        lambda: (pods := h.pods()) and not any(map(terminating, pods.values())), what="new pods"
    )
    h.wait_pods(W0, W1, PART)
    h.settle()
    assert h.condition("Failed") is None


def test_invalid_spec_fails_once_without_a_hot_loop(h: Harness) -> None:
    raw = seed(partitionMode="ParMETIS")  # FakeKube has no admission: it slips through
    h.create_job(raw)
    cond = h.wait_condition("Failed")
    assert cond["reason"] == "InvalidSpec"
    assert "spec.chunkedGraph" in cond["message"] and "is required" in cond["message"]
    h.settle()
    writes = [a for a in h.kube.writes() if a.resource == "dgljobs.qihoo.net"]
    assert len(writes) == 2, writes  # the create and one status write
    assert h.pods() == {}
    poke(h)
    h.settle()
    writes = [a for a in h.kube.writes() if a.resource == "dgljobs.qihoo.net"]
    assert len(writes) == 3, writes  # the poke itself, nothing more
    assert h.sample("controller_runtime_reconcile_errors_total", controller="dgljob") == 0


def test_foreign_pod_is_never_adopted(h: Harness) -> None:
    foreign = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": W0, "labels": {"dgl.qihoo.net/job-name": J}},
        "spec": {"containers": [{"name": "x", "image": "busybox"}]},
    }
    h.kube.create(PODS, NS, foreign)
    h.create_job(seed())
    wait_for(lambda: "ErrResourceExists" in h.event_reasons(), what="a Warning event")
    warning = next(e for e in h.events() if e["reason"] == "ErrResourceExists")
    assert warning["type"] == "Warning" and W0 in warning["message"]
    h.settle()
    assert set(h.pods()) == {W0}, "nothing is created while a name is taken"
    assert "ownerReferences" not in h.pods()[W0]["metadata"]
    h.kube.delete(PODS, NS, W0)
    # (its retries back off on the fake clock: the test syncs the job again once the cache
    # has seen the foreign pod go, which enqueues nothing by itself: it is not the job's)
    wait_for(lambda: h.ctrl.listers[PODS].get(NS, W0) is None, what="the cache to see it go")
    h.ctrl.queue.forget(f"{NS}/{J}")
    h.ctrl.queue.add(f"{NS}/{J}")
    h.wait_pods(W0, W1, PART)
    assert h.pods()[W0]["metadata"]["ownerReferences"][0]["name"] == J


def test_foreign_object_outside_the_cache_is_detected_on_create(h: Harness) -> None:
    foreign = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": f"{J}-config"},  # no job label: the informer never sees it
        "data": {"mine": "yes"},
    }
    h.kube.create(CONFIGMAPS, NS, foreign)
    h.create_job(seed())
    wait_for(lambda: "ErrResourceExists" in h.event_reasons(), what="a Warning event")
    assert h.kube.get(CONFIGMAPS, NS, f"{J}-config")["data"] == {"mine": "yes"}


def test_skip_mode_runs_the_launcher_alone(h: Harness) -> None:
    raw = seed(partitionMode="Skip")
    del raw["spec"]["dglReplicaSpecs"]["Worker"]
    h.create_job(raw)
    h.wait_pods(LAUNCH)
    h.settle()
    assert set(h.pods()) == {LAUNCH}
    assert h.kube.objects(CONFIGMAPS, NS) == [] and h.kube.objects(ROLES, NS) == []
    h.run_pod(LAUNCH, "10.0.0.4")
    h.wait_phase("Training")
    assert set(h.status()["replicaStatuses"]) == {"Launcher"}
    h.finish_pod(LAUNCH)
    h.wait_condition("Succeeded")
    assert h.status()["phase"] == "Completed"


def test_concurrent_status_writer_is_not_clobbered(h: Harness) -> None:
    """Another writer (e.g. the launcher reporting progress) shares the status."""
    h.create_job(seed())
    h.wait_condition("Created")
    h.settle()
    job = h.job()
    body = copy.deepcopy(job)
    body["status"]["progress"] = "epoch 1/2"
    h.kube.replace(DGLJOBS, NS, J, body, subresource="status")
    bring_up(h)
    h.wait_phase("Partitioning")
    assert h.status()["progress"] == "epoch 1/2"


def test_many_jobs_each_get_exactly_their_pods() -> None:
    h = Harness().start(workers=4)
    try:
        for i in range(15):
            raw = seed()
            raw["metadata"]["name"] = f"job-{i}"
            h.create_job(raw)
        wait_for(lambda: len(h.pods()) == 15 * 3, what="45 pods")
        h.settle()
        creates = [a for a in h.kube.actions if a.verb == "create" and a.resource == "pods"]
        assert len(creates) == 45, "a pod was created twice"
        for i in range(15):
            assert h.condition("Created", f"job-{i}") is not None
        assert h.sample("dgl_operator_jobs_created_total", namespace=NS) == 15
    finally:
        h.close()


def test_idle_resync_writes_nothing() -> None:
    h = Harness(resync=0.1).start()
    try:
        h.create_job(seed())
        train(h)
        h.settle()
        h.kube.clear_actions()
        syncs_before = h.sample(
            "controller_runtime_reconcile_total", controller="dgljob", result="success"
        )
        wait_for(
            lambda: (
                h.sample(
                    "controller_runtime_reconcile_total", controller="dgljob", result="success"
                )
                >= syncs_before + 5
            ),
            what="several resyncs",
        )
        h.settle()
        assert h.kube.writes() == []
        assert [a for a in h.kube.actions if a.verb in ("get", "list")] == []
    finally:
        h.close()


def test_a_child_the_api_server_refuses_fails_the_job_once(h: Harness) -> None:
    """E.g. a template field of the wrong type that the CRD cannot see (preserved fields)."""
    from kubeclient import Invalid

    h.kube.fail_next(
        "create",
        PODS,
        Invalid(
            422,
            "Invalid",
            'Pod "x" is invalid: spec.containers[0].ports[0].containerPort: Invalid value: 0',
        ),
        times=100,
    )
    h.create_job(seed())
    cond = h.wait_condition("Failed")
    assert cond["reason"] == "InvalidSpec"
    assert "the API server refused a child object" in cond["message"]
    assert "containerPort" in cond["message"]
    h.settle()
    assert h.sample("controller_runtime_reconcile_errors_total", controller="dgljob") == 0


# -- spec.storage ---------------------------------------------------------------------------

CLAIM = f"{J}-results"
CLAIM_SPEC = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}


def test_the_claim_is_made_from_the_template_and_outlives_the_job(h: Harness) -> None:
    created = h.create_job(seed(storage={"claimTemplate": {"spec": CLAIM_SPEC}}))
    uid = created["metadata"]["uid"]
    wait_for(lambda: h.names(PVCS) == [CLAIM], what="the claim")
    claim = h.kube.get(PVCS, NS, CLAIM)
    assert claim["spec"] == CLAIM_SPEC and "ownerReferences" not in claim["metadata"]
    h.wait_pods(W0, W1, PART)
    wait_for(lambda: h.status().get("results"), what="status.results")
    assert h.status()["results"] == f"{CLAIM}:/runs/{J}-{uid[:8]}/output"
    h.kube.delete(DGLJOBS, NS, J)
    h.settle()  # (the controller has seen the job go: it creates nothing more for it)
    h.kube.collect_garbage()  # what the API server's garbage collector does
    assert h.names(PVCS) == [CLAIM] and h.pods() == {}
    h.settle()
    # a new job of the same name uses the kept claim again (and a folder of its own)
    h.create_job(seed(storage={"claimTemplate": {"spec": CLAIM_SPEC}}))
    h.wait_pods(W0, W1, PART)
    wait_for(lambda: "ClaimReused" in h.event_reasons(), what="the ClaimReused event")


def test_a_claim_the_job_owns_goes_with_it(h: Harness) -> None:
    storage = {"claimTemplate": {"spec": CLAIM_SPEC}, "claimPolicy": "Delete"}
    h.create_job(seed(storage=storage))
    wait_for(lambda: h.names(PVCS) == [CLAIM], what="the claim")
    h.kube.delete(DGLJOBS, NS, J)
    h.settle()
    h.kube.collect_garbage()
    assert h.names(PVCS) == []


def test_someone_elses_claim_of_that_name_is_never_taken(h: Harness) -> None:
    foreign = {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
               "metadata": {"name": CLAIM, "namespace": NS}, "spec": CLAIM_SPEC}  # fmt: skip
    h.kube.create(PVCS, NS, foreign)
    h.create_job(seed(storage={"claimTemplate": {"spec": CLAIM_SPEC}}))
    cond = h.wait_condition("Failed")
    assert cond["reason"] == "InvalidSpec"
    assert (
        f"PersistentVolumeClaim {CLAIM} exists and was not made for DGLJob {J}" in (cond["message"])
    )
    assert h.pods() == {}


def test_a_missing_claim_is_said_once_and_the_pods_wait_for_it(h: Harness) -> None:
    h.create_job(seed(storage={"claimName": "later"}))
    h.wait_pods(W0, W1, PART)
    h.settle()
    reasons = h.event_reasons()
    assert reasons.count("ClaimNotFound") == 1, reasons
    message = next(e["message"] for e in h.events() if e["reason"] == "ClaimNotFound")
    assert message.startswith("spec.storage.claimName: PersistentVolumeClaim later does not")
    assert h.names(PVCS) == []  # a user's claim is never made (nor changed, nor deleted)


class StuckPodCreates:
    """The API as the controller sees it, except that creating a pod hangs until released
    (an API server that accepted the request and never answers)."""

    def __init__(self, kube: FakeKube) -> None:
        self._kube = kube
        self.entered = threading.Event()
        self.release = threading.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._kube, name)

    def create(self, res: Resource, namespace: str | None, body: Obj, **kw: Any) -> Obj:
        if res is PODS:
            self.entered.set()
            self.release.wait(60)
        return self._kube.create(res, namespace, body, **kw)


def test_shutdown_abandons_a_stuck_sync_at_its_deadline_naming_the_job() -> None:
    h = Harness(wrap=StuckPodCreates).start()
    assert isinstance(h.client, StuckPodCreates)
    stuck = h.client
    try:
        h.create_job(seed())
        assert stuck.entered.wait(5), "the sync never tried to create a pod"
        h.stop_event.set()
        started = time.monotonic()
        with structlog.testing.capture_logs() as logs:
            h.ctrl.shutdown(timeout=3.0)
        took = time.monotonic() - started
        assert took < 6, f"shutdown took {took:.1f}s with a 3s deadline"
        (warning,) = [e for e in logs if e["event"].startswith("shutdown deadline passed")]
        assert warning["jobs"] == [f"{NS}/{MAIN}"]
        assert any("self.release.wait(60)" in s for s in warning["stacks"].values())
    finally:
        stuck.release.set()
        h.factory.join(5)


def test_paused_workers_sync_nothing_then_resume_with_what_was_queued() -> None:
    """The leader Lease lost for a while (main.py pauses, then resumes on its own Lease again):
    a job created meanwhile is queued, not synced; on resume its pods come; a SIGTERM while
    paused ends at once without syncing the keys left (they are the next leader's)."""
    h = Harness().start()
    try:
        h.ctrl.pause()
        h.create_job(seed())
        wait_for(lambda: len(h.ctrl.queue) == 1, what="the job's key queued")
        time.sleep(0.3)  # (a worker that took the key as the gate closed put it back)
        assert h.pods() == {} and len(h.ctrl.queue) == 1, "a paused worker synced the job"
        h.ctrl.resume()
        h.wait_pods(W0, W1, PART)
        h.ctrl.pause()
        h.kube.delete(PODS, NS, W0)
        wait_for(lambda: len(h.ctrl.queue) == 1, what="the deletion queued the job")
        started = time.monotonic()
        h.stop_event.set()
        h.ctrl.shutdown(timeout=5.0)
        assert time.monotonic() - started < 2.0, "shutdown waited for a paused queue to drain"
        assert W0 not in h.pods(), "a paused worker synced the job at shutdown"
    finally:
        h.stop_event.set()
        h.factory.join(5)


def test_a_launcher_lost_while_training_is_made_again_and_the_attempt_goes_on(
    h: Harness,
) -> None:
    """Issue 58: the launcher pod is deleted while the attempt trains (its dglrun ended at
    SIGTERM with 143, the pod being deleted; then it is gone). The workers' agents keep the
    DGL processes, so this is no failure: no restart, a new launcher pod of the same attempt
    (it re-attaches), a Normal Event once. The twins: a launcher whose dglrun failed on its
    own fails the job (below); so does a worker deleted while training
    (test_worker_deleted_while_training_fails_the_job)."""
    h.create_job(seed())
    train(h)
    old = h.pods()[LAUNCH]["metadata"]["uid"]
    # being deleted (a pod on a node stays until its kubelet confirms): dglrun got SIGTERM
    # and ended, the kubelet reports the container's end
    add_nodes(h, "node-1")
    h.kube.patch(PODS, NS, LAUNCH, {"spec": {"nodeName": "node-1"}})
    h.kube.delete(PODS, NS, LAUNCH, uid=old)
    assert h.pods()[LAUNCH]["metadata"].get("deletionTimestamp")
    h.finish_pod(LAUNCH, exit_code=143)
    h.settle()
    assert h.status().get("restartCount", 0) == 0 and h.condition("Failed") is None
    poke(h)  # (a later sync too: the launcher's end is still no failure)
    h.settle()
    assert h.status().get("restartCount", 0) == 0 and h.condition("Failed") is None
    if h.pods().get(LAUNCH, {}).get("metadata", {}).get("uid") == old:
        h.kube.delete(PODS, NS, LAUNCH, uid=old, grace_period_seconds=0)  # (gone)
    wait_for(
        lambda: LAUNCH in h.pods() and h.pods()[LAUNCH]["metadata"]["uid"] != old,
        what="a new launcher pod",
    )
    new = h.pods()[LAUNCH]
    assert new["metadata"]["annotations"]["dgl.qihoo.net/restart-attempt"] == "0"
    assert set(h.pods()) >= {W0, W1}  # (the workers, and their processes, stayed)
    replaced = [e for e in h.events() if e["reason"] == "LauncherReplaced"]
    assert len(replaced) == 1 and "re-attaches" in replaced[0]["message"], replaced
    h.run_pod(LAUNCH, "10.0.0.5")
    h.finish_pod(LAUNCH, seconds=10)
    h.wait_condition("Succeeded")
    assert h.status().get("restartCount", 0) == 0


def test_a_launcher_whose_dglrun_failed_while_training_fails_the_job(h: Harness) -> None:
    """The twin of the replacement above: the same exit, 143, from a launcher pod that is not
    being deleted (dglrun ended on its own) is a failure, not a replacement."""
    h.create_job(seed())
    train(h)
    h.finish_pod(LAUNCH, exit_code=143)
    cond = h.wait_condition("Failed")
    assert cond["reason"] == "LauncherFailed", cond
    assert not [e for e in h.events() if e["reason"] == "LauncherReplaced"]
