"""Gang scheduling (--gang-scheduling scheduler-plugins) and the workers' placement, in the pure
builders: the PodGroup, its minMember, what the pods carry; and the operator's flags."""

from __future__ import annotations

import copy
import threading
from typing import Any

import pytest

from controller.api import SpecError, parse_job
from controller.builders import (
    DEFAULT_GANG_SCHEDULER_NAME,
    GANG_SCHEDULER_PLUGINS,
    JOB_NAME_LABEL,
    REPLICA_TYPE_LABEL,
    BuildOptions,
)
from controller.builders.desired import Desired, desired
from controller.builders.pods import HOSTNAME_TOPOLOGY_KEY
from controller.features.gang import POD_GROUP_LABEL, pod_group
from controller.main import parse_settings
from kubeclient import PODGROUPS, Obj, Resource
from tests.controller.harness import (
    LAUNCH,
    MAIN,
    NS,
    PART,
    W0,
    W1,
    Harness,
    train,
    wait_attempt,
)
from tests.fakekube import FakeKube
from tests.support.dgljobs import load_fixture
from tests.support.waiting import wait_for

GANG = BuildOptions(gang_scheduling=GANG_SCHEDULER_PLUGINS)
MIN_AVAILABLE = "spec.runPolicy.schedulingPolicy.minAvailable"


def job_with(raw: dict[str, Any], **spec_changes: Any) -> dict[str, Any]:
    out = copy.deepcopy(raw)
    out["spec"].update(spec_changes)
    return out


def _pods(d: Desired) -> list[dict[str, Any]]:
    return [*d.workers, *([d.partitioner] if d.partitioner else []), d.launcher]


def _mode(raw: dict[str, Any], mode: str, policy: str) -> dict[str, Any]:
    out = job_with(raw, partitionMode=mode, launcherCreationPolicy=policy)
    if mode in ("ParMETIS", "DistParMETIS"):
        out["spec"]["chunkedGraph"] = {"path": "/data/graph"}
    if mode == "Skip":
        del out["spec"]["dglReplicaSpecs"]["Worker"]
    return out


def _scheduling(raw: dict[str, Any], **policy: Any) -> dict[str, Any]:
    out = copy.deepcopy(raw)
    out["spec"].setdefault("runPolicy", {})["schedulingPolicy"] = policy
    return out


# -- the PodGroup ----------------------------------------------------------------------------


