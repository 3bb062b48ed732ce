"""tests/support/rbac.py against the API calls the controller really makes.

Every request the operator sends during full lifecycles (success, failure + restart, suspend,
TTL, leader election, events) must be allowed by RULES; and every rule must be used, so the
chart grants nothing the code does not need.
"""

from __future__ import annotations

import copy
import threading
from typing import Any

import pytest

from controller.api import DGLJOBS, parse_job
from controller.builders import GANG_SCHEDULER_PLUGINS, BuildOptions
from controller.builders.rbac import rbac
from controller.machinery.leader import LeaderConfig, LeaderElector
from controller.status.pod_state import is_terminating as terminating
from kubeclient import PODS, PRIORITYCLASSES, RESOURCEFLAVORS, WORKLOADS, Resource
from tests.controller.harness import (
    LAUNCH,
    NS,
    PART,
    W0,
    Harness,
    bring_up,
    poke,
    train,
    wait_attempt,
)
from tests.controller.kueue_fixtures import (
    FLAVOR,
    admitted_status,
    cond,
    kueue_writes,
    queued,
    workload,
)
from tests.fakekube import FakeKube
from tests.support.dgljobs import load_fixture
from tests.support.rbac import (
    LEADER_ELECTION_RULES,
    RULES,
    allows,
    cluster_rules,
    operator_rules,
    triples,
)
from tests.support.waiting import wait_for

# RBAC verbs of the KubeClient methods
_VERBS = {
    "list": "list",
    "watch": "watch",
    "get": "get",
    "create": "create",
    "replace": "update",
    "patch": "patch",
    "delete": "delete",
}


class Recording:
    """Delegates to FakeKube and records (group, resource[/subresource], verb)."""

    def __init__(self, kube: FakeKube) -> None:
        self._kube = kube
        self.calls: set[tuple[str, str, str]] = set()
        self._lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        target = getattr(self._kube, name)
        if name not in _VERBS:
            return target

        def call(res: Resource, *args: Any, **kwargs: Any) -> Any:
            resource = res.plural
            if kwargs.get("subresource"):
                resource += "/" + kwargs["subresource"]
            with self._lock:
                self.calls.add((res.group, resource, _VERBS[name]))
            return target(res, *args, **kwargs)

        return call


def _job_roles() -> list[dict[str, Any]]:
    job = parse_job(load_fixture("seed_dgljob.yaml"))
    return [o for o in rbac(job) if o["kind"] == "Role"]


def test_the_operator_holds_what_it_grants_the_job_roles() -> None:
    """RBAC refuses to create a Role granting more than its creator holds."""
    for role in _job_roles():
        missing = sorted(t for t in triples(role["rules"]) if not allows(RULES, *t))
        assert missing == [], f"{role['metadata']['name']} grants what the operator lacks"


def _run_scenarios(h: Harness) -> None:
    raw = load_fixture("seed_dgljob.yaml")
    raw["spec"]["runPolicy"] = {"backoffLimit": 1, "ttlSecondsAfterFinished": 0}
    h.create_job(raw)
    train(h)
    h.finish_pod(W0, exit_code=1)  # restart
    wait_for(lambda: h.status().get("restartCount") == 1, what="restartCount 1")
    wait_attempt(h, 1)
    train(h)
    h.finish_pod(PART)
    h.finish_pod(LAUNCH)  # success, cleanup, TTL delete
    wait_for(lambda: not h.kube.objects(DGLJOBS, "dgl-operator"), what="TTL deletion")
    h.kube.collect_garbage()  # the children go with their owner, as the API server's GC does
    suspended = load_fixture("seed_dgljob.yaml")
    suspended["metadata"]["name"] = "other"
    suspended["spec"]["runPolicy"] = {"suspend": False}
    h.create_job(suspended)
    wait_for(lambda: "other-worker-0" in h.pods(), what="the pods of other")
    h.kube.patch(DGLJOBS, "dgl-operator", "other", {"spec": {"runPolicy": {"suspend": True}}})
    wait_for(lambda: "other-worker-0" not in h.pods(), what="suspend deletes pods")
    bring_up_ok = load_fixture("seed_dgljob.yaml")
    bring_up_ok["metadata"]["name"] = "dgl-graphsage"
    h.create_job(bring_up_ok)
    bring_up(h)
    poke(h)
    # spec.storage: a claim made from a template, and a user's claim the operator looks up
    for name, storage in (
        ("kept", {"claimTemplate": {"spec": {"accessModes": ["ReadWriteOnce"]}}}),
        ("mine", {"claimName": "my-results"}),
    ):
        stored = load_fixture("seed_dgljob.yaml")
        stored["metadata"]["name"] = name
        stored["spec"]["storage"] = storage
        h.create_job(stored)
        wait_for(lambda n=name: f"{n}-worker-0" in h.pods(), what=f"{name}'s pods")
    h.settle()


