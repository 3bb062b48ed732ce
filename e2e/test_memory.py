"""Memory on the real cluster: the plan refuses a graph too big for the Worker limit before
anything runs, and a process the kernel kills for memory anyway fails the job ``OOMKilled``
naming its pod; a graph whose in-memory train step does not fit the Worker limit trains out of
core under it, and is refused, naming the option, without it."""

from __future__ import annotations

import re
from typing import Any

import yaml

from e2e.helpers import (
    EXAMPLE,
    accuracy,
    apply,
    conditions,
    event_messages,
    example_job,
    figure,
    get_job,
    launcher_args,
    pods,
    succeeded,
    wait_finished,
)


def worker_limit(job: dict[str, Any], memory: str) -> None:
    worker = job["spec"]["dglReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    worker["resources"] = {"limits": {"memory": memory}}


def refused_by_the_plan(cluster: Any, job: dict[str, Any], timeout: float = 600) -> str:
    """Apply ``job``; once it failed MemoryPlanExceeded (else the test fails), its message."""
    meta = job["metadata"]
    apply(cluster, job)
    done = wait_finished(cluster, meta["namespace"], meta["name"], timeout=timeout)
    cond = conditions(done).get("Failed", {})
    assert cond.get("reason") == "MemoryPlanExceeded", conditions(done)
    return str(cond["message"])


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
    message = refused_by_the_plan(cluster, job, timeout=300)
    assert "huge-partitioner" in message and "the partition step needs ~" in message, message
    assert "2.0 GiB" in message, message
    assert int(get_job(cluster, namespace, "huge")["status"].get("restartCount") or 0) == 0
    log = cluster.logs("huge-partitioner", "dgl-graphsage", namespace)
    assert "[1/5] partition" not in log, log[-2000:]


# Each worker's init container makes the same graph (make_dataset.py is seeded), 200k nodes x
# 1024 features (~390 MiB of node features per partition), of degree 30 (3x the example's
# fan-out, 10: buffer order samples from the buffer's share of a node's neighbours, and at
# degree 10 that cost 3 points of accuracy, outofcore.buffer.MARGIN), small splits so that an
# epoch of batch 64 is short, and chunks it for DistParMETIS (every worker holds the whole
# chunked graph at the same path: layout Shared). The init container has no limit; the main
# container's memory plan, 2 workers of one server and one trainer each, one DistParMETIS
# rank on each: train ~2.1 GiB in memory, ~1.0 GiB out of core with a quarter of the
# features as page cache (the e2e figure prints the plan's numbers).
MAKE_GRAPH = """set -e
python3 code/make_dataset.py --root /data/raw --num-nodes 200000 --feat-dim 1024 \\
  --avg-degree 30 --train-frac 0.05 --val-frac 0.05 --test-frac 0.05 --binary
dgl-chunk-graph ogb --dataset ogbn-synth --root /data/raw --out /data/chunked \\
  --num-chunks 2 --graph-name graphsage
rm -rf /data/raw
"""
OOC_LIMIT = "1792Mi"  # between the two: 1.75 GiB


def ooc_job(
    namespace: str,
    name: str,
    out_of_core: bool,
    order: str = "Exact",
    epochs: int = 1,
    fraction: float = 0.25,
) -> dict[str, Any]:
    job: dict[str, Any] = yaml.safe_load((EXAMPLE / "dgljob-distparmetis.yaml").read_text())
    job["metadata"].update(name=name, namespace=namespace)
    job["spec"]["chunkedGraph"] = {"path": "/data/chunked", "layout": "Shared"}
    args = launcher_args(job)
    args[args.index("--num-epochs") + 1] = str(epochs)
    args[args.index("--batch-size") + 1] = "64"
    # evaluation samples 10 neighbours a hop too: every one, at degree 30, is ~0.2 GiB of
    # input rows a minibatch, and trainer-0 was killed for memory under the limit (the
    # memory plan cannot know the script's evaluation)
    args.extend(["--train-args", "--eval_fan_out 10,10"])
    worker = job["spec"]["dglReplicaSpecs"]["Worker"]["template"]["spec"]
    (init,) = worker["initContainers"]
    init.update(name="make-graph", command=["sh", "-c", MAKE_GRAPH])
    worker_limit(job, OOC_LIMIT)
    worker["containers"][0]["volumeMounts"] = [{"name": "chunks", "mountPath": "/data"}]
    if out_of_core:
        job["spec"]["outOfCore"] = {"enabled": True, "pageCacheFraction": fraction, "order": order}
    return job


BUFFER_SAID = re.compile(
    r"\[buffer-worker-(\d)/trainer-0\] out-of-core: buffer order: 4 epoch\(s\), (\d+) buffer "
    r"states, .* (\d+) of (\d+) input rows outside the buffer"
)


def test_a_worker_limit_below_the_in_memory_need_trains_out_of_core_and_refuses_without(
    cluster: Any, namespace: str
) -> None:
    """The same graph and the same 1.75 GiB Worker limit: without spec.outOfCore the memory plan
    refuses the train step, its message naming the option; with it the job partitions (the
    node features also as .npy), its DGL servers memory-map them, and it trains to Succeeded
    under that limit, with no restart and no process killed for memory; and so does the same
    job in buffer order (spec.outOfCore.order: Buffer), beside it, every trainer's minibatches
    inside the buffer, its accuracy not more than a point under the exact run's."""
    message = refused_by_the_plan(cluster, ooc_job(namespace, "in-memory", out_of_core=False))
    assert "the train step needs ~" in message and "limit of 1.8 GiB" in message, message
    assert "spec.outOfCore.enabled: true" in message, message
    need = re.search(r"the train step needs ~([\d.]+) GiB", message)
    assert need and float(need.group(1)) > 1.75, message

    # Exact order (the in-memory run's losses, tests/examples/test_pipeline.py) and, beside
    # it, buffer order: the same graph under the same limit. Both 4 epochs, the buffer half
    # the features (7 of 16 partitions): with a quarter (3 of 16), after 1 epoch, buffer
    # order's accuracy was 0.44 against 0.79; on this graph at degree 10, after 4 epochs,
    # 0.7761 against 0.8111
    apply(cluster, ooc_job(namespace, "out-of-core", out_of_core=True, epochs=4))
    buffer_job = ooc_job(namespace, "buffer", True, order="Buffer", epochs=4, fraction=0.5)
    apply(cluster, buffer_job)
    done = wait_finished(cluster, namespace, "out-of-core", timeout=900)
    assert succeeded(done), str(conditions(done))
    buffered = wait_finished(cluster, namespace, "buffer", timeout=900)
    assert succeeded(buffered), str(conditions(buffered))
    assert int(buffered["status"].get("restartCount") or 0) == 0, buffered["status"]
    assert int(done["status"].get("restartCount") or 0) == 0, done["status"]
    log = cluster.logs("out-of-core-launcher", "dgl-graphsage", namespace)
    assert "out of core: structure " in log and "page cache 0.25 x " in log, log[-3000:]
    for i in (0, 1):
        mapped = rf"\[out-of-core-worker-{i}/server-0\] out-of-core: part {i}: .*memory-mapped"
        assert re.search(mapped, log), log[-3000:]
    assert "the train step needs" not in log  # (out of core, it fits)
    assert "killed for memory" not in log, log[-3000:]
    memory = done["status"].get("memory") or {}
    train = memory.get("train") or {}
    buffer_log = cluster.logs("buffer-launcher", "dgl-graphsage", namespace)
    said = {int(m[1]): m.groups()[1:] for m in BUFFER_SAID.finditer(buffer_log)}
    assert sorted(said) == [0, 1], buffer_log[-3000:]
    assert all(int(states) > 1 and outside == "0" for states, outside, _ in said.values()), said
    assert "killed for memory" not in buffer_log, buffer_log[-3000:]
    exact, buffer = accuracy(log), accuracy(buffer_log)
    buffer_train = (buffered["status"].get("memory") or {}).get("train") or {}
    figure(
        f"out of core under a {OOC_LIMIT} Worker limit (in memory the plan needs "
        f"~{need.group(1)} GiB): train estimate {train.get('estimateMiB')} MiB, peak "
        f"{train.get('peakMiB')} MiB (buffer order: {buffer_train.get('estimateMiB')}, "
        f"{buffer_train.get('peakMiB')}); test accuracy {exact:.4f}, in buffer order {buffer:.4f} "
        f"(buffer states, rows outside, input rows per trainer: {said})"
    )
    # the pods' measured peak is what they held, under their limit (the servers' and
    # trainers' peaks added up said 2422 MiB under this 1792 MiB limit)
    for figures in (train, buffer_train):
        assert 0 < figures["peakMiB"] <= figures["limitMiB"], figures
    # degree 30 for a fan-out of 10: no trainer warns that the buffer thins its neighbours
    assert "sample from fewer neighbours than in memory" not in buffer_log, buffer_log[-3000:]
    # the goal: not more than a point under; the runs vary (DistParMETIS's parts and
    # DGL's sampling), and buffer order came out above: 0.8552 vs 0.8510, 0.8532 vs 0.8450.
    # At degree 10 it was 3.5 points under (0.7761 vs 0.8111), which this catches
    assert buffer >= exact - 0.01, (buffer, exact)
