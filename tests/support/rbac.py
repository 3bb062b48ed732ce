"""The permissions the operator needs, in one place: the Helm chart's (Cluster)Role is checked
against this list, and tests check this list against the API calls the controller really
makes (tests/controller/test_rbac.py).

The operator itself never imports this module (so it is here, among the tests' shared
helpers, not in the controller): it is the RBAC the chart grants
(charts/dgl-operator/templates/rbac.yaml), kept as data so that tests/chart (rendered and
installed chart), tests/apiserver/test_least_privilege.py (:func:`cluster_role`) and
tests/controller/test_rbac.py can compare it with the chart and with the calls made."""

from __future__ import annotations

from typing import Any

RULES: list[dict[str, Any]] = [
    {
        "apiGroups": ["qihoo.net"],
        "resources": ["dgljobs"],
        "verbs": ["get", "list", "watch", "delete"],
    },
    # the operator alone writes the status (update); get: only to grant it to the launcher's
    # and partitioner's Roles (an elastic job's grow and members; RBAC's escalation check)
    {
        "apiGroups": ["qihoo.net"],
        "resources": ["dgljobs/status"],
        "verbs": ["get", "update"],
    },
    # blockOwnerDeletion on children needs update on the owner's finalizers subresource
    # (OwnerReferencesPermissionEnforcement admission).
    {"apiGroups": ["qihoo.net"], "resources": ["dgljobs/finalizers"], "verbs": ["update"]},
    {
        "apiGroups": [""],
        "resources": ["pods", "services"],
        "verbs": ["get", "list", "watch", "create", "delete"],
    },
    # patch: only to grant it to the job Roles, on the job's report (dglrun writes it)
    {
        "apiGroups": [""],
        "resources": ["configmaps"],
        "verbs": ["get", "list", "watch", "create", "update", "patch"],
    },
    {
        "apiGroups": [""],
        "resources": ["serviceaccounts"],
        "verbs": ["get", "list", "watch", "create"],
    },
    # partitionTransfer HTTP: the job's token Secret (created, never read: the operator
    # cannot read any Secret)
    {"apiGroups": [""], "resources": ["secrets"], "verbs": ["create"]},
    # spec.storage: the claim made from claimTemplate; whether the user's claimName exists
    {"apiGroups": [""], "resources": ["persistentvolumeclaims"], "verbs": ["get", "create"]},
    # each job's NetworkPolicy (its pods take connections from its own only)
    {
        "apiGroups": ["networking.k8s.io"],
        "resources": ["networkpolicies"],
        "verbs": ["get", "list", "watch", "create"],
    },
    {
        "apiGroups": ["rbac.authorization.k8s.io"],
        "resources": ["roles", "rolebindings"],
        "verbs": ["get", "list", "watch", "create"],
    },
    {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch"]},
]

# --gang-scheduling scheduler-plugins (chart value gangScheduling): one PodGroup per job, watched
# and created; never updated or deleted (the garbage collector deletes it with its job)
GANG_SCHEDULING_RULES: list[dict[str, Any]] = [
    {
        "apiGroups": ["scheduling.x-k8s.io"],
        "resources": ["podgroups"],
        "verbs": ["get", "list", "watch", "create"],
    },
]

# --kueue (chart value kueue): a queued job's Workload, created and watched; its status is
# patched (PodsReady, Finished, a reservation cleared after an eviction). Never updated or
# deleted (the garbage collector deletes it with its job).
KUEUE_RULES: list[dict[str, Any]] = [
    {
        "apiGroups": ["kueue.x-k8s.io"],
        "resources": ["workloads"],
        # (delete: a Workload that no longer stands for its job is replaced)
        "verbs": ["get", "list", "watch", "create", "delete"],
    },
    {"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads/status"], "verbs": ["patch"]},
    # the LocalQueues, read (never written): one named default takes its namespace's jobs
    # without the queue label (Kueue's LocalQueueDefaulting)
    {"apiGroups": ["kueue.x-k8s.io"], "resources": ["localqueues"], "verbs": ["list", "watch"]},
]
# ... and, cluster-scoped (the ClusterRole beside the nodes'): the admitted ResourceFlavors'
# nodeLabels and tolerations, and the value of a job's priority class (the Workload's priority)
KUEUE_CLUSTER_RULES: list[dict[str, Any]] = [
    {"apiGroups": ["kueue.x-k8s.io"], "resources": ["resourceflavors"], "verbs": ["get"]},
    {"apiGroups": ["scheduling.k8s.io"], "resources": ["priorityclasses"], "verbs": ["get"]},
]

