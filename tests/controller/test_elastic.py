"""Elastic jobs (spec.elasticPolicy) through the whole controller over FakeKube: an attempt
starts with the workers that run, waits below minReplicas saying why, and rescales instead
of failing when a member is taken away; a crash of the training code is still a failure."""

from __future__ import annotations

from typing import Any

import podcontract as pc
from controller.builders import ATTEMPT_ANNOTATION
from controller.features import elastic as elastic_policies
from controller.features.elastic import STATUS_FIELDS
from kubeclient import CONFIGMAPS, PODS, Obj
from kubeclient import PERSISTENTVOLUMECLAIMS as PVCS
from podcontract import settings as dglrun
from tests.controller.harness import (
    LAUNCH,
    MAIN,
    NS,
    PART,
    Harness,
    add_nodes,
    bind,
    confirm_silence,
    node_unknown,
    seed,
)
from tests.support.waiting import wait_for

W = [f"{MAIN}-worker-{i}" for i in range(3)]
CLAIM_SPEC = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}


def elastic_job(**policy: Any) -> Obj:
    raw = seed(
        storage={"claimName": "results"},
        elasticPolicy={"minReplicas": 1, "maxReplicas": 3, **policy},
    )
    return raw


def start(h: Harness, raw: Obj | None = None, **policy: Any) -> None:
    """The claim, then the job (``raw``, else :func:`elastic_job` of ``policy``) to sizing."""
    claim = {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
             "metadata": {"name": "results", "namespace": NS}, "spec": CLAIM_SPEC}  # fmt: skip
    h.kube.create(PVCS, NS, claim)
    h.create_job(raw if raw is not None else elastic_job(**policy))
    place_partitioner(h, "0")


def place_partitioner(h: Harness, attempt: str) -> None:
    """The scheduler gives the attempt's partitioner a node: only then are the workers made."""

    def made() -> bool:
        pod = h.pods().get(PART)
        return pod is not None and pod["metadata"]["annotations"][ATTEMPT_ANNOTATION] == attempt

    wait_for(made, what=f"attempt {attempt}'s partitioner")
    h.settle()
    assert not set(W) & set(h.pods()), "no worker before the partitioner has its room"
    scheduled = [{"type": "PodScheduled", "status": "True"}]
    h.set_status(PART, {"phase": "Pending", "conditions": scheduled})
    h.wait_pods(*W)


def elastic(h: Harness) -> Obj:
    st: Obj = h.status().get("elastic") or {}
    assert set(st) <= set(STATUS_FIELDS), f"{set(st) - set(STATUS_FIELDS)}: not in the CRD"
    return st


def env_of(pod: Obj, name: str) -> str | None:
    for e in pod["spec"]["containers"][0].get("env") or []:
        if e["name"] == name:
            return str(e.get("value"))
    return None


def hostfile(h: Harness) -> str:
    return str(h.kube.get(CONFIGMAPS, NS, f"{MAIN}-config")["data"]["hostfile"])


def unschedulable(h: Harness, name: str) -> None:
    h.set_status(
        name,
        {
            "phase": "Pending",
            "conditions": [
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "Unschedulable",
                    "message": "0/3 nodes are available: 3 Insufficient cpu.",
                }
            ],
        },
    )


def attempt_pods(h: Harness, attempt: str) -> dict[str, Obj] | None:
    """The pods (one listing), once they are the partitioner and the workers of ``attempt``."""
    pods = h.pods()
    ok = set(pods) == {PART, *W} and all(
        p["metadata"]["annotations"][ATTEMPT_ANNOTATION] == attempt for p in pods.values()
    )
    return pods if ok else None


def room_for_one(h: Harness) -> None:
    """worker-0 runs; the scheduler finds no room for the others."""
    h.run_pod(W[0], "10.0.1.1")
    for name in W[1:]:
        unschedulable(h, name)


def train_with(h: Harness, members: list[str]) -> None:
    """The members' attempt through partitioning to training."""
    h.wait_pods(PART)
    h.run_pod(PART, "10.0.1.9")
    h.wait_pods(LAUNCH)
    h.launcher_waiting_in_init(LAUNCH, "10.0.1.10")
    h.finish_pod(PART, seconds=12)
    h.wait_phase("Partitioned")
    h.run_pod(LAUNCH, "10.0.1.10")
    h.wait_phase("Training")


