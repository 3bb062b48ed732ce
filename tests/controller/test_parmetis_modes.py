"""The ParMETIS and DistParMETIS modes on the controller side: the pods each mode builds, the
phase DistParMETIS takes from dglrun's progress, and both lifecycles over FakeKube."""

from __future__ import annotations

from typing import Any

import pytest

from controller import builders
from controller.api import parse_job
from controller.builders import BuildOptions
from controller.builders.desired import desired
from controller.builders.rbac import rbac
from controller.status.observation import phase_from_progress
from kubeclient import ROLES, SERVICEACCOUNTS
from podcontract.progress import FROM_DETAIL, FROM_TEXT, ProgressDetail, read
from tests.controller.harness import NS, Harness
from tests.support.dgljobs import load_fixture
from tests.support.waiting import wait_for

J = "dgl-graphsage"
W0, W1 = f"{J}-worker-0", f"{J}-worker-1"
PART, LAUNCH = f"{J}-partitioner", f"{J}-launcher"
CHUNKED = "/dgl_workspace/chunked"


def job_raw(mode: str, layout: str = "Shared") -> dict[str, Any]:
    raw = load_fixture("seed_dgljob.yaml")
    raw["metadata"]["uid"] = "uid-1"
    raw["spec"].update(partitionMode=mode, chunkedGraph={"path": CHUNKED, "layout": layout})
    return raw


def env_of(container: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container.get("env") or []}


def test_parmetis_pods_are_dgl_apis_plus_the_mode_env() -> None:
    job = parse_job(job_raw("ParMETIS"))
    d = desired(job, BuildOptions())
    seed = load_fixture("seed_dgljob.yaml")
    seed["metadata"]["uid"] = "uid-1"
    base = desired(parse_job(seed), BuildOptions())
    assert d.partitioner is not None and base.partitioner is not None
    part_env = env_of(d.partitioner["spec"]["containers"][0])
    assert part_env["DGL_OPERATOR_PARTITION_MODE"] == "ParMETIS"
    assert part_env["DGL_OPERATOR_CHUNKED_GRAPH"] == CHUNKED
    assert part_env["DGL_OPERATOR_CHUNKED_LAYOUT"] == "Shared"
    assert part_env["DGL_OPERATOR_CPU_LIMIT"] == {
        "resourceFieldRef": {
            "containerName": "dgl-graphsage",
            "resource": "limits.cpu",
            "divisor": "1",
        }
    }
    # the same choreography as DGL-API: partitioner, then the launcher waits for it
    launcher_inits = [c["name"] for c in d.launcher["spec"]["initContainers"]]
    assert launcher_inits == [c["name"] for c in base.launcher["spec"]["initContainers"]]
    assert env_of(d.launcher["spec"]["containers"][0])["DGL_OPERATOR_PARTITION_MODE"] == "ParMETIS"
    # DGL-API pods carry none of it (they stay the original operator's)
    for pod in (base.partitioner, base.launcher):
        assert not any(
            k.startswith("DGL_OPERATOR_CHUNKED") for k in env_of(pod["spec"]["containers"][0])
        )
        assert "DGL_OPERATOR_PARTITION_MODE" not in env_of(pod["spec"]["containers"][0])
    assert len(rbac(job)) == 6


def test_distparmetis_has_no_partitioner_and_its_launcher_waits_only_for_workers() -> None:
    job = parse_job(job_raw("DistParMETIS", "PerWorker"))
    d = desired(job, BuildOptions())
    assert d.partitioner is None
    assert [w["metadata"]["name"] for w in d.workers] == [W0, W1]
    launcher = d.launcher
    assert [c["name"] for c in launcher["spec"]["initContainers"]] == [
        "kubectl-download",
        "watcher-loop-worker",
    ]
    volumes = {v["name"] for v in launcher["spec"]["volumes"]}
    assert "dataset-volume" not in volumes and {"kube-volume", "config-volume"} <= volumes
    main = launcher["spec"]["containers"][0]
    assert "/dgl_workspace/dataset" not in {m["mountPath"] for m in main["volumeMounts"]}
    env = env_of(main)
    assert env["DGL_OPERATOR_PARTITION_MODE"] == "DistParMETIS"
    assert env["DGL_OPERATOR_CHUNKED_LAYOUT"] == "PerWorker"
    assert env["DGL_OPERATOR_KUBEXEC_PATH"] == "/etc/dgl/kubexec.sh"  # mpirun's rsh agent
    objs = rbac(job)
    assert [(o["kind"], o["metadata"]["name"]) for o in objs] == [
        ("ServiceAccount", LAUNCH),
        ("Role", LAUNCH),
        ("RoleBinding", LAUNCH),
    ]
    # mpirun's daemons start through the workers' agents: no exec
    assert objs[1]["rules"][0]["resources"] == ["pods"]
    assert not any("pods/exec" in r["resources"] for r in objs[1]["rules"])


