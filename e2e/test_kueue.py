"""DGLJobs under Kueue on the real cluster: Kueue's manager runs beside it (e2e/conftest.py) and
the operator has ``kueue=true``. Each job's pods ask for a little CPU, so that a ClusterQueue's
quota decides how many jobs run; the jobs train for real.

1. A ClusterQueue that fits one job: three jobs submitted at once run one after the other,
   never two admitted, all Succeed, their Workloads admitted in order; a job without the queue
   label, submitted with them, runs at once (Kueue leaves it alone).
2. A high-priority job preempts a running low-priority one: the low job's pods are gone within
   seconds; it is admitted again once the high one finished, resumes from its checkpoint with
   its partitions reused, and Succeeds.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
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
    example_job,
    figure,
    get_job,
    launcher_args,
    pods,
    succeeded,
    wait_finished,
    wait_job,
)
from tests.support.kueue import FLAVOR, cluster_queue, local_queue
from tests.support.waiting import wait_for

CPU = "100m"  # each pod's request: the quotas below count them
EPOCHS = 4


def ask_cpu(job: dict[str, Any]) -> dict[str, Any]:
    for replica in job["spec"]["dglReplicaSpecs"].values():
        main = replica["template"]["spec"]["containers"][0]
        main.setdefault("resources", {}).setdefault("requests", {})["cpu"] = CPU
    return job


def queued(job: dict[str, Any], priority: str = "") -> dict[str, Any]:
    job["metadata"].setdefault("labels", {})[kq.QUEUE_LABEL] = "lq"
    if priority:
        job["spec"].setdefault("runPolicy", {})["schedulingPolicy"] = {"priorityClass": priority}
    return ask_cpu(job)


def skip_job(ns: str, name: str) -> dict[str, Any]:
    """The example's launcher alone (partitionMode Skip): one pod, one epoch."""
    job = example_job(ns, name)
    spec = job["spec"]
    spec["partitionMode"] = "Skip"
    del spec["dglReplicaSpecs"]["Worker"]
    train = ["--train-entry-point", "code/train_single.py", "--num-epochs", "1"]
    launcher_args(job)[:] = ["--graph-name", "graphsage", *train, "--batch-size", "256"]
    return job


def storage_job(ns: str, name: str) -> dict[str, Any]:
    job: dict[str, Any] = yaml.safe_load((EXAMPLE / "dgljob-storage.yaml").read_text())
    job["metadata"].update(name=name, namespace=ns)
    job["spec"]["runPolicy"] = {"backoffLimit": 0}
    args = launcher_args(job)
    args[args.index("--num-epochs") + 1] = str(EPOCHS)
    args[args.index("--batch-size") + 1] = "32"  # (a few seconds an epoch)
    return job


def queues(cluster: Any, ns: str, cpu: str, *, preemption: bool = False) -> str:
    """ClusterQueue ``cq-<ns>`` of ``cpu`` on the flavor ``default-flavor`` (any node), and
    LocalQueue ``lq`` in ``ns``."""
    name = f"cq-{ns}"
    apply(cluster, {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
                    "metadata": {"name": FLAVOR}, "spec": {}})  # fmt: skip
    apply(cluster, cluster_queue(name, cpu, preemption=preemption))
    apply(cluster, local_queue("lq", ns, name))
    return name


@pytest.fixture
def kns(cluster: Any, operator: str, kubeconfig: Any) -> Iterator[str]:
    """A namespace (its static volumes ready) and, after the test, its ClusterQueue gone."""
    for ns in claims_namespace(cluster, kubeconfig, "e2e-kq"):
        yield ns
        cluster.kubectl(["delete", "clusterqueue", f"cq-{ns}", "--wait=false"], as_dict=False)


def workloads(cluster: Any, ns: str) -> dict[str, dict[str, Any]]:
    """The namespace's Workloads, by the DGLJob that owns them."""
    items = cluster.kubectl(["get", "workloads.kueue.x-k8s.io", "-n", ns])["items"]
    return {
        o["name"]: wl
        for wl in items
        for o in wl["metadata"].get("ownerReferences") or []
        if o["kind"] == "DGLJob"
    }


