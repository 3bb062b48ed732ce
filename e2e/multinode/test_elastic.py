"""An elastic DistParMETIS job on the 3-node cluster (issue 43): a node powered off mid-training
shrinks it to the 2 workers left, and powered on again grows it back to 3; the graph is
partitioned once, by the first attempt, for both counts.

The job: examples/graphsage/dgljob-elastic-distparmetis.yaml, with its chunks ``PerWorker``
(each worker's init container copies its own slice of the image's chunked graph),
``elasticPolicy`` min 2, max 3, and a ReadWriteMany claim (the partition cache and the
checkpoints). Marked: it powers a node
off (conftest.py runs such tests last).

The job goes through Kueue (issue 43, item 6): its LocalQueue's ClusterQueue admits it whole,
and the shrink and the grow happen inside that one admission. Its one Workload is never
evicted (Kueue's recovery timeout, 3 min here, runs while the job reports PodsReady False
``WaitForRecovery``), and reads ``PodsReady`` True ``Recovered`` once the 2 workers left train.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import yaml

from controller.features import kueue as kq
from e2e.helpers import (
    EXAMPLE,
    accuracy,
    apply,
    claims_namespace,
    conditions,
    epochs_done,
    event_messages,
    figure,
    launcher_args,
    pods,
    single_process_accuracy,
    succeeded,
    wait_finished,
    wait_job,
)
from tests.support.kueue import FLAVOR, cluster_queue, local_queue
from tests.support.waiting import wait_for

NAME = "elastic-dist"
WORKERS = 3
EPOCHS = 30  # (the example's 8 end before a node is seen lost and back: ~3 s an epoch here)
GLOBAL_BATCH = 384  # (the example's: each of the 3 trainers takes 128)


@pytest.fixture
def ns(cluster: Any, operator: str, kubeconfig: Any) -> Iterator[str]:
    """A namespace (its static volumes ready) with the LocalQueue ``lq`` of a ClusterQueue that
    fits the job (gone after the test)."""
    for name in claims_namespace(cluster, kubeconfig, "e2e-mel"):
        apply(cluster, {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
                        "metadata": {"name": FLAVOR}, "spec": {}})  # fmt: skip
        apply(cluster, cluster_queue(f"cq-{name}", "8"))
        apply(cluster, local_queue("lq", name, f"cq-{name}"))
        yield name
        cluster.kubectl(["delete", "clusterqueue", f"cq-{name}", "--wait=false"], as_dict=False)


def workload(cluster: Any, ns: str) -> dict[str, Any]:
    """The job's one Workload."""
    items = cluster.kubectl(["get", "workloads.kueue.x-k8s.io", "-n", ns])["items"]
    owned = [
        wl
        for wl in items
        if any(o.get("name") == NAME for o in wl["metadata"].get("ownerReferences") or [])
    ]
    assert len(owned) == 1, [wl["metadata"]["name"] for wl in owned]
    return dict(owned[0])


def elastic_dist_job(ns: str) -> dict[str, Any]:
    """examples/graphsage/dgljob-elastic-distparmetis.yaml, with more epochs."""
    job: dict[str, Any] = yaml.safe_load((EXAMPLE / "dgljob-elastic-distparmetis.yaml").read_text())
    job["metadata"].update(name=NAME, namespace=ns)
    job["metadata"].setdefault("labels", {})[kq.QUEUE_LABEL] = "lq"
    args = launcher_args(job)
    args[args.index("--num-epochs") + 1] = str(EPOCHS)
    assert args[args.index("--batch-size") + 1] == str(GLOBAL_BATCH)
    return job


def elastic(job: dict[str, Any]) -> dict[str, Any]:
    st: dict[str, Any] = (job.get("status") or {}).get("elastic") or {}
    return st


def node_of(pod: dict[str, Any]) -> str:
    return str(pod["spec"].get("nodeName") or "")


