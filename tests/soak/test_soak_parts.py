"""The soak's pure parts: its plan is its seed's alone and covers every kind; the jobs it
submits are what the CRD and the operator's parser accept; each invariant catches what it
forbids and passes what it allows."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from controller.api import parse_job
from soak import invariants as inv
from soak.faults import FAULTS, struck_while_away
from soak.kinds import KINDS, QUEUE_LABEL, manifest
from soak.plan import DEFAULT, SMALL, make_plan
from soak.run import error_event, exit_cause, queue_objects


def test_a_seed_is_its_plan() -> None:
    kinds, faults = sorted(KINDS), sorted(FAULTS)
    one, again = make_plan(7, DEFAULT, kinds, faults), make_plan(7, DEFAULT, kinds, faults)
    assert one == again
    assert make_plan(8, DEFAULT, kinds, faults) != one
    assert {s.kind for s in one.submissions} == set(kinds)
    assert {f.kind for f in one.faults} == set(faults)
    assert len(one.submissions) == DEFAULT.jobs >= 60
    assert [s.at for s in one.submissions] == sorted(s.at for s in one.submissions)
    assert len({s.name for s in one.submissions}) == DEFAULT.jobs
    assert {s.queue for s in one.submissions} == {"team-a", "team-b"}
    assert {s.priority for s in one.submissions} == {"soak-low", "soak-high"}
    # whom a fault strikes is drawn from its own generator: the same on a replay
    fault = one.faults[0]
    assert fault.rng(7).random() == fault.rng(7).random() != fault.rng(8).random()


def test_the_small_plan_fits_make_test() -> None:
    plan = make_plan(1, SMALL, sorted(KINDS), sorted(FAULTS))
    assert len(plan.submissions) == SMALL.jobs and len(plan.faults) == SMALL.faults
    assert max(s.at for s in plan.submissions) <= SMALL.submit_seconds
    assert max(f.at for f in plan.faults) <= SMALL.first_fault + SMALL.fault_seconds


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_each_kind_is_a_queued_job_the_parser_accepts(kind: str) -> None:
    """(tests/controller/test_crd.py: and the CRD)"""
    raw = manifest(kind, "team-a", f"{kind}-000", "team-a", "soak-high")
    assert raw["metadata"]["labels"][QUEUE_LABEL] == "team-a"
    raw["metadata"]["uid"] = "u"
    job = parse_job(raw)
    assert job.spec.run_policy.scheduling_policy.priority_class == "soak-high"
    for replica in raw["spec"]["dglReplicaSpecs"].values():
        pod = replica["template"]["spec"]
        assert pod["containers"][0]["resources"]["requests"]["cpu"] == "200m"
        assert (pod.get("schedulerName") is None) is KINDS[kind].gang
    assert (job.spec.storage is not None) is KINDS[kind].storage


def test_the_queue_objects_name_one_cluster_queue_with_preemption() -> None:
    objs = {(o["kind"], o["metadata"]["name"]) for o in queue_objects()}
    assert ("ClusterQueue", "soak") in objs
    assert {("LocalQueue", "team-a"), ("LocalQueue", "team-b")} <= objs
    (cq,) = [o for o in queue_objects() if o["kind"] == "ClusterQueue"]
    assert cq["spec"]["preemption"] == {"withinClusterQueue": "LowerPriority"}


def pod(name: str, job: str, replica: str, attempt: str = "0", **status: Any) -> dict[str, Any]:
    return {
        "kind": "Pod",
        "metadata": {
            "name": name, "namespace": "team-a", "uid": f"uid-{name}",
            "labels": {"dgl.qihoo.net/job-name": job, "dgl-replica-name": replica},
            "annotations": {"dgl.qihoo.net/restart-attempt": attempt},
        },
        "spec": {"nodeName": "dgl-node", "containers": [
            {"resources": {"requests": {"cpu": "200m"}}}
        ]},
        "status": {"phase": "Running", **status},
    }  # fmt: skip


def test_two_live_pods_for_one_replica_of_one_attempt_is_a_violation() -> None:
    one = pod("j-worker-0", "j", "j-worker-0")
    twin = pod("j-worker-0-b", "j", "j-worker-0")
    assert len(inv.duplicate_replicas(1.0, [one, twin])) == 1
    gone = copy.deepcopy(twin)
    gone["metadata"]["deletionTimestamp"] = "2026-11-29T00:00:00Z"
    later = pod("j-worker-0-c", "j", "j-worker-0", attempt="1")
    done = pod("j-worker-0-d", "j", "j-worker-0", phase="Failed")
    assert inv.duplicate_replicas(1.0, [one, gone, later, done]) == []


def test_a_pod_placed_on_a_node_away_is_struck_by_that_nodes_fault() -> None:
    """CI (seed 47): a job's partitioner bound to a node just after the node was powered off
    (the scheduler places pods there until the node is seen NotReady) was restarted NodeLost,
    though the fault had listed the node's jobs before it: the looks count it struck. A pod
    elsewhere, an ended one, or a node back again strikes nothing."""
    away = {"dgl-node": "115s powered node dgl-node off for 31s"}
    placed = pod("rigid-003-partitioner", "rigid-003", "partitioner", phase="Pending")
    assert struck_while_away([placed], away) == {"team-a/rigid-003": away["dgl-node"]}
    elsewhere = copy.deepcopy(placed)
    elsewhere["spec"]["nodeName"] = "dgl-node-2"
    ended = pod("skip-001-launcher", "skip-001", "launcher", phase="Succeeded")
    assert struck_while_away([elsewhere, ended], away) == {}
    assert struck_while_away([placed], {}) == {}


def test_placed_pods_over_the_quota_are_a_violation() -> None:
    pods = [pod(f"p{i}", "j", f"p{i}") for i in range(10)]
    assert inv.over_quota(1.0, pods, 2000) == []
    (v,) = inv.over_quota(1.0, [*pods, pod("p10", "k", "p10")], 2000)
    assert "2200m CPU of 2000m" in v.what
    unplaced = pod("p11", "k", "p11", phase="Pending")
    unplaced["spec"]["nodeName"] = ""
    assert inv.over_quota(1.0, [*pods, unplaced], 2000) == []


def record(**kw: Any) -> inv.JobRecord:
    base: dict[str, Any] = dict(name="j", kind="storage", namespace="team-a", resumable=True,
                                submitted=0.0, uid="U")  # fmt: skip
    return inv.JobRecord(**{**base, **kw})


def test_what_a_deleted_job_owned_is_a_violation_until_it_is_gone() -> None:
    owned = {
        "kind": "ConfigMap",
        "metadata": {"name": "j-config", "ownerReferences": [{"uid": "U"}]},
    }
    labelled = {"kind": "Pod", "metadata": {"name": "j-worker-0",
                                            "labels": {"dgl.qihoo.net/job-name": "j"}}}  # fmt: skip
    other = {"kind": "Secret", "metadata": {"name": "x", "ownerReferences": [{"uid": "V"}]}}
    (v,) = inv.leftovers(1.0, record(), [owned, labelled, other])
    assert "ConfigMap j-config" in v.what and "Pod j-worker-0" in v.what and "x" not in v.what
    assert inv.leftovers(1.0, record(), [other]) == []


def test_a_job_fails_only_for_a_fault_that_struck_it_and_says_what() -> None:
    assert inv.outcome(1.0, record(outcome="Succeeded")) == []
    failed = record(
        outcome="Failed", reason="BackoffLimitExceeded", message="pod j-worker-1 exited 137"
    )
    assert [v.rule for v in inv.outcome(1.0, failed)] == ["failed though no fault struck it"]
    failed.faults.append("10s killed pod j-worker-1")
    assert inv.outcome(1.0, failed) == []
    vague = record(outcome="Failed", reason="", message="", faults=["x"])
    assert [v.rule for v in inv.outcome(1.0, vague)] == [
        "failed without a reason that names what happened"
    ]
    (stuck,) = inv.outcome(1.0, record(last_status={"phase": "Training"}))
    assert stuck.rule == "stuck" and "Training" in stuck.what


def test_a_slow_job_whose_status_moves_is_waited_for_and_a_still_one_is_not() -> None:
    """Past its deadline the soak waits for jobs that still move (ci7's and a later soak's
    "stuck" jobs were training, only slowly): a job is moving while a look saw its status
    change within STALL_SECONDS; the twin, the same job with a status that stays, is not."""
    training = {"phase": "Training", "progress": "5/5 train"}
    slow, still = record(name="slow", submitted=10.0), record(name="still", submitted=10.0)
    for job in (slow, still):
        job.saw(training, 20.0)
    slow.saw({**training, "progress": "5/5 train: epoch 1/2"}, 150.0)
    still.saw(dict(training), 150.0)  # (the same status, seen again)
    assert (slow.moved, still.moved) == (150.0, 20.0)
    assert inv.moving([slow, still], 200.0) == ["team-a/slow"]
    assert inv.moving([slow, still], 150.0 + inv.STALL_SECONDS) == []
    slow.finished = 210.0
    assert inv.moving([slow], 211.0) == []  # finished: nothing to wait for
    never = record(name="never", submitted=100.0)  # not seen by a look yet: since submitted
    assert inv.moving([never], 150.0) == ["team-a/never"]
    (stuck,) = inv.outcome(300.0, still)
    assert "its status last moved at 20.0s" in stuck.what


def test_only_a_fault_that_struck_a_job_restarts_it() -> None:
    """An API server restart strikes no job (issue 58): a job that took a second attempt
    though no fault struck it is a violation; the twin, struck, is not."""
    twice = [inv.Attempt("a", done=2), inv.Attempt("b", done=4, resumed_at=2)]
    why = "worker pod job-worker-1 failed: exit 137"
    restarted = {
        "restartCount": 1,
        "conditions": [
            {"type": "Restarting", "status": "True", "reason": "DGLJobRestarting", "message": why}
        ],
    }
    unstruck = record(outcome="Succeeded", attempts=list(twice), last_status={"restartCount": 1})
    unstruck.saw_restart(restarted)
    unstruck.saw_restart(restarted)  # (the same restart, seen by two looks)
    (violation,) = inv.outcome(1.0, unstruck)
    assert violation.rule == "restarted though no fault struck it"
    assert violation.what.endswith(f"1 restarts (DGLJobRestarting: {why})"), violation.what
    struck = record(
        outcome="Succeeded", attempts=list(twice), last_status=restarted, faults=["killed pod"]
    )
    assert inv.outcome(1.0, struck) == []
    # Kueue's preemption makes a second attempt without a restart: not a violation
    preempted = record(outcome="Succeeded", attempts=list(twice), last_status={"restartCount": 0})
    assert inv.outcome(1.0, preempted) == []


def test_a_resumed_job_trains_no_epoch_twice_and_keeps_its_accuracy() -> None:
    good = record(outcome="Succeeded", accuracy=0.870, attempts=[
        inv.Attempt("a", done=3), inv.Attempt("b", done=6, resumed_at=3)
    ])  # fmt: skip
    assert inv.resumed(1.0, good, {"storage": 0.875}) == []
    again = record(outcome="Succeeded", accuracy=0.870, attempts=[
        inv.Attempt("a", done=3), inv.Attempt("b", done=6, resumed_at=2)
    ])  # fmt: skip
    assert [v.rule for v in inv.resumed(1.0, again, {})] == ["an epoch trained twice"]
    scratch = record(outcome="Succeeded", attempts=[
        inv.Attempt("a", done=2), inv.Attempt("b", done=6)
    ])  # fmt: skip
    assert [v.rule for v in inv.resumed(1.0, scratch, {})] == ["an epoch trained twice"]
    partitioning = record(outcome="Succeeded", attempts=[  # (an attempt stopped before training)
        inv.Attempt("a", done=2), inv.Attempt("b"), inv.Attempt("c", done=6, resumed_at=2)
    ])  # fmt: skip
    assert inv.resumed(1.0, partitioning, {}) == []
    off = record(outcome="Succeeded", accuracy=0.850, attempts=good.attempts)
    assert [v.rule for v in inv.resumed(1.0, off, {"storage": 0.875})] == ["resumed accuracy off"]


def test_the_operator_is_flat_and_idle_or_it_is_a_violation() -> None:
    assert inv.memory_flat(1.0, 100 << 20, 119 << 20, "op") == []
    assert inv.memory_flat(1.0, 100 << 20, 130 << 20, "op")[0].rule == "operator memory grew"
    assert inv.idle_requests(1.0, {"get pods": 0.0}, 30) == []
    (v,) = inv.idle_requests(1.0, {"get pods": 0.0, "patch dgljobs": 2.0}, 30)
    assert "patch dgljobs: 2" in v.what


def test_the_operators_memory_is_judged_per_process_and_over_the_run() -> None:
    """Each leader process by its PID (a restarted container is another process); the
    longest-lived one against itself warmed up, and the run's peak against the first one."""
    from soak.run import Soak

    mib = 1 << 20
    plan = make_plan(1, SMALL, sorted(KINDS), sorted(FAULTS))
    soak = Soak(world=None, plan=plan, say=lambda _: None, drain_seconds=0)  # type: ignore[arg-type]
    soak.memory = [(t, "op-a pid 1", 50 * mib) for t in range(0, 100, 10)]
    soak.memory += [(t, "op-b pid 2", 52 * mib) for t in range(100, 150, 10)]
    line = soak._memory(200.0)
    assert soak.violations == [] and "2 leader process(es)" in line and "op-a pid 1" in line
    soak.memory.append((160, "op-b pid 2", 70 * mib))  # (over 1.2 x 50 MiB: a leak)
    soak._memory(200.0)
    assert [v.rule for v in soak.violations] == ["operator memory grew"]
    assert "the run's peak" in soak.violations[0].what


