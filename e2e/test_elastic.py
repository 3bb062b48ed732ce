"""Elastic DGLJobs (spec.elasticPolicy) on the real cluster, with real training.

The room is an extended resource the test gives the node (``dgl.e2e/slot``), which every pod
of the Worker template (the workers and the partitioner) asks one of: the cluster's size is
then the test's to change. One job goes through every step of issue 29:

* **start small**: 2 slots: the partitioner and worker-0 run, the others wait: after the
  settling window the job trains on 1 worker;
* **grow**: 5 slots: the standby workers run; at the next epoch boundary dglrun stops the
  trainers and the job rescales to 3 workers, resuming from the checkpoint;
* **shrink on preemption**: a higher-priority pod takes 3 slots; the scheduler preempts a
  worker and the job rescales to the workers there is room for, not counted as a restart;
* it ends Succeeded, every finished epoch trained once.

A second job shows **waiting below minReplicas**, saying why; it starts with 2 workers,
and its one standby (in the slot the partitioner left) grows it to 3 once the **probe** pod
finds the next attempt's partitioner a slot of its own.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from e2e.helpers import (
    EXAMPLE,
    accuracy,
    apply,
    claims_namespace,
    conditions,
    epochs_done,
    event_messages,
    figure,
    get_job,
    launcher_args,
    pods,
    succeeded,
    wait_finished,
    wait_job,
)
from localcluster.node import IMAGE_TAG
from tests.support.waiting import wait_for

SLOT = "dgl.e2e/slot"
EPOCHS = 10
HIGH = "e2e-elastic-high"


def kubectl(cluster: Any, *argv: str) -> str:
    """kubectl with argv as is (pytest-kubernetes would pass JSON through a shell)."""
    out = subprocess.run(
        ["kubectl", "--kubeconfig", str(cluster.kubeconfig), *argv],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    return out.stdout


def node_name(cluster: Any) -> str:
    nodes = cluster.kubectl(["get", "nodes"])["items"]
    assert len(nodes) == 1, [n["metadata"]["name"] for n in nodes]
    return str(nodes[0]["metadata"]["name"])


def set_slots(cluster: Any, node: str, count: int | None) -> None:
    """The node's ``dgl.e2e/slot`` capacity (None: removed), as a device plugin would say it."""
    path = SLOT.replace("/", "~1")
    if count is None:
        ops = [{"op": "remove", "path": f"/status/{f}/{path}"} for f in ("capacity", "allocatable")]
    else:
        ops = [{"op": "add", "path": f"/status/{f}/{path}", "value": str(count)}
               for f in ("capacity", "allocatable")]  # fmt: skip
    kubectl(cluster, "patch", "node", node, "--subresource=status", "--type=json",
            "-p", json.dumps(ops))  # fmt: skip


@pytest.fixture(scope="module")
def node(cluster: Any, operator: str) -> Iterator[str]:
    name = node_name(cluster)
    yield name
    set_slots(cluster, name, None)


@pytest.fixture
def ns(cluster: Any, operator: str, kubeconfig: Any) -> Iterator[str]:
    yield from claims_namespace(cluster, kubeconfig, "e2e-el")


def elastic_job(ns: str, name: str, **policy: Any) -> dict[str, Any]:
    job: dict[str, Any] = yaml.safe_load((EXAMPLE / "dgljob-elastic.yaml").read_text())
    job["metadata"].update(name=name, namespace=ns)
    job["spec"]["elasticPolicy"].update(policy)
    args = launcher_args(job)
    args[args.index("--num-epochs") + 1] = str(EPOCHS)
    args[args.index("--batch-size") + 1] = "64"  # the global batch: a few seconds an epoch
    template = job["spec"]["dglReplicaSpecs"]["Worker"]["template"]["spec"]
    template["containers"][0]["resources"] = {"requests": {SLOT: "1"}, "limits": {SLOT: "1"}}
    template["terminationGracePeriodSeconds"] = 2  # (sleep as PID 1 ignores SIGTERM)
    return job


def elastic_status(job: dict[str, Any]) -> dict[str, Any]:
    st: dict[str, Any] = (job.get("status") or {}).get("elastic") or {}
    return st


def hog(ns: str, slots: int) -> dict[str, Any]:
    """A pod of a higher priority that wants ``slots`` slots."""
    want = {SLOT: str(slots)}
    container = {"name": "c", "image": f"dgloperator/pause:{IMAGE_TAG}",
                 "resources": {"requests": want, "limits": want}}  # fmt: skip
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "hog", "namespace": ns},
        "spec": {"priorityClassName": HIGH, "containers": [container]},
    }


@pytest.fixture
def high_priority(cluster: Any) -> Iterator[str]:
    pc = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
          "metadata": {"name": HIGH}, "value": 1000000}  # fmt: skip
    apply(cluster, pc)
    yield HIGH
    kubectl(cluster, "delete", "priorityclass", HIGH, "--ignore-not-found")


