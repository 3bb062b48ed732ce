"""Malformed DGLJobs, each with the field its rejection must name.

Shared by the CRD tests (schema + CEL rules), the controller's own validation tests, and the
real-API-server admission tests.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass

from kubeclient import Obj


@dataclass(frozen=True)
class Case:
    id: str
    mutate: Callable[[Obj], object]  # what it returns is ignored
    field: str  # a substring the error message must contain
    # False: a rule only the parser states (the CRD cannot: pod templates are kept whole)
    crd: bool = True


def _spec(o: Obj) -> Obj:
    spec: Obj = o["spec"]
    return spec


def _rs(o: Obj, rtype: str) -> Obj:
    rs: Obj = o["spec"]["dglReplicaSpecs"][rtype]
    return rs


def _main(o: Obj, rtype: str) -> Obj:
    c: Obj = _rs(o, rtype)["template"]["spec"]["containers"][0]
    return c


def _pod_spec(o: Obj, rtype: str) -> Obj:
    spec: Obj = _rs(o, rtype)["template"]["spec"]
    return spec


def _run_policy(o: Obj) -> Obj:
    rp: Obj = o["spec"].setdefault("runPolicy", {})
    return rp


def _skip(o: Obj) -> Obj:
    """Make o a Skip-mode job (no Worker replicas); returns o."""
    _spec(o)["partitionMode"] = "Skip"
    del _spec(o)["dglReplicaSpecs"]["Worker"]
    return o


def _elastic(o: Obj, **policy: object) -> Obj:
    """Make o an elastic job (on spec.storage, which elastic jobs need) with ``policy`` as
    its elasticPolicy; returns o."""
    _spec(o).setdefault("storage", {"claimName": "results"})
    _spec(o)["elasticPolicy"] = dict(policy)
    return o


def _default_worker_replicas(o: Obj) -> Obj:
    """Drop o's Worker replicas (their default is 1); returns o."""
    del _rs(o, "Worker")["replicas"]
    return o


def _elastic_skip(o: Obj) -> None:
    _elastic(_skip(o), minReplicas=1)


