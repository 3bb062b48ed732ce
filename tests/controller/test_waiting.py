"""Pure functions: why a job's pods wait (PodsReady), and which nodes are lost (NodeLost)."""

from __future__ import annotations

from typing import Any

import pytest

from controller.api import parse_job
from controller.builders import ATTEMPT_ANNOTATION, REPLICA_TYPE_LABEL
from controller.status import node_loss, observation, pod_state, waiting
from tests.support.dgljobs import load_fixture

J = "dgl-graphsage"
W0, W1, PART, LAUNCH = f"{J}-worker-0", f"{J}-worker-1", f"{J}-partitioner", f"{J}-launcher"
RTYPE = {W0: "Worker", W1: "Worker", PART: "Partitioner", LAUNCH: "Launcher"}
UNSCHEDULABLE = "0/3 nodes are available: 3 Insufficient memory."


def job() -> Any:
    return parse_job(load_fixture("seed_dgljob.yaml"))


def pod(name: str, phase: str = "Pending", node: str = "", **status: Any) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "labels": {REPLICA_TYPE_LABEL: RTYPE[name]},
            "annotations": {ATTEMPT_ANNOTATION: "0"},
        },
        "spec": {"containers": [{"name": "main"}], **({"nodeName": node} if node else {})},
        "status": {"phase": phase, **status},
    }


def unschedulable(name: str, message: str = UNSCHEDULABLE) -> dict[str, Any]:
    cond = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}
    return pod(name, conditions=[{**cond, "message": message}])


def waiting_pod(name: str, reason: str, message: str = "", *, init: bool = False) -> dict[str, Any]:
    key = "initContainerStatuses" if init else "containerStatuses"
    state = {"waiting": {"reason": reason, **({"message": message} if message else {})}}
    container = "kubectl-download" if init else "main"
    p = pod(name)
    p["status"][key] = [{"name": container, "state": state}]
    return p


def running(name: str, node: str = "") -> dict[str, Any]:
    return pod(
        name, "Running", node, containerStatuses=[{"name": "main", "state": {"running": {}}}]
    )


def observe(*pods: dict[str, Any]) -> observation.Observation:
    return observation.observe(job(), list(pods), 0)


# -- waiting problems ------------------------------------------------------------------------


def test_an_unschedulable_pod_says_the_schedulers_message() -> None:
    p = waiting.pod_waiting_problem(unschedulable(W0))
    assert p == waiting.WaitingProblem("Unschedulable", W0, UNSCHEDULABLE)
    assert p.describe() == f"pod {W0} cannot be scheduled: {UNSCHEDULABLE}"


@pytest.mark.parametrize(
    "reason",
    [
        "ErrImagePull",
        "ImagePullBackOff",
        "InvalidImageName",
        "CreateContainerConfigError",
        "CreateContainerError",
        "CrashLoopBackOff",
    ],
)
def test_each_waiting_reason_of_the_kubelet_names_the_container(reason: str) -> None:
    p = waiting.pod_waiting_problem(waiting_pod(W1, reason, "the kubelet's\n words"))
    assert p is not None and (p.reason, p.pod, p.container) == (reason, W1, "main")
    assert (
        p.describe() == f"container main of pod {W1} cannot start ({reason}): the kubelet's words"
    )


def test_an_init_container_is_named_as_one() -> None:
    p = waiting.pod_waiting_problem(waiting_pod(LAUNCH, "ErrImagePull", "not found", init=True))
    assert p is not None and p.init
    assert p.describe().startswith(f"init container kubectl-download of pod {LAUNCH} cannot start")