def test_pod_group_shape(seed_job_raw: dict[str, Any]) -> None:
    job = parse_job(_scheduling(seed_job_raw, scheduleTimeoutSeconds=120))
    group = desired(job, GANG).pod_group
    assert group == pod_group(job)
    assert group == {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {
            "name": job.name,  # the job's name: what every pod's label names
            "namespace": job.namespace,
            "labels": {JOB_NAME_LABEL: job.name},
            "ownerReferences": [
                {
                    "apiVersion": "qihoo.net/v1alpha1",
                    "kind": "DGLJob",
                    "name": job.name,
                    "uid": "uid-1234",
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        # the seed: partitioner + 2 workers; WaitForWorkersReady makes the launcher later
        "spec": {"minMember": 3, "scheduleTimeoutSeconds": 120},
    }
    # without a timeout the PodGroup has none (Coscheduling's own default applies)
    assert pod_group(parse_job(seed_job_raw))["spec"] == {"minMember": 3}
    assert desired(job, GANG).once[0] == group, "created before the other children"


@pytest.mark.parametrize(
    ("mode", "policy", "members"),
    [
        # partitioner + workers (+ the launcher when it is created with them)
        ("DGL-API", "WaitForWorkersReady", 3),
        ("DGL-API", "AtStartup", 4),
        ("ParMETIS", "WaitForWorkersReady", 3),
        ("ParMETIS", "AtStartup", 4),
        # no partitioner pod
        ("DistParMETIS", "WaitForWorkersReady", 2),
        ("DistParMETIS", "AtStartup", 3),
        # the launcher alone, created at once whatever the policy (there are no workers)
        ("Skip", "WaitForWorkersReady", 1),
        ("Skip", "AtStartup", 1),
    ],
)
def test_min_member_is_every_pod_created_at_once(
    seed_job_raw: dict[str, Any], mode: str, policy: str, members: int
) -> None:
    job = parse_job(_mode(seed_job_raw, mode, policy))
    d = desired(job, GANG)
    assert d.pod_group is not None
    assert d.pod_group["spec"]["minMember"] == members == job.spec.gang_size
    created_at_once = len(d.workers) + (1 if d.partitioner else 0)
    if policy == "AtStartup" or mode == "Skip":
        created_at_once += 1
    assert members == created_at_once


def test_min_available_sets_min_member(seed_job_raw: dict[str, Any]) -> None:
    job = parse_job(_scheduling(seed_job_raw, minAvailable=2))
    assert pod_group(job)["spec"]["minMember"] == 2
    assert pod_group(parse_job(_scheduling(seed_job_raw, minAvailable=3)))["spec"] == {
        "minMember": 3
    }


@pytest.mark.parametrize(
    ("policy", "limit", "launcher_note"),
    [("WaitForWorkersReady", 3, True), ("AtStartup", 4, False)],
)
def test_min_available_above_the_pods_created_at_once_is_invalid(
    seed_job_raw: dict[str, Any], policy: str, limit: int, launcher_note: bool
) -> None:
    raw = job_with(seed_job_raw, launcherCreationPolicy=policy)
    parse_job(_scheduling(raw, minAvailable=limit))
    with pytest.raises(SpecError) as err:
        parse_job(_scheduling(raw, minAvailable=limit + 1))
    assert err.value.field == MIN_AVAILABLE
    assert f"more than the {limit} pods the job creates at once" in err.value.message
    assert ("WaitForWorkersReady" in err.value.message) == launcher_note


def test_queue_is_accepted_and_changes_nothing(seed_job_raw: dict[str, Any]) -> None:
    plain = desired(parse_job(seed_job_raw), GANG, token="t")
    queued = desired(parse_job(_scheduling(seed_job_raw, queue="team-a")), GANG, token="t")
    assert queued == plain


# -- the pods ----------------------------------------------------------------------------------


def test_every_pod_joins_the_group_and_goes_to_the_gang_scheduler(
    seed_job_raw: dict[str, Any],
) -> None:
    job = parse_job(job_with(seed_job_raw, launcherCreationPolicy="AtStartup"))
    d = desired(job, GANG)
    assert len(_pods(d)) == 4
    for pod in _pods(d):
        assert pod["metadata"]["labels"][POD_GROUP_LABEL] == job.name
        assert pod["spec"]["schedulerName"] == DEFAULT_GANG_SCHEDULER_NAME
    named = BuildOptions(gang_scheduling=GANG_SCHEDULER_PLUGINS, gang_scheduler_name="gangs")
    assert {p["spec"]["schedulerName"] for p in _pods(desired(job, named))} == {"gangs"}


def test_a_template_that_names_a_scheduler_keeps_it(seed_job_raw: dict[str, Any]) -> None:
    raw = copy.deepcopy(seed_job_raw)
    raw["spec"]["dglReplicaSpecs"]["Worker"]["template"]["spec"]["schedulerName"] = "mine"
    d = desired(parse_job(raw), GANG)
    # the Worker template makes the workers and the partitioner
    assert d.partitioner is not None
    assert {p["spec"]["schedulerName"] for p in [*d.workers, d.partitioner]} == {"mine"}
    assert d.launcher["spec"]["schedulerName"] == DEFAULT_GANG_SCHEDULER_NAME
    assert all(POD_GROUP_LABEL in p["metadata"]["labels"] for p in _pods(d))


def test_gang_off_changes_nothing(seed_job_raw: dict[str, Any]) -> None:
    """Without gang scheduling: no PodGroup, no label, no schedulerName; with it, the pods
    differ by exactly those."""
    job = parse_job(seed_job_raw)
    off = desired(job, BuildOptions(), token="t")
    on = desired(job, GANG, token="t")
    assert off.pod_group is None and off.once == [*off.network, *off.rbac, *off.transfer]
    for pod in _pods(off):
        assert POD_GROUP_LABEL not in pod["metadata"]["labels"]
        assert "schedulerName" not in pod["spec"]
    for plain, ganged in zip(_pods(off), _pods(on), strict=True):
        ganged = copy.deepcopy(ganged)
        del ganged["metadata"]["labels"][POD_GROUP_LABEL]
        del ganged["spec"]["schedulerName"]
        assert ganged == plain
    assert (off.config_map, off.rbac, off.transfer, off.services) == (
        on.config_map,
        on.rbac,
        on.transfer,
        on.services,
    )


@pytest.mark.parametrize("gang", [False, True])
def test_priority_class_goes_to_pods_whose_template_sets_none(
    seed_job_raw: dict[str, Any], gang: bool
) -> None:
    raw = _scheduling(seed_job_raw, priorityClass="high")
    raw["spec"]["dglReplicaSpecs"]["Launcher"]["template"]["spec"]["priorityClassName"] = "own"
    d = desired(parse_job(raw), GANG if gang else BuildOptions())
    assert d.partitioner is not None
    assert {p["spec"]["priorityClassName"] for p in [*d.workers, d.partitioner]} == {"high"}
    assert d.launcher["spec"]["priorityClassName"] == "own"
    plain = desired(parse_job(seed_job_raw), GANG if gang else BuildOptions())
    assert all("priorityClassName" not in p["spec"] for p in _pods(plain))


# -- placement ---------------------------------------------------------------------------------


def test_workers_spread_softly_over_the_nodes(seed_job_raw: dict[str, Any]) -> None:
    job = parse_job(seed_job_raw)
    d = desired(job, BuildOptions())
    for pod in d.workers:
        assert pod["spec"]["topologySpreadConstraints"] == [
            {
                "maxSkew": 1,
                "topologyKey": HOSTNAME_TOPOLOGY_KEY,
                "whenUnsatisfiable": "ScheduleAnyway",  # 3 workers still fit on 2 nodes
                "labelSelector": {
                    "matchLabels": {JOB_NAME_LABEL: job.name, REPLICA_TYPE_LABEL: "Worker"}
                },
            }
        ]
        # the selector matches the workers of this job: every one carries those labels
        labels = pod["metadata"]["labels"]
        assert labels[JOB_NAME_LABEL] == job.name and labels[REPLICA_TYPE_LABEL] == "Worker"
    assert d.partitioner is not None
    for other in (d.partitioner, d.launcher):
        assert "topologySpreadConstraints" not in other["spec"]


@pytest.mark.parametrize(
    "placement",
    [
        {"topologySpreadConstraints": [{"maxSkew": 2, "topologyKey": "zone"}]},
        {"topologySpreadConstraints": []},  # the way to ask for no spread at all
        {
            "affinity": {
                "podAntiAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": [
                        {"topologyKey": HOSTNAME_TOPOLOGY_KEY, "labelSelector": {}}
                    ]
                }
            }
        },
    ],
)
def test_a_worker_template_that_places_its_pods_gets_no_spread(
    seed_job_raw: dict[str, Any], placement: dict[str, Any]
) -> None:
    raw = copy.deepcopy(seed_job_raw)
    raw["spec"]["dglReplicaSpecs"]["Worker"]["template"]["spec"].update(copy.deepcopy(placement))
    for pod in desired(parse_job(raw), BuildOptions()).workers:
        for key, value in placement.items():
            assert pod["spec"][key] == value


def test_a_pod_affinity_alone_keeps_the_spread(seed_job_raw: dict[str, Any]) -> None:
    raw = copy.deepcopy(seed_job_raw)
    affinity: Obj = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": []}}
    raw["spec"]["dglReplicaSpecs"]["Worker"]["template"]["spec"]["affinity"] = affinity
    for pod in desired(parse_job(raw), BuildOptions()).workers:
        assert pod["spec"]["affinity"] == affinity
        assert len(pod["spec"]["topologySpreadConstraints"]) == 1


# -- the operator's settings -------------------------------------------------------------------


def test_gang_flags() -> None:
    off = parse_settings([]).options
    assert (off.gang_scheduling, off.gang, off.gang_scheduler_name) == (
        "none",
        False,
        "scheduler-plugins-scheduler",
    )
    on = parse_settings(
        ["--gang-scheduling", "scheduler-plugins", "--gang-scheduler-name", "gangs"]
    ).options
    assert (on.gang_scheduling, on.gang, on.gang_scheduler_name) == (
        "scheduler-plugins",
        True,
        "gangs",
    )


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--gang-scheduling", "volcano"], "--gang-scheduling: invalid choice: 'volcano'"),
        (["--gang-scheduler-name", ""], "--gang-scheduler-name must not be empty"),
    ],
)
def test_bad_gang_flags_stop_the_operator_at_startup(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        parse_settings(argv)
    assert exit_.value.code == 2
    assert message in capsys.readouterr().err


def test_build_options_refuse_an_unknown_gang_scheduler() -> None:
    with pytest.raises(ValueError, match="'volcano'"):
        BuildOptions(gang_scheduling="volcano")


# -- a whole life over the in-memory API -------------------------------------------------------


class CreationOrder:
    """Delegates to FakeKube; records the kind and name of every object created, and every
    resource any call (list, watch, get, ...) was about."""

    def __init__(self, kube: FakeKube) -> None:
        self._kube = kube
        self.created: list[tuple[str, str]] = []
        self.touched: set[str] = set()
        self._lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        target = getattr(self._kube, name)
        if not callable(target):
            return target

        def call(*args: Any, **kwargs: Any) -> Any:
            if args and isinstance(args[0], Resource):
                with self._lock:
                    self.touched.add(args[0].plural)
            return target(*args, **kwargs)

        return call

    def create(self, res: Resource, namespace: str | None, body: Obj, **kw: Any) -> Obj:
        with self._lock:
            self.created.append((res.kind, body["metadata"]["name"]))
            self.touched.add(res.plural)
        return self._kube.create(res, namespace, body, **kw)


def test_the_pod_group_comes_before_the_pods_and_outlives_restarts() -> None:
    h = Harness(options=GANG, wrap=CreationOrder).start()
    try:
        raw = load_fixture("seed_dgljob.yaml")
        raw["spec"]["runPolicy"] = {"backoffLimit": 1, "schedulingPolicy": {"queue": "q"}}
        h.create_job(raw)
        h.wait_pods(W0, W1, PART)
        assert isinstance(h.client, CreationOrder)
        recorded = h.client
        kinds = [kind for kind, _ in recorded.created]
        assert kinds.index("PodGroup") < kinds.index("Pod")
        (group,) = h.kube.objects(PODGROUPS, NS)
        assert group["metadata"]["name"] == MAIN and group["spec"] == {"minMember": 3}
        assert group["metadata"]["ownerReferences"][0]["uid"] == h.job()["metadata"]["uid"]
        for pod in h.pods().values():
            assert pod["metadata"]["labels"][POD_GROUP_LABEL] == MAIN
            assert pod["spec"]["schedulerName"] == DEFAULT_GANG_SCHEDULER_NAME
        train(h)  # the launcher joins the group when WaitForWorkersReady creates it
        assert h.pods()[LAUNCH]["metadata"]["labels"][POD_GROUP_LABEL] == MAIN
        h.finish_pod(W0, exit_code=1)
        wait_for(lambda: h.status().get("restartCount") == 1, what="restartCount 1")
        wait_attempt(h, 1)
        train(h)
        # the restart's pods joined the same PodGroup: created once, never again
        assert h.kube.objects(PODGROUPS, NS)[0]["metadata"]["uid"] == group["metadata"]["uid"]
        assert [k for k, _ in recorded.created].count("PodGroup") == 1
        assert "podgroups" in recorded.touched
        assert all(p["metadata"]["labels"][POD_GROUP_LABEL] == MAIN for p in h.pods().values())
        h.settle()
    finally:
        h.close()


def test_without_gang_scheduling_podgroups_are_never_touched() -> None:
    """The informer for PodGroups does not even start: the CRD may not exist."""
    h = Harness(wrap=CreationOrder).start()
    try:
        h.create_job(load_fixture("seed_dgljob.yaml"))
        h.wait_pods(W0, W1, PART)
        h.settle()
        assert PODGROUPS not in h.ctrl.child_informers
        assert isinstance(h.client, CreationOrder)
        recorded = h.client
        assert "pods" in recorded.touched and "podgroups" not in recorded.touched
        assert h.kube.objects(PODGROUPS, NS) == []
        assert all(POD_GROUP_LABEL not in p["metadata"]["labels"] for p in h.pods().values())
    finally:
        h.close()