@pytest.mark.powers_off_a_node
def test_a_lost_node_shrinks_an_elastic_job_and_its_return_grows_it_without_partitioning(
    cluster: Any,
    ns: str,
    stop_node: Callable[[str], None],
    start_node: Callable[[str], None],
    operator_node: str,
) -> None:
    apply(cluster, elastic_dist_job(ns))
    job = wait_job(cluster, ns, NAME, lambda j: epochs_done(j) >= 2, 900, "2 epochs on 3 workers")
    assert len(elastic(job)["members"]) == WORKERS, elastic(job)
    first = (job.get("status") or {}).get("partitions") or {}
    assert first.get("reused") is False, first  # (the first attempt partitioned)
    admitted = workload(cluster, ns)
    assert kq.state(admitted).admitted, kq.state(admitted)
    queued = conditions(job)["Queued"]
    assert queued["status"] == "False", queued  # (admitted: training)
    now = pods(cluster, ns)
    placed = {n: node_of(p) for n, p in now.items() if "-worker-" in n}
    spared = {operator_node, node_of(now[f"{NAME}-launcher"])}  # (a member's node alone)
    victim = next(n for n in sorted(set(placed.values()), reverse=True) if n not in spared)
    lost_worker = next(w for w, n in placed.items() if n == victim)
    powered_off = time.monotonic()
    stop_node(victim)
    try:
        job = wait_job(
            cluster, ns, NAME,
            lambda j: elastic(j).get("rescales", 0) >= 1 and epochs_done(j) >= 1
            and len(elastic(j).get("members") or []) == WORKERS - 1,
            600, "training again on the 2 workers left",
        )  # fmt: skip
        shrink = elastic(job)["lastRescale"]
        assert shrink["reason"] == "NodeLost" and shrink["from"] == WORKERS, shrink
        training_again = time.monotonic()
        shrink_cost = float(elastic(job).get("rescaleSeconds") or 0)
        assert (job.get("status") or {}).get("partitions", {}).get("reused") is True
        assert job["status"].get("restartCount", 0) == 0  # (a rescale, not a restart)
        # inside its one admission: the Workload's PodsReady back to True in Kueue's recovery
        # terms (Recovered follows the WaitForRecovery written while the job rescaled)
        recovered = wait_for(
            lambda: (
                kq.condition(workload(cluster, ns), kq.PODS_READY).get("reason")
                == kq.WORKLOAD_RECOVERED
            ),
            timeout=60,
            interval=1.0,
            what="the Workload's PodsReady True Recovered",
        )
        assert recovered
        figure(
            f"elastic DistParMETIS: node {victim} ({lost_worker}) powered off: training again "
            f"on 2 workers {training_again - powered_off:.0f}s later (the shrink: "
            f"{shrink_cost:.0f}s from the loss seen to training), no partitioning"
        )
    finally:
        powered_on = time.monotonic()
        start_node(victim)
    job = wait_job(
        cluster, ns, NAME,
        lambda j: elastic(j).get("rescales", 0) >= 2
        and len(elastic(j).get("members") or []) == WORKERS and epochs_done(j) >= 1,
        900, "grown back to 3 workers",
    )  # fmt: skip
    grow = elastic(job)["lastRescale"]
    assert grow["reason"] == "Grew" and grow["from"] == WORKERS - 1, grow
    grow_cost = float(elastic(job).get("rescaleSeconds") or 0) - shrink_cost
    figure(
        f"elastic DistParMETIS: node {victim} powered on: training on 3 workers again "
        f"{time.monotonic() - powered_on:.0f}s later (the grow: {grow_cost:.0f}s from the "
        "epoch boundary to training), no partitioning"
    )
    done = wait_finished(cluster, ns, NAME, timeout=900)
    assert succeeded(done), conditions(done)
    assert done["status"].get("restartCount", 0) == 0
    # one admission throughout: the same Workload, never evicted, the job never queued again
    wl = workload(cluster, ns)
    assert wl["metadata"]["uid"] == admitted["metadata"]["uid"], wl["metadata"]
    assert kq.condition(wl, kq.EVICTED).get("status") != "True", kq.condition(wl, kq.EVICTED)
    assert kq.state(wl).finished, kq.state(wl)
    assert conditions(done)["Queued"] == queued, conditions(done)["Queued"]
    # the graph was partitioned once: every later attempt (2 workers, then 3) placed the
    # partitions the first one cached for its count, without reading a chunk
    reused = event_messages(cluster, ns, "PartitionsReused")
    for count in (WORKERS - 1, WORKERS):
        assert any(f"this run's {count} partitions" in m for m in reused), reused
    assert len(reused) == 2, reused
    acc = accuracy(cluster.logs(f"{NAME}-launcher", "dgl-graphsage", ns))
    base = single_process_accuracy(GLOBAL_BATCH, EPOCHS)
    figure(
        f"elastic DistParMETIS: 3 -> 2 (NodeLost) -> 3 workers, partitioned once; test "
        f"accuracy {acc:.4f} (single process {base:.4f})"
    )
    assert abs(acc - base) <= 0.02, f"{acc:.4f} vs {base:.4f}"