def test_it_starts_small_grows_and_shrinks_on_preemption_without_a_restart(
    cluster: Any, ns: str, node: str, high_priority: str
) -> None:
    set_slots(cluster, node, 2)  # the partitioner and one worker
    apply(cluster, elastic_job(ns, "el", settleSeconds=5, cooldownSeconds=3))
    name = "el"

    # start small: one worker, after the settling window
    job = wait_job(cluster, ns, name, lambda j: epochs_done(j) >= 1, 600, "1 epoch on 1 worker")
    st = elastic_status(job)
    # (whichever worker the scheduler placed: any of the three)
    assert len(st["members"]) == 1 and st["scale"] == "1/3", st
    launcher = cluster.logs(f"{name}-launcher", "dgl-graphsage", ns)
    assert "elastic: this attempt has 1 workers (partitions); global batch 64" in launcher

    # grow: room for the standbys; the job stops at the next checkpoint and comes back with 3
    set_slots(cluster, node, 5)
    job = wait_job(
        cluster, ns, name, lambda j: elastic_status(j).get("rescales", 0) >= 1, 300, "the grow"
    )
    assert elastic_status(job)["lastRescale"]["reason"] == "Grew", elastic_status(job)
    grew = event_messages(cluster, ns, "DGLJobRescaled")
    assert grew and "stopped at the epoch boundary after epoch" in grew[0], grew
    job = wait_job(
        cluster, ns, name,
        lambda j: elastic_status(j).get("workers") == 3 and epochs_done(j) >= 1, 600,
        "training on 3 workers",
    )  # fmt: skip
    resumed = job["status"]["resume"]["epoch"]
    assert resumed >= 1, job["status"].get("resume")
    launcher = cluster.logs(f"{name}-launcher", "dgl-graphsage", ns)
    assert "elastic: this attempt has 3 workers (partitions); global batch 64 = 21" in launcher
    assert f"resuming at epoch {resumed} of {EPOCHS}" in launcher

    # shrink: a higher-priority pod takes 3 of the 5 slots; one worker is preempted
    apply(cluster, hog(ns, 3))
    job = wait_job(
        cluster, ns, name, lambda j: elastic_status(j).get("rescales", 0) >= 2, 300, "the shrink"
    )
    last = elastic_status(job)["lastRescale"]
    assert last["reason"] == "Preempted" and last["from"] == 3, last
    done = wait_finished(cluster, ns, name, timeout=900)
    assert succeeded(done), conditions(done)
    st = done["status"]
    assert st["restartCount"] == 0, "rescales are not restarts"
    assert st["elastic"]["rescales"] == 2 and st["elastic"]["workers"] == 1, st["elastic"]
    assert st["partitions"]["reused"] is True, "1 partition was made in the first attempt"
    acc = accuracy(cluster.logs(f"{name}-launcher", "dgl-graphsage", ns))
    assert acc > 0.8, acc
    figure(
        f"elastic: 1 -> 3 workers (grew at epoch {resumed}) -> 1 (preempted), "
        f"{st['elastic']['rescaleSeconds']:.0f}s rescaling in all, no restart; "
        f"test accuracy {acc:.4f}"
    )


def test_below_min_replicas_it_waits_saying_why_then_one_standby_grows_it(
    cluster: Any, ns: str, node: str
) -> None:
    set_slots(cluster, node, 2)  # the partitioner and one worker: minReplicas 2 cannot run
    job = elastic_job(ns, "few", minReplicas=2, settleSeconds=2, cooldownSeconds=3)
    args = launcher_args(job)
    args[args.index("--num-epochs") + 1] = str(2 * EPOCHS)  # (time for the grow below)
    apply(cluster, job)

    def waiting(j: dict[str, Any]) -> bool:
        # (first BelowMinReplicas: no worker pod yet, they wait for the partitioner's node;
        # then the scheduler's reason once a worker pod is found unschedulable)
        ready = conditions(j).get("PodsReady", {})
        return (
            ready.get("status") == "False"
            and ready.get("reason") == "Unschedulable"
            and "of minReplicas 2" in ready.get("message", "")
        )

    job = wait_job(cluster, ns, "few", waiting, 300, "PodsReady False below minReplicas")
    ready = conditions(job)["PodsReady"]
    assert ready["reason"] == "Unschedulable", ready
    assert f"Insufficient {SLOT}" in ready["message"], ready
    assert "few-launcher" not in {
        p["metadata"]["name"] for p in cluster.kubectl(["get", "pods", "-n", ns])["items"]
    }
    set_slots(cluster, node, 3)  # room for a second worker: the job starts with 2
    job = wait_job(
        cluster, ns, "few", lambda j: elastic_status(j).get("workers") == 2, 300, "2 workers"
    )
    assert get_job(cluster, ns, "few")["status"].get("restartCount", 0) == 0

    # The partitioner ends once it delivered: its slot goes to the third worker (a standby).
    # That room alone is the next partitioner's: the probe looks for one more slot, pending.
    probe = wait_for(
        lambda: pods(cluster, ns).get("few-probe"), what="the probe", timeout=300, interval=1.0
    )
    assert probe["spec"]["containers"][0]["command"] == ["sleep", "infinity"]
    assert "growTo" not in elastic_status(get_job(cluster, ns, "few"))
    set_slots(cluster, node, 4)  # the probe is placed: the job grows to 3
    job = wait_job(
        cluster, ns, "few", lambda j: elastic_status(j).get("workers") == 3, 600, "3 workers"
    )
    assert elastic_status(job)["lastRescale"]["reason"] == "Grew", elastic_status(job)
    assert "few-probe" not in pods(cluster, ns), "the probe went with its attempt"
