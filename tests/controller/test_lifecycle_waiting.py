"""Why a job waits (PodsReady, scheduleTimeoutSeconds) and what a lost node does (NodeLost),
through informers, workqueue, workers and sync over FakeKube, on the fake clock."""

from __future__ import annotations

from typing import Any

from controller.api import DGLJOBS
from controller.watched_nodes import NODE_LOSS_CONFIRM_SECONDS
from kubeclient import NODES, PODS, Obj
from tests.controller.harness import (
    EPOCH,
    LAUNCH,
    NS,
    PART,
    STOPPED,
    W0,
    W1,
    Harness,
    add_nodes,
    bind,
    bring_up,
    confirm_silence,
    node_ready,
    node_unknown,
    poke,
    seed,
    train,
    wait_attempt,
)
from tests.support.waiting import wait_for

UNSCHEDULABLE = "0/3 nodes are available: 3 Insufficient memory."


def unschedulable(h: Harness, name: str, message: str = UNSCHEDULABLE) -> None:
    cond = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}
    h.set_status(name, {"phase": "Pending", "conditions": [{**cond, "message": message}]})


def waiting(h: Harness, name: str, reason: str, message: str) -> None:
    state = {"waiting": {"reason": reason, "message": message}}
    main = h.pods()[name]["spec"]["containers"][0]["name"]
    h.set_status(
        name,
        {
            "phase": "Pending",
            "conditions": [{"type": "PodScheduled", "status": "True"}],
            "containerStatuses": [{"name": main, "state": state}],
        },
    )


def warnings(h: Harness, reason: str) -> list[Obj]:
    return [e for e in h.events() if e["reason"] == reason and e["type"] == "Warning"]


def pods_ready(h: Harness) -> Obj:
    cond = h.condition("PodsReady")
    assert cond is not None
    return cond


def resync(h: Harness, times: int = 5) -> None:
    """Sync the job again and again (a poke each), as resyncs and pod updates do."""
    for _ in range(times):
        poke(h)
        h.settle()


# -- PodsReady --------------------------------------------------------------------------------


def test_unschedulable_pods_are_said_once_then_a_new_reason_then_ready(h: Harness) -> None:
    h.create_job(seed())
    h.wait_pods(W0, W1, PART)
    unschedulable(h, W0)  # (a sync may see W0 alone, or both: W0 is named first either way)
    unschedulable(h, W1)
    wait_for(
        lambda: (h.condition("PodsReady") or {}).get("reason") == "Unschedulable",
        what="PodsReady False Unschedulable",
    )
    resync(h)
    unschedulable(h, PART)  # one more pod waits for the same reason: no news
    wait_for(lambda: "3 pods" in pods_ready(h)["message"], what="the count of waiting pods")
    resync(h)
    cond = pods_ready(h)
    assert cond["status"] == "False"
    assert cond["message"] == (
        f"pod {PART} cannot be scheduled: {UNSCHEDULABLE} (3 pods of the job wait for "
        "Unschedulable)"
    )
    (event,) = warnings(h, "Unschedulable")
    assert event["count"] == 1, "announced again on a re-sync"
    assert event["message"].startswith(f"pod {W0} cannot be scheduled: {UNSCHEDULABLE}")
    assert h.status()["phase"] == "Pending"
    assert h.sample("dgl_operator_jobs_waiting", namespace=NS, reason="Unschedulable") == 1

    # scheduled; the image cannot be pulled: a new problem, a second Warning
    for name in (PART, W0, W1):
        waiting(h, name, "ErrImagePull", "rpc error: example.com/dgl:nope: not found")
    wait_for(lambda: pods_ready(h)["reason"] == "ErrImagePull", what="ErrImagePull")
    for name in (PART, W0, W1):  # the kubelet's back-off between two pulls: the same problem
        waiting(h, name, "ImagePullBackOff", 'Back-off pulling image "example.com/dgl:nope"')
    resync(h)
    assert pods_ready(h)["reason"] == "ErrImagePull"
    assert "not found" in pods_ready(h)["message"]
    (pull,) = warnings(h, "ErrImagePull")
    assert pull["count"] == 1 and f"of pod {PART} cannot start (ErrImagePull)" in pull["message"]
    assert warnings(h, "ImagePullBackOff") == []
    assert h.sample("dgl_operator_jobs_waiting", namespace=NS, reason="ErrImagePull") == 1
    assert h.sample("dgl_operator_jobs_waiting", namespace=NS, reason="Unschedulable") == 0

    bring_up(h)  # every pod runs (the launcher too, soon)
    wait_for(lambda: pods_ready(h)["status"] == "True", what="PodsReady True")
    assert pods_ready(h)["reason"] == "PodsReady"
    h.settle()
    assert h.sample("dgl_operator_jobs_waiting", namespace=NS, reason="ErrImagePull") == 0
    assert len(warnings(h, "Unschedulable")) == 1 and len(warnings(h, "ErrImagePull")) == 1