def worker_main(raw: dict[str, Any]) -> dict[str, Any]:
    main: dict[str, Any] = raw["spec"]["dglReplicaSpecs"]["Worker"]["template"]["spec"][
        "containers"
    ][0]
    return main


def _run_kueue_scenario(h: Harness) -> None:
    """A queued job with a priority class: its Workload made, admitted on a flavor, evicted
    (the reservation cleared), admitted again, then failed (the Workload Finished)."""
    high = {"kind": "PriorityClass", "metadata": {"name": "high"}, "value": 1000}
    h.kube.create(PRIORITYCLASSES, None, {"apiVersion": "scheduling.k8s.io/v1", **high})
    h.kube.create(RESOURCEFLAVORS, None, copy.deepcopy(FLAVOR))
    raw = queued(
        runPolicy={
            "backoffLimit": 0,
            "ttlSecondsAfterFinished": 0,
            "schedulingPolicy": {"priorityClass": "high"},
        }
    )
    raw["metadata"]["name"] = "queued"
    h.create_job(raw)
    wait_for(lambda: h.kube.objects(WORKLOADS, NS), what="the Workload")
    kueue_writes(h, admitted_status())
    wait_for(lambda: "queued-worker-0" in h.pods(), what="the admitted job's pods")
    evicted = admitted_status()
    evicted["conditions"].append(cond("Evicted", True, "Preempted", "preempted"))
    kueue_writes(h, evicted)
    wait_for(lambda: all(terminating(p) for p in h.pods().values()), what="the pods deleted")
    for name in list(h.pods()):
        h.kube.delete(PODS, NS, name, grace_period_seconds=0)
    wait_for(lambda: workload(h)["status"].get("admission") is None, what="the reservation cleared")
    kueue_writes(h, admitted_status())
    wait_for(lambda: "queued-worker-0" in h.pods(), what="the pods again")
    # its templates changed while admitted: the attempt stops, the Workload is replaced
    old = workload(h)["metadata"]["uid"]
    h.edit_job(lambda raw: worker_main(raw).update(resources={"requests": {"cpu": "2"}}), "queued")
    wait_for(
        lambda: [w["metadata"]["uid"] for w in h.kube.objects(WORKLOADS, NS)] not in ([], [old]),
        what="the Workload replaced",
    )
    for name in list(h.pods()):
        h.kube.delete(PODS, NS, name, grace_period_seconds=0)
    kueue_writes(h, admitted_status())
    wait_for(lambda: "queued-worker-0" in h.pods(), what="the pods of the new admission")
    h.finish_pod("queued-worker-0", exit_code=1)
    wait_for(lambda: "Finished" in str(workload(h)["status"]), what="the Workload Finished")
    wait_for(lambda: not h.kube.objects(DGLJOBS, NS), what="TTL deletion")
    h.kube.collect_garbage()


@pytest.mark.parametrize(
    "options",
    [
        BuildOptions(),
        BuildOptions(gang_scheduling=GANG_SCHEDULER_PLUGINS),
        BuildOptions(kueue=True),
    ],
    ids=["default", "gang-scheduling", "kueue"],
)
def test_every_call_is_allowed_and_every_rule_is_used(options: BuildOptions) -> None:
    gang = options.gang
    h = Harness(wrap=Recording, options=options)
    h.start()
    try:
        if options.kueue:
            _run_kueue_scenario(h)
        _run_scenarios(h)
        assert isinstance(h.client, Recording)
        recording = h.client
        stop = threading.Event()
        elector = LeaderElector(
            recording,
            LeaderConfig("dgl-system", "lease", "me", 1.0, 0.5, 0.05),
            on_started_leading=stop.set,
            on_stopped_leading=lambda: None,
        )
        assert elector.try_acquire_or_renew() and elector.try_acquire_or_renew()
        h.recorder.flush()
        calls = set(recording.calls)
    finally:
        h.close()
    rules = (
        operator_rules(gang, options.kueue) + cluster_rules(options.kueue) + LEADER_ELECTION_RULES
    )
    denied = sorted(c for c in calls if not allows(rules, *c))
    assert denied == [], f"calls the RBAC rules do not allow: {denied}"
    granted = triples(rules)
    # Permissions the fake cannot exercise: what the job Roles grant (exec into workers,
    # dglrun's progress patch) is needed only to create those Roles (RBAC's escalation
    # check); finalizers only by the OwnerReferencesPermissionEnforcement admission plugin;
    # 'get' of children only on AlreadyExists.
    implicit = {(g, r, v) for role in _job_roles() for g, r, v in triples(role["rules"])} | {
        ("qihoo.net", "dgljobs/finalizers", "update")
    }
    unused = sorted(granted - calls - implicit - {(g, r, "get") for g, r, _ in granted})
    assert unused == [], f"rules no code path uses: {unused}"
