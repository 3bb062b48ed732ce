"""DGLJobs on the 3-node cluster (real kubelets, kube-scheduler and the Coscheduling scheduler):
placement, gang scheduling, why a job waits, and a node that dies under a running job.

The last test powers a node off, then on again (marked, and run after every other
test of the session: conftest.py).
Each node offers 1 CPU and 6Gi to pods (localcluster.node's multi-node default).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from typing import Any

import pytest

from e2e.helpers import (
    JOB,
    accuracy,
    apply,
    conditions,
    example_job,
    figure,
    get_job,
    launcher_args,
    pods,
    single_process_accuracy,
    succeeded,
    wait_epochs,
    wait_finished,
)
from localcluster.node import IMAGE_TAG
from tests.support.waiting import wait_for

GANG = {"gangScheduling": "scheduler-plugins"}
PAUSE = f"docker.io/dgloperator/pause:{IMAGE_TAG}"
# an image reference whose registry refuses at once, on loopback: nothing leaves the machine
MISSING_IMAGE = "127.0.0.1:5999/dgloperator/does-not-exist:v0.1.0"


def job_with_workers(namespace: str, name: str, workers: int, epochs: int = 2) -> dict[str, Any]:
    job = example_job(namespace, name)
    job["spec"]["dglReplicaSpecs"]["Worker"]["replicas"] = workers
    args = launcher_args(job)
    args[args.index("--num-partitions") + 1] = str(workers)
    args[args.index("--num-epochs") + 1] = str(epochs)
    return job


def worker_template(job: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = job["spec"]["dglReplicaSpecs"]["Worker"]["template"]["spec"]
    return spec


def job_pods(cluster: Any, ns: str, name: str) -> dict[str, dict[str, Any]]:
    return {
        n: p
        for n, p in pods(cluster, ns).items()
        if n.startswith(f"{name}-") and not p["metadata"].get("deletionTimestamp")
    }


def workers_of(cluster: Any, ns: str, name: str) -> dict[str, dict[str, Any]]:
    return {n: p for n, p in job_pods(cluster, ns, name).items() if "-worker-" in n}


def node_of(pod: dict[str, Any]) -> str:
    return str(pod["spec"].get("nodeName") or "")


def events(cluster: Any, ns: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = cluster.kubectl(["get", "events", "-n", ns])["items"]
    return items


def condition(cluster: Any, ns: str, name: str, ctype: str) -> dict[str, Any] | None:
    return conditions(get_job(cluster, ns, name)).get(ctype)


def test_three_workers_land_one_per_node_and_train(cluster: Any, namespace: str) -> None:
    apply(cluster, job_with_workers(namespace, JOB, 3))
    placed = wait_for(
        lambda: (
            {n: node_of(p) for n, p in w.items()}
            if len(w := workers_of(cluster, namespace, JOB)) == 3
            and all(node_of(p) for p in w.values())
            else None
        ),
        what="3 workers to be scheduled",
        timeout=120,
        interval=1.0,
    )
    assert len(set(placed.values())) == 3, f"workers not spread one per node: {placed}"
    job = wait_finished(cluster, namespace)
    assert succeeded(job), conditions(job)
    acc = accuracy(cluster.logs(f"{JOB}-launcher", "dgl-graphsage", namespace))
    baseline = single_process_accuracy(3 * 128)
    figure(f"3 nodes, 3 workers ({placed}): accuracy {acc:.4f}, baseline {baseline:.4f}")
    assert abs(acc - baseline) <= 0.02, f"3-node {acc:.4f} vs single-process {baseline:.4f}"


def big_job(namespace: str, name: str) -> dict[str, Any]:
    """4 workers of 400m: 1.6 of the cluster's 3 CPUs (two such jobs do not fit together;
    each node holds 2 of these workers, the cluster 6)."""
    job = job_with_workers(namespace, name, 4, epochs=1)
    worker_template(job)["containers"][0]["resources"] = {"requests": {"cpu": "400m"}}
    return job


Placement = dict[str, tuple[int, int]]
"""Each job's (bound, unbound) workers at one moment."""


def placement(cluster: Any, ns: str, name: str) -> tuple[int, int]:
    """(bound, unbound) workers of a job."""
    w = workers_of(cluster, ns, name)
    bound = sum(1 for p in w.values() if node_of(p))
    return bound, len(w) - bound


def watch_placement(
    cluster: Any,
    ns: str,
    names: list[str],
    until: Callable[[], bool],
    timeout: float,
    count: int = 0,
) -> list[Placement]:
    """Samples of each job's (bound, unbound) workers, a second apart, until ``until()`` (within
    ``timeout`` seconds) or, with ``count``, until there are that many."""
    samples: list[Placement] = []
    deadline = time.monotonic() + timeout
    while True:
        samples.append({n: placement(cluster, ns, n) for n in names})
        if until() or len(samples) == count:
            return samples
        if not count and time.monotonic() > deadline:
            raise AssertionError(f"{names}: not done in {timeout} s; last samples {samples[-3:]}")
        time.sleep(1.0)