def test_a_wait_resolved_says_the_pods_are_starting(h: Harness) -> None:
    h.create_job(seed())
    h.wait_pods(W0, W1, PART)
    unschedulable(h, W0)
    wait_for(
        lambda: (h.condition("PodsReady") or {}).get("reason") == "Unschedulable",
        what="PodsReady False Unschedulable",
    )
    h.set_status(
        W0, {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "True"}]}
    )
    wait_for(lambda: pods_ready(h)["reason"] == "PodsStarting", what="PodsStarting")
    assert pods_ready(h)["status"] == "False"
    assert pods_ready(h)["message"] == f"waiting for pods to start: {PART}, {W0}, {W1}"


def test_schedule_timeout_fails_the_job_with_the_reason_and_deletes_its_pods(h: Harness) -> None:
    policy = {"backoffLimit": 2, "schedulingPolicy": {"scheduleTimeoutSeconds": 60}}
    h.create_job(seed(runPolicy=policy))
    h.wait_pods(W0, W1, PART)
    h.step(5)
    unschedulable(h, W1)
    wait_for(
        lambda: (h.condition("PodsReady") or {}).get("reason") == "Unschedulable",
        what="PodsReady False Unschedulable",
    )
    h.settle()
    h.requeued_at(EPOCH + 60)  # counted from the pods' creation
    h.step(54)
    h.settle()
    assert h.condition("Failed") is None, "failed before scheduleTimeoutSeconds"
    h.step(1)
    cond = h.wait_condition("Failed")
    assert cond["reason"] == "Unschedulable"
    assert cond["message"] == (
        f"pod {W1} cannot be scheduled: {UNSCHEDULABLE}; pod {W1} did not start within "
        "schedulingPolicy.scheduleTimeoutSeconds (60s)"
    )
    assert h.status()["restartCount"] == 0, "a retry cannot help: no restart"
    wait_for(lambda: h.pods() == {}, what="every pod deleted (cleanPodPolicy Running)")
    h.settle()
    assert h.sample("dgl_operator_jobs_failed_total", namespace=NS, reason="Unschedulable") == 1
    assert h.sample("dgl_operator_jobs_waiting", namespace=NS, reason="Unschedulable") == 0
    assert h.due() is None


def test_schedule_timeout_without_a_reason_and_clean_pod_policy_none(h: Harness) -> None:
    """No pod says why (no scheduler looked at them): ScheduleTimeoutExceeded; with
    cleanPodPolicy None the pods that run stay, those that never started go."""
    runpolicy = {"schedulingPolicy": {"scheduleTimeoutSeconds": 30}}
    h.create_job(seed(cleanPodPolicy="None", runPolicy=runpolicy))
    h.wait_pods(W0, W1, PART)
    h.run_pod(W0, "10.0.0.1")
    h.settle()
    h.requeued_at(EPOCH + 30)
    h.step(30)
    cond = h.wait_condition("Failed")
    assert cond["reason"] == "ScheduleTimeoutExceeded"
    assert cond["message"] == (
        f"pod {PART} did not start within schedulingPolicy.scheduleTimeoutSeconds (30s): "
        "not scheduled"
    )
    wait_for(lambda: set(h.pods()) == {W0}, what="the pods that never started deleted")


def test_without_a_timeout_the_job_waits_and_says_why(h: Harness) -> None:
    h.create_job(seed())
    h.wait_pods(W0, W1, PART)
    unschedulable(h, W0)
    wait_for(
        lambda: (h.condition("PodsReady") or {}).get("reason") == "Unschedulable",
        what="PodsReady False Unschedulable",
    )
    h.settle()
    assert h.due() is None, "nothing to wake up for"
    h.step(86400)
    poke(h)
    h.settle()
    assert h.condition("Failed") is None and h.status()["phase"] == "Pending"


# -- lost nodes -------------------------------------------------------------------------------


def terminating(h: Harness, *names: str) -> None:
    wait_for(
        lambda: all(
            h.pods().get(n, {}).get("metadata", {}).get("deletionTimestamp") for n in names
        ),
        what=f"{names} terminating",
    )


def kubelet_confirms(h: Harness, *names: str) -> None:
    """The kubelet of a live node ends the graceful deletions of its pods."""
    terminating(h, *names)
    for name in names:
        h.kube.delete(PODS, NS, name, grace_period_seconds=0)


def forced(h: Harness) -> set[str]:
    return {
        str(a.name)
        for a in h.kube.actions
        if a.verb == "delete" and a.resource == "pods" and a.grace_period_seconds == 0
    }


