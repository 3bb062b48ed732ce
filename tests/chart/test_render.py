"""The Helm chart rendered by the real ``helm``: lint, schema validation of every object for the
cluster's Kubernetes version, RBAC equal to tests/support/rbac.py, the operator's flags
(parsed by the operator's own argument parser), security settings, and the values' failure
messages."""

from __future__ import annotations

import base64
import copy
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from controller.builders import DEFAULT_GANG_SCHEDULER_NAME
from controller.main import VERSION, parse_settings
from tests.chart.helpers import KUBE_VERSION, Helm, find, kinds
from tests.support.paths import CHART, REPO
from tests.support.rbac import (
    LEADER_ELECTION_RULES,
    METRICS_READER_RULES,
    USER_EDIT_RULES,
    USER_VIEW_RULES,
    cluster_rules,
    operator_rules,
    triples,
)

RELEASE = "dgl-operator"
NS = "dgl-system"
SHA = "0123456789abcdef" * 4
KUBECTL_URL = "https://dl.k8s.io/release/v1.34.4/bin/linux/amd64/kubectl"
MONITORING = "monitoring.coreos.com/v1"

SCHEDULING: dict[str, Any] = {
    "resources": {"requests": {"cpu": "250m", "memory": "256Mi"}, "limits": {"memory": "1Gi"}},
    "nodeSelector": {"kubernetes.io/os": "linux", "node-role.example.com/infra": "true"},
    "tolerations": [
        {"key": "dedicated", "operator": "Equal", "value": "infra", "effect": "NoSchedule"}
    ],
    "affinity": {
        "podAntiAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 100,
                    "podAffinityTerm": {
                        "topologyKey": "kubernetes.io/hostname",
                        "labelSelector": {
                            "matchLabels": {"app.kubernetes.io/name": "dgl-operator"}
                        },
                    },
                }
            ]
        }
    },
    "topologySpreadConstraints": [
        {
            "maxSkew": 1,
            "topologyKey": "topology.kubernetes.io/zone",
            "whenUnsatisfiable": "ScheduleAnyway",
            "labelSelector": {"matchLabels": {"app.kubernetes.io/name": "dgl-operator"}},
        }
    ],
    "commonLabels": {"team": "graph-ml", "cost-center": 42, "opt-in": "yes"},
    "podLabels": {"sidecar.istio.io/inject": "false"},
    "podAnnotations": {"prometheus.io/scrape": "true"},
    "imagePullSecrets": [{"name": "regcred"}],
    "priorityClassName": "system-cluster-critical",
    "image": {"repository": "registry.example.com/dgl/dgl-operator", "tag": "0.2.0-rc1"},
    "watcherLoop": {"image": {"repository": "registry.example.com/dgl/watcher-loop"}},
    "kubectlDownload": {
        "image": {
            "repository": "registry.example.com/dgl/kubectl-download",
            "digest": "sha256:" + SHA,
        }
    },
    "initImagePullPolicy": "Always",
    "workers": 8,
    "resyncPeriod": 120,
    "logFormat": "console",
    "logLevel": "debug",
    "extraEnv": [{"name": "TZ", "value": "UTC"}],
    "extraArgs": ["--leader-elect-retry-period=1"],
    "serviceAccount": {"annotations": {"example.com/role": "dgl"}},
    "metrics": {"service": {"annotations": {"example.com/scrape": "yes"}, "labels": {"x": "y"}}},
}

MONITORS: dict[str, Any] = {
    "metrics": {
        "serviceMonitor": {
            "enabled": True,
            "interval": "15s",
            "scrapeTimeout": "10s",
            "labels": {"release": "kube-prometheus-stack"},
            "metricRelabelings": [
                {"action": "drop", "sourceLabels": ["__name__"], "regex": "python_gc_.*"}
            ],
        },
        "podMonitor": {
            "enabled": True,
            "namespace": "monitoring",
            "labels": {"release": "kube-prometheus-stack"},
            "relabelings": [{"targetLabel": "cluster", "replacement": "gpu-a"}],
        },
    }
}

VALUE_SETS: dict[str, dict[str, Any]] = {
    "default": {},
    "watch-namespace": {"watchNamespace": "team-a"},
    "replicas-3": {"replicas": 3},
    "leader-forced": {"leaderElection": {"force": True, "leaseName": "my-lease"}},
    "monitors": MONITORS,
    "kubectl-url-sha": {"kubectlDownload": {"url": KUBECTL_URL, "sha256": "sha256:" + SHA.upper()}},
    "scheduling-labels": SCHEDULING,
    "existing-sa": {"serviceAccount": {"create": False, "name": "ops-operator"}},
    "no-rbac": {"rbac": {"create": False}},
    "no-user-roles": {"rbac": {"userRoles": False}},
    "gang": {"gangScheduling": "scheduler-plugins"},
    "gang-named-in-namespace": {
        "gangScheduling": "scheduler-plugins",
        "gangSchedulerName": "coscheduler",
        "watchNamespace": "team-a",
    },
    "kueue": {"kueue": True},
    "kueue-in-namespace": {"kueue": True, "watchNamespace": "team-a"},
    "kueue-mandatory": {"kueue": True, "kueueManageJobsWithoutQueueName": True},
    "no-service": {"metrics": {"service": {"enabled": False}, "podMonitor": {"enabled": True}}},
    "secure-metrics": {"metrics": {"secure": True, "serviceMonitor": {"enabled": True}}},
    "secure-metrics-own-cert": {
        "metrics": {
            "secure": True,
            "certSecret": "ops-metrics-tls",
            "service": {"enabled": False},
            "podMonitor": {
                "enabled": True,
                "bearerTokenSecret": {"name": "prometheus-token", "key": "token"},
            },
        },
        "watchNamespace": "team-a",
    },
    "everything": {
        **SCHEDULING,
        **MONITORS,
        "watchNamespace": "dgl-system",
        "replicas": 2,
        "kubectlDownload": {**SCHEDULING["kubectlDownload"], "url": KUBECTL_URL, "sha256": SHA},
        "fullnameOverride": "dgl",
        # the monitoring engineer's templates, against these helpers and values
        "prometheusRule": {"enabled": True, "labels": {"release": "kube-prometheus-stack"}},
        "grafanaDashboard": {"enabled": True},
    },
}