def test_it_starts_with_the_workers_that_run_after_the_settling_window(h: Harness) -> None:
    start(h, settleSeconds=30)
    h.wait_pods(PART)
    h.settle()
    assert set(h.pods()) == {PART, *W}, "no launcher while the count is chosen"
    part = h.pods()[PART]
    assert env_of(part, dglrun.ELASTIC.env) == dglrun.ELASTIC.write(True)
    assert env_of(part, dglrun.NUM_PARTITIONS.env) is None, "it reads the count from the status"
    assert env_of(part, dglrun.PARTITION_COUNTS.env) == "1-3"  # (it partitions for each at once)
    room_for_one(h)
    cond = h.wait_condition_status("PodsReady", "False", reason="Settling")
    assert "1 of 3 worker pods run (minReplicas 1)" in cond["message"]
    assert h.status()["phase"] == "Pending" and elastic(h)["scale"] == "0/3"
    h.settle()
    assert LAUNCH not in h.pods() and "members" not in elastic(h)
    h.step(30)
    wait_for(lambda: elastic(h).get("members") == [W[0]], what="worker-0 chosen")
    assert elastic(h)["workers"] == 1 and elastic(h)["scale"] == "1/3"
    train_with(h, [W[0]])
    launcher = h.pods()[LAUNCH]
    assert env_of(launcher, dglrun.NUM_PARTITIONS.env) == "1"
    assert env_of(launcher, dglrun.ELASTIC.env) == dglrun.ELASTIC.write(True)
    assert env_of(launcher, dglrun.PARTITION_COUNTS.env) == "1-3"
    assert hostfile(h) == f"10.0.1.1 30050 {W[0]} slots=1\n"
    watcher = next(c for c in launcher["spec"]["initContainers"] if c["name"] == pc.WATCHER_WORKERS)
    assert env_of({"spec": {"containers": [watcher]}}, pc.WATCHER_EXPECTED_PODS_ENV) == "1"
    assert set(W[1:]) <= set(h.pods()), "the standby workers stay, to tell when room frees"
    assert h.status()["replicaStatuses"]["Worker"]["ready"] == "1/1"
    assert "DGLJobWorkers" in h.event_reasons()


def test_every_worker_running_starts_at_once(h: Harness) -> None:
    start(h, settleSeconds=600)
    for i, name in enumerate(W):
        h.run_pod(name, f"10.0.1.{i + 1}")
    wait_for(lambda: elastic(h).get("members") == W, what="all three chosen, no window")
    train_with(h, W)
    assert env_of(h.pods()[LAUNCH], dglrun.NUM_PARTITIONS.env) == "3"


def test_below_min_replicas_it_waits_saying_why(h: Harness) -> None:
    start(h, minReplicas=2, settleSeconds=10)
    room_for_one(h)
    cond = h.wait_condition_status("PodsReady", "False", reason="Unschedulable")
    assert "1 of minReplicas 2 worker pods run" in cond["message"]
    assert "Insufficient cpu" in cond["message"]
    h.step(600)
    h.settle()
    assert LAUNCH not in h.pods() and elastic(h)["workers"] == 0
    assert h.condition("Failed") is None
    h.run_pod(W[1], "10.0.1.2")  # room freed for one more
    h.wait_condition_status("PodsReady", "False", reason="Settling")
    h.step(10)
    wait_for(lambda: elastic(h).get("members") == W[:2], what="two chosen")


def preempt(h: Harness, name: str) -> None:
    """What the scheduler does to a victim: DisruptionTarget, then a graceful delete."""
    pod = h.pods()[name]
    target = {"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler"}
    conds = [*pod["status"].get("conditions", []), target]
    h.set_status(name, {**pod["status"], "conditions": conds})
    h.kube.delete(PODS, NS, name, uid=pod["metadata"]["uid"])


