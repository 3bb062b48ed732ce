"""The operator's metrics, rules and dashboard against a real Prometheus.

`dgl-operator` runs as a process against the local control plane with its metrics endpoint
on 127.0.0.1; a real Prometheus scrapes it every second and evaluates
files/prometheus-rules.yaml every second. The test drives three DGLJobs (one succeeds, one
fails after a whole-job restart, one stays pending), playing the kubelet, then checks through
Prometheus's HTTP API what the operator counted, the recording rules, the alerts, that every
rule evaluates, and that every dashboard query runs.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from controller.api import DGLJOBS
from kubeclient import CONFIGMAPS, PERSISTENTVOLUMECLAIMS, PODS, Obj, RestClient
from localcluster.cluster import ControlPlane
from localcluster.operator_process import OperatorProcess
from podcontract import report
from tests.prometheus.promql import (
    dashboard_queries,
    load_dashboard,
    load_rules,
    metric_names,
    recording_rule_names,
    sample_names,
    substitute,
)
from tests.support.dgljobs import load_fixture
from tests.support.live import Kubelet
from tests.support.prometheus import SCRAPE_JOB, PrometheusServer
from tests.support.waiting import LIVE_TIMEOUT, wait_for


@pytest.fixture
def operator(
    control_plane: ControlPlane, namespace: str, tmp_path: Path
) -> Iterator[OperatorProcess]:
    op = OperatorProcess(
        control_plane.kubeconfig, tmp_path / "operator.log", "--namespace", namespace, metrics=True
    )
    op.start()
    try:
        op.wait_ready(timeout=60)
        yield op
    finally:
        try:
            op.terminate(timeout=30)
        finally:
            op.kill()  # only if SIGTERM did not end it
            print("--- operator log ---\n" + op.tail())


@pytest.fixture
def prom(prometheus: Path, operator: OperatorProcess, tmp_path: Path) -> Iterator[PrometheusServer]:
    server = PrometheusServer(prometheus, tmp_path, f"127.0.0.1:{operator.metrics_port}")
    try:
        server.start()
        yield server
    finally:
        server.stop()
        print("--- prometheus log ---\n" + server.tail())


# -- playing the kubelet for one job ---------------------------------------------------------


class Job:
    def __init__(self, api: RestClient, ns: str, name: str, subnet: int, **spec: Any) -> None:
        self.api, self.ns, self.name, self.subnet = api, ns, name, subnet
        raw = load_fixture("seed_dgljob.yaml")
        raw["metadata"].update(name=name, namespace=ns)
        raw["spec"].update(spec)
        self.raw = raw
        self.kubelet = Kubelet(api, ns)
        self.worker0, self.worker1 = f"{name}-worker-0", f"{name}-worker-1"
        self.partitioner, self.launcher = f"{name}-partitioner", f"{name}-launcher"

    def create(self) -> Job:
        self.api.create(DGLJOBS, self.ns, self.raw)
        return self

    def pods(self) -> dict[str, Obj]:
        items = self.api.list(PODS, self.ns, label_selector=f"dgl.qihoo.net/job-name={self.name}")
        return {p["metadata"]["name"]: p for p in items["items"]}

    def status(self) -> Obj:
        st: Obj = self.api.get(DGLJOBS, self.ns, self.name).get("status") or {}
        return st

    def condition(self, ctype: str) -> Obj | None:
        for c in self.status().get("conditions") or []:
            if c["type"] == ctype and c["status"] == "True":
                return dict(c)
        return None

    def wait_condition(self, ctype: str, timeout: float = 30) -> Obj:
        found: Obj = wait_for(
            lambda: self.condition(ctype), what=f"{self.name} {ctype}", timeout=timeout
        )
        return found

    def wait_phase(self, phase: str) -> None:
        wait_for(
            lambda: self.status().get("phase") == phase,
            what=f"{self.name} {phase}",
            timeout=LIVE_TIMEOUT,
        )

    def train(self, fresh_from: dict[str, str] | None = None) -> None:
        """Workers and partitioner run, the graph is partitioned (12 s), training starts."""

        def ready() -> bool:
            pods = self.pods()
            names = {self.worker0, self.worker1, self.partitioner}
            return names <= set(pods) and all(
                pods[n]["metadata"]["uid"] != (fresh_from or {}).get(n) for n in names
            )

        wait_for(ready, what=f"{self.name}'s worker and partitioner pods", timeout=LIVE_TIMEOUT)
        ip = f"10.{self.subnet}.0."
        self.kubelet.run(self.worker1, ip + "2")
        self.kubelet.run(self.worker0, ip + "1")
        self.kubelet.run(self.partitioner, ip + "3")
        wait_for(
            lambda: self.launcher in self.pods(),
            what=f"{self.name}'s launcher pod",
            timeout=LIVE_TIMEOUT,
        )
        self.kubelet.init_running(self.launcher, ip + "4")
        self.kubelet.finish(self.partitioner, seconds=12)
        self.wait_phase("Partitioned")
        self.kubelet.run(self.launcher, ip + "4")
        self.wait_phase("Training")

    def place_partitioner(self, fresh_from: dict[str, str] | None = None) -> None:
        """An elastic job's: the scheduler gives its partitioner a node, after which the
        operator makes the workers."""

        def made() -> bool:
            pod = self.pods().get(self.partitioner)
            return pod is not None and pod["metadata"]["uid"] != (fresh_from or {}).get(
                self.partitioner
            )

        wait_for(made, what=f"{self.name}'s partitioner", timeout=LIVE_TIMEOUT)
        scheduled = {"conditions": [{"type": "PodScheduled", "status": "True"}]}
        self.api.patch(PODS, self.ns, self.partitioner, {"status": scheduled}, subresource="status")

    def uids(self) -> dict[str, str]:
        return {n: p["metadata"]["uid"] for n, p in self.pods().items()}


# -- the test --------------------------------------------------------------------------------


def eventually(check: Callable[[], Any], what: str, timeout: float = 60) -> Any:
    return wait_for(check, what=what, timeout=timeout, interval=0.5)


def lint(promtool: Path, exposition: str) -> None:
    """`promtool check metrics` reads the exposition on stdin."""
    out = subprocess.run(
        [str(promtool), "check", "metrics"],
        input=exposition,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stdout + out.stderr


def test_operator_metrics_rules_and_dashboard_in_prometheus(
    promtool: Path,
    prometheus: Path,
    api: RestClient,
    namespace: str,
    operator: OperatorProcess,
    prom: PrometheusServer,
) -> None:
    ns = namespace
    lint(promtool, operator.metrics())
    eventually(lambda: prom.value(f'up{{job="{SCRAPE_JOB}"}}') == 1, "the operator target up")

    # One job succeeds, one fails after a restart, one stays pending.
    ok = Job(api, ns, "dgl-ok", 201).create()
    failing = Job(api, ns, "dgl-fail", 202, runPolicy={"backoffLimit": 1}).create()
    idle = Job(api, ns, "dgl-idle", 203).create()
    for job in (ok, failing, idle):
        job.wait_condition("Created")

    # dglrun in ok's partitioner: partitioned in 12 s (its report; the operator copies it)
    wait_for(
        lambda: api.get(CONFIGMAPS, ns, report.report_name("dgl-ok")) is not None,
        what="dgl-ok's report ConfigMap",
        timeout=LIVE_TIMEOUT,
    )
    doc = report.document(0, {"progress": "2/5 deliver", "partitionSeconds": 12}, [])
    api.patch(CONFIGMAPS, ns, report.report_name("dgl-ok"), {"data": {"partitioner": doc}})
    ok.train()
    ok.kubelet.finish(ok.launcher, seconds=30)
    ok.wait_condition("Succeeded")

    failing.train()
    # its dglrun reported a delivery over HTTP (observed when the attempt ends)
    delivered = {"deliveryBytes": 420_000_000, "deliverySeconds": 2.0}
    api.patch(DGLJOBS, ns, failing.name, {"status": delivered}, subresource="status")
    eventually(
        lambda: api.get(DGLJOBS, ns, failing.name)["status"].get("deliveryBytes") == 420_000_000,
        "the delivery reported",
    )
    before = failing.uids()
    failing.kubelet.finish(failing.worker1, exit_code=137)
    failing.wait_condition("Restarting")
    failing.train(fresh_from=before)
    failing.kubelet.finish(failing.worker0, exit_code=1)
    failed = failing.wait_condition("Failed")
    assert failed["reason"] == "BackoffLimitExceeded"

    # An elastic job loses a worker to preemption: a rescale (not a restart), and its next
    # attempt trains (the rescale's seconds observed).
    claim = {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
             "metadata": {"name": "results", "namespace": ns},
             "spec": {"accessModes": ["ReadWriteOnce"],
                      "resources": {"requests": {"storage": "1Gi"}}}}  # fmt: skip
    api.create(PERSISTENTVOLUMECLAIMS, ns, claim)
    policy = {"maxReplicas": 2, "settleSeconds": 0}
    elastic = Job(api, ns, "dgl-elastic", 204, storage={"claimName": "results"},
                  elasticPolicy=policy).create()  # fmt: skip
    elastic.place_partitioner()
    elastic.train()
    before = elastic.uids()
    victim = {"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler",
              "message": "Preempted by a pod on node n1"}  # fmt: skip
    api.patch(PODS, ns, elastic.worker1, {"status": {"conditions": [victim]}}, subresource="status")
    api.delete(PODS, ns, elastic.worker1)
    eventually(lambda: (elastic.status().get("elastic") or {}).get("rescales") == 1, "the rescale")
    elastic.place_partitioner(fresh_from=before)
    elastic.train(fresh_from=before)

    # The idle job's partitioner cannot be scheduled: the job says it waits (and is counted).
    unschedulable = {
        "type": "PodScheduled",
        "status": "False",
        "reason": "Unschedulable",
        "message": "0/1 nodes are available: 1 Insufficient memory.",
    }
    api.patch(
        PODS,
        ns,
        idle.partitioner,
        {"status": {"conditions": [unschedulable]}},
        subresource="status",
    )
    eventually(
        lambda: (
            prom.value(f'dgl_operator_jobs_waiting{{namespace="{ns}",reason="Unschedulable"}}') == 1
        ),
        "the idle job counted as waiting, Unschedulable",
    )

    # What the operator counted, through Prometheus.
    eventually(lambda: prom.value("sum(dgl_operator_jobs_created_total)") == 4, "4 jobs created")
    eventually(lambda: (prom.value("sum(dgl_operator_jobs_failed_total)") or 0) >= 1, "a failure")
    (failure,) = prom.query("dgl_operator_jobs_failed_total")
    assert {"namespace": ns, "reason": "BackoffLimitExceeded"}.items() <= failure["metric"].items()
    eventually(lambda: prom.value("sum(dgl_operator_jobs_successful_total)") == 1, "a success")
    eventually(lambda: prom.value("sum(dgl_operator_jobs_restarted_total)") == 1, "a restart")
    preempted = f'dgl_operator_jobs_rescaled_total{{namespace="{ns}",reason="Preempted"}}'
    eventually(lambda: prom.value(preempted) == 1, "a rescale, Preempted")
    eventually(lambda: prom.value("sum(dgl_operator_job_rescale_seconds_count)") == 1, "timed")
    eventually(
        lambda: prom.value("sum(dgl_operator_job_delivery_bytes_sum)") == 420_000_000,
        "the delivery observed",
    )
    assert (prom.value('sum(workqueue_adds_total{name="dgljob"})') or 0) > 0
    assert (prom.value("sum(controller_runtime_reconcile_total)") or 0) > 0
    assert prom.value("dgl_operator_is_leader") == 1

    # The recording rules count the failure and the success although their series were born
    # at 1 (increase() alone reports 0 for them).
    failed_1h = f'namespace_reason:dgl_operator_jobs_failed:increase1h{{namespace="{ns}"}}'
    eventually(lambda: prom.value(failed_1h) == 1, "the failure recorded")
    ratio = f'namespace:dgl_operator_jobs_failure_ratio:1h{{namespace="{ns}"}}'
    eventually(lambda: prom.value(ratio) == 0.5, "a failure ratio of 1/2")

    # The alerts: DGLJobFailed fires with the reason; nothing says the operator is down.
    def alerts() -> list[Obj]:
        return list(prom.api("alerts")["alerts"])

    def job_failed_firing() -> bool:
        return any(
            a["labels"]["alertname"] == "DGLJobFailed"
            and a["state"] == "firing"
            and a["labels"].get("namespace") == ns
            and a["labels"].get("reason") == "BackoffLimitExceeded"
            and a["labels"].get("severity") == "info"
            for a in alerts()
        )

    eventually(job_failed_firing, "DGLJobFailed firing")
    names = {a["labels"]["alertname"] for a in alerts()}
    assert not names & {
        "DGLOperatorDown",
        "DGLOperatorNoLeader",
        "DGLOperatorMultipleLeaders",
        "DGLJobFailureRateHigh",  # one failure is below its minimum of three
    }, alerts()

    # Every group of the file is loaded and every rule evaluates.
    want = {g["name"]: len(g["rules"]) for g in load_rules()["groups"]}

    def rules_healthy() -> bool:
        groups = {g["name"]: g for g in prom.api("rules")["groups"]}
        if {n: len(g["rules"]) for n, g in groups.items()} != want:
            return False
        return all(r["health"] == "ok" for g in groups.values() for r in g["rules"])

    eventually(rules_healthy, "every rule evaluated with health ok", timeout=30)
    for group in prom.api("rules")["groups"]:
        for rule in group["rules"]:
            assert not rule.get("lastError"), rule

    # Every dashboard query runs; the job panels show the jobs just driven.
    variables = {"job": SCRAPE_JOB, "namespace": ns, "window": "3600"}
    for where, expr in dashboard_queries(load_dashboard()):
        try:
            prom.query(substitute(expr, variables))
        except AssertionError as e:
            raise AssertionError(f"dashboard {where}: {e}") from e
    dashboard = {
        panel["title"]: [substitute(t["expr"], variables) for t in panel.get("targets") or []]
        for panel in load_dashboard()["panels"]
    }
    assert prom.value(dashboard["Jobs started"][0]) == 4
    assert prom.value(dashboard["Jobs succeeded"][0]) == 1
    assert prom.value(dashboard["Jobs failed"][0]) == 1
    assert prom.value(dashboard["Whole-job restarts"][0]) == 1
    assert prom.value(dashboard["Failure ratio"][0]) == 0.5
    assert prom.value(dashboard["Leaders"][0]) == 1
    # Partitioned five times (12 s each), trained once (30 s): the means are exact.
    assert prom.value(dashboard["Partitioning duration"][-1]) == 12
    assert prom.value(dashboard["Training duration"][-1]) == 30
    p50 = prom.value(dashboard["Training duration"][0])
    assert p50 is not None and 15 < p50 <= 30  # in the (15, 30] bucket

    # Every metric the rules and the dashboard use is in the live exposition, which still lints
    # clean now that every labelled metric has children.
    exposition = operator.metrics()
    lint(promtool, exposition)
    live = sample_names(exposition)
    known = live | recording_rule_names(load_rules())
    used = {
        n
        for rule in (r for g in load_rules()["groups"] for r in g["rules"])
        for n in metric_names(rule["expr"])
    }
    used |= {
        n
        for _, e in dashboard_queries(load_dashboard())
        for n in metric_names(substitute(e, variables))
    }
    assert used <= known, f"not exposed by the running operator: {used - known}"