def leader_on(values: dict[str, Any]) -> bool:
    return bool(
        values.get("replicas", 1) > 1 or values.get("leaderElection", {}).get("force", True)
    )


def fullname(values: dict[str, Any]) -> str:
    return values.get("fullnameOverride") or RELEASE


@pytest.fixture(scope="module")
def rendered(helm: Helm, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("render")
    return {
        name: helm.template(values, tmp=tmp, release=RELEASE, namespace=NS)
        for name, values in VALUE_SETS.items()
    }


def deployment(docs: list[dict[str, Any]]) -> dict[str, Any]:
    return find(docs, "Deployment")


def container(docs: list[dict[str, Any]]) -> dict[str, Any]:
    containers = deployment(docs)["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1
    c: dict[str, Any] = containers[0]
    return c


# -- lint -----------------------------------------------------------------------------------


@pytest.mark.parametrize("strict", [False, True], ids=["lint", "lint-strict"])
def test_helm_lint_is_clean(helm: Helm, strict: bool) -> None:
    proc = helm.run("lint", str(CHART), "--kube-version", KUBE_VERSION, *(["--strict"] * strict))
    assert "1 chart(s) linted, 0 chart(s) failed" in proc.stdout
    assert "[WARNING]" not in proc.stdout and "[ERROR]" not in proc.stdout, proc.stdout


@pytest.mark.parametrize("name", sorted(VALUE_SETS))
def test_helm_lint_strict_with_values(helm: Helm, name: str, tmp_path: Path) -> None:
    f = tmp_path / "values.yaml"
    f.write_text(json.dumps(VALUE_SETS[name]))
    proc = helm.run("lint", str(CHART), "--strict", "--kube-version", KUBE_VERSION, "-f", str(f))
    assert "0 chart(s) failed" in proc.stdout, proc.stdout
    assert "[WARNING]" not in proc.stdout and "[ERROR]" not in proc.stdout, proc.stdout


# -- schema validation ----------------------------------------------------------------------

_DURATION = {
    "type": "string",
    # the Prometheus Operator's monitoringv1.Duration
    "pattern": r"^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?"
    r"(([0-9]+)ms)?)$",
}
_RELABEL = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "sourceLabels": {"type": "array", "items": {"type": "string"}},
        "separator": {"type": "string"},
        "targetLabel": {"type": "string"},
        "regex": {"type": "string"},
        "modulus": {"type": "integer"},
        "replacement": {"type": "string"},
        "action": {
            "enum": [
                *("replace", "keep", "drop", "hashmod", "labelmap", "labeldrop", "labelkeep"),
                *("lowercase", "uppercase", "keepequal", "dropequal"),
                *("Replace", "Keep", "Drop", "HashMod", "LabelMap", "LabelDrop", "LabelKeep"),
                *("Lowercase", "Uppercase", "KeepEqual", "DropEqual"),
            ]
        },
    },
}
_STRING_MAP = {"type": "object", "additionalProperties": {"type": "string"}}
_ENDPOINT: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["port"],
    "properties": {
        "port": {"type": "string"},
        "path": {"type": "string"},
        "honorLabels": {"type": "boolean"},
        "interval": _DURATION,
        "scrapeTimeout": _DURATION,
        "relabelings": {"type": "array", "items": _RELABEL},
        "metricRelabelings": {"type": "array", "items": _RELABEL},
        # metrics.secure
        "scheme": {"enum": ["http", "https"]},
        "tlsConfig": {
            "type": "object",
            "additionalProperties": False,
            "properties": {"insecureSkipVerify": {"type": "boolean"}},
        },
        "bearerTokenSecret": {
            "type": "object",
            "additionalProperties": False,
            "required": ["key"],
            "properties": {
                "name": {"type": "string"},
                "key": {"type": "string"},
                "optional": {"type": "boolean"},
            },
        },
    },
}
# a ServiceMonitor's endpoint may also read a token file of Prometheus's pod (a PodMonitor's
# may not)
_SERVICE_ENDPOINT: dict[str, Any] = {
    **_ENDPOINT,
    "properties": {**_ENDPOINT["properties"], "bearerTokenFile": {"type": "string"}},
}


