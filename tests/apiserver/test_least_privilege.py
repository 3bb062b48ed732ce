"""The operator with only its own RBAC (tests/support/rbac.py, what the chart grants),
through a ServiceAccount token from the TokenRequest API; and what the job's own
ServiceAccounts may do."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from controller.api import DGLJOBS
from kubeclient import EVENTS, PODS, Forbidden, Resource, RestClient
from localcluster.cluster import ControlPlane, k8s_binaries
from tests.support.apiserver import allowed, operator_identity, token_kubeconfig
from tests.support.dgljobs import load_fixture
from tests.support.live import InProcessOperator, Kubelet
from tests.support.rbac import cluster_role
from tests.support.waiting import LIVE_TIMEOUT, wait_for

SECRETS = Resource("", "v1", "secrets", "Secret")
ROLES = Resource("rbac.authorization.k8s.io", "v1", "roles", "Role")
NODES = Resource("", "v1", "nodes", "Node", namespaced=False)


@pytest.fixture
def operator_kubeconfig(
    api: RestClient, control_plane: ControlPlane, crd: None, tmp_path: Path
) -> Iterator[Path]:
    with operator_identity(api, control_plane, cluster_role(), tmp_path / "sa.kubeconfig") as (
        kubeconfig,
        _user,
    ):
        yield kubeconfig


def test_operator_runs_a_job_with_its_own_rbac_only(
    api: RestClient, namespace: str, operator_kubeconfig: Path
) -> None:
    sa = RestClient.from_config(str(operator_kubeconfig))
    refused_calls: list[Callable[[], object]] = [
        # secrets: only create (the jobs' transfer tokens), never read
        lambda: sa.list(SECRETS, namespace),
        lambda: sa.get(SECRETS, namespace, "dgl-graphsage-transfer"),
        # nodes: read only (lost nodes), never written
        lambda: sa.patch(NODES, None, "any-node", {"metadata": {"labels": {"a": "b"}}}),
        lambda: sa.delete(NODES, None, "any-node"),
        lambda: sa.get(SECRETS, "kube-system", "anything"),
    ]
    for attempt in refused_calls:
        with pytest.raises(Forbidden):
            attempt()
    with InProcessOperator(str(operator_kubeconfig), namespace) as op:
        raw = load_fixture("seed_dgljob.yaml")
        raw["metadata"]["namespace"] = namespace
        api.create(DGLJOBS, namespace, raw)
        kubelet = Kubelet(api, namespace)
        names = [f"dgl-graphsage-{n}" for n in ("worker-0", "worker-1", "partitioner")]
        wait_for(
            lambda: (
                set(names) <= {p["metadata"]["name"] for p in api.list(PODS, namespace)["items"]}
            ),
            what="pods created under the operator's own RBAC",
            timeout=LIVE_TIMEOUT,
        )
        for i, name in enumerate(names):
            kubelet.run(name, f"10.5.0.{i + 2}")
        wait_for(
            lambda: (
                "dgl-graphsage-launcher"
                in {p["metadata"]["name"] for p in api.list(PODS, namespace)["items"]}
            ),
            what="launcher pod",
            timeout=LIVE_TIMEOUT,
        )
        kubelet.finish("dgl-graphsage-partitioner")
        kubelet.run("dgl-graphsage-launcher", "10.5.0.9")
        kubelet.finish("dgl-graphsage-launcher")

        def succeeded() -> bool:
            conds = api.get(DGLJOBS, namespace, "dgl-graphsage").get("status", {}).get("conditions")
            return any(c["type"] == "Succeeded" and c["status"] == "True" for c in conds or [])

        wait_for(succeeded, what="Succeeded under the operator's own RBAC", timeout=LIVE_TIMEOUT)
        forbidden = [
            k
            for k, v in _samples(op, "rest_client_requests_total").items()
            if k[2] == "403" and v > 0
        ]
        assert forbidden == [], f"the operator was refused: {forbidden}"
        assert _samples(op, "controller_runtime_reconcile_errors_total") == {("dgljob",): 0.0}


def _samples(op: InProcessOperator, name: str) -> dict[tuple[str, ...], float]:
    out = {}
    for metric in op.metrics.registry.collect():
        for s in metric.samples:
            if s.name == name:
                out[tuple(s.labels.values())] = s.value
    return out


def sa_kubectl(
    api: RestClient, cp: ControlPlane, namespace: str, sa: str, tmp: Path
) -> Callable[..., subprocess.CompletedProcess[str]]:
    """The real kubectl with a TokenRequest token of ``sa``, as in its pod."""
    config = token_kubeconfig(api, cp, namespace, sa, tmp / f"{sa}.kubeconfig")
    kubectl = str(k8s_binaries("kubectl") / "kubectl")

    def run(*args: str, input: str | None = None) -> subprocess.CompletedProcess[str]:
        argv = [kubectl, f"--kubeconfig={config}", "-n", namespace, *args]
        return subprocess.run(argv, capture_output=True, text=True, timeout=60, input=input)

    return run


def test_the_job_pods_roles_reach_their_own_job_only(
    api: RestClient,
    namespace: str,
    operator_kubeconfig: Path,
    control_plane: ControlPlane,
    tmp_path: Path,
) -> None:
    """What the launcher's and the partitioner's tokens may do (the user's code runs with
    them), asked of the real API server's RBAC: exec into no pod at all (dglrun reaches the
    workers through their agents; a KubectlCp manifest is served over HTTP), read only their
    own job's pods by name, no Events, no DGLJob written; their report only."""
    with InProcessOperator(str(operator_kubeconfig)):
        for job in ("a", "b"):
            raw = load_fixture("seed_dgljob.yaml")
            raw["metadata"].update(name=job, namespace=namespace)
            if job == "b":  # the original's delivery (once exec into the launcher): HTTP now
                raw["spec"]["partitionTransfer"] = "KubectlCp"
            api.create(DGLJOBS, namespace, raw)
        wait_for(
            lambda: len(api.list(ROLES, namespace)["items"]) == 4,
            what="the jobs' Roles",
            timeout=LIVE_TIMEOUT,
        )
    launcher = f"system:serviceaccount:{namespace}:a-launcher"
    partitioner = f"system:serviceaccount:{namespace}:a-partitioner"

    def may(user: str, verb: str, resource: str, name: str = "", sub: str = "") -> bool:
        attrs = {"namespace": namespace, "verb": verb, "resource": resource}
        if name:
            attrs["name"] = name
        if sub:
            attrs["subresource"] = sub
        if resource.startswith("dgljobs"):
            attrs["group"] = "qihoo.net"
        return allowed(api, user, **attrs)

    def exec_into(user: str, pod: str) -> bool:
        return may(user, "create", "pods", pod, "exec")

    # no pods/exec anywhere (before issue 58 the launcher held it on its workers, and a
    # KubectlCp partitioner on its launcher); the twin, that the same check sees a grant the
    # Role does hold: the launcher reads its worker
    b_partitioner = f"system:serviceaccount:{namespace}:b-partitioner"
    for user in (launcher, partitioner, b_partitioner):
        for pod in ("a-worker-0", "a-worker-1", "b-worker-0", "a-launcher", "b-launcher"):
            assert not exec_into(user, pod), (user, pod)
    assert may(launcher, "get", "pods", "a-worker-0")
    # reading pods: its own job's, by name (watcher-loop watches each by name); never the
    # namespace's list (other jobs' pods, a results reader's spec), never another job's pod
    for verb in ("get", "list", "watch"):
        assert may(launcher, verb, "pods", "a-worker-0") and may(
            launcher, verb, "pods", "a-partitioner"
        )
        assert not may(launcher, verb, "pods"), f"{verb} every pod of the namespace"
        assert not may(launcher, verb, "pods", "b-worker-0"), f"{verb} another job's pod"
    assert not may(partitioner, "get", "pods", "a-worker-0")  # (HTTP: it reads no pod)
    assert not may(b_partitioner, "get", "pods", "b-launcher")  # (KubectlCp served as HTTP)
    for user in (launcher, partitioner):
        assert not may(user, "create", "events"), "Events: the operator records dglrun's"
        assert not may(user, "get", "secrets") and not may(user, "delete", "pods", "a-worker-0")
        assert may(user, "get", "dgljobs/status", "a")  # (an elastic job's grow, members)
        for verb in ("patch", "update"):
            assert not may(user, verb, "dgljobs/status", "a"), f"{verb} its job's status"
            assert not may(user, verb, "dgljobs", "a")
        assert may(user, "patch", "configmaps", "a-report")
        assert not may(user, "patch", "configmaps", "b-report")
        assert not may(user, "patch", "configmaps", "a-config")  # (the operator's files)
    # The attack of issue 57, with the launcher's own token and the real kubectl: its code
    # writes Succeeded into its job's status. Refused; the twin (its report) is allowed.
    kubectl = sa_kubectl(api, control_plane, namespace, "a-launcher", tmp_path)
    forged = '{"status":{"conditions":[{"type":"Succeeded","status":"True","reason":"X"}]}}'
    done = kubectl("patch", "dgljob", "a", "--subresource=status", "--type=merge", "-p", forged)
    assert done.returncode != 0 and "forbidden" in done.stderr.lower(), done.stderr
    assert not (api.get(DGLJOBS, namespace, "a").get("status") or {}).get("conditions") or all(
        c["type"] != "Succeeded" for c in api.get(DGLJOBS, namespace, "a")["status"]["conditions"]
    )
    report_patch = '{"data":{"launcher":"{}"}}'
    done = kubectl("patch", "configmap", "a-report", "--type=merge", "-p", report_patch)
    assert done.returncode == 0, done.stderr
    other = kubectl("patch", "configmap", "b-report", "--type=merge", "-p", report_patch)
    assert other.returncode != 0 and "forbidden" in other.stderr.lower(), other.stderr
    listed = kubectl("get", "pods")
    assert listed.returncode != 0 and "forbidden" in listed.stderr.lower(), listed.stderr