def test_an_operator_exit_names_its_cause_and_for_one_not_killed_its_last_error() -> None:
    asked: list[str] = []

    def last_error() -> str:
        asked.append("log")
        return '{"event": "leader lease lost; exiting so a fresh replica can take over"}'

    killed = {"lastState": {"terminated": {"reason": "Error", "exitCode": 137}}}
    assert exit_cause(killed, last_error) == "Error exit 137"
    assert asked == []  # (a SIGKILL: the fault's kill or the kernel's; its log says nothing)
    gave_up = {"lastState": {"terminated": {"reason": "Error", "exitCode": 1}}}
    assert exit_cause(gave_up, last_error) == (
        'Error exit 1: {"event": "leader lease lost; exiting so a fresh replica can take over"}'
    )
    assert exit_cause({"lastState": {}}, last_error) == "unknown exit ?"
    assert exit_cause(gave_up, lambda: "") == "Error exit 1"  # (no error in its log)


def test_an_error_line_s_cause_is_its_event_without_its_time() -> None:
    line = (
        '{"event": "leader lease lost; exiting so a fresh replica can take over", '
        '"level": "error", "timestamp": "2026-11-29T10:55:57.562851Z"}'
    )
    assert error_event(line) == "leader lease lost; exiting so a fresh replica can take over"
    assert error_event("E1129 plain error text") == "E1129 plain error text"
    assert error_event('["a list", "error"]') == '["a list", "error"]'