# Nodes are cluster-scoped: a ClusterRole of their own, also when the operator watches one
# namespace. The Node informer tells a lost node (NotReady, unreachable, deleted) holding a
# job's pods; get: a node the cache does not hold yet.
NODE_RULES: list[dict[str, Any]] = [
    {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch"]},
]

# --metrics-secure: who asks for /metrics is reviewed by the API server
# (controller/machinery/metrics_server.py); cluster-scoped, the chart's <release>-nodes
METRICS_AUTH_RULES: list[dict[str, Any]] = [
    {"apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"], "verbs": ["create"]},
    {
        "apiGroups": ["authorization.k8s.io"],
        "resources": ["subjectaccessreviews"],
        "verbs": ["create"],
    },
]

# What a scraper of a secure /metrics needs (the chart's <release>-metrics-reader ClusterRole)
METRICS_READER_RULES: list[dict[str, Any]] = [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]

LEADER_ELECTION_RULES: list[dict[str, Any]] = [
    {
        "apiGroups": ["coordination.k8s.io"],
        "resources": ["leases"],
        "verbs": ["get", "create", "update"],
    },
]


# What the users who submit DGLJobs need beyond Kubernetes' own `edit` and `view` (the chart's
# <release>-edit and <release>-view ClusterRoles, aggregated into them: rbac.userRoles). dglctl
# and the client (dgl_operator/client/) also read the launcher's log (pods/log), list events,
# and for `results` create, get and delete a reader pod and its NetworkPolicy and read through
# the pod proxy (pods/proxy): `edit` has those, `view` the reads.
USER_EDIT_RULES: list[dict[str, Any]] = [
    {
        "apiGroups": ["qihoo.net"],
        "resources": ["dgljobs"],
        "verbs": [
            "create",
            "delete",
            "deletecollection",
            "get",
            "list",
            "patch",
            "update",
            "watch",
        ],
    },
    {
        "apiGroups": ["qihoo.net"],
        "resources": ["dgljobs/status"],
        "verbs": ["get", "list", "watch"],
    },
]
USER_VIEW_RULES: list[dict[str, Any]] = [
    {
        "apiGroups": ["qihoo.net"],
        "resources": ["dgljobs", "dgljobs/status"],
        "verbs": ["get", "list", "watch"],
    },
]


def triples(rules: list[dict[str, Any]]) -> set[tuple[str, str, str]]:
    """Every (apiGroup, resource, verb) the rules grant."""
    return {
        (g, r, v)
        for rule in rules
        for g in rule["apiGroups"]
        for r in rule["resources"]
        for v in rule["verbs"]
    }


def allows(rules: list[dict[str, Any]], group: str, resource: str, verb: str) -> bool:
    return any(
        group in r["apiGroups"] and resource in r["resources"] and verb in r["verbs"] for r in rules
    )


def operator_rules(gang: bool = False, kueue: bool = False) -> list[dict[str, Any]]:
    """The main rules (the chart's ClusterRole, or Role in watchNamespace)."""
    return RULES + (GANG_SCHEDULING_RULES if gang else []) + (KUEUE_RULES if kueue else [])


def cluster_rules(kueue: bool = False, secure_metrics: bool = False) -> list[dict[str, Any]]:
    """The rules on cluster-scoped resources (a ClusterRole whatever the watched namespace)."""
    return (
        NODE_RULES
        + (KUEUE_CLUSTER_RULES if kueue else [])
        + (METRICS_AUTH_RULES if secure_metrics else [])
    )


def cluster_role(
    name: str = "dgl-operator", gang: bool = False, kueue: bool = False
) -> dict[str, Any]:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": name},
        "rules": operator_rules(gang, kueue) + cluster_rules(kueue) + LEADER_ELECTION_RULES,
    }