def started_on_two_nodes(h: Harness, **spec: Any) -> None:
    add_nodes(h, "n1", "n2")
    h.create_job(seed(**spec))
    train(h)
    bind(h, {W0: "n1", PART: "n1", LAUNCH: "n1", W1: "n2"})
    h.settle()
    h.kube.clear_actions()


def test_a_node_gone_not_ready_restarts_the_job_and_forces_its_pods_off(h: Harness) -> None:
    started_on_two_nodes(h, runPolicy={"backoffLimit": 2})
    node_unknown(h, "n2")
    confirm_silence(h)
    cond = h.wait_condition("Restarting")
    assert cond["reason"] == "NodeLost"
    assert cond["message"] == (
        f"node n2 is lost (Ready=Unknown: {STOPPED}): pods {W1} ran there; restarting the job "
        "(restart 1 of 2)"
    )
    # the lost node's pod is forced off; n1's pods end gracefully (their kubelet confirms)
    wait_for(lambda: W1 not in h.pods(), what="the pod on the lost node forced off")
    assert forced(h) == {W1}
    kubelet_confirms(h, W0, PART, LAUNCH)
    wait_attempt(h, 1)
    h.settle()
    assert h.status()["restartCount"] == 1
    assert h.sample("dgl_operator_job_node_losses_total") == 1
    assert h.sample("dgl_operator_jobs_restarted_total", namespace=NS) == 1
    (event,) = warnings(h, "NodeLost")
    assert event["message"] == cond["message"]


def test_no_node_is_lost_while_every_node_is_silent_then_those_still_silent_are(
    h: Harness,
) -> None:
    """Every node Ready=Unknown at once (the control plane away past the node monitor's
    grace, stop 65's CI), for longer than the confirmation: the job goes on. Once n3, where
    the job has no pod, reports again, n1 and n2 still silent are lost: the twin, the same
    check failing the moment the disruption ends (and the job looks again though none of its
    nodes changed)."""
    started_on_two_nodes(h, runPolicy={"backoffLimit": 2})
    add_nodes(h, "n3")
    for name in ("n1", "n2", "n3"):
        node_unknown(h, name)
    confirm_silence(h)
    h.settle()
    assert h.condition("Restarting") is None and h.condition("Failed") is None
    assert forced(h) == set() and warnings(h, "NodeLost") == []
    node_ready(h, "n3")
    cond = h.wait_condition("Restarting")
    assert cond["reason"] == "NodeLost"
    assert cond["message"].startswith(f"node n1 is lost (Ready=Unknown: {STOPPED}): pods ")
    assert f"; node n2 is lost (Ready=Unknown: {STOPPED}): pods {W1} ran there" in cond["message"]


def test_a_node_silent_for_less_than_the_confirmation_is_not_lost(h: Harness) -> None:
    """n2 Ready=Unknown, then Ready again within the confirmation (a lease renewed late after
    an API server outage): nothing happens. Silent again and for the whole confirmation
    (the twin): lost, the job restarts."""
    started_on_two_nodes(h, runPolicy={"backoffLimit": 2})
    node_unknown(h, "n2")
    h.settle()
    h.step(NODE_LOSS_CONFIRM_SECONDS - 1)
    h.settle()
    assert h.condition("Restarting") is None, "lost before the confirmation"
    node_ready(h, "n2")
    h.settle()
    h.step(NODE_LOSS_CONFIRM_SECONDS)
    h.settle()
    assert h.condition("Restarting") is None and warnings(h, "NodeLost") == []
    node_unknown(h, "n2")
    h.settle()
    assert h.condition("Restarting") is None, "timed from its new silence"
    h.step(NODE_LOSS_CONFIRM_SECONDS)
    cond = h.wait_condition("Restarting")
    assert cond["reason"] == "NodeLost" and cond["message"].startswith("node n2 is lost")