def partial(s: tuple[int, int]) -> bool:
    return s[0] > 0 and s[1] > 0


def held_partials(samples: list[Placement]) -> list[tuple[str, list[Placement]]]:
    """Jobs placed partially in two samples in a row (a second apart), with the two samples.

    One sample alone can land mid-binding: coscheduling permits a whole gang at once, but the
    scheduler binds its pods one by one, so a list of the pods may show one bound and three not
    for a few milliseconds (ci19 saw gang-b at (1, 3) once). A job that holds nodes it cannot
    use holds them for as long as it waits, so it shows in the next sample too."""
    return [
        (name, [before, after])
        for before, after in itertools.pairwise(samples)
        for name in before
        if partial(before[name]) and partial(after[name])
    ]


def test_a_placement_is_partial_when_it_holds_not_when_a_sample_lands_mid_binding() -> None:
    mid_binding = [
        {"a": (0, 3), "b": (0, 4)},
        {"a": (0, 3), "b": (1, 3)},
        {"a": (0, 4), "b": (4, 0)},
    ]
    assert held_partials(mid_binding) == []
    held = [{"a": (0, 4), "b": (2, 2)}, {"a": (0, 4), "b": (2, 2)}]
    assert held_partials(held) == [("b", held)]


def test_two_big_jobs_without_gang_scheduling_place_partially(cluster: Any, namespace: str) -> None:
    """The default scheduler places pods one by one: 8 workers for 6 slots leave at least one
    job holding nodes it cannot use (both, when the slots split 3 + 3: a deadlock)."""
    for name in ("big-a", "big-b"):
        apply(cluster, big_job(namespace, name))
    wait_for(
        lambda: sum(placement(cluster, namespace, n)[0] for n in ("big-a", "big-b")) == 6,
        what="6 of the 8 workers to be bound (all the cluster's 400m slots)",
        timeout=180,
        interval=1.0,
    )
    # three samples a second apart: the gang test's check (held_partials) catches this
    samples = watch_placement(cluster, namespace, ["big-a", "big-b"], lambda: False, 0, count=3)
    last = samples[-1]
    figure(f"without gang scheduling: workers (bound, unbound) per job: {last}")
    assert any(partial(s) for s in last.values()), last
    assert held_partials(samples), samples
    if all(partial(s) for s in last.values()):
        figure("without gang scheduling: both jobs partially placed, neither can start")
    for name in ("big-a", "big-b"):
        cluster.kubectl(["delete", "dgljob", name, "-n", namespace, "--wait=true"], as_dict=False)


def test_gang_scheduling_runs_one_job_then_the_other(
    cluster: Any, namespace: str, install: Callable[[dict[str, str]], None]
) -> None:
    install(GANG)
    try:
        for name in ("gang-a", "gang-b"):
            apply(cluster, big_job(namespace, name))
        names = ["gang-a", "gang-b"]

        def one_finished() -> bool:
            return any(
                (conditions(get_job(cluster, namespace, n)).get("Succeeded") or {}).get("status")
                == "True"
                for n in names
            )

        samples = watch_placement(cluster, namespace, names, one_finished, 600)
        # never a job holding part of what it needs
        partials = held_partials(samples)
        assert not partials, f"gang scheduling placed a job partially: {partials[:3]}"
        # one ran with all 4 workers while the other had none bound
        assert any(sorted(s.values()) == [(0, 4), (4, 0)] for s in samples), samples[-5:]
        group = cluster.kubectl(["get", "podgroups.scheduling.x-k8s.io", "gang-a", "-n", namespace])
        assert group["spec"]["minMember"] >= 4, group["spec"]
        for name in names:
            job = wait_finished(cluster, namespace, name, timeout=600)
            assert succeeded(job), (name, conditions(job))
        figure(f"gang scheduling: {len(samples)} samples, never a partial placement")
    finally:
        install({})


def waits_with(
    cluster: Any, ns: str, name: str, reasons: tuple[str, ...], text: str, applied: float
) -> float:
    """Seconds from ``applied`` (time.monotonic()) until the job says why it waits (condition
    PodsReady False and a Warning event, with the cause): at most 30."""

    def told() -> dict[str, Any] | None:
        cond = condition(cluster, ns, name, "PodsReady")
        if cond and cond["status"] == "False" and cond["reason"] in reasons:
            return cond
        return None

    cond = wait_for(
        told,
        what=f"DGLJob {name} to say why it waits ({reasons})",
        timeout=applied + 30 - time.monotonic(),
        interval=1.0,
    )
    took = time.monotonic() - applied
    assert text in cond["message"], cond
    seen = [
        e
        for e in events(cluster, ns)
        if e["involvedObject"].get("name") == name and e["reason"] in reasons
    ]
    assert seen and all(e["type"] == "Warning" for e in seen), seen
    return took