@pytest.mark.parametrize(
    ("progress", "phase"),
    [
        ("", "Partitioning"),
        ("1/5 partition", "Partitioning"),
        ("2/5 deliver", "Partitioning"),
        ("3/5 dispatch", "Partitioned"),
        ("4/5 configure", "Training"),
        ("5/5 train: epoch 2/10", "Training"),
        ("done", "Training"),
        ("failed in 1/5 partition", "Partitioning"),
        ("failed in 5/5 train", "Training"),
    ],
)
def test_distparmetis_phase_follows_an_older_dglruns_text(progress: str, phase: str) -> None:
    """An older dglrun wrote the text alone: its step, through podcontract's one parser."""
    reading = read({"progress": progress})
    assert reading.source == (FROM_TEXT if progress else "")
    assert phase_from_progress(reading) == phase


def typed(step: int, text: str = "", percentage: int = 0, **status: Any) -> dict[str, Any]:
    """A status as this dglrun writes it: the detail at ``step`` of 5, beside ``text``."""
    d = ProgressDetail(step=step, steps=5, step_name="x", percentage=percentage, epochs=2)
    return {"progress": text, "progressDetail": d.as_status(), **status}


@pytest.mark.parametrize(
    ("step", "phase"),
    [(0, "Partitioning"), (1, "Partitioning"), (2, "Partitioning"), (3, "Partitioned"),
     (4, "Training"), (5, "Training")],
)  # fmt: skip
def test_distparmetis_phase_follows_the_typed_detail_not_the_text(step: int, phase: str) -> None:
    """The detail decides: a text that says otherwise (here every other step's) is display."""
    for text in ("1/5 partition", "3/5 dispatch", "5/5 train: epoch 1/2", "done", "junk"):
        reading = read(typed(step, text))
        assert reading.source == FROM_DETAIL and reading.detail is not None
        assert phase_from_progress(reading) == phase, (step, text)
    done = read(typed(5, "1/5 partition", percentage=100))
    assert phase_from_progress(done) == "Training"


@pytest.mark.parametrize(
    "bad",
    [
        {"epochsDone": 3, "epochs": 2},  # more epochs done than there are
        {"epochsDone": "1"},  # a string where an int belongs
        {"step": 6},  # past the steps
        {"step": True},  # a bool is no number
        {"percentage": 101},
        {"steps": -1},
        {"stepName": 5},
        {"metrics": "fast"},
    ],
)
def test_a_bad_detail_is_not_read_and_the_phase_shown_stays(bad: dict[str, Any]) -> None:
    """A detail with a field of the wrong type or value is ignored as a whole, with a message
    naming the field (never an exception); the phase the job shows stays, and nothing falls
    back to the text (it says step 5 here)."""
    status = typed(3, "5/5 train: epoch 1/2")
    status["progressDetail"].update(bad)
    reading = read(status)
    assert reading.detail is None and reading.source == ""
    key = next(iter(bad))
    assert reading.problem.startswith("status.progressDetail") and key in reading.problem
    assert reading.problem.endswith(": ignored"), reading.problem
    assert phase_from_progress(reading, "Partitioned") == "Partitioned"
    assert phase_from_progress(reading, "Pending") == "Partitioning", "not a running phase"
    assert phase_from_progress(reading) == "Partitioning"
    assert phase_from_progress(read(typed(3, "5/5 train")), "Training") == "Partitioned"


# -- whole lifecycles over FakeKube --------------------------------------------------------


