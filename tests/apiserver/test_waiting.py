"""Why a job waits (PodsReady) and a lost node (NodeLost), against the real API server.

No scheduler, no kubelet, no node controller: the test binds pods through the binding
subresource, writes their status as a scheduler or kubelet would, and makes Node objects by
hand, setting their Ready condition through the status subresource as the node controller
does when a kubelet stops reporting. A pod bound to a node goes only with grace period 0
here (no kubelet ends a graceful deletion), as on a dead node."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from controller.api import DGLJOBS
from controller.builders import ATTEMPT_ANNOTATION
from kubeclient import EVENTS, NODES, PODS, NotFound, Obj, RestClient
from localcluster.cluster import ControlPlane
from tests.support.dgljobs import load_fixture
from tests.support.live import InProcessOperator, Kubelet, stamp
from tests.support.waiting import LIVE_TIMEOUT, wait_for

J = "dgl-graphsage"
W0, W1, PART, LAUNCH = f"{J}-worker-0", f"{J}-worker-1", f"{J}-partitioner", f"{J}-launcher"
UNSCHEDULABLE = "0/3 nodes are available: 3 Insufficient memory."
STOPPED = "Kubelet stopped posting node status."


@pytest.fixture
def operator(control_plane: ControlPlane, namespace: str) -> Iterator[InProcessOperator]:
    # a silent node counts as lost after 1 s, not 15 (controller/watched_nodes.py)
    with InProcessOperator(str(control_plane.kubeconfig), namespace, node_loss_confirm=1.0) as op:
        yield op


@contextlib.contextmanager
def ready_node(api: RestClient) -> Iterator[str]:
    """A Node that reports Ready (cluster-scoped: a name of its own for each test)."""
    name = f"dgl-node-{uuid.uuid4().hex[:6]}"
    api.create(NODES, None, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}})
    set_ready(api, name, "True", "KubeletReady", "kubelet is posting ready status")
    try:
        yield name
    finally:
        with contextlib.suppress(NotFound):
            api.delete(NODES, None, name)


@pytest.fixture
def node(api: RestClient) -> Iterator[str]:
    """The node the test binds a worker to."""
    with ready_node(api) as name:
        yield name


@pytest.fixture
def neighbour(api: RestClient) -> Iterator[str]:
    """A second node, still reporting while the first goes silent (one silent node among
    several is lost; every node silent at once is the control plane's fault, node_loss.py)."""
    with ready_node(api) as name:
        yield name


def set_ready(api: RestClient, node: str, status: str, reason: str, message: str) -> None:
    ready = {
        "type": "Ready",
        "status": status,
        "reason": reason,
        "message": message,
        "lastHeartbeatTime": stamp(),
        "lastTransitionTime": stamp(),
    }
    api.patch(NODES, None, node, {"status": {"conditions": [ready]}}, subresource="status")


def create(api: RestClient, ns: str, **spec: Any) -> None:
    raw = load_fixture("seed_dgljob.yaml")
    raw["metadata"]["namespace"] = ns
    raw["spec"].update(spec)
    api.create(DGLJOBS, ns, raw)


def pods(api: RestClient, ns: str) -> dict[str, Any]:
    return {p["metadata"]["name"]: p for p in api.list(PODS, ns)["items"]}


def condition(api: RestClient, ns: str, ctype: str) -> dict[str, Any]:
    for c in (api.get(DGLJOBS, ns, J).get("status") or {}).get("conditions") or []:
        if c["type"] == ctype:
            return dict(c)
    return {}


def warnings(api: RestClient, ns: str, reason: str) -> list[dict[str, Any]]:
    return [
        e
        for e in api.list(EVENTS, ns)["items"]
        if e["reason"] == reason and e["type"] == "Warning" and e["involvedObject"]["name"] == J
    ]


def unschedulable(api: RestClient, ns: str, pod: str) -> None:
    cond = {
        "type": "PodScheduled",
        "status": "False",
        "reason": "Unschedulable",
        "message": UNSCHEDULABLE,
        "lastTransitionTime": stamp(),
    }
    api.patch(PODS, ns, pod, {"status": {"conditions": [cond]}}, subresource="status")


def test_an_unschedulable_pod_is_said_on_the_job_once(
    api: RestClient, namespace: str, operator: InProcessOperator
) -> None:
    ns = namespace
    create(api, ns)
    wait_for(
        lambda: {W0, W1, PART} <= set(pods(api, ns)), what="the job's pods", timeout=LIVE_TIMEOUT
    )
    unschedulable(api, ns, W1)
    wait_for(
        lambda: condition(api, ns, "PodsReady").get("reason") == "Unschedulable",
        what="PodsReady False Unschedulable",
        timeout=LIVE_TIMEOUT,
    )
    cond = condition(api, ns, "PodsReady")
    assert cond["status"] == "False"
    assert cond["message"] == f"pod {W1} cannot be scheduled: {UNSCHEDULABLE}"
    # the next pod waits for the same reason: the condition counts it, nothing is announced
    unschedulable(api, ns, W0)
    wait_for(
        lambda: "2 pods of the job" in condition(api, ns, "PodsReady").get("message", ""),
        what="the count of waiting pods",
        timeout=LIVE_TIMEOUT,
    )
    assert condition(api, ns, "PodsReady")["message"].startswith(f"pod {W0} cannot be scheduled")
    assert operator.ctrl.recorder.flush(10)
    (event,) = warnings(api, ns, "Unschedulable")
    assert (
        event["count"] == 1 and event["message"] == f"pod {W1} cannot be scheduled: {UNSCHEDULABLE}"
    )
    assert (
        operator.metrics.registry.get_sample_value(
            "dgl_operator_jobs_waiting", {"namespace": ns, "reason": "Unschedulable"}
        )
        == 1
    )


def start_on(api: RestClient, ns: str, node: str) -> Obj:
    """The job's pods running, worker 1 bound to ``node``; the bound pod."""
    create(api, ns, runPolicy={"backoffLimit": 1})
    wait_for(
        lambda: {W0, W1, PART} <= set(pods(api, ns)), what="the job's pods", timeout=LIVE_TIMEOUT
    )
    binding = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": W1},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node},
    }
    api.create(PODS, ns, binding, name=W1, subresource="binding")
    bound = api.get(PODS, ns, W1)
    assert bound["spec"]["nodeName"] == node
    kubelet = Kubelet(api, ns)
    for i, name in enumerate((W0, W1, PART)):
        kubelet.run(name, f"10.7.0.{i + 2}")
    wait_for(lambda: LAUNCH in pods(api, ns), what="the launcher", timeout=LIVE_TIMEOUT)
    assert condition(api, ns, "Restarting") == {}
    return bound