def test_a_preempted_member_rescales_to_the_workers_left_without_a_restart(h: Harness) -> None:
    start(h)
    for i, name in enumerate(W):
        h.run_pod(name, f"10.0.1.{i + 1}")
    train_with(h, W)
    h.report_progress("5/5 train: epoch 2/10")
    preempt(h, W[2])
    wait_for(lambda: elastic(h).get("rescales") == 1, what="one rescale")
    st = h.status()
    assert st["restartCount"] == 0, "a rescale is not a restart"
    assert st["phase"] == "Rescaling" and "progress" not in st
    assert st["elastic"]["lastRescale"]["reason"] == "Preempted"
    assert st["elastic"]["lastRescale"]["from"] == 3
    assert "members" not in st["elastic"]

    # the old attempt's pods go (at most 5 s of grace: the attempt is over), and the new
    # attempt sizes again with fresh worker pods
    place_partitioner(h, "1")
    graces = {
        a.name: a.grace_period_seconds
        for a in h.kube.actions
        if a.verb == "delete" and a.resource == "pods" and a.name != W[2]
    }
    assert graces == {W[0]: 5, W[1]: 5, LAUNCH: 5, PART: 5}, graces
    wait_for(lambda: attempt_pods(h, "1"), what="attempt 1's partitioner and workers, no launcher")
    h.run_pod(W[0], "10.0.1.4")
    h.run_pod(W[1], "10.0.1.5")
    # while worker-2 may still come (made, not placed yet), the settling window runs
    h.wait_condition_status("PodsReady", "False", reason="Settling")
    h.step(10)
    # its room went to the preemptor: nothing more can come, the window is not waited out
    unschedulable(h, W[2])
    wait_for(lambda: elastic(h).get("members") == W[:2], what="rescaled to two")
    assert elastic(h)["lastRescale"]["to"] == 2
    train_with(h, W[:2])
    st = h.status()
    assert 10 <= st["elastic"]["rescaleSeconds"] < 30
    assert "rescalingSince" not in st["elastic"]
    assert hostfile(h) == f"10.0.1.4 30050 {W[0]} slots=1\n10.0.1.5 30050 {W[1]} slots=1\n"
    assert env_of(h.pods()[LAUNCH], dglrun.NUM_PARTITIONS.env) == "2"
    h.settle()
    assert h.sample("dgl_operator_jobs_rescaled_total", namespace=NS, reason="Preempted") == 1
    assert h.sample("dgl_operator_jobs_restarted_total", namespace=NS) == 0
    assert h.sample("dgl_operator_job_rescale_seconds_count", namespace=NS) == 1
    assert "DGLJobRescaled" in h.event_reasons()


def test_a_crash_of_the_training_code_is_still_a_failure(h: Harness) -> None:
    start(h)
    for i, name in enumerate(W):
        h.run_pod(name, f"10.0.1.{i + 1}")
    train_with(h, W)
    h.finish_pod(W[1], exit_code=1)
    cond = h.wait_condition("Failed")
    assert cond["reason"] == "WorkerFailed" and W[1] in cond["message"]
    assert elastic(h)["rescales"] == 0


def test_a_launcher_failing_before_a_members_node_is_seen_lost_makes_a_rescale(
    h: Harness,
) -> None:
    """A dead node's trainers' peers fail first (the e2e saw the launcher fail 17 s before the
    node was seen lost): the failure is held (FAILURE_HOLD_SECONDS) and the lost node makes it
    a rescale, not a restart."""
    start(h)
    add_nodes(h, "n1", "n2", "n3")
    for i, name in enumerate(W):
        h.run_pod(name, f"10.0.1.{i + 1}")
    bind(h, dict(zip(W, ["n1", "n2", "n3"], strict=True)))
    train_with(h, W)
    h.finish_pod(LAUNCH, exit_code=1, message="train failed: trainer 0 on worker-1 exited 1")
    h.settle()
    assert h.condition("Failed") is None and h.status()["restartCount"] == 0  # (held)
    node_unknown(h, "n3")
    confirm_silence(h)
    wait_for(lambda: elastic(h).get("rescales") == 1, what="the rescale")
    st = h.status()
    assert st["elastic"]["lastRescale"]["reason"] == "NodeLost" and st["restartCount"] == 0


def test_a_launcher_failure_no_node_loss_explains_is_one_after_the_hold(h: Harness) -> None:
    start(h)
    for i, name in enumerate(W):
        h.run_pod(name, f"10.0.1.{i + 1}")
    train_with(h, W)
    h.finish_pod(LAUNCH, exit_code=1, message="train failed: trainer 0 on worker-1 exited 1")
    h.settle()
    assert h.status()["restartCount"] == 0 and h.condition("Failed") is None
    h.step(elastic_policies.FAILURE_HOLD_SECONDS)
    wait_for(
        lambda: h.status().get("restartCount") == 1 or h.condition("Failed"),
        what="the failure counted",
    )
    assert elastic(h)["rescales"] == 0


def test_a_standby_worker_that_ends_is_made_again_and_fails_nothing(h: Harness) -> None:
    start(h, settleSeconds=0)
    h.run_pod(W[0], "10.0.1.1")
    wait_for(lambda: elastic(h).get("members") == [W[0]], what="worker-0 alone")
    old = h.pods()[W[2]]["metadata"]["uid"]
    h.finish_pod(W[2], exit_code=137, reason="Error")
    wait_for(
        lambda: (h.pods().get(W[2]) or {}).get("metadata", {}).get("uid") not in (None, old),
        what="the standby made again",
    )
    train_with(h, [W[0]])
    assert h.condition("Failed") is None and elastic(h)["rescales"] == 0