def test_jobs_that_cannot_start_say_why_and_fail_after_their_bound(
    cluster: Any, namespace: str
) -> None:
    too_big = job_with_workers(namespace, "too-big", 2)
    worker_template(too_big)["containers"][0]["resources"] = {"requests": {"memory": "20Gi"}}
    no_image = job_with_workers(namespace, "no-image", 2)
    worker_template(no_image)["containers"][0]["image"] = MISSING_IMAGE
    applied = {}
    for job in (too_big, no_image):
        job["spec"]["runPolicy"] = {"schedulingPolicy": {"scheduleTimeoutSeconds": 45}}
        apply(cluster, job)
        applied[job["metadata"]["name"]] = time.monotonic()
    took = waits_with(
        cluster, namespace, "too-big", ("Unschedulable",), "Insufficient memory", applied["too-big"]
    )
    figure(f"a 20Gi worker: Unschedulable on the DGLJob {took:.0f}s after apply")
    took = waits_with(
        cluster,
        namespace,
        "no-image",
        ("ErrImagePull", "ImagePullBackOff"),
        MISSING_IMAGE,
        applied["no-image"],
    )
    figure(f"a missing image: image pull error on the DGLJob {took:.0f}s after apply")
    for name, reasons in (
        ("too-big", ("Unschedulable",)),
        ("no-image", ("ErrImagePull", "ImagePullBackOff")),
    ):
        job = wait_finished(cluster, namespace, name, timeout=180)
        failed = conditions(job).get("Failed") or {}
        assert failed.get("status") == "True" and failed.get("reason") in reasons, conditions(job)
        assert "scheduleTimeoutSeconds" in failed.get("message", ""), failed
        wait_for(
            lambda n=name: not job_pods(cluster, namespace, n),
            what=f"{name}'s pods to be deleted",
            timeout=120,
            interval=1.0,
        )


@pytest.mark.powers_off_a_node
def test_a_node_dies_mid_training_and_the_job_restarts_on_the_others(
    cluster: Any,
    namespace: str,
    stop_node: Callable[[str], None],
    start_node: Callable[[str], None],
    operator_node: str,
) -> None:
    job = job_with_workers(namespace, JOB, 3, epochs=6)
    job["spec"]["runPolicy"] = {"backoffLimit": 2}
    apply(cluster, job)
    wait_epochs(cluster, namespace, JOB, timeout=300)  # the trainers are under way
    placed = {n: node_of(p) for n, p in workers_of(cluster, namespace, JOB).items()}
    victim = next(n for n in sorted(placed.values(), reverse=True) if n != operator_node)
    stopped = time.monotonic()
    stop_node(victim)
    restarted = wait_for(
        lambda: (
            int((get_job(cluster, namespace).get("status") or {}).get("restartCount") or 0) >= 1
        ),
        what="the job to restart",
        timeout=180,
        interval=1.0,
    )
    assert restarted
    to_restart = time.monotonic() - stopped
    lost = wait_for(
        lambda: [
            e
            for e in events(cluster, namespace)
            if e["reason"] == "NodeLost" and victim in e.get("message", "")
        ],
        what=f"a NodeLost event naming {victim}",
        timeout=120,
        interval=1.0,
    )
    to_lost = time.monotonic() - stopped
    figure(
        f"node {victim} powered off mid-training: restart after {to_restart:.0f}s, "
        f"NodeLost after {to_lost:.0f}s ({lost[0]['message']})"
    )
    done = wait_finished(cluster, namespace, timeout=900)
    assert succeeded(done), conditions(done)
    assert done["status"]["restartCount"] >= 1
    left = {n: node_of(p) for n, p in pods(cluster, namespace).items()}
    assert victim not in left.values(), f"pods still bound to the dead node: {left}"
    # powered on again (localcluster start-node, as make demo-large does): Ready, and it runs
    # a pod again
    powered = time.monotonic()
    start_node(victim)
    probe = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "back-again", "namespace": namespace},
        "spec": {"nodeName": victim, "containers": [{"name": "pause", "image": PAUSE}]},
    }
    apply(cluster, probe)
    wait_for(
        lambda: pods(cluster, namespace)["back-again"]["status"].get("phase") == "Running",
        what=f"a pod to run on {victim} once it is powered on again",
        timeout=120,
        interval=1.0,
    )
    figure(
        f"node {victim} powered on again: a pod runs on it {time.monotonic() - powered:.0f}s later"
    )
