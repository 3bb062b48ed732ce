"""A namespace locked down as platform teams lock theirs (issue 42), against the real API
server's own admission (PodSecurity, ResourceQuota) with the operator running in this process:
- Pod Security `restricted` and a ResourceQuota that requires requests and limits admit every
  pod of the restricted example (examples/graphsage/dgljob-restricted.yaml), the operator's
  init containers included;
- a template such a namespace refuses fails the job (InvalidSpec) with a condition and an Event
  that quote the API server, instead of retrying in silence;
- a quota that is used up is said (PodsReady False, a Warning quoting it) and retried: once
  the quota grows, the pods are made.
The job running to Succeeded on a real node in such a namespace is e2e/test_dgljob.py's."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from controller.api import DGLJOBS
from kubeclient import EVENTS, NAMESPACES, PODS, Resource, RestClient
from localcluster.cluster import ControlPlane
from podcontract import WATCHER_PARTITIONER, WATCHER_WORKERS
from tests.support.dgljobs import load_fixture
from tests.support.live import InProcessOperator, Kubelet
from tests.support.paths import REPO
from tests.support.waiting import LIVE_TIMEOUT, wait_for

QUOTAS = Resource("", "v1", "resourcequotas", "ResourceQuota")
RESTRICTED = REPO / "examples" / "graphsage" / "dgljob-restricted.yaml"
# How long the quota controller may take to fill in a quota's status. Whenever discovery
# changes (a CRD another test installed: Kueue's, the PodGroup's; the API servers restarted by
# test_reliability.py) its workers stop until its new monitors' caches sync, for up to 30 s
# (kube-controller-manager v1.34, pkg/controller/resourcequota Sync: workerLock held through
# WaitForNamedCacheSync with the hard-coded 30 s period), and a monitor whose watch is refused
# meanwhile holds them that long. A CI run waited past 30 s (LIVE_TIMEOUT) for a status that
# came later.
QUOTA_STATUS_TIMEOUT = 120.0
ROOMY = {
    "requests.cpu": "8",
    "requests.memory": "16Gi",
    "limits.cpu": "16",
    "limits.memory": "32Gi",
}


@pytest.fixture
def operator(control_plane: ControlPlane, namespace: str) -> Iterator[InProcessOperator]:
    with InProcessOperator(str(control_plane.kubeconfig), namespace) as op:
        yield op


def lock_down(api: RestClient, ns: str, hard: dict[str, str]) -> None:
    """Pod Security `restricted` enforced, and a quota over requests and limits (which makes
    both required of every container)."""
    labels = {
        "pod-security.kubernetes.io/enforce": "restricted",
        "pod-security.kubernetes.io/enforce-version": "latest",
    }
    api.patch(NAMESPACES, None, ns, {"metadata": {"labels": labels}})
    quota = {"metadata": {"name": "team"}, "spec": {"hard": hard}}
    api.create(QUOTAS, ns, {"apiVersion": "v1", "kind": "ResourceQuota", **quota})
    # (the quota controller fills in status.hard; until then admission refuses every pod)
    wait_for(
        lambda: (api.get(QUOTAS, ns, "team").get("status") or {}).get("hard") == hard,
        what="the quota's status",
        timeout=QUOTA_STATUS_TIMEOUT,
    )


def set_quota(api: RestClient, ns: str, hard: dict[str, str]) -> None:
    api.patch(QUOTAS, ns, "team", {"spec": {"hard": hard}})
    wait_for(
        lambda: (api.get(QUOTAS, ns, "team").get("status") or {}).get("hard") == hard,
        what="the quota's new status",
        timeout=QUOTA_STATUS_TIMEOUT,
    )


def restricted_job(ns: str) -> dict[str, Any]:
    raw = yaml.safe_load(RESTRICTED.read_text())
    assert isinstance(raw, dict)
    raw["metadata"]["namespace"] = ns
    return raw


def pods(api: RestClient, ns: str) -> dict[str, Any]:
    return {p["metadata"]["name"]: p for p in api.list(PODS, ns)["items"]}


def condition(api: RestClient, ns: str, name: str, ctype: str) -> dict[str, Any] | None:
    for c in (api.get(DGLJOBS, ns, name).get("status") or {}).get("conditions") or []:
        if c["type"] == ctype:
            return dict(c)
    return None


def events(api: RestClient, ns: str, reason: str) -> list[str]:
    return [str(e.get("message")) for e in api.list(EVENTS, ns)["items"] if e["reason"] == reason]


def test_the_restricted_example_runs_in_a_restricted_namespace_with_a_quota(
    api: RestClient, namespace: str, operator: InProcessOperator
) -> None:
    lock_down(api, namespace, ROOMY)
    api.create(DGLJOBS, namespace, restricted_job(namespace))
    job = "dgl-graphsage-restricted"
    w0, w1, part, launcher = (
        f"{job}-{s}" for s in ("worker-0", "worker-1", "partitioner", "launcher")
    )
    wait_for(
        lambda: {w0, w1, part} <= set(pods(api, namespace)),
        what="the workers and the partitioner, admitted",
        timeout=LIVE_TIMEOUT,
    )
    kubelet = Kubelet(api, namespace)
    for i, name in enumerate((w0, w1, part)):
        kubelet.run(name, f"10.0.2.{i + 1}")
    wait_for(
        lambda: launcher in pods(api, namespace),
        what="the launcher, admitted",
        timeout=LIVE_TIMEOUT,
    )
    made = pods(api, namespace)
    inits = [c for p in made.values() for c in p["spec"].get("initContainers") or []]
    assert {c["name"] for c in inits} == {
        "dgl-agent-install",  # (the workers')
        "kubectl-download",
        WATCHER_PARTITIONER,
        WATCHER_WORKERS,
    }
    for c in inits:  # the operator's own containers, restricted and bounded by themselves
        assert c["securityContext"]["allowPrivilegeEscalation"] is False, c["name"]
        assert c["securityContext"]["runAsNonRoot"] is True, c["name"]
        assert set(c["resources"]["limits"]) == {"cpu", "memory"}, c["name"]
    assert condition(api, namespace, job, "Failed") is None
    assert events(api, namespace, "InvalidSpec") == []


def test_a_template_the_namespace_refuses_fails_the_job_quoting_the_api_server(
    api: RestClient, namespace: str, operator: InProcessOperator
) -> None:
    lock_down(api, namespace, ROOMY)
    raw = load_fixture("seed_dgljob.yaml")  # no securityContext, no resources
    raw["metadata"]["namespace"] = namespace
    api.create(DGLJOBS, namespace, raw)
    name = raw["metadata"]["name"]
    failed = wait_for(
        lambda: condition(api, namespace, name, "Failed"),
        what="the job failed",
        timeout=LIVE_TIMEOUT,
    )
    assert failed["reason"] == "InvalidSpec", failed
    message = failed["message"]
    assert message.startswith("invalid spec: the API server refused a child object: "), message
    assert 'violates PodSecurity "restricted:latest"' in message, message
    wait_for(
        lambda: any(message in m for m in events(api, namespace, "InvalidSpec")),
        what="an InvalidSpec Event quoting the API server",
        timeout=LIVE_TIMEOUT,
    )
    assert (api.get(DGLJOBS, namespace, name).get("status") or {}).get("phase") == "Failed"


def test_a_used_up_quota_is_said_and_retried(
    api: RestClient, namespace: str, operator: InProcessOperator
) -> None:
    small = {**ROOMY, "limits.memory": "3Gi"}  # one worker (2Gi) fits, not two
    lock_down(api, namespace, small)
    api.create(DGLJOBS, namespace, restricted_job(namespace))
    job = "dgl-graphsage-restricted"
    waiting = wait_for(
        lambda: (
            (c := condition(api, namespace, job, "PodsReady"))
            and c["reason"] == "FailedCreate"
            and c
        ),
        what="PodsReady False: FailedCreate",
        timeout=LIVE_TIMEOUT,
    )
    assert waiting["status"] == "False" and "exceeded quota: team" in waiting["message"], waiting
    wait_for(
        lambda: any("exceeded quota: team" in m for m in events(api, namespace, "FailedCreate")),
        what="a FailedCreate Event quoting the API server",
        timeout=LIVE_TIMEOUT,
    )
    assert condition(api, namespace, job, "Failed") is None
    set_quota(api, namespace, ROOMY)
    want = {f"{job}-worker-0", f"{job}-worker-1", f"{job}-partitioner"}
    wait_for(
        lambda: want <= set(pods(api, namespace)),
        what="the pods, once the quota grew",
        timeout=LIVE_TIMEOUT,
    )
    assert condition(api, namespace, job, "Failed") is None