def _monitor_schema(kind: str, endpoints_key: str) -> dict[str, Any]:
    """The part of the Prometheus Operator's CRD schema (monitoring.coreos.com/v1) the chart
    uses, strict: an unknown or misplaced field fails."""
    return {
        "type": "object",
        "additionalProperties": False,
        "required": ["apiVersion", "kind", "metadata", "spec"],
        "properties": {
            "apiVersion": {"const": MONITORING},
            "kind": {"const": kind},
            "metadata": {
                "type": "object",
                "additionalProperties": False,
                "required": ["name", "namespace", "labels"],
                "properties": {
                    "name": {"type": "string", "pattern": r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"},
                    "namespace": {"type": "string"},
                    "labels": _STRING_MAP,
                    "annotations": _STRING_MAP,
                },
            },
            "spec": {
                "type": "object",
                "additionalProperties": False,
                "required": ["selector", endpoints_key],
                "properties": {
                    "namespaceSelector": {
                        "type": "object",
                        "additionalProperties": False,
                        "properties": {
                            "any": {"type": "boolean"},
                            "matchNames": {"type": "array", "items": {"type": "string"}},
                        },
                    },
                    "selector": {
                        "type": "object",
                        "additionalProperties": False,
                        "properties": {
                            "matchLabels": _STRING_MAP,
                            "matchExpressions": {"type": "array"},
                        },
                    },
                    endpoints_key: {
                        "type": "array",
                        "minItems": 1,
                        "items": _SERVICE_ENDPOINT if kind == "ServiceMonitor" else _ENDPOINT,
                    },
                },
            },
        },
    }


MONITOR_SCHEMAS = {
    "ServiceMonitor": _monitor_schema("ServiceMonitor", "endpoints"),
    "PodMonitor": _monitor_schema("PodMonitor", "podMetricsEndpoints"),
}


@pytest.mark.parametrize("name", sorted(VALUE_SETS))
def test_rendered_objects_validate_for_the_cluster_version(
    rendered: dict[str, Any], name: str, tmp_path: Path
) -> None:
    docs = rendered[name]
    f = tmp_path / "rendered.yaml"
    f.write_text(yaml.safe_dump_all(docs))
    # kubernetes-validate's CLI: Kubernetes' own (strict) schemas for the cluster's version
    proc = subprocess.run(
        [sys.executable, "-m", "kubernetes_validate", "--strict", "-k", KUBE_VERSION, str(f)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    passed = [ln for ln in lines if ln.startswith("INFO") and " passed for resource " in ln]
    warned = [ln for ln in lines if ln.startswith("WARN")]
    crd_kinds = [d for d in docs if d["apiVersion"] == MONITORING]
    assert len(passed) == len(docs) - len(crd_kinds), proc.stdout
    # only the Prometheus Operator's kinds lack a schema there: those are checked below
    assert len(warned) == len(crd_kinds), proc.stdout
    assert all(f"api version {MONITORING}" in ln for ln in warned), proc.stdout
    assert not [ln for ln in lines if ln.startswith(("ERROR", "FATAL"))], proc.stdout
    for doc in crd_kinds:
        if doc["kind"] in MONITOR_SCHEMAS:  # (PrometheusRule: tests/prometheus)
            jsonschema.validate(doc, MONITOR_SCHEMAS[doc["kind"]])


def test_monitors_select_the_operator_metrics(rendered: dict[str, Any]) -> None:
    docs = rendered["monitors"]
    svc = find(docs, "Service")
    pod = deployment(docs)["spec"]["template"]
    sm = find(docs, "ServiceMonitor")
    pm = find(docs, "PodMonitor")
    assert sm["metadata"]["namespace"] == NS
    assert pm["metadata"]["namespace"] == "monitoring"
    for mon in (sm, pm):
        assert mon["spec"]["namespaceSelector"] == {"matchNames": [NS]}
        assert mon["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    assert sm["spec"]["selector"]["matchLabels"].items() <= svc["metadata"]["labels"].items()
    assert pm["spec"]["selector"]["matchLabels"].items() <= pod["metadata"]["labels"].items()
    service_ports = {p["name"] for p in svc["spec"]["ports"]}
    container_ports = {p["name"] for p in pod["spec"]["containers"][0]["ports"]}
    assert [e["port"] for e in sm["spec"]["endpoints"]] == ["metrics"]
    assert {e["port"] for e in sm["spec"]["endpoints"]} <= service_ports
    assert [e["port"] for e in pm["spec"]["podMetricsEndpoints"]] == ["metrics"]
    assert {e["port"] for e in pm["spec"]["podMetricsEndpoints"]} <= container_ports
    assert sm["spec"]["endpoints"][0]["interval"] == "15s"
    assert sm["spec"]["endpoints"][0]["path"] == "/metrics"
    # the job metrics' own "namespace" label must survive the scrape (alerts, dashboard)
    assert sm["spec"]["endpoints"][0]["honorLabels"] is True
    # off by default
    assert not [d for d in rendered["default"] if d["apiVersion"] == MONITORING]


def test_metrics_service_targets_the_metrics_port(rendered: dict[str, Any]) -> None:
    docs = rendered["default"]
    svc = find(docs, "Service")
    assert svc["metadata"]["name"] == "dgl-operator-metrics"
    assert svc["spec"]["type"] == "ClusterIP"
    assert svc["spec"]["ports"] == [
        {"name": "metrics", "port": 8080, "targetPort": "metrics", "protocol": "TCP"}
    ]
    pod = deployment(docs)["spec"]["template"]
    assert svc["spec"]["selector"].items() <= pod["metadata"]["labels"].items()
    ports = {p["name"]: p["containerPort"] for p in container(docs)["ports"]}
    assert ports == {"metrics": 8080, "health": 8081}
    assert "Service" not in kinds(rendered["no-service"])


def test_the_operator_pod_takes_ingress_on_its_metrics_port_only(
    rendered: dict[str, Any], helm: Helm, tmp_path: Path
) -> None:
    docs = rendered["default"]
    policy = find(docs, "NetworkPolicy")
    assert policy["metadata"]["name"] == "dgl-operator"
    assert policy["metadata"]["namespace"] == NS
    pod = deployment(docs)["spec"]["template"]
    selector = policy["spec"]["podSelector"]["matchLabels"]
    assert selector.items() <= pod["metadata"]["labels"].items()
    assert policy["spec"]["policyTypes"] == ["Ingress"]  # (egress: the API server, as before)
    # by default: from every pod of every namespace, to the metrics port, nothing else
    assert policy["spec"]["ingress"] == [
        {
            "from": [{"namespaceSelector": {}, "podSelector": {}}],
            "ports": [{"port": 8080, "protocol": "TCP"}],
        }
    ]
    monitoring = {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}
    prometheus = {"matchLabels": {"app.kubernetes.io/name": "prometheus"}}
    outside = {"from": [{"ipBlock": {"cidr": "10.9.0.0/16"}}], "ports": [{"port": 8080}]}
    narrowed = helm.template(
        {
            "metrics": {"port": 9090},
            "networkPolicy": {
                "operator": {
                    "metricsFrom": {"namespaceSelector": monitoring, "podSelector": prometheus},
                    "extraIngress": [outside],
                }
            },
        },
        tmp=tmp_path,
        release=RELEASE,
        namespace=NS,
    )
    assert find(narrowed, "NetworkPolicy")["spec"]["ingress"] == [
        {
            "from": [{"namespaceSelector": monitoring, "podSelector": prometheus}],
            "ports": [{"port": 9090, "protocol": "TCP"}],
        },
        outside,
    ]
    off = helm.template(
        {"networkPolicy": {"operator": {"enabled": False}}},
        tmp=tmp_path,
        release=RELEASE,
        namespace=NS,
    )
    assert "NetworkPolicy" not in kinds(off)
    # (the jobs' policies are the operator's flag, apart from the operator's own)
    jobs_off = helm.template(
        {"networkPolicy": {"enabled": False}}, tmp=tmp_path, release=RELEASE, namespace=NS
    )
    assert "NetworkPolicy" in kinds(jobs_off)
    assert "--no-network-policy" in container(jobs_off)["args"]


# -- RBAC -----------------------------------------------------------------------------------

Triple = tuple[str, str, str]


def effective_permissions(
    docs: list[dict[str, Any]], sa_namespace: str, sa_name: str
) -> dict[str, set[Triple]]:
    """What the rendered bindings grant the operator's ServiceAccount: scope ('*' for
    cluster-wide, else the namespace) -> (apiGroup, resource, verb) triples."""
    by_name = {
        (d["kind"], d["metadata"].get("namespace"), d["metadata"]["name"]): d
        for d in docs
        if d["kind"] in ("Role", "ClusterRole") and not _not_the_operators(d)
    }
    grants: dict[str, set[Triple]] = {}
    bound: set[tuple[str, str | None, str]] = set()
    for b in docs:
        if b["kind"] not in ("RoleBinding", "ClusterRoleBinding"):
            continue
        subjects = b["subjects"]
        assert subjects == [{"kind": "ServiceAccount", "name": sa_name, "namespace": sa_namespace}]
        ref = b["roleRef"]
        assert ref["apiGroup"] == "rbac.authorization.k8s.io"
        ns = b["metadata"].get("namespace")
        role_ns = None if ref["kind"] == "ClusterRole" else ns
        role = by_name[(ref["kind"], role_ns, ref["name"])]
        bound.add((ref["kind"], role_ns, ref["name"]))
        for rule in role["rules"]:
            # nothing beyond apiGroups/resources/verbs: no resourceNames, no URLs
            assert set(rule) == {"apiGroups", "resources", "verbs"}, rule
        scope = "*" if b["kind"] == "ClusterRoleBinding" else ns
        assert scope is not None
        grants.setdefault(scope, set()).update(triples(role["rules"]))
    assert bound == set(by_name), "every rendered (Cluster)Role is bound to the operator"
    return grants


@pytest.mark.parametrize("name", sorted(VALUE_SETS))
def test_rbac_is_exactly_what_the_controller_uses(rendered: dict[str, Any], name: str) -> None:
    values = VALUE_SETS[name]
    docs = rendered[name]
    if not values.get("rbac", {}).get("create", True):
        operators = [d for d in docs if not _not_the_operators(d)]
        assert not {"Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding"} & set(
            kinds(operators)
        )
        return
    pod_spec = deployment(docs)["spec"]["template"]["spec"]
    sa = pod_spec["serviceAccountName"]
    grants = effective_permissions(docs, NS, sa)
    expected: dict[str, set[Triple]] = {}
    watch = values.get("watchNamespace")
    kueue = bool(values.get("kueue"))
    secure = bool(values.get("metrics", {}).get("secure"))
    expected[watch or "*"] = triples(operator_rules(bool(values.get("gangScheduling")), kueue))
    # nodes (and Kueue's flavors, priority classes, the metrics' reviews) are cluster-scoped:
    # a ClusterRole of their own, whatever the watched namespace
    expected.setdefault("*", set()).update(triples(cluster_rules(kueue, secure)))
    if leader_on(values):
        expected.setdefault(NS, set()).update(triples(LEADER_ELECTION_RULES))
    assert grants == expected
    cluster = [
        d
        for d in docs
        if d["kind"] in ("ClusterRole", "ClusterRoleBinding") and not _not_the_operators(d)
    ]
    assert all("namespace" not in d["metadata"] for d in cluster)
    readers = [d for d in docs if _metrics_reader(d)]
    assert [d["rules"] for d in readers] == ([METRICS_READER_RULES] if secure else [])
    if not watch:
        assert "Role" not in kinds(docs) or leader_on(values)
        assert len(cluster) == 4
    else:
        rules = [d["rules"] for d in cluster if d["kind"] == "ClusterRole"]
        assert rules == [cluster_rules(kueue, secure)]


def _metrics_reader(doc: dict[str, Any]) -> bool:
    """The ClusterRole a scraper of the secure /metrics is bound to (not the operator)."""
    return doc["kind"] == "ClusterRole" and str(doc["metadata"]["name"]).endswith("-metrics-reader")


AGGREGATE = "rbac.authorization.k8s.io/aggregate-to-"


def _user_role(doc: dict[str, Any]) -> bool:
    """A ClusterRole of the users who submit DGLJobs (aggregated into admin, edit, view)."""
    labels = doc["metadata"].get("labels") or {}
    return doc["kind"] == "ClusterRole" and any(k.startswith(AGGREGATE) for k in labels)


def _not_the_operators(doc: dict[str, Any]) -> bool:
    return _metrics_reader(doc) or _user_role(doc)


@pytest.mark.parametrize("name", sorted(VALUE_SETS))
def test_user_roles_aggregate_into_admin_edit_and_view(rendered: dict[str, Any], name: str) -> None:
    values = VALUE_SETS[name]
    roles = {d["metadata"]["name"]: d for d in rendered[name] if _user_role(d)}
    if not values.get("rbac", {}).get("userRoles", True):
        assert roles == {}
        return
    full = fullname(values)
    assert set(roles) == {f"{full}-edit", f"{full}-view"}
    edit, view = roles[f"{full}-edit"], roles[f"{full}-view"]
    aggregated = {k: v for k, v in edit["metadata"]["labels"].items() if k.startswith(AGGREGATE)}
    assert aggregated == {f"{AGGREGATE}admin": "true", f"{AGGREGATE}edit": "true"}
    aggregated = {k: v for k, v in view["metadata"]["labels"].items() if k.startswith(AGGREGATE)}
    assert aggregated == {f"{AGGREGATE}view": "true"}
    assert edit["rules"] == USER_EDIT_RULES
    assert view["rules"] == USER_VIEW_RULES
    # a reader never writes; nobody but the operator and the job's own pods write its status
    reads = {"get", "list", "watch"}
    assert {v for _, _, v in triples(USER_VIEW_RULES)} == reads
    assert {v for _, r, v in triples(USER_EDIT_RULES) if r == "dgljobs/status"} == reads


def test_service_account(rendered: dict[str, Any]) -> None:
    sa = find(rendered["default"], "ServiceAccount")
    assert sa["metadata"] == {
        "name": "dgl-operator",
        "namespace": NS,
        "labels": sa["metadata"]["labels"],
    }
    assert deployment(rendered["default"])["spec"]["template"]["spec"]["serviceAccountName"] == (
        "dgl-operator"
    )
    assert "ServiceAccount" not in kinds(rendered["existing-sa"])
    spec = deployment(rendered["existing-sa"])["spec"]["template"]["spec"]
    assert spec["serviceAccountName"] == "ops-operator"
    sa = find(rendered["scheduling-labels"], "ServiceAccount")
    assert sa["metadata"]["annotations"] == {"example.com/role": "dgl"}


# -- the operator's flags -------------------------------------------------------------------


def _image(values: dict[str, Any], key: str | None, repo: str) -> str:
    img = values.get("image", {}) if key is None else values.get(key, {}).get("image", {})
    if img.get("digest"):
        return f"{img.get('repository', repo)}@{img['digest']}"
    return f"{img.get('repository', repo)}:{img.get('tag') or VERSION}"


@pytest.mark.parametrize("name", sorted(VALUE_SETS))
def test_args_are_the_operators_flags(rendered: dict[str, Any], name: str) -> None:
    values = VALUE_SETS[name]
    c = container(rendered[name])
    assert "command" not in c, "the image's entrypoint is dgl-operator"
    args = c["args"]
    assert all(isinstance(a, str) for a in args)
    settings = parse_settings(args)  # the operator's own parser accepts them (or exits)
    assert settings.namespace == (values.get("watchNamespace") or None)
    watch = values.get("watchNamespace")
    assert [a for a in args if a.startswith("--namespace")] == (
        [f"--namespace={watch}"] if watch else []
    )
    assert settings.workers == values.get("workers", 4)
    assert settings.resync_period == values.get("resyncPeriod", 600)
    assert settings.metrics_addr == ":8080" and settings.health_addr == ":8081"
    secure = bool(values.get("metrics", {}).get("secure"))
    certs = Path("/etc/dgl-operator/metrics-certs")
    assert settings.metrics_cert_dir == (certs if secure else None)
    assert settings.log_format == values.get("logFormat", "json")
    assert settings.log_level == values.get("logLevel", "info")
    leader = leader_on(values)
    assert ("--leader-elect" in args) == leader
    assert settings.leader_elect == leader
    if leader:
        assert settings.leader_elect_namespace == NS
        lease = values.get("leaderElection", {}).get("leaseName") or f"{fullname(values)}-leader"
        assert settings.leader_elect_id == lease
        assert (settings.lease_duration, settings.renew_deadline) == (15, 10)
    opts = settings.options
    assert opts.watcher_loop_image == _image(values, "watcherLoop", "dgloperator/watcher-loop")
    assert opts.kubectl_download_image == _image(
        values, "kubectlDownload", "dgloperator/kubectl-download"
    )
    assert opts.init_image_pull_policy == values.get("initImagePullPolicy", "IfNotPresent")
    url = values.get("kubectlDownload", {}).get("url", "")
    assert opts.kubectl_download_url == url
    assert opts.kubectl_download_sha256 == (SHA if url else "")
    gang = values.get("gangScheduling", "")
    assert opts.gang_scheduling == (gang or "none")
    assert [a for a in args if a.startswith("--gang-")] == (
        [
            f"--gang-scheduling={gang}",
            f"--gang-scheduler-name={values.get('gangSchedulerName', DEFAULT_GANG_SCHEDULER_NAME)}",
        ]
        if gang
        else []
    )
    assert opts.kueue == bool(values.get("kueue"))
    assert args.count("--kueue") == int(bool(values.get("kueue")))
    mandatory = bool(values.get("kueueManageJobsWithoutQueueName"))
    assert opts.kueue_manage_jobs_without_queue_name == mandatory
    assert args.count("--kueue-manage-jobs-without-queue-name") == int(mandatory)
    assert c["image"] == _image(values, None, "dgloperator/dgl-operator")
    for extra in values.get("extraArgs", []):
        assert args[-len(values["extraArgs"]) :].count(extra) == 1


def test_secure_metrics_serve_a_certificate_and_monitors_send_a_token(
    rendered: dict[str, Any],
) -> None:
    docs = rendered["secure-metrics"]
    secret = next(d for d in docs if d["kind"] == "Secret")
    assert secret["metadata"]["name"] == "dgl-operator-metrics-cert"
    assert secret["type"] == "kubernetes.io/tls"
    cert = base64.b64decode(secret["data"]["tls.crt"]).decode()
    assert cert.startswith("-----BEGIN CERTIFICATE-----")
    pod = deployment(docs)["spec"]["template"]["spec"]
    assert {"name": "metrics-certs", "secret": {"secretName": "dgl-operator-metrics-cert"}} in pod[
        "volumes"
    ]
    mounts = pod["containers"][0]["volumeMounts"]
    assert {"name": "metrics-certs", "mountPath": "/etc/dgl-operator/metrics-certs",
            "readOnly": True} in mounts  # fmt: skip
    (endpoint,) = find(docs, "ServiceMonitor")["spec"]["endpoints"]
    assert endpoint["scheme"] == "https" and endpoint["tlsConfig"] == {"insecureSkipVerify": True}
    assert endpoint["bearerTokenFile"] == "/var/run/secrets/kubernetes.io/serviceaccount/token"
    own = rendered["secure-metrics-own-cert"]
    assert "Secret" not in kinds(own)  # (the user's, e.g. cert-manager's)
    volumes = deployment(own)["spec"]["template"]["spec"]["volumes"]
    assert {"name": "metrics-certs", "secret": {"secretName": "ops-metrics-tls"}} in volumes
    (pod_endpoint,) = find(own, "PodMonitor")["spec"]["podMetricsEndpoints"]
    assert pod_endpoint["bearerTokenSecret"] == {"name": "prometheus-token", "key": "token"}
    assert pod_endpoint["scheme"] == "https"
    plain = find(rendered["monitors"], "ServiceMonitor")["spec"]["endpoints"][0]
    assert "scheme" not in plain and "bearerTokenFile" not in plain


def test_one_replica_takes_the_lease_by_default_and_rolls(helm: Helm, tmp_path: Path) -> None:
    """The default: leader election with one replica too, so the Deployment rolls
    (RollingUpdate, the new pod waiting for the Lease) rather than being replaced with Recreate,
    which Kubernetes stalls for progressDeadlineSeconds when the old ReplicaSet holds a
    terminal pod (kubernetes/kubernetes#128798: the soak left one OutOfcpu after a drain)."""
    dep = deployment(helm.template({}, tmp=tmp_path, namespace=NS))
    assert dep["spec"]["replicas"] == 1
    assert "--leader-elect" in dep["spec"]["template"]["spec"]["containers"][0]["args"]
    assert dep["spec"]["strategy"] == {
        "type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}
    }  # fmt: skip


@pytest.mark.parametrize(
    ("replicas", "force", "leader"),
    [(1, False, False), (0, False, False), (2, False, True), (3, False, True), (1, True, True)],
)
def test_leader_election_iff_replicas_above_one_or_forced(
    helm: Helm, tmp_path: Path, replicas: int, force: bool, leader: bool
) -> None:
    docs = helm.template(
        {"replicas": replicas, "leaderElection": {"force": force}}, tmp=tmp_path, namespace=NS
    )
    dep = deployment(docs)
    assert dep["spec"]["replicas"] == replicas
    args = dep["spec"]["template"]["spec"]["containers"][0]["args"]
    assert ("--leader-elect" in args) == leader
    assert any(a.startswith("--leader-elect-namespace=") for a in args) == leader
    lease_roles = [d for d in docs if d["kind"] == "Role" and d["metadata"]["namespace"] == NS]
    assert len(lease_roles) == int(leader)
    # without leader election two operators must never overlap during an update
    expected = "RollingUpdate" if leader else "Recreate"
    assert dep["spec"]["strategy"]["type"] == expected
    if leader:
        assert dep["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] == 0


# -- pod settings ---------------------------------------------------------------------------


def test_security_settings(rendered: dict[str, Any]) -> None:
    spec = deployment(rendered["default"])["spec"]["template"]["spec"]
    pod_sc = spec["securityContext"]
    assert pod_sc["runAsNonRoot"] is True and pod_sc["runAsUser"] != 0
    assert pod_sc["seccompProfile"] == {"type": "RuntimeDefault"}
    c = container(rendered["default"])
    sc = c["securityContext"]
    assert sc["runAsNonRoot"] is True
    assert sc["readOnlyRootFilesystem"] is True
    assert sc["allowPrivilegeEscalation"] is False
    assert sc["privileged"] is False
    assert sc["capabilities"] == {"drop": ["ALL"]}
    assert sc["seccompProfile"] == {"type": "RuntimeDefault"}
    assert c["resources"]["requests"] == {"cpu": "100m", "memory": "128Mi"}
    assert c["resources"]["limits"]["memory"] == "512Mi"
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    assert c["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}
    assert c["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "health"}
    assert ports["health"] == 8081
    env = {e["name"]: e for e in c["env"]}
    assert env["POD_NAMESPACE"]["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.namespace"}}
    assert spec["automountServiceAccountToken"] is True
    # the read-only root filesystem gets a writable /tmp
    mounts = {m["mountPath"]: m["name"] for m in c["volumeMounts"]}
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert "emptyDir" in volumes[mounts["/tmp"]]


def test_scheduling_and_labels(rendered: dict[str, Any]) -> None:
    values = VALUE_SETS["scheduling-labels"]
    docs = rendered["scheduling-labels"]
    dep = deployment(docs)
    tpl = dep["spec"]["template"]
    spec = tpl["spec"]
    for key in ("nodeSelector", "tolerations", "affinity", "topologySpreadConstraints"):
        assert spec[key] == values[key]
    assert spec["imagePullSecrets"] == [{"name": "regcred"}]
    assert spec["priorityClassName"] == "system-cluster-critical"
    assert container(docs)["resources"] == values["resources"]
    assert {"name": "TZ", "value": "UTC"} in container(docs)["env"]
    assert tpl["metadata"]["annotations"] == {"prometheus.io/scrape": "true"}
    assert tpl["metadata"]["labels"]["sidecar.istio.io/inject"] == "false"
    assert tpl["metadata"]["labels"]["team"] == "graph-ml"
    for doc in docs:
        labels = doc["metadata"]["labels"]
        assert labels["team"] == "graph-ml" and labels["cost-center"] == "42", doc["kind"]
        assert labels["opt-in"] == "yes", doc["kind"]
        assert labels["app.kubernetes.io/managed-by"] == "Helm"
        assert labels["helm.sh/chart"] == f"dgl-operator-{VERSION}"
        assert labels["app.kubernetes.io/version"] == VERSION
    svc = find(docs, "Service")
    assert svc["metadata"]["annotations"] == {"example.com/scrape": "yes"}
    assert svc["metadata"]["labels"]["x"] == "y"


def test_extra_labels_never_replace_the_selector_labels(helm: Helm, tmp_path: Path) -> None:
    docs = helm.template(
        {
            "commonLabels": {"app.kubernetes.io/name": "evil", "app.kubernetes.io/instance": "x"},
            "podLabels": {"app.kubernetes.io/name": "evil"},
        },
        tmp=tmp_path,
    )
    dep = deployment(docs)
    selector = dep["spec"]["selector"]["matchLabels"]
    assert selector == {
        "app.kubernetes.io/name": "dgl-operator",
        "app.kubernetes.io/instance": RELEASE,
    }
    assert selector.items() <= dep["spec"]["template"]["metadata"]["labels"].items()


def test_default_images_follow_the_app_version(rendered: dict[str, Any]) -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert chart["apiVersion"] == "v2"
    assert chart["version"] == chart["appVersion"] == VERSION == "0.2.0"
    c = container(rendered["default"])
    assert c["image"] == f"dgloperator/dgl-operator:{VERSION}"
    assert f"--watcher-loop-image=dgloperator/watcher-loop:{VERSION}" in c["args"]
    assert f"--kubectl-download-image=dgloperator/kubectl-download:{VERSION}" in c["args"]
    assert not any(a.startswith("--kubectl-download-url") for a in c["args"])


def test_crd_is_shipped_as_is(helm: Helm, tmp_path: Path) -> None:
    """crds/ is the single source of truth: not templated, installed verbatim."""
    plain = helm.template(tmp=tmp_path)
    assert "CustomResourceDefinition" not in kinds(plain)
    docs = helm.template(tmp=tmp_path, extra=["--include-crds"])
    crd = find(docs, "CustomResourceDefinition")
    source = yaml.safe_load((CHART / "crds" / "qihoo.net_dgljobs.yaml").read_text())
    assert crd == source


# -- failures -------------------------------------------------------------------------------

FAILURES = [
    (
        {"kubectlDownload": {"url": KUBECTL_URL}},
        "kubectlDownload.url is set but kubectlDownload.sha256 is not",
    ),
    (
        {"kubectlDownload": {"sha256": SHA}},
        "kubectlDownload.sha256 is set but kubectlDownload.url is not",
    ),
    (
        {"kubectlDownload": {"url": "ftp://example.com/kubectl", "sha256": SHA}},
        "kubectlDownload.url must be an http:// or https:// URL",
    ),
    (
        {"kubectlDownload": {"url": KUBECTL_URL, "sha256": "abc"}},
        "kubectlDownload.sha256 must be 64 hexadecimal digits",
    ),
    (
        {"leaderElection": {"leaseDuration": 10, "renewDeadline": 10}},
        "leaderElection.renewDeadline must be shorter than leaderElection.leaseDuration",
    ),
    (
        {"metrics": {"service": {"enabled": False}, "serviceMonitor": {"enabled": True}}},
        "metrics.serviceMonitor.enabled needs metrics.service.enabled",
    ),
    ({"metrics": {"port": 8081}}, "metrics.port and health.port must differ"),
    ({"serviceAccount": {"create": False}}, "rbac.create with serviceAccount.create=false needs"),
    ({"kueueManageJobsWithoutQueueName": True}, "kueueManageJobsWithoutQueueName needs kueue"),
    # values.schema.json
    ({"logFormat": "text"}, "logFormat"),
    ({"workers": 0}, "workers"),
    ({"watchNamespaces": "typo"}, "watchNamespaces"),
    ({"image": {"repository": "x", "digest": "latest"}}, "digest"),
]


@pytest.mark.parametrize(("values", "message"), FAILURES, ids=[m for _, m in FAILURES])
def test_bad_values_fail_rendering_with_a_clear_message(
    helm: Helm, tmp_path: Path, values: dict[str, Any], message: str
) -> None:
    proc = helm.template_text(values, tmp=tmp_path, check=False)
    assert proc.returncode != 0, proc.stdout
    assert message in proc.stderr, proc.stderr
    assert not proc.stdout.strip()


# -- what other templates and users rely on -------------------------------------------------


def test_values_keys_shared_with_the_monitoring_templates() -> None:
    v = yaml.safe_load((CHART / "values.yaml").read_text())
    m = v["metrics"]
    assert m["port"] == 8080
    assert m["service"]["enabled"] is True and m["service"]["port"] == 8080
    for mon in ("serviceMonitor", "podMonitor"):
        assert m[mon]["enabled"] is False
        assert m[mon]["interval"] and m[mon]["labels"] == {}
    assert v["prometheusRule"] == {"enabled": False, "labels": {}}
    assert v["grafanaDashboard"] == {"enabled": False, "labels": {"grafana_dashboard": "1"}}
    assert v["commonLabels"] == {}


def test_named_helpers(helm: Helm, tmp_path: Path) -> None:
    """The helper names other templates use, through a probe template in a copy of the chart."""
    chart = tmp_path / "dgl-operator"
    shutil.copytree(CHART, chart)
    (chart / "templates" / "zz-probe.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: probe\n"
        '  labels:\n    {{- include "dgl-operator.labels" . | nindent 4 }}\n'
        "data:\n"
        '  name: {{ include "dgl-operator.name" . | quote }}\n'
        '  fullname: {{ include "dgl-operator.fullname" . | quote }}\n'
        '  sa: {{ include "dgl-operator.serviceAccountName" . | quote }}\n'
        "  selector: |\n"
        '    {{- include "dgl-operator.selectorLabels" . | nindent 4 }}\n'
    )
    values = {"commonLabels": {"team": "graph-ml"}}
    docs = helm.template(values, tmp=tmp_path, release="prod", chart=chart)
    probe = find(docs, "ConfigMap", "probe")
    assert probe["data"]["name"] == "dgl-operator"
    assert probe["data"]["fullname"] == "prod-dgl-operator"
    assert probe["data"]["sa"] == "prod-dgl-operator"
    assert yaml.safe_load(probe["data"]["selector"]) == {
        "app.kubernetes.io/name": "dgl-operator",
        "app.kubernetes.io/instance": "prod",
    }
    assert probe["metadata"]["labels"] == {
        "app.kubernetes.io/name": "dgl-operator",
        "app.kubernetes.io/instance": "prod",
        "app.kubernetes.io/version": VERSION,
        "app.kubernetes.io/managed-by": "Helm",
        "app.kubernetes.io/part-of": "dgl-operator",
        "helm.sh/chart": f"dgl-operator-{VERSION}",
        "team": "graph-ml",
    }


def _notes(helm: Helm, tmp_path: Path, values: dict[str, Any]) -> str:
    f = tmp_path / "notes-values.yaml"
    f.write_text(json.dumps(values))
    proc = helm.run(
        "install", "demo", str(CHART), "-n", NS, "--dry-run=client", "-o", "json", "-f", str(f)
    )
    notes: str = json.loads(proc.stdout)["info"]["notes"]
    return notes


def test_notes_tell_how_to_run_and_watch_the_example(helm: Helm, tmp_path: Path) -> None:
    example = REPO / "examples" / "graphsage" / "dgljob.yaml"
    job = yaml.safe_load(example.read_text())
    name, job_ns = job["metadata"]["name"], job["metadata"]["namespace"]
    notes = _notes(helm, tmp_path, {})
    assert "kubectl apply -f examples/graphsage/dgljob.yaml" in notes
    assert "https://" not in notes, "nothing to fetch from the internet"
    assert f"kubectl create namespace {job_ns}" in notes
    assert f"kubectl -n {job_ns} get dglj -w" in notes
    assert f"kubectl -n {job_ns} wait --for=condition=Succeeded dgljob/{name}" in notes
    assert "service/demo-dgl-operator-metrics 8080:8080" in notes
    assert "/metrics" in notes
    watched = _notes(helm, tmp_path, {"watchNamespace": "team-a", "replicas": 2})
    assert (
        'change metadata.namespace in\n  # examples/graphsage/dgljob.yaml from "dgl-operator"'
        in (watched)
    )
    assert "kubectl -n team-a get dglj -w" in watched
    assert "leader election" in watched
    monitored = _notes(helm, tmp_path, {"metrics": {"serviceMonitor": {"enabled": True}}})
    assert re.search(r'ServiceMonitor "demo-dgl-operator" in "dgl-system"', monitored)


def test_values_schema_is_json_and_covers_values_yaml() -> None:
    schema = json.loads((CHART / "values.schema.json").read_text())
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    jsonschema.validate(values, schema)
    assert set(values) <= set(schema["properties"])
    for extra in VALUE_SETS.values():
        merged = _merge(copy.deepcopy(values), extra)
        jsonschema.validate(merged, schema)


def _merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    for k, v in extra.items():
        if isinstance(v, dict) and isinstance(base.get(k), dict):
            _merge(base[k], v)
        else:
            base[k] = v
    return base


def notes(helm: Helm, *sets: str) -> str:
    args = ["install", "x", str(CHART), "-n", "dgl-system", "--dry-run=client"]
    out = helm.run(*args, *[a for s in sets for a in ("--set", s)]).stdout
    return out.split("NOTES:", 1)[1]


def test_the_notes_run_the_example_with_the_image_of_the_releases_registry(helm: Helm) -> None:
    """Installed with push.sh's values (the images in a registry of yours), NOTES.txt rewrites
    the example's image to that registry; installed as it is, the example runs unchanged."""
    own = notes(helm, "image.repository=reg.example:5000/ml/dgl-operator")
    assert "sed 's#image: dgloperator/#image: reg.example:5000/ml/#' examples/graphsage" in own
    assert "kubectl apply -f examples/graphsage/dgljob.yaml" not in own
    default = notes(helm)
    assert "kubectl apply -f examples/graphsage/dgljob.yaml" in default and "sed " not in default
    assert "(Phase, Workers ready, Scale, Restarts, Progress, ETA)" in default