CASES: list[Case] = [
    Case(
        "partition-mode-unknown", lambda o: _spec(o).update(partitionMode="Bogus"), "partitionMode"
    ),
    Case(
        "parmetis-without-chunked-graph",
        lambda o: _spec(o).update(partitionMode="ParMETIS"),
        "chunkedGraph",
    ),
    Case(
        "distparmetis-without-chunked-graph",
        lambda o: _spec(o).update(partitionMode="DistParMETIS"),
        "chunkedGraph",
    ),
    Case(
        "chunked-graph-in-dgl-api-mode",
        lambda o: _spec(o).update(chunkedGraph={"path": "/data/chunked"}),
        "chunkedGraph",
    ),
    Case(
        "chunked-graph-relative-path",
        lambda o: _spec(o).update(partitionMode="ParMETIS", chunkedGraph={"path": "data/g"}),
        "chunkedGraph.path",
    ),
    Case(
        "chunked-graph-path-missing",
        lambda o: _spec(o).update(partitionMode="DistParMETIS", chunkedGraph={"layout": "Shared"}),
        "path",
    ),
    Case(
        "chunked-graph-unknown-field",
        lambda o: _spec(o).update(
            partitionMode="ParMETIS", chunkedGraph={"path": "/g", "layot": "x"}
        ),
        "chunkedGraph.layot",
    ),
    Case(
        "chunked-graph-layout-unknown",
        lambda o: _spec(o).update(
            partitionMode="DistParMETIS", chunkedGraph={"path": "/g", "layout": "Sometimes"}
        ),
        "chunkedGraph.layout",
    ),
    Case(
        "chunked-graph-per-worker-in-parmetis-mode",
        lambda o: _spec(o).update(
            partitionMode="ParMETIS", chunkedGraph={"path": "/g", "layout": "PerWorker"}
        ),
        "chunkedGraph.layout",
    ),
    Case(
        "clean-pod-policy-unknown",
        lambda o: _spec(o).update(cleanPodPolicy="Sometimes"),
        "cleanPodPolicy",
    ),
    Case(
        "launcher-creation-policy-unknown",
        lambda o: _spec(o).update(launcherCreationPolicy="Later"),
        "launcherCreationPolicy",
    ),
    Case("worker-missing", lambda o: _spec(o)["dglReplicaSpecs"].pop("Worker"), "Worker"),
    Case("worker-in-skip-mode", lambda o: _spec(o).update(partitionMode="Skip"), "Worker"),
    Case("launcher-missing", lambda o: _spec(o)["dglReplicaSpecs"].pop("Launcher"), "Launcher"),
    Case("replica-specs-missing", lambda o: _spec(o).pop("dglReplicaSpecs"), "dglReplicaSpecs"),
    Case("spec-missing", lambda o: o.pop("spec"), "spec"),
    Case(
        "launcher-replicas-2", lambda o: _rs(o, "Launcher").update(replicas=2), "Launcher.replicas"
    ),
    Case("worker-replicas-0", lambda o: _rs(o, "Worker").update(replicas=0), "Worker.replicas"),
    Case(
        "worker-replicas-string",
        lambda o: _rs(o, "Worker").update(replicas="two"),
        "Worker.replicas",
    ),
    Case(
        "worker-replicas-too-many",
        lambda o: _rs(o, "Worker").update(replicas=10001),
        "Worker.replicas",
    ),
    Case(
        "launcher-template-missing",
        lambda o: _rs(o, "Launcher").pop("template"),
        "Launcher.template",
    ),
    Case(
        "worker-no-containers",
        lambda o: _rs(o, "Worker")["template"]["spec"].update(containers=[]),
        "Worker.template.spec.containers",
    ),
    Case(
        "worker-template-without-spec",
        lambda o: _rs(o, "Worker")["template"].pop("spec"),
        "Worker.template.spec",
    ),
    Case(
        "replica-type-unknown",
        lambda o: _spec(o)["dglReplicaSpecs"].update(PS=_rs(o, "Worker")),
        "dglReplicaSpecs",
    ),
    Case(
        "command-not-a-list",
        lambda o: _main(o, "Launcher").update(command="dglrun"),
        "containers[0].command",
    ),
    Case("container-without-image", lambda o: _main(o, "Worker").pop("image"), "image"),
    Case("container-without-name", lambda o: _main(o, "Launcher").pop("name"), "name"),
    Case(
        "unquoted-number-in-args",
        lambda o: _main(o, "Launcher")["args"].__setitem__(9, 2),
        "args[9]",
    ),
    Case(
        "backoff-limit-negative", lambda o: _run_policy(o).update(backoffLimit=-1), "backoffLimit"
    ),
    Case(
        "active-deadline-zero",
        lambda o: _run_policy(o).update(activeDeadlineSeconds=0),
        "activeDeadlineSeconds",
    ),
    Case(
        "ttl-negative",
        lambda o: _run_policy(o).update(ttlSecondsAfterFinished=-5),
        "ttlSecondsAfterFinished",
    ),
    Case("suspend-not-bool", lambda o: _run_policy(o).update(suspend="yes"), "suspend"),
    Case(
        "min-available-zero",
        lambda o: _run_policy(o).update(schedulingPolicy={"minAvailable": 0}),
        "minAvailable",
    ),
    Case(
        "schedule-timeout-zero",
        lambda o: _run_policy(o).update(schedulingPolicy={"scheduleTimeoutSeconds": 0}),
        "scheduleTimeoutSeconds",
    ),
    Case(
        "scheduling-queue-not-a-string",
        lambda o: _run_policy(o).update(schedulingPolicy={"queue": 5}),
        "queue",
    ),
    Case(
        "scheduling-priority-class-not-a-name",
        lambda o: _run_policy(o).update(schedulingPolicy={"priorityClass": "High_Prio"}),
        "priorityClass",
    ),
    Case(
        "min-available-above-the-gang",  # the seed creates 3 pods at once (no launcher)
        lambda o: _run_policy(o).update(schedulingPolicy={"minAvailable": 4}),
        "minAvailable",
        crd=False,
    ),
    Case("slots-per-worker-zero", lambda o: _spec(o).update(slotsPerWorker=0), "slotsPerWorker"),
    Case(
        "name-too-long-for-partitioner",
        lambda o: o["metadata"].update(name="j" * 52),
        "metadata.name",
    ),
    Case(
        "name-too-long-for-launcher-in-skip",
        lambda o: _skip(o)["metadata"].update(name="s" * 55),
        "metadata.name",
    ),
    Case("name-not-dns-1035", lambda o: o["metadata"].update(name="1-job"), "metadata.name"),
    Case("storage-empty", lambda o: _spec(o).update(storage={}), "claimName"),
    Case(
        "storage-claim-and-template",
        lambda o: _spec(o).update(storage={"claimName": "r", "claimTemplate": {"spec": {}}}),
        "claimTemplate",
    ),
    Case(
        "storage-claim-name-invalid",
        lambda o: _spec(o).update(storage={"claimName": "Results_1"}),
        "claimName",
    ),
    Case(
        "storage-policy-with-claim-name",
        lambda o: _spec(o).update(storage={"claimName": "r", "claimPolicy": "Delete"}),
        "claimPolicy",
    ),
    Case(
        "storage-policy-unknown",
        lambda o: _spec(o).update(storage={"claimTemplate": {"spec": {}}, "claimPolicy": "Keep"}),
        "claimPolicy",
    ),
    Case(
        "storage-path-escapes",
        lambda o: _spec(o).update(storage={"claimName": "r", "path": "a/../../b"}),
        "path",
    ),
    Case(
        "storage-template-without-spec",
        lambda o: _spec(o).update(storage={"claimTemplate": {"metadata": {}}}),
        "claimTemplate.spec",
    ),
    Case(
        "storage-template-unknown-field",
        lambda o: _spec(o).update(storage={"claimTemplate": {"spec": {}, "kind": "PVC"}}),
        "claimTemplate.kind",
    ),
    Case(
        "storage-template-names-the-claim",
        lambda o: _spec(o).update(
            storage={"claimTemplate": {"spec": {}, "metadata": {"name": "mine"}}}
        ),
        "claimTemplate.metadata.name",
    ),
    Case(
        "storage-share-not-bool",
        lambda o: _spec(o).update(storage={"claimName": "r", "sharePartitions": "yes"}),
        "sharePartitions",
    ),
    Case(
        "storage-cache-limit-not-a-quantity",
        lambda o: _spec(o).update(storage={"claimName": "r", "cacheLimit": "20GB"}),
        "spec.storage.cacheLimit",
    ),
    Case(
        "storage-cache-limit-negative",
        lambda o: _spec(o).update(storage={"claimName": "r", "cacheLimit": "-1Gi"}),
        "spec.storage.cacheLimit",
    ),
    Case(
        "storage-cache-limit-unquoted-number",
        lambda o: _spec(o).update(storage={"claimName": "r", "cacheLimit": 1000}),
        "spec.storage.cacheLimit",
    ),
    # spec.elasticPolicy (the seed has 2 Worker replicas: maxReplicas' default)
    Case(
        "elastic-not-an-object",
        lambda o: _spec(_elastic(o)).update(elasticPolicy=3),
        "elasticPolicy",
    ),
    Case(
        "elastic-min-replicas-zero",
        lambda o: _elastic(o, minReplicas=0, maxReplicas=2),
        "elasticPolicy.minReplicas",
    ),
    Case(
        "elastic-min-replicas-string",
        lambda o: _elastic(o, minReplicas="1"),
        "elasticPolicy.minReplicas",
    ),
    Case(
        "elastic-min-replicas-too-many",
        lambda o: _elastic(o, minReplicas=10001, maxReplicas=10001),
        "elasticPolicy.minReplicas",
    ),
    Case(
        "elastic-max-replicas-zero",
        lambda o: _elastic(o, maxReplicas=0),
        "elasticPolicy.maxReplicas",
    ),
    Case(
        "elastic-max-replicas-too-many",
        lambda o: _elastic(o, maxReplicas=10001),
        "elasticPolicy.maxReplicas",
    ),
    Case(
        "elastic-min-above-max",
        lambda o: _elastic(o, minReplicas=3, maxReplicas=2),
        "elasticPolicy.minReplicas",
    ),
    Case(
        "elastic-min-above-default-max",  # maxReplicas defaults to the Worker replicas (2)
        lambda o: _elastic(o, minReplicas=3),
        "elasticPolicy.minReplicas",
    ),
    Case(
        "elastic-min-above-default-worker-replicas",  # Worker replicas default to 1
        lambda o: _elastic(_default_worker_replicas(o), minReplicas=2),
        "elasticPolicy.minReplicas",
    ),
    Case(
        "elastic-worker-replicas-above-max",
        lambda o: _elastic(o, minReplicas=1, maxReplicas=1),
        "spec.dglReplicaSpecs.Worker.replicas",
    ),
    Case(
        "elastic-worker-replicas-below-min",
        lambda o: _elastic(o, minReplicas=3, maxReplicas=4),
        "spec.dglReplicaSpecs.Worker.replicas",
    ),
    Case(
        "elastic-settle-negative",
        lambda o: _elastic(o, settleSeconds=-1),
        "elasticPolicy.settleSeconds",
    ),
    Case(
        "elastic-settle-too-long",
        lambda o: _elastic(o, settleSeconds=3601),
        "elasticPolicy.settleSeconds",
    ),
    Case(
        "elastic-cooldown-negative",
        lambda o: _elastic(o, cooldownSeconds=-1),
        "elasticPolicy.cooldownSeconds",
    ),
    Case(
        "elastic-cooldown-too-long",
        lambda o: _elastic(o, cooldownSeconds=86401),
        "elasticPolicy.cooldownSeconds",
    ),
    Case(
        "elastic-unknown-field",
        lambda o: _elastic(o, minReplicas=1, maxWorkers=3),
        "elasticPolicy.maxWorkers",
    ),
    Case(
        "elastic-without-storage",
        lambda o: _spec(o).update(elasticPolicy={"minReplicas": 1}),
        "needs spec.storage",
    ),
    Case("elastic-in-skip-mode", _elastic_skip, "Skip has no workers to scale"),
    Case(
        "elastic-with-a-gang-size",
        lambda o: _run_policy(_elastic(o)).update(schedulingPolicy={"minAvailable": 2}),
        "spec.runPolicy.schedulingPolicy.minAvailable",
    ),
    # what only the parser checks: a pod template's resource quantities
    Case(
        "worker-memory-limit-6K",
        lambda o: _main(o, "Worker").update(resources={"limits": {"memory": "6K"}}),
        "spec.dglReplicaSpecs.Worker.template.spec.containers[0].resources.limits.memory",
        crd=False,
    ),
    # spec.outOfCore
    Case(
        "out-of-core-fraction-above-one",
        lambda o: _spec(o).update(outOfCore={"enabled": True, "pageCacheFraction": 1.5}),
        "pageCacheFraction",
    ),
    Case(
        "out-of-core-order-unknown",
        lambda o: _spec(o).update(outOfCore={"enabled": True, "order": "buffer"}),
        "order",
    ),
    Case(
        "out-of-core-enabled-not-bool",
        lambda o: _spec(o).update(outOfCore={"enabled": "yes"}),
        "outOfCore.enabled",
    ),
    Case(
        "out-of-core-unknown-field",
        lambda o: _spec(o).update(outOfCore={"enabled": True, "pageCache": 0.5}),
        "outOfCore.pageCache",
    ),
    Case(
        "out-of-core-in-skip-mode",
        lambda o: _spec(_skip(o)).update(outOfCore={"enabled": True}),
        "needs workers: partitionMode Skip",
    ),
    # a template wearing a service account the operator makes (another job's launcher, this
    # job's own launcher, a Skip launcher taking a partitioner's): refused naming the field
    Case(
        "worker-wears-another-jobs-launcher-account",
        lambda o: _pod_spec(o, "Worker").update(serviceAccountName="other-launcher"),
        "spec.dglReplicaSpecs.Worker.template.spec.serviceAccountName",
    ),
    Case(
        "worker-wears-its-own-jobs-launcher-account-by-the-old-field",
        lambda o: _pod_spec(o, "Worker").update(serviceAccount="dgl-graphsage-launcher"),
        "spec.dglReplicaSpecs.Worker.template.spec.serviceAccount",
    ),
    Case(
        "skip-launcher-wears-a-partitioner-account",
        lambda o: _pod_spec(_skip(o), "Launcher").update(serviceAccountName="other-partitioner"),
        "spec.dglReplicaSpecs.Launcher.template.spec.serviceAccountName",
    ),
    Case(
        "worker-service-account-not-a-string",
        lambda o: _pod_spec(o, "Worker").update(serviceAccountName=7),
        "spec.dglReplicaSpecs.Worker.template.spec.serviceAccountName",
    ),
]

# the cases the CRD refuses too (the admission tests run these against the API server)
CRD_CASES = [c for c in CASES if c.crd]


def apply_case(base: Obj, case: Case) -> Obj:
    obj = copy.deepcopy(base)
    case.mutate(obj)
    return obj