def admitted_now(cluster: Any, ns: str) -> list[str]:
    """The jobs holding quota: admitted and not finished (a Finished Workload stays Admitted)."""
    states = {n: kq.state(wl) for n, wl in workloads(cluster, ns).items()}
    return sorted(n for n, st in states.items() if st.admitted and not st.finished)


def admitted_at(wl: dict[str, Any]) -> str:
    return str(kq.condition(wl, "Admitted").get("lastTransitionTime", ""))


def test_one_job_at_a_time_within_the_quota(cluster: Any, kns: str) -> None:
    queues(cluster, kns, CPU)  # one launcher at a time
    names = ["one", "two", "three"]
    for name in names:
        apply(cluster, queued(skip_job(kns, name)))
    apply(cluster, ask_cpu(skip_job(kns, "unqueued")))
    most = 0
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        now = admitted_now(cluster, kns)
        most = max(most, len(now))
        if all(succeeded(get_job(cluster, kns, n)) for n in names):
            break
        time.sleep(1.0)
    assert most == 1, f"{most} jobs admitted at once on a quota of one"
    for name in names:
        assert succeeded(get_job(cluster, kns, name)), conditions(get_job(cluster, kns, name))
    free = wait_finished(cluster, kns, "unqueued")
    assert succeeded(free), conditions(free)
    wls = workloads(cluster, kns)
    assert "unqueued" not in wls, "a job without the queue label got a Workload"
    order = sorted(names, key=lambda n: admitted_at(wls[n]))
    assert all(kq.condition(wls[n], "Finished").get("reason") == "Succeeded" for n in names)
    figure(f"Kueue: 3 jobs on a quota of one ran in the order {order}, never more than 1 admitted")


def test_a_high_priority_job_preempts_and_the_low_one_resumes_from_its_checkpoint(
    cluster: Any, kns: str
) -> None:
    quota = f"{4 * int(CPU.removesuffix('m'))}m"  # the low job's 4 pods
    queues(cluster, kns, quota, preemption=True)
    for name, value in (("e2e-low", 10), ("e2e-high", 1000)):
        apply(cluster, {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                        "metadata": {"name": name}, "value": value})  # fmt: skip
    apply(cluster, queued(storage_job(kns, "low"), priority="e2e-low"))
    wait_job(cluster, kns, "low", lambda j: epochs_done(j) >= 2, 900, "low: 2 epochs trained")
    before = {p["metadata"]["uid"] for n, p in pods(cluster, kns).items() if n.startswith("low-")}
    apply(cluster, queued(skip_job(kns, "high"), priority="e2e-high"))
    came = time.monotonic()
    wait_job(cluster, kns, "low", lambda j: conditions(j).get("Queued", {}).get("reason")
             == "EvictedPreempted", 120, "low evicted")  # fmt: skip
    # every pod the low job ran is deleted (new ones may come soon: the high job is short)
    wait_for(lambda: not before & {p["metadata"]["uid"] for p in pods(cluster, kns).values()},
             what="low's pods gone", timeout=120)  # fmt: skip
    gone = time.monotonic() - came
    high = wait_finished(cluster, kns, "high")
    assert succeeded(high), conditions(high)
    done = wait_finished(cluster, kns, "low", timeout=900)
    assert succeeded(done), conditions(done)
    st = done["status"]
    resumed = st["resume"]["epoch"]
    assert 2 <= resumed < EPOCHS, st["resume"]
    assert st["partitions"]["reused"] is True, st["partitions"]
    assert st.get("restartCount", 0) == 0, "an eviction is no failure"
    log = cluster.logs("low-launcher", "dgl-graphsage", kns)
    assert f"resuming at epoch {resumed} of {EPOCHS}" in log, log[-3000:]
    wl = workloads(cluster, kns)["low"]
    assert kq.condition(wl, "Finished").get("reason") == "Succeeded"
    figure(
        f"Kueue preemption: the low job's pods were gone {gone:.1f}s after the high job came; "
        f"readmitted, it resumed at epoch {resumed} of {EPOCHS} with its partitions reused; "
        f"test accuracy {accuracy(log):.4f}"
    )