def test_dglruns_report_reaches_the_status_through_the_operator_alone(
    api: RestClient,
    namespace: str,
    operator_kubeconfig: Path,
    control_plane: ControlPlane,
    tmp_path: Path,
) -> None:
    """dglrun's report, exactly as its reporter sends it with the launcher's token, reaches the
    DGLJob's status only through the operator (with the chart's RBAC): the detail, the ETA
    column, the last word, the Events asked for; a forged field in it is refused and said."""
    from launcher.report.progress import ReportProgress
    from podcontract import report

    with InProcessOperator(str(operator_kubeconfig)):
        raw = load_fixture("seed_dgljob.yaml")
        raw["metadata"].update(name="a", namespace=namespace)
        api.create(DGLJOBS, namespace, raw)
        wait_for(
            lambda: len(api.list(ROLES, namespace)["items"]) == 2,
            what="the job's Roles",
            timeout=LIVE_TIMEOUT,
        )
        kubectl = sa_kubectl(api, control_plane, namespace, "a-launcher", tmp_path)
        sender = ReportProgress(
            "kubectl", "a", 4, print, interval=0, run=lambda argv: kubectl(*argv[1:])
        )
        sender.phase(5, 5, "train")
        sender.event("Normal", "Resuming", "Resuming training at epoch 2 of 4")
        sender.output("a-worker-0/trainer-0", "epoch 0 loss 1.25 nodes 500 time 100.00s")

        def status() -> dict[str, Any]:
            return dict(api.get(DGLJOBS, namespace, "a").get("status") or {})

        def detail() -> dict[str, Any]:
            return dict(status().get("progressDetail") or {})

        wait_for(lambda: "loss" in (detail().get("metrics") or {}), what="the detail", timeout=30)
        got = detail()
        assert got["stepName"] == "train" and got["percentage"] == 85, got
        assert 280 <= got["estimatedRemainingSeconds"] <= 300, got  # 3 epochs of 100 s
        assert got["metrics"] == {"epoch": 1, "loss": 1.25, "samplesPerSecond": 5}, got
        admin = [
            str(k8s_binaries("kubectl") / "kubectl"),
            f"--kubeconfig={control_plane.kubeconfig}",
        ]
        table = subprocess.run([*admin, "-n", namespace, "get", "dgljob", "a"], capture_output=True,
                               text=True, timeout=60, check=True)  # fmt: skip
        header, row = table.stdout.splitlines()[:2]
        column = header.index("ETA")
        assert "ETA" in header.split() and row[column:].startswith(got["eta"]), (header, row)

        def resuming() -> list[dict[str, Any]]:
            found = api.list(EVENTS, namespace)["items"]
            return [e for e in found if e["reason"] == "Resuming"]

        wait_for(resuming, what="the Event dglrun asked for", timeout=LIVE_TIMEOUT)
        event = resuming()[0]
        assert event["message"] == "Resuming training at epoch 2 of 4"
        assert (
            event["involvedObject"]["kind"] == "DGLJob" and event["involvedObject"]["name"] == "a"
        )
        sender.finish("done")
        wait_for(lambda: status().get("progress") == "done", what="the last word", timeout=30)
        final = status()
        assert final["progressDetail"]["percentage"] == 100 and "eta" not in final["progressDetail"]
        assert len(resuming()) == 1, "recorded once"
        # the attack, through the report: the launcher's code writes Succeeded there
        succeeded = [{"type": "Succeeded", "status": "True"}]
        lies = {"progress": "done", "phase": "Succeeded", "conditions": succeeded}
        forged = report.document(0, lies, [])
        done = kubectl("patch", "configmap", "a-report", "--type=merge", "-p",
                       json.dumps({"data": {"launcher": forged}}))  # fmt: skip
        assert done.returncode == 0, done.stderr

        def refused() -> dict[str, Any] | None:
            for c in status().get("conditions") or []:
                if c["type"] == "Reported" and c["status"] == "False":
                    return dict(c)
            return None

        said = wait_for(refused, what="the refusal said", timeout=LIVE_TIMEOUT)
        assert "status.phase is not a field dglrun reports" in said["message"]
        assert "status.conditions is not a field dglrun reports" in said["message"]
        assert all(c["type"] != "Succeeded" for c in status().get("conditions") or [])
        assert status().get("phase") != "Succeeded"

        def warnings() -> list[dict[str, Any]]:
            found = api.list(EVENTS, namespace)["items"]
            return [e for e in found if e["reason"] == "ReportRefused"]

        # the Event follows the condition, from the recorder's own thread: wait for it
        warned = wait_for(warnings, what="the ReportRefused Event", timeout=30)
        assert warned[0]["type"] == "Warning"
