"""Gang scheduling against the real API server: the ``dgl-operator`` process with
``--gang-scheduling scheduler-plugins``, under exactly the RBAC the chart grants with
``gangScheduling`` (tests/support/rbac.py), with scheduler-plugins' own PodGroup CRD
installed.

What the API server stores is checked: the PodGroup (its CRD's schema prunes any field it does
not know), and the pods' label, schedulerName and priority. No scheduler runs here (there are
no nodes): placing the gang is the e2e's business.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from controller.api import DGLJOBS
from controller.builders import DEFAULT_GANG_SCHEDULER_NAME
from controller.features.gang import POD_GROUP_LABEL
from kubeclient import PODGROUPS, PODS, AlreadyExists, NotFound, Obj, Resource, RestClient
from localcluster.cluster import ControlPlane
from localcluster.operator_process import OperatorProcess
from tests.support.apiserver import allowed, install_crd, operator_identity
from tests.support.dgljobs import load_fixture
from tests.support.live import Kubelet
from tests.support.rbac import cluster_role
from tests.support.scheduler_plugins import podgroup_crd_path
from tests.support.waiting import wait_for

PRIORITYCLASSES = Resource(
    "scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", namespaced=False
)
JOB = "dgl-graphsage"
WORKERS = [f"{JOB}-worker-0", f"{JOB}-worker-1"]
PARTITIONER = f"{JOB}-partitioner"
LAUNCHER = f"{JOB}-launcher"


@pytest.fixture(scope="module")
def podgroup_crd(api: RestClient) -> None:
    install_crd(api, podgroup_crd_path())


@pytest.fixture
def priority_class(api: RestClient) -> Iterator[str]:
    name = "dgl-gang-test-high"
    with contextlib.suppress(AlreadyExists):  # left by an earlier run: the same object
        api.create(
            PRIORITYCLASSES,
            None,
            {
                "apiVersion": "scheduling.k8s.io/v1",
                "kind": "PriorityClass",
                "metadata": {"name": name},
                "value": 1000,
            },
        )
    yield name
    with contextlib.suppress(NotFound):
        api.delete(PRIORITYCLASSES, None, name)


def podgroups_allowed(api: RestClient, user: str, verb: str, namespace: str) -> bool:
    return allowed(
        api, user, namespace=namespace, verb=verb, group="scheduling.x-k8s.io", resource="podgroups"
    )


def pods(api: RestClient, namespace: str) -> dict[str, Obj]:
    return {p["metadata"]["name"]: p for p in api.list(PODS, namespace)["items"]}


def refused(op: OperatorProcess) -> list[str]:
    """The operator's requests the API server answered 403 (its rest_client metrics)."""
    return [
        line
        for line in op.metrics().splitlines()
        if line.startswith("rest_client_requests_total") and 'code="403"' in line
        if not line.endswith(" 0.0")
    ]


def test_the_operator_makes_the_pod_group_and_the_gang_under_its_own_rbac(
    api: RestClient,
    namespace: str,
    control_plane: ControlPlane,
    podgroup_crd: None,
    priority_class: str,
    tmp_path: Path,
) -> None:
    role = cluster_role(gang=True)
    with operator_identity(api, control_plane, role, tmp_path / "sa.kubeconfig") as (config, me):
        # exactly the PodGroup verbs the chart grants with gangScheduling
        assert [
            v
            for v in ("get", "list", "watch", "create")
            if not podgroups_allowed(api, me, v, namespace)
        ] == []
        assert not podgroups_allowed(api, me, "delete", namespace) and not podgroups_allowed(
            api, me, "update", namespace
        )
        op = OperatorProcess(
            config,
            tmp_path / "operator.log",
            "--namespace", namespace,
            "--gang-scheduling", "scheduler-plugins",
            metrics=True,
        )  # fmt: skip
        try:
            op.start().wait_ready()  # the PodGroup informer synced: list and watch allowed
            raw = load_fixture("seed_dgljob.yaml")
            raw["metadata"]["namespace"] = namespace
            raw["spec"]["runPolicy"] = {
                "backoffLimit": 1,
                "schedulingPolicy": {
                    "scheduleTimeoutSeconds": 300,
                    "priorityClass": priority_class,
                    "queue": "ignored",
                },
            }
            job = api.create(DGLJOBS, namespace, raw)
            wait_for(
                lambda: set([*WORKERS, PARTITIONER]) <= set(pods(api, namespace)),
                what="the gang's pods",
                timeout=30,
            )
            group = api.get(PODGROUPS, namespace, JOB)
            assert group["spec"] == {"minMember": 3, "scheduleTimeoutSeconds": 300}
            assert group["metadata"]["labels"] == {"dgl.qihoo.net/job-name": JOB}
            (owner,) = group["metadata"]["ownerReferences"]
            assert (owner["kind"], owner["uid"], owner["controller"]) == (
                "DGLJob",
                job["metadata"]["uid"],
                True,
            )
            # created before every pod: nothing else writes either yet (no scheduler, no
            # kubelet), so the resourceVersions are their creations' (etcd's revision order)
            first = pods(api, namespace)
            created = {n: int(p["metadata"]["resourceVersion"]) for n, p in first.items()}
            assert int(group["metadata"]["resourceVersion"]) < min(created.values()), created
            for pod in first.values():
                assert pod["metadata"]["labels"][POD_GROUP_LABEL] == JOB
                assert pod["spec"]["schedulerName"] == DEFAULT_GANG_SCHEDULER_NAME
                assert pod["spec"]["priorityClassName"] == priority_class
                assert pod["spec"]["priority"] == 1000  # resolved by the Priority admission
            workers = [first[w] for w in WORKERS]
            for w in workers:
                (spread,) = w["spec"]["topologySpreadConstraints"]
                assert spread["topologyKey"] == "kubernetes.io/hostname"
                assert spread["whenUnsatisfiable"] == "ScheduleAnyway"
            assert "topologySpreadConstraints" not in first[PARTITIONER]["spec"]
            # WaitForWorkersReady: the launcher comes once the workers run, in the same group
            kubelet = Kubelet(api, namespace)
            for i, name in enumerate([*WORKERS, PARTITIONER]):
                kubelet.run(name, f"10.7.0.{i + 2}")
            wait_for(lambda: LAUNCHER in pods(api, namespace), what="the launcher", timeout=30)
            launcher = pods(api, namespace)[LAUNCHER]
            assert launcher["metadata"]["labels"][POD_GROUP_LABEL] == JOB
            assert launcher["spec"]["schedulerName"] == DEFAULT_GANG_SCHEDULER_NAME
            # a restart: new pods, the same PodGroup
            kubelet.finish(WORKERS[0], exit_code=1)

            def restarted() -> bool:
                now = pods(api, namespace)
                return set([*WORKERS, PARTITIONER]) <= set(now) and all(
                    now[n]["metadata"]["uid"] != first[n]["metadata"]["uid"]
                    for n in [*WORKERS, PARTITIONER]
                )

            wait_for(restarted, what="the restart's pods", timeout=30)
            again = api.get(PODGROUPS, namespace, JOB)
            assert again["metadata"]["uid"] == group["metadata"]["uid"]
            assert again["spec"] == group["spec"]
            assert all(
                p["metadata"]["labels"][POD_GROUP_LABEL] == JOB
                for p in pods(api, namespace).values()
            )
            assert refused(op) == [], "the operator was refused a request"
            log = (tmp_path / "operator.log").read_text()
            assert len(re.findall(r"schedulingPolicy\.queue is ignored", log)) == 1
        finally:
            op.stop()