def test_distparmetis_lifecycle(h: Harness) -> None:
    raw = job_raw("DistParMETIS")
    del raw["metadata"]["uid"]
    h.create_job(raw)
    h.wait_pods(W0, W1)
    h.wait_condition("Created")
    assert h.names(SERVICEACCOUNTS) == [LAUNCH] and h.names(ROLES) == [LAUNCH]
    assert PART not in h.pods() and LAUNCH not in h.pods()
    h.run_pod(W0, "10.0.0.1")
    h.run_pod(W1, "10.0.0.2")
    h.wait_pods(LAUNCH)  # no partitioner to wait for
    h.launcher_waiting_in_init(LAUNCH, "10.0.0.4")
    h.settle()
    assert h.status()["phase"] == "Pending"
    assert set(h.status()["replicaStatuses"]) == {"Launcher", "Worker"}
    h.run_pod(LAUNCH, "10.0.0.4")
    h.wait_phase("Partitioning")  # dglrun starts with the partition phase
    h.report_progress("1/5 partition")
    h.settle()
    assert h.status()["phase"] == "Partitioning"
    h.report_progress("3/5 dispatch", partitionSeconds=12.5)
    h.wait_phase("Partitioned")
    h.report_progress("5/5 train: epoch 1/2")  # (an older dglrun: the text alone)
    h.wait_phase("Training")
    h.finish_pod(LAUNCH, seconds=60)
    h.wait_condition("Succeeded")
    reasons = h.event_reasons()
    for r in ("DGLJobPartitioning", "PartitionSucceeded", "DGLJobPartitioned", "DGLJobTraining"):
        assert r in reasons, f"no {r} event in {reasons}"
    partitioned = [e for e in h.events() if e["reason"] == "PartitionSucceeded"]
    assert partitioned[0]["message"] == "Graph partitioned on the workers in 12s"
    h.settle()
    assert h.sample("dgl_operator_job_partition_duration_seconds_sum", namespace=NS) == 12.5
    assert h.status()["partitionSeconds"] == 12.5  # dglrun's field survives the operator's writes


def test_distparmetis_phase_over_the_lifecycle_comes_from_the_typed_detail(h: Harness) -> None:
    """This dglrun's status: the phase follows progressDetail's step, whatever the text says
    (a text that lags behind, here the first step's, is display only)."""
    raw = job_raw("DistParMETIS")
    del raw["metadata"]["uid"]
    h.create_job(raw)
    h.wait_pods(W0, W1)
    h.run_pod(W0, "10.0.0.1")
    h.run_pod(W1, "10.0.0.2")
    h.wait_pods(LAUNCH)
    h.run_pod(LAUNCH, "10.0.0.4")
    h.wait_phase("Partitioning")
    h.report_progress("1/5 partition", progressDetail=typed(3)["progressDetail"],
                      partitionSeconds=7.0)  # fmt: skip
    h.wait_phase("Partitioned")
    h.report_progress("1/5 partition: late", progressDetail=typed(5)["progressDetail"])
    h.wait_phase("Training")
    bad = dict(typed(1)["progressDetail"], epochsDone=9)
    h.report_progress("1/5 partition: later", progressDetail=bad)
    h.settle()
    assert h.status()["phase"] == "Training", "a bad detail moves nothing"
    partitioned = [e for e in h.events() if e["reason"] == "PartitionSucceeded"]
    assert partitioned[0]["message"] == "Graph partitioned on the workers in 7s"


def test_distparmetis_worker_failure_while_partitioning_restarts_the_job(h: Harness) -> None:
    raw = job_raw("DistParMETIS")
    del raw["metadata"]["uid"]
    raw["spec"]["runPolicy"] = {"backoffLimit": 1}
    h.create_job(raw)
    h.wait_pods(W0, W1)
    h.run_pod(W0, "10.0.0.1")
    h.run_pod(W1, "10.0.0.2")
    h.wait_pods(LAUNCH)
    h.run_pod(LAUNCH, "10.0.0.4")
    h.report_progress("1/5 partition")
    h.wait_phase("Partitioning")
    h.finish_pod(LAUNCH, exit_code=1, reason="Error")
    wait_for(lambda: h.status().get("restartCount") == 1, what="a whole-job restart")
    assert "progress" not in h.status()  # the next attempt's dglrun reports afresh
    wait_for(
        lambda: (
            all(
                p["metadata"]["annotations"][builders.ATTEMPT_ANNOTATION] == "1"
                for p in h.pods().values()
            )
            and {W0, W1} <= set(h.pods())
        ),
        what="the second attempt's workers",
    )


def test_parmetis_lifecycle_is_dgl_apis(h: Harness) -> None:
    raw = job_raw("ParMETIS")
    del raw["metadata"]["uid"]
    h.create_job(raw)
    h.wait_pods(W0, W1, PART)
    h.run_pod(W0, "10.0.0.1")
    h.run_pod(W1, "10.0.0.2")
    h.run_pod(PART, "10.0.0.3")
    h.wait_phase("Partitioning")
    h.wait_pods(LAUNCH)
    h.launcher_waiting_in_init(LAUNCH, "10.0.0.4")
    h.report_progress("2/5 deliver", reporter="partitioner", partitionSeconds=30)
    wait_for(lambda: h.status().get("partitionSeconds") == 30, what="the partition time")
    h.run_pod(LAUNCH, "10.0.0.4")
    h.wait_phase("Training")
    h.finish_pod(LAUNCH)
    h.wait_condition("Succeeded")
    assert "PartitionSucceeded" in h.event_reasons()