def test_benign_waits_and_finished_pods_are_no_problem() -> None:
    assert waiting.pod_waiting_problem(waiting_pod(W0, "ContainerCreating")) is None
    assert waiting.pod_waiting_problem(waiting_pod(W0, "PodInitializing")) is None
    assert waiting.pod_waiting_problem(pod(W0)) is None  # not looked at by the scheduler yet
    assert waiting.pod_waiting_problem(running(W0)) is None
    failed = unschedulable(W0)
    failed["status"]["phase"] = "Failed"
    assert waiting.pod_waiting_problem(failed) is None
    gone = unschedulable(W0)
    gone["metadata"]["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    assert waiting.pod_waiting_problem(gone) is None


def test_the_first_problem_in_replica_order_and_how_many_pods_share_it() -> None:
    obs = observe(
        unschedulable(LAUNCH),
        waiting_pod(W1, "ImagePullBackOff", 'Back-off pulling image "x"'),
        unschedulable(W0),
        waiting_pod(PART, "ErrImagePull", "x: not found"),
    )
    p = waiting.waiting_problem(job(), obs)
    assert p is not None and (p.reason, p.pod, p.count) == ("ErrImagePull", PART, 2)
    assert p.describe().endswith("(2 pods of the job wait for ErrImagePull)")
    # without the partitioner's: worker-0 comes before the launcher
    obs = observe(unschedulable(LAUNCH), unschedulable(W1), unschedulable(W0))
    p = waiting.waiting_problem(job(), obs)
    assert p is not None and (p.pod, p.count) == (W0, 3)
    assert waiting.waiting_problem(job(), observe(running(W0), running(W1))) is None


def test_the_same_problem_whatever_the_count_and_the_pull_retries() -> None:
    one = waiting.WaitingProblem("Unschedulable", W0, UNSCHEDULABLE)
    three = waiting.WaitingProblem("Unschedulable", W0, UNSCHEDULABLE, count=3)
    assert three.same("Unschedulable", one.describe())
    assert one.same("Unschedulable", three.describe())
    other = waiting.WaitingProblem(
        "Unschedulable", W0, "0/3 nodes are available: 3 Insufficient cpu."
    )
    assert not other.same("Unschedulable", one.describe())
    pull = waiting.WaitingProblem("ErrImagePull", W1, "x: not found", "main")
    backoff = waiting.WaitingProblem("ImagePullBackOff", W1, 'Back-off pulling image "x"', "main")
    assert backoff.same("ErrImagePull", pull.describe())
    assert pull.same("ImagePullBackOff", backoff.describe())
    # another pod first now, for the same reason said the same way: the same problem
    assert waiting.WaitingProblem("Unschedulable", PART, UNSCHEDULABLE).same(
        "Unschedulable", one.describe()
    )
    assert not pull.same("Unschedulable", one.describe())


def test_started_pods() -> None:
    assert pod_state.pod_started(running(W0))
    assert not pod_state.pod_started(unschedulable(W0))
    assert not pod_state.pod_started(waiting_pod(W0, "ContainerCreating"))
    in_init = pod(LAUNCH, initContainerStatuses=[{"name": "w", "state": {"running": {}}}])
    assert pod_state.pod_started(in_init), "the launcher waiting for its peers in an init container"
    done = pod(PART, "Succeeded")
    assert pod_state.pod_started(done)
    # a worker whose agent install ended, its main container still pulling a missing image:
    # not started (the scheduleTimeoutSeconds fails it); the twin above, one running, is
    installed = pod(
        W0,
        initContainerStatuses=[{"name": "dgl-agent-install", "state": {"terminated": {}}}],
        containerStatuses=[{"name": "m", "state": {"waiting": {"reason": "ErrImagePull"}}}],
    )
    assert not pod_state.pod_started(installed)
    obs = observe(running(W0), unschedulable(W1), in_init)
    assert [p["metadata"]["name"] for p in waiting.not_started(obs)] == [W1]


# -- lost nodes ------------------------------------------------------------------------------


def node(ready: str = "True", message: str = "", **extra: Any) -> dict[str, Any]:
    cond = {"type": "Ready", "status": ready, "reason": "R", "message": message}
    return {"metadata": {"name": "n1"}, "status": {"conditions": [cond]}, **extra}


def test_which_nodes_are_lost() -> None:
    assert node_loss.node_lost(node()) is None
    assert node_loss.node_lost({"metadata": {"name": "fresh"}}) is None, "never reported: not lost"
    assert node_loss.node_lost(None) == "deleted"
    stopped = "Kubelet stopped posting node status."
    assert node_loss.node_lost(node("Unknown", stopped)) == f"Ready=Unknown: {stopped}"
    assert node_loss.node_lost(node("False")) == "Ready=False: R"
    taint = {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"}
    assert node_loss.node_lost(node(spec={"taints": [taint]})) == (
        "tainted node.kubernetes.io/unreachable"
    )
    other = {"key": "node.kubernetes.io/disk-pressure", "effect": "NoSchedule"}
    assert node_loss.node_lost(node(spec={"taints": [other]})) is None
    deleting = node()
    deleting["metadata"]["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    assert node_loss.node_lost(deleting) == "being deleted"


def test_every_node_silent_at_once_is_a_full_disruption_and_one_reporting_ends_it() -> None:
    """Stop 65's CI: the one node of a cluster went Ready=Unknown after an API server restart
    while its kubelet ran the jobs. Silence on every node is the control plane's fault."""
    stopped = "Kubelet stopped posting node status."
    unknown = node("Unknown", stopped)
    taint = {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"}
    tainted = node(spec={"taints": [taint]})
    assert node_loss.silent(unknown) and node_loss.silent(tainted)
    assert node_loss.full_disruption([unknown]) and node_loss.full_disruption([unknown, tainted])
    # the twins: one node reporting, a kubelet's own NotReady, a node being deleted, no node
    assert not node_loss.silent(node()) and not node_loss.silent(node("False"))
    deleting = node("Unknown", stopped)
    deleting["metadata"]["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    assert not node_loss.silent(deleting)
    assert not node_loss.full_disruption([unknown, node()])
    assert not node_loss.full_disruption([unknown, node("False")])
    assert not node_loss.full_disruption([unknown, deleting])
    assert not node_loss.full_disruption([])
    assert node_loss.node_lost(unknown) == f"Ready=Unknown: {stopped}", "lost on its own"
    # how a node that may recover is unwell (each timed by controller/watched_nodes.py)
    assert node_loss.unwell(unknown) == node_loss.unwell(tainted) == "silent"
    assert node_loss.unwell(node("False")) == "not ready"
    assert node_loss.unwell(node()) is None and node_loss.unwell(deleting) is None


def test_a_pod_of_the_attempt_on_a_lost_node_is_a_node_loss_failure() -> None:
    lost = {"n3": "Ready=Unknown: Kubelet stopped posting node status."}
    done = pod(PART, "Succeeded", "n3")  # finished there: it does not matter
    obs = observe(running(W0, "n1"), running(W1, "n3"), running(LAUNCH, "n3"), done)
    failure = node_loss.node_loss_failure(job(), obs, lost)
    assert failure is not None
    assert (failure.pod, failure.condition_reason) == (W1, "NodeLost")
    assert failure.describe() == (
        "node n3 is lost (Ready=Unknown: Kubelet stopped posting node status.): "
        f"pods {LAUNCH}, {W1} ran there"
    )
    assert node_loss.node_loss_failure(job(), obs, {}) is None
    assert node_loss.node_loss_failure(job(), observe(done, running(W0, "n1")), lost) is None


def test_the_loss_message_names_every_lost_node() -> None:
    pods = [running(W0, "a"), running(W1, "b"), running(LAUNCH, "c")]
    message = node_loss.node_loss_message({"a": "deleted", "b": "Ready=False"}, pods)
    assert message == (
        f"node a is lost (deleted): pods {W0} ran there; node b is lost (Ready=False): "
        f"pods {W1} ran there"
    )