def test_no_grow_within_the_cooldown(h: Harness) -> None:
    start(h, settleSeconds=0, cooldownSeconds=60)
    h.run_pod(W[0], "10.0.1.1")
    wait_for(lambda: elastic(h).get("members") == [W[0]], what="worker-0 alone")
    train_with(h, [W[0]])
    h.run_pod(W[1], "10.0.1.2")
    h.run_pod(W[2], "10.0.1.3")
    h.step(59)
    h.settle()
    assert "growTo" not in elastic(h)
    h.step(1)
    wait_for(lambda: elastic(h).get("growTo") == 2, what="the grow, once the cooldown passed")


def test_standby_workers_that_run_grow_the_job_at_an_epoch_boundary(h: Harness) -> None:
    start(h, settleSeconds=0, cooldownSeconds=60)
    room_for_one(h)
    wait_for(lambda: elastic(h).get("members") == [W[0]], what="worker-0 alone")
    train_with(h, [W[0]])
    h.run_pod(W[1], "10.0.1.2")  # room freed: a standby runs
    h.step(60)
    h.settle()
    assert "growTo" not in elastic(h), "its room is the next attempt's partitioner's"
    h.run_pod(W[2], "10.0.1.3")  # room for one more
    wait_for(lambda: elastic(h).get("growTo") == 2, what="a grow to 2 asked of dglrun")
    assert "DGLJobGrowing" in h.event_reasons()
    assert h.status()["phase"] == "Training", "the attempt trains on to the epoch boundary"
    # dglrun: the next checkpoint is whole; it stops the trainers and exits 75
    h.finish_pod(
        LAUNCH,
        exit_code=pc.RESCALE_EXIT_CODE,
        message="stopped at the epoch boundary after epoch 3 (checkpoint epoch-3.pt) for a "
        "rescale to 2 workers",
    )
    wait_for(lambda: elastic(h).get("rescales") == 1, what="the rescale")
    st = h.status()
    assert st["restartCount"] == 0 and h.condition("Failed") is None
    assert st["elastic"]["lastRescale"]["reason"] == "Grew"
    assert "growTo" not in st["elastic"]
    h.settle()
    assert h.sample("dgl_operator_jobs_rescaled_total", namespace=NS, reason="Grew") == 1
    reasons = [e for e in h.events() if e["reason"] == "DGLJobRescaled"]
    assert reasons and reasons[-1]["type"] == "Normal"
    assert "epoch-3.pt" in reasons[-1]["message"]


PROBE = f"{MAIN}-probe"


def one_standby_runs(h: Harness, **run_policy: Any) -> None:
    """worker-0 trains alone; then room frees for worker-1 (a standby) and nothing else."""
    raw = elastic_job(settleSeconds=0, cooldownSeconds=0)
    raw["spec"]["runPolicy"] = run_policy
    main = raw["spec"]["dglReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    main["resources"] = {"requests": {"cpu": "1", "example.com/slot": "1"},
                         "limits": {"example.com/slot": "1"}}  # fmt: skip
    start(h, raw)
    room_for_one(h)
    wait_for(lambda: elastic(h).get("members") == [W[0]], what="worker-0 alone")
    train_with(h, [W[0]])
    h.run_pod(W[1], "10.0.1.2")
    h.wait_pods(PROBE)


def test_a_probe_looks_for_the_partitioners_room_when_one_standby_runs(h: Harness) -> None:
    one_standby_runs(h)
    probe, part = h.pods()[PROBE], h.pods()[PART]
    assert probe["metadata"]["labels"]["dgl-replica-type"] == "Probe"
    assert probe["metadata"]["annotations"][ATTEMPT_ANNOTATION] == "0"
    (main,) = probe["spec"]["containers"]
    assert main["command"] == ["sleep", "infinity"] and not probe["spec"].get("initContainers")
    assert main["resources"] == part["spec"]["containers"][0]["resources"]
    assert main["image"] == part["spec"]["containers"][0]["image"]
    h.settle()
    assert "growTo" not in elastic(h), "the probe has no node yet"
    assert h.status()["replicaStatuses"]["Worker"]["active"] == 1, "the probe is no replica"
    h.set_status(PROBE, {"phase": "Pending", "conditions": [{"type": "PodScheduled",
                                                              "status": "True"}]})  # fmt: skip
    wait_for(lambda: elastic(h).get("growTo") == 2, what="the grow to 2, once the probe placed")
    h.finish_pod(LAUNCH, exit_code=pc.RESCALE_EXIT_CODE, message="stopped for a rescale")
    wait_for(lambda: elastic(h).get("rescales") == 1, what="the rescale")
    wait_for(lambda: PROBE not in h.pods(), what="the probe gone with its attempt")
    place_partitioner(h, "1")
    assert PROBE not in h.pods(), "the next attempt makes no probe of its own"