def test_a_kubelet_going_on_after_a_stop_reports_not_ready_for_a_while_not_lost(
    h: Harness,
) -> None:
    """ci14: the only node silent past the confirmation (a full disruption: not lost), then
    its kubelet, going on, reports its own NotReady ("container runtime is down") for one
    status update: unwell in a new way, timed afresh, so not lost, and Ready again before the
    confirmation. The twin: NotReady for the whole confirmation is lost."""
    add_nodes(h, "n1")
    h.create_job(seed(runPolicy={"backoffLimit": 2}))
    train(h)
    bind(h, {W0: "n1", W1: "n1", PART: "n1", LAUNCH: "n1"})
    h.settle()
    node_unknown(h, "n1")
    confirm_silence(h)
    h.settle()
    assert h.condition("Restarting") is None, "every node silent: the control plane's fault"
    down = {"type": "Ready", "status": "False", "reason": "KubeletNotReady"}
    not_ready = {"status": {"conditions": [{**down, "message": "container runtime is down"}]}}
    h.kube.patch(NODES, None, "n1", not_ready)
    resync(h, 1)  # (the job synced meanwhile, as a pod's update would have it)
    h.settle()
    assert h.condition("Restarting") is None, "NotReady after silence: timed afresh"
    h.step(NODE_LOSS_CONFIRM_SECONDS - 5)
    resync(h, 1)
    h.settle()
    assert h.condition("Restarting") is None
    node_ready(h, "n1")
    h.settle()  # (Ready seen before the clock moves on: else the look due at 20 s finds NotReady)
    h.step(NODE_LOSS_CONFIRM_SECONDS)
    h.settle()
    assert h.condition("Restarting") is None and warnings(h, "NodeLost") == []
    h.kube.patch(NODES, None, "n1", not_ready)
    h.settle()
    h.step(NODE_LOSS_CONFIRM_SECONDS)
    cond = h.wait_condition("Restarting")
    assert cond["reason"] == "NodeLost"
    assert cond["message"].startswith("node n1 is lost (Ready=False: container runtime is down)")


def test_a_deleted_node_is_lost_too_and_the_last_attempt_fails(h: Harness) -> None:
    started_on_two_nodes(h)  # backoffLimit 0
    h.kube.delete(NODES, None, "n2")
    cond = h.wait_condition("Failed")
    assert cond["reason"] == "NodeLost"
    assert cond["message"] == f"node n2 is lost (deleted): pods {W1} ran there"
    # cleanPodPolicy Running: the lost node's pod is forced, the live node's end gracefully
    wait_for(lambda: W1 not in h.pods(), what="the pod on the lost node forced off")
    assert forced(h) == {W1}
    kubelet_confirms(h, W0, LAUNCH)
    wait_for(lambda: set(h.pods()) == {PART}, what="the running pods deleted")


def test_the_launcher_fails_before_the_node_is_seen_lost(h: Harness) -> None:
    """The node dies: its pods die with it, the launcher's dglrun fails at once and the job
    restarts; the worker on the dead node stays Terminating (no kubelet) until the node
    controller marks the node: then it is forced off and the restart names the node."""
    started_on_two_nodes(h, runPolicy={"backoffLimit": 3})
    h.finish_pod(LAUNCH, exit_code=1, message="train failed: trainer 0 on worker-1 exited")
    cond = h.wait_condition("Restarting")
    assert cond["reason"] == "DGLJobRestarting" and LAUNCH in cond["message"]
    terminating(h, W1)
    assert forced(h) == set()
    kubelet_confirms(h, W0, PART, LAUNCH)
    h.settle()
    assert W1 in h.pods(), "the restart waits for the pod stuck on the dead node"
    h.kube.clear_actions()
    node_unknown(h, "n2")
    confirm_silence(h)
    wait_for(
        lambda: (h.condition("Restarting") or {}).get("reason") == "NodeLost",
        what="Restarting NodeLost",
    )
    cond = h.condition("Restarting") or {}
    assert cond["message"] == (
        f"node n2 is lost (Ready=Unknown: {STOPPED}): pods {W1} ran there; restarting the job "
        "(restart 1 of 3)"
    )
    wait_attempt(h, 1)
    assert forced(h) == {W1}
    h.settle()
    assert h.status()["restartCount"] == 1, "the restart counted twice"
    assert h.sample("dgl_operator_jobs_restarted_total", namespace=NS) == 1
    assert h.sample("dgl_operator_job_node_losses_total") == 1
    assert len(warnings(h, "NodeLost")) == 1
    resync(h, 2)
    assert len(warnings(h, "NodeLost")) == 1 and h.status()["restartCount"] == 1


def test_a_finished_jobs_pods_stuck_on_a_lost_node_are_forced(h: Harness) -> None:
    started_on_two_nodes(h, cleanPodPolicy="None")
    h.finish_pod(LAUNCH)
    h.wait_condition("Succeeded")
    h.kube.delete(PODS, NS, W1)  # say, evicted by the node controller: Terminating
    h.settle()
    assert h.pods()[W1]["metadata"].get("deletionTimestamp")
    h.kube.delete(NODES, None, "n2")
    wait_for(lambda: W1 not in h.pods(), what="the stuck pod forced off")
    assert forced(h) == {W1}
    assert set(h.pods()) == {W0, PART, LAUNCH}, "cleanPodPolicy None keeps the others"
    assert h.kube.get(DGLJOBS, NS, "dgl-graphsage")["status"]["phase"] == "Completed"