def caught_up(operator: InProcessOperator, ns: str, *nodes: str) -> None:
    """Wait until the operator's node cache holds ``nodes`` Ready=Unknown for longer than its
    confirmation, and it has synced every key its handlers queued, the job's look after the
    confirmation too: a barrier, so that a negative assert after it is sound."""

    def sample(metric: str) -> float:
        got = operator.metrics.registry.get_sample_value(metric, {"name": "dgljob"})
        return 0.0 if got is None else got

    def quiet() -> bool:
        store = operator.ctrl.node_informer.store
        unknown = all(
            any(
                c.get("status") == "Unknown"
                for c in ((store.get(n) or {}).get("status") or {}).get("conditions") or []
            )
            for n in nodes
        )
        confirmed = all(operator.ctrl.nodes.unwell.pending(store.get(n) or {}) == 0 for n in nodes)
        idle = (
            operator.ctrl.node_informer.handlers_idle()
            and operator.ctrl.queue.ready_at(f"{ns}/{J}") is None
            and len(operator.ctrl.queue) == 0
        )
        done = sample("workqueue_work_duration_seconds_count")
        return unknown and confirmed and idle and done == sample("workqueue_adds_total")

    wait_for(quiet, what="the operator to sync after the nodes' silence", timeout=LIVE_TIMEOUT)


def test_a_node_gone_unknown_restarts_the_job_and_its_pod_there_is_forced_off(
    api: RestClient, namespace: str, operator: InProcessOperator, node: str, neighbour: str
) -> None:
    ns = namespace
    bound = start_on(api, ns, node)
    set_ready(api, node, "Unknown", "NodeStatusUnknown", STOPPED)
    wait_for(
        lambda: condition(api, ns, "Restarting").get("reason") == "NodeLost",
        what="Restarting NodeLost",
        timeout=LIVE_TIMEOUT,
    )
    assert condition(api, ns, "Restarting")["message"] == (
        f"node {node} is lost (Ready=Unknown: {STOPPED}): pods {W1} ran there; restarting the "
        "job (restart 1 of 1)"
    )

    def replaced() -> bool:
        now = pods(api, ns).get(W1)
        return now is None or now["metadata"]["uid"] != bound["metadata"]["uid"]

    # without grace period 0 it would stay Terminating for ever (no kubelet confirms)
    wait_for(replaced, what=f"{W1} forced off the lost node", timeout=LIVE_TIMEOUT)
    wait_for(
        lambda: (
            pods(api, ns)
            .get(W1, {})
            .get("metadata", {})
            .get("annotations", {})
            .get(ATTEMPT_ANNOTATION)
            == "1"
        ),
        what="the next attempt's worker",
        timeout=LIVE_TIMEOUT,
    )
    assert "nodeName" not in api.get(PODS, ns, W1)["spec"]
    assert api.get(DGLJOBS, ns, J)["status"]["restartCount"] == 1
    assert operator.ctrl.recorder.flush(10)
    (event,) = warnings(api, ns, "NodeLost")
    assert node in event["message"] and W1 in event["message"]


def test_every_node_silent_at_once_restarts_nothing_until_one_reports_again(
    api: RestClient, namespace: str, operator: InProcessOperator, node: str, neighbour: str
) -> None:
    """Both nodes Ready=Unknown at once, as the node controller marks every node after the
    control plane was away past its grace (stop 65's CI: five jobs of a one-node cluster
    failed NodeLost while its kubelet ran them): the job goes on, its pod stays. Once the
    neighbour reports again, the node still silent is lost: the same check failing."""
    ns = namespace
    bound = start_on(api, ns, node)
    set_ready(api, node, "Unknown", "NodeStatusUnknown", STOPPED)
    set_ready(api, neighbour, "Unknown", "NodeStatusUnknown", STOPPED)
    caught_up(operator, ns, node, neighbour)
    assert condition(api, ns, "Restarting") == {} and condition(api, ns, "Failed") == {}
    assert pods(api, ns)[W1]["metadata"]["uid"] == bound["metadata"]["uid"]
    assert warnings(api, ns, "NodeLost") == []

    set_ready(api, neighbour, "True", "KubeletReady", "kubelet is posting ready status")
    wait_for(
        lambda: condition(api, ns, "Restarting").get("reason") == "NodeLost",
        what="Restarting NodeLost once the neighbour reports",
        timeout=LIVE_TIMEOUT,
    )
    assert condition(api, ns, "Restarting")["message"].startswith(
        f"node {node} is lost (Ready=Unknown: {STOPPED}): pods {W1} ran there"
    )