def test_the_probe_goes_when_no_standby_runs_any_more(h: Harness) -> None:
    one_standby_runs(h)
    h.kube.delete(PODS, NS, W[1])  # (the standby goes; it is made again, pending)
    wait_for(lambda: PROBE not in h.pods(), what="the probe deleted")
    assert elastic(h)["rescales"] == 0 and h.condition("Failed") is None


def test_a_finished_job_deletes_its_probe_whatever_its_clean_pod_policy(h: Harness) -> None:
    one_standby_runs(h, cleanPodPolicy="None")
    h.finish_pod(LAUNCH)
    h.wait_condition("Succeeded")
    wait_for(lambda: PROBE not in h.pods(), what="the probe deleted")
    assert {PART, LAUNCH} <= set(h.pods()), "cleanPodPolicy None keeps the pods that ended"


def test_a_count_the_memory_plan_refuses_waits_for_the_workers_it_needs(h: Harness) -> None:
    start(h, settleSeconds=0)
    room_for_one(h)
    wait_for(lambda: elastic(h).get("members") == [W[0]], what="worker-0 alone")
    h.wait_pods(PART)
    h.run_pod(PART, "10.0.1.9")
    refusal = (
        "memory plan: the train step needs ~3.1 GiB in each worker pod (...), more than its "
        "memory limit of 2.0 GiB (Worker memory limit): use 2 or more workers (smaller "
        "partitions), or raise the Worker memory limit to at least 3.4 GiB"
    )
    h.finish_pod(PART, exit_code=1, message=refusal)
    wait_for(lambda: elastic(h).get("rescales") == 1, what="a rescale, not a failure")
    st = h.status()
    assert h.condition("Failed") is None and st["restartCount"] == 0
    assert st["elastic"]["minWorkers"] == 2
    assert st["elastic"]["lastRescale"]["reason"] == "TooFewToFit"
    # the next attempt: one worker runs, which is not enough any more
    place_partitioner(h, "1")
    wait_for(lambda: attempt_pods(h, "1"), what="attempt 1's partitioner and workers")
    room_for_one(h)
    cond = h.wait_condition_status("PodsReady", "False", reason="Unschedulable")
    assert "1 of the 2 the memory plan needs (minReplicas 1) worker pods run" in cond["message"]


def test_a_refused_file_fails_an_elastic_job_without_a_restart_or_rescale(h: Harness) -> None:
    """A process that refused a file it was to load (dglrun's ``refused: `` message) fails an
    elastic job as a rigid one: FileRefused, neither restarted within backoffLimit nor
    rescaled, its condition naming the file."""
    raw = elastic_job()
    raw["spec"]["runPolicy"] = {"backoffLimit": 3}
    start(h, raw, settleSeconds=600)
    for i, name in enumerate(W):
        h.run_pod(name, f"10.0.1.{i + 1}")
    wait_for(lambda: elastic(h).get("members") == W, what="all three")
    h.wait_pods(PART)
    h.run_pod(PART, "10.0.1.9")
    planted = "/dgl_storage/raw_data/g/weights.pt"
    refusal = (
        f"refused: partition.py: error: {planted} is refused: it holds more than tensors (the "
        "partition entry point partition.py exited with code 65: it refused a file it was to "
        "load, and would refuse it again on a restart)"
    )
    h.finish_pod(PART, exit_code=1, message=refusal)
    cond = h.wait_condition("Failed")
    assert cond["reason"] == "FileRefused" and planted in cond["message"], cond
    assert elastic(h)["rescales"] == 0 and int(h.status().get("restartCount") or 0) == 0


def test_a_refusal_more_workers_cannot_help_fails_the_job(h: Harness) -> None:
    start(h, settleSeconds=600)  # (all three, not whichever ran first)
    for i, name in enumerate(W):
        h.run_pod(name, f"10.0.1.{i + 1}")
    wait_for(lambda: elastic(h).get("members") == W, what="all three")
    h.wait_pods(PART)
    h.run_pod(PART, "10.0.1.9")
    refusal = (
        "memory plan: the partition step needs ~9.0 GiB in the partitioner pod (...): use "
        "partitionMode DistParMETIS (one rank per worker pod: 3.1 GiB each), or raise the "
        "Worker memory limit to at least 9.9 GiB"
    )
    h.finish_pod(PART, exit_code=1, message=refusal)
    assert h.wait_condition("Failed")["reason"] == "MemoryPlanExceeded"
    assert elastic(h)["rescales"] == 0
