"""Pure status logic: conditions, failures, phases, rebase."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from controller.api import DGLJob
from controller.builders import ATTEMPT_ANNOTATION, REPLICA_TYPE_LABEL
from controller.status import conditions, failures, observation, pod_state, rebase
from launcher.plans import memory as memplan
from launcher.workers import refusal
from podcontract import REFUSED_EXIT_CODE, REFUSED_PREFIX

T0 = 1_700_000_000.0


def pod(
    name: str, rtype: str, phase: str = "Running", *, attempt: int = 0, **status: Any
) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "labels": {REPLICA_TYPE_LABEL: rtype},
            "annotations": {ATTEMPT_ANNOTATION: str(attempt)},
        },
        "spec": {"containers": [{"name": "main"}]},
        "status": {"phase": phase, **status},
    }


def test_set_condition_keeps_transition_time_unless_status_flips() -> None:
    s: dict[str, Any] = {}
    assert conditions.set_condition(s, conditions.RUNNING, True, "A", "a", T0)
    first = conditions.get_condition(s, conditions.RUNNING)
    assert first and first["lastTransitionTime"] == "2023-11-14T22:13:20Z"
    assert not conditions.set_condition(s, conditions.RUNNING, True, "A", "a", T0 + 10), (
        "no-op is not a change"
    )
    assert conditions.set_condition(s, conditions.RUNNING, True, "B", "b", T0 + 20)
    c = conditions.get_condition(s, conditions.RUNNING)
    assert c and c["lastTransitionTime"] == first["lastTransitionTime"] and c["reason"] == "B"
    assert conditions.set_condition(s, conditions.RUNNING, False, "C", "c", T0 + 30)
    c = conditions.get_condition(s, conditions.RUNNING)
    assert c and c["status"] == "False" and c["lastTransitionTime"] == "2023-11-14T22:13:50Z"


def test_absent_false_condition_is_not_added() -> None:
    s: dict[str, Any] = {}
    assert not conditions.set_condition(s, conditions.RESTARTING, False, "X", "x", T0)
    assert "conditions" not in s


def test_pod_failure_names_the_first_failed_container_init_first() -> None:
    p = pod(
        "j-launcher",
        "Launcher",
        "Failed",
        initContainerStatuses=[
            {"name": "kubectl-download", "state": {"terminated": {"exitCode": 0}}},
            {
                "name": "watcher-loop-worker",
                "state": {
                    "terminated": {
                        "exitCode": 4,
                        "reason": "Error",
                        "message": "pod j-worker-1 Failed",
                    }
                },
            },
        ],
        containerStatuses=[{"name": "main", "state": {"waiting": {}}}],
    )
    f = failures.pod_failure(p)
    assert f is not None
    assert (f.replica_type, f.pod, f.container, f.exit_code) == (
        "Launcher",
        "j-launcher",
        "watcher-loop-worker",
        4,
    )
    assert f.condition_reason == "LauncherFailed"
    assert f.describe() == (
        "launcher pod j-launcher failed: container watcher-loop-worker exited with code 4 "
        "(Error): pod j-worker-1 Failed"
    )


def test_a_memory_plans_refusal_is_quoted_whole_with_the_options_that_make_it_fit() -> None:
    """dglrun's refusal ends with its advice (the e2e job under a limit below its in-memory
    need lost the out-of-core option when the quote was cut at 300 characters)."""
    size = memplan.GraphSize(nodes=200_000, edges=2_000_000, node_bytes=4107)
    shape = memplan.Shape("DistParMETIS", workers=2, parts=2, ranks=2,
                          processes=memplan.Processes(servers=1, trainers=1),
                          batch_size=64)  # fmt: skip
    limit = 1792 << 20
    with pytest.raises(memplan.PlanError) as refused:
        memplan.check(size, shape, memplan.plan(size, shape, limit))
    message = str(refused.value)
    assert len(message) > 300 and "spec.outOfCore.enabled: true" in message[300:]
    p = pod("j-launcher", "Launcher", "Failed", containerStatuses=[{"name": "main", "state": {
        "terminated": {"exitCode": 1, "reason": "Error", "message": message}}}])  # fmt: skip
    f = failures.pod_failure(p)
    assert f is not None and f.condition_reason == conditions.REASON_MEMORY_PLAN
    assert f.describe().endswith(message.strip())


def launcher_failed(message: str) -> failures.PodFailure:
    p = pod("j-launcher", "Launcher", "Failed", containerStatuses=[{"name": "main", "state": {
        "terminated": {"exitCode": 1, "reason": "Error", "message": message}}}])  # fmt: skip
    f = failures.pod_failure(p)
    assert f is not None
    return f


def test_a_refused_file_is_a_permanent_failure_quoting_the_refusal_and_the_file() -> None:
    """dglrun's termination message for a trainer that refused its checkpoint (its line as
    launcher.workers.refusal quotes it): reason FileRefused, never retried, the condition
    quotes the refusal with the file named, however long the rest of it (a payload's global
    name is the attacker's to choose)."""
    ckpt = "/dgl_storage/" + "deep/" * 30 + "runs/j-1a2b3c4d/checkpoints/epoch-3.pt"
    line = (
        f"train_dist.py: error: [rank 0] checkpoint {ckpt} is refused: it holds more than "
        f"tensors and plain values, and loading it could run code (GLOBAL {'x' * 5000})"
    )
    text = refusal.describe(REFUSED_EXIT_CODE, line, "trainer 0 on j-worker-0 (10.0.0.1)")
    assert text is not None and text.startswith(REFUSED_PREFIX + "train_dist.py: error:")
    f = launcher_failed(text + "; stopped every DGL process on every worker")
    assert f.condition_reason == conditions.REASON_FILE_REFUSED == "FileRefused"
    assert f.permanent
    said = f.describe()
    assert said.startswith(f"train_dist.py: error: [rank 0] checkpoint {ckpt} is refused: it")
    assert said.endswith("(reported by launcher pod j-launcher)") and len(said) < 2000, said
    assert "GLOBAL xxx" in said


def test_only_a_refusal_or_a_memory_plan_is_permanent() -> None:
    """The twins: the same line without dglrun's ``refused: `` start is an ordinary failure
    (retried within backoffLimit); a memory plan's refusal was permanent before and is."""
    line = "checkpoint /dgl_storage/runs/j/checkpoints/epoch-3.pt is refused: it holds more"
    ordinary = launcher_failed(f"train failed: trainer 0 exited with code 65 ({line})")
    assert ordinary.condition_reason == "LauncherFailed" and not ordinary.permanent
    plan = launcher_failed("memory plan: the train step needs ~3.1 GiB in each worker pod")
    assert plan.condition_reason == conditions.REASON_MEMORY_PLAN and plan.permanent
    killed = launcher_failed("OOMKilled: trainer-0 in pod j-worker-0 was killed for memory")
    assert killed.condition_reason == conditions.REASON_OOM_KILLED and not killed.permanent
    assert {conditions.REASON_MEMORY_PLAN, conditions.REASON_FILE_REFUSED} == failures.PERMANENT


def test_evicted_pod_failure_uses_the_pod_reason() -> None:
    p = pod("j-worker-0", "Worker", "Failed", reason="Evicted", message="low on memory")
    f = failures.pod_failure(p)
    assert f is not None and f.describe() == "worker pod j-worker-0 failed: Evicted: low on memory"


def test_observe_counts_and_separates_stale_and_terminating(seed_job: DGLJob) -> None:
    pods = [
        pod("dgl-graphsage-worker-0", "Worker", conditions=[{"type": "Ready", "status": "True"}]),
        pod("dgl-graphsage-worker-1", "Worker", "Pending"),
        pod("dgl-graphsage-partitioner", "Partitioner", "Succeeded"),
        pod("dgl-graphsage-launcher", "Launcher", attempt=1),
    ]
    gone = pod("dgl-graphsage-worker-1", "Worker")
    gone["metadata"]["deletionTimestamp"] = "2023-01-01T00:00:00Z"
    obs = observation.observe(seed_job, pods, attempt=0)
    assert [p["metadata"]["name"] for p in obs.stale] == ["dgl-graphsage-launcher"]
    assert observation.replica_statuses(obs) == {
        "Launcher": {"active": 0, "succeeded": 0, "failed": 0, "ready": "0/1"},
        "Partitioner": {"active": 0, "succeeded": 1, "failed": 0, "ready": "0/1"},
        "Worker": {"active": 2, "succeeded": 0, "failed": 0, "ready": "1/2"},
    }
    obs2 = observation.observe(seed_job, [gone], attempt=0)
    assert obs2.terminating == ["dgl-graphsage-worker-1"] and not obs2.pods


def test_worker_that_exits_before_the_launcher_is_a_failure(seed_job: DGLJob) -> None:
    obs = observation.observe(seed_job, [pod("dgl-graphsage-worker-0", "Worker", "Succeeded")], 0)
    assert obs.failure is not None and obs.failure.pod == "dgl-graphsage-worker-0"
    assert "exited before training finished" in obs.failure.describe()


def test_phases(seed_job: DGLJob) -> None:
    def phase(*pods: dict[str, Any]) -> str:
        return observation.phase_for(seed_job, observation.observe(seed_job, list(pods), 0))

    assert phase() == conditions.PENDING
    assert phase(pod("dgl-graphsage-partitioner", "Partitioner")) == conditions.PARTITIONING
    assert (
        phase(pod("dgl-graphsage-partitioner", "Partitioner", "Succeeded"))
        == conditions.PARTITIONED
    )
    launcher_init_done = pod(
        "dgl-graphsage-launcher",
        "Launcher",
        "Pending",
        initContainerStatuses=[
            {"name": "watcher-loop-partitioner", "state": {"terminated": {"exitCode": 0}}}
        ],
    )
    assert phase(launcher_init_done) == conditions.PARTITIONED
    training = pod(
        "dgl-graphsage-launcher",
        "Launcher",
        containerStatuses=[{"name": "main", "state": {"running": {}}}],
    )
    assert phase(training) == conditions.TRAINING


def test_workers_up_needs_every_worker_and_the_partitioner(seed_job: DGLJob) -> None:
    w0 = pod("dgl-graphsage-worker-0", "Worker", podIP="10.0.0.1")
    w1 = pod("dgl-graphsage-worker-1", "Worker", podIP="10.0.0.2")
    part = pod("dgl-graphsage-partitioner", "Partitioner", podIP="10.0.0.3")
    assert not observation.workers_up(seed_job, observation.observe(seed_job, [w0, w1], 0))
    assert observation.workers_up(seed_job, observation.observe(seed_job, [w0, w1, part], 0))
    no_ip = copy.deepcopy(w1)
    del no_ip["status"]["podIP"]
    assert not observation.workers_up(seed_job, observation.observe(seed_job, [w0, no_ip, part], 0))


def test_main_run_seconds() -> None:
    p = pod(
        "x",
        "Launcher",
        "Succeeded",
        containerStatuses=[
            {
                "name": "main",
                "state": {
                    "terminated": {
                        "exitCode": 0,
                        "startedAt": "2024-01-01T00:00:00Z",
                        "finishedAt": "2024-01-01T00:01:30Z",
                    }
                },
            }
        ],
    )
    assert pod_state.main_run_seconds(p) == 90


def test_rebase_keeps_their_fields_and_applies_ours() -> None:
    base: dict[str, Any] = {
        "phase": "Pending",
        "conditions": [{"type": "Created", "status": "True"}],
    }
    ours = copy.deepcopy(base)
    ours["phase"] = "Partitioning"
    ours["conditions"].append({"type": "Running", "status": "True"})
    theirs = copy.deepcopy(base)
    theirs["progress"] = "epoch 2"
    theirs["conditions"].append({"type": "Custom", "status": "True"})
    out = rebase.rebase_status(base, ours, theirs)
    assert out["phase"] == "Partitioning" and out["progress"] == "epoch 2"
    assert [c["type"] for c in out["conditions"]] == ["Created", "Custom", "Running"]
    removed = rebase.rebase_status({"startTime": "t"}, {}, {"startTime": "t", "x": 1})
    assert removed == {"x": 1}


def test_time_round_trip() -> None:
    assert conditions.parse_time(conditions.now_rfc3339(T0)) == T0
    assert conditions.parse_time("2024-01-01T00:00:00.123456Z") is not None
    assert conditions.parse_time("garbage") is None and conditions.parse_time(None) is None