def test_an_attempts_epochs_are_the_typed_details_and_a_resumed_one_is_no_violation() -> None:
    """Each attempt's epochs done come from ``progressDetail.epochsDone`` (an older dglrun's
    text through podcontract's one fallback); an attempt that did 4 and a next one resumed
    from the checkpoint of those 4 trained no epoch twice."""
    from soak.run import Soak

    plan = make_plan(1, SMALL, sorted(KINDS), sorted(FAULTS))
    soak = Soak(world=None, plan=plan, say=lambda _: None, drain_seconds=0)  # type: ignore[arg-type]
    job = inv.JobRecord("j", "k", "ns", resumable=True, submitted=0.0, outcome="Succeeded")
    detail = {"step": 5, "steps": 5, "stepName": "train", "epochsDone": 4, "epochs": 6,
              "percentage": 90, "metrics": {"epoch": 4.0}}  # fmt: skip
    job.last_status = {"progress": "5/5 train: epoch 1/6", "progressDetail": detail}
    soak._attempt(job, {"metadata": {"uid": "a"}})
    assert job.attempts[-1].done == 4, "the detail's count, not the text's, not epoch + 1"
    job.last_status = {"progress": "5/5 train: epoch 5/6", "resume": {"epoch": 4}}
    soak._attempt(job, {"metadata": {"uid": "b"}})
    assert (job.attempts[-1].done, job.attempts[-1].resumed_at) == (5, 4), "an older dglrun"
    assert inv.resumed(1.0, job, {}) == []
    job.last_status = {"progressDetail": dict(detail, epochsDone="x")}
    soak._attempt(job, {"metadata": {"uid": "b"}})
    assert job.attempts[-1].done == 5, "a bad detail counts nothing"
