"""Memory on the real cluster: the plan refuses a graph too big for the Worker limit before
anything runs, and a process the kernel kills for memory anyway fails the job ``OOMKilled``
naming its pod."""

from __future__ import annotations

from typing import Any

from e2e.helpers import (
    apply,
    conditions,
    event_messages,
    example_job,
    get_job,
    launcher_args,
    pods,
    wait_finished,
)


def worker_limit(job: dict[str, Any], memory: str) -> None:
    worker = job["spec"]["dglReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    worker["resources"] = {"limits": {"memory": memory}}


def test_a_trainer_killed_for_memory_fails_the_job_oomkilled_naming_its_pod(
    cluster: Any, namespace: str
) -> None:
    """Worker pods of 1 GiB hold the example's partition and DGL server (~650 MiB together),
    but not a 3-layer GraphSAGE of 8192 hidden units (~2 GiB of weights, gradients and Adam
    state): the kernel kills a trainer inside its Running pod, and the job fails OOMKilled
    naming that pod (backoffLimit 0), with no pod left running."""
    job = example_job(namespace, "hog")
    worker_limit(job, "1Gi")
    launcher_args(job).extend(["--train-args", "--num_hidden 8192 --num_layers 3 --fan_out 5,5,5"])
    apply(cluster, job)
    done = wait_finished(cluster, namespace, "hog", timeout=600)
    cond = conditions(done).get("Failed", {})
    assert cond.get("status") == "True", conditions(done)
    assert cond["reason"] == "OOMKilled", cond
    message = cond["message"]
    assert "was killed for memory" in message and "1.00 GiB" in message, message
    assert any(f"in pod hog-worker-{i}" in message for i in (0, 1)), message
    assert int(done["status"].get("restartCount") or 0) == 0
    log = cluster.logs("hog-launcher", "dgl-graphsage", namespace)
    assert "launcher.remote: killed for memory in pod hog-worker-" in log, log[-3000:]
    assert "Traceback" not in log.split("[5/5] train")[0]  # (a trainer's own output may have one)
    assert event_messages(cluster, namespace, "OOMKilled")
    left = [
        n
        for n, p in pods(cluster, namespace).items()
        if p["status"].get("phase") in ("Pending", "Running")
        and not p["metadata"].get("deletionTimestamp")
    ]
    assert left == [], left


def test_a_graph_too_big_for_the_worker_limit_is_refused_before_partitioning(
    cluster: Any, namespace: str
) -> None:
    """The launcher says the graph has 2M nodes / 40M edges; with 2 GiB Worker pods the plan
    refuses at once: MemoryPlanExceeded naming the step, its estimate and the limit, no
    restart although backoffLimit allows 2, and nothing partitioned."""
    job = example_job(namespace, "huge")
    worker_limit(job, "2Gi")
    job["spec"]["runPolicy"] = {"backoffLimit": 2}
    launcher_args(job).extend(["--graph-size", "nodes=2000000,edges=40000000,node_bytes=411"])
    apply(cluster, job)
    done = wait_finished(cluster, namespace, "huge", timeout=300)
    cond = conditions(done).get("Failed", {})
    assert cond.get("reason") == "MemoryPlanExceeded", conditions(done)
    message = cond["message"]
    assert "huge-partitioner" in message and "the partition step needs ~" in message, message
    assert "2.0 GiB" in message, message
    assert int(get_job(cluster, namespace, "huge")["status"].get("restartCount") or 0) == 0
    log = cluster.logs("huge-partitioner", "dgl-graphsage", namespace)
    assert "[1/5] partition" not in log, log[-2000:]
