"""Least privilege for the job's pods (issue 57): which pods carry a service-account token and
whose; a template cannot wear an account the operator makes; an admission's placement adds
labels and annotations but never replaces the operator's. Each attack is refused, and a twin
shows what the check lets through (a check that can fail)."""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

import pytest

from controller.api import LAUNCHER, PARTITIONER, WORKER, DGLJob, Placement, SpecError, parse_job
from controller.builders import (
    ATTEMPT_ANNOTATION,
    JOB_NAME_LABEL,
    REPLICA_ANNOTATION,
    REPLICA_NAME_LABEL,
    REPLICA_TYPE_LABEL,
    BuildOptions,
)
from controller.builders.desired import desired
from controller.builders.pods import launcher_pod, partitioner_pod, worker_pod
from controller.features import kueue
from controller.features.elastic import probe_pod
from controller.features.gang import POD_GROUP_LABEL
from controller.features.transfer import TRANSFER_SECRET_ANNOTATION
from controller.lifecycle.invalid import refuse_the_operators_account
from tests.controller.crd_validate import Validator, load_crd
from tests.controller.harness import NS, Harness, seed
from tests.support.paths import CRD_PATH

OPTS = BuildOptions()
ACCOUNT = "automountServiceAccountToken"


def _job(raw: dict[str, Any], worker_spec: dict[str, Any] | None = None) -> DGLJob:
    raw = copy.deepcopy(raw)
    raw["spec"]["dglReplicaSpecs"]["Worker"]["template"]["spec"].update(worker_spec or {})
    return parse_job(raw)


# -- tokens ---------------------------------------------------------------------------------


def test_a_worker_gets_no_token(seed_job_raw: dict[str, Any]) -> None:
    """A worker talks to no API (the launcher execs into it; it pulls its partitions over HTTP
    with the transfer token): no token, not even when its template asks for the namespace's
    default account's."""
    for asked in ({}, {ACCOUNT: True}, {ACCOUNT: False}):
        spec = worker_pod(_job(seed_job_raw, asked), 0)["spec"]
        assert spec[ACCOUNT] is False, asked
        assert "serviceAccountName" not in spec
    # nothing of the worker's needs the API: no kubectl, no kube volume
    main = worker_pod(_job(seed_job_raw), 0)["spec"]["containers"][0]
    assert not [m for m in main["volumeMounts"] if m["name"] == "kube-volume"]
    assert not [e for e in main["env"] if "KUBECTL" in e["name"]]


@pytest.mark.parametrize(
    ("asked", "mounted"),
    [({}, None), ({ACCOUNT: True}, True), ({ACCOUNT: False}, False)],
    ids=["the-accounts-own-setting", "explicit-true", "explicit-false"],
)
def test_a_worker_with_an_account_of_its_own_keeps_the_templates_choice(
    seed_job_raw: dict[str, Any], asked: dict[str, Any], mounted: bool | None
) -> None:
    """The twin: a template naming an account of its own decides (unset: the account's own
    automountServiceAccountToken, by default true)."""
    for field in ("serviceAccountName", "serviceAccount"):
        spec = worker_pod(_job(seed_job_raw, {field: "trainer", **asked}), 0)["spec"]
        assert spec.get(ACCOUNT) is mounted, (field, asked)
        assert spec[field] == "trainer"


def test_the_launcher_and_the_partitioner_wear_the_operators_account_with_its_token(
    seed_job_raw: dict[str, Any],
) -> None:
    """They run kubectl with the accounts the operator made for them, whatever the templates
    say (a Worker template's false, or its own account, would otherwise reach the partitioner,
    which is made of it)."""
    raw = copy.deepcopy(seed_job_raw)
    for rtype in (LAUNCHER, WORKER):
        raw["spec"]["dglReplicaSpecs"][rtype]["template"]["spec"].update(
            {ACCOUNT: False, "serviceAccount": "trainer"}
        )
    job = parse_job(raw)
    for pod, account in (
        (launcher_pod(job, OPTS), "dgl-graphsage-launcher"),
        (partitioner_pod(job, OPTS), "dgl-graphsage-partitioner"),
    ):
        assert pod["spec"]["serviceAccountName"] == account
        assert pod["spec"][ACCOUNT] is True
        assert "serviceAccount" not in pod["spec"]


def test_the_elastic_probe_gets_no_token_and_not_the_partitioners_account(
    seed_job_raw: dict[str, Any],
) -> None:
    job = _job(seed_job_raw)
    partitioner = partitioner_pod(job, OPTS)
    # the twin: what it is made of has the partitioner's account and token
    assert partitioner["spec"]["serviceAccountName"] == "dgl-graphsage-partitioner"
    assert partitioner["spec"][ACCOUNT] is True
    probe = probe_pod(job, copy.deepcopy(partitioner))
    assert probe["spec"][ACCOUNT] is False
    assert "serviceAccountName" not in probe["spec"] and "serviceAccount" not in probe["spec"]


# -- a template wearing an account the operator makes ----------------------------------------


@pytest.fixture(scope="module")
def validator() -> Validator:
    return Validator(load_crd(CRD_PATH))


def _with_account(raw: dict[str, Any], rtype: str, field: str, account: Any) -> dict[str, Any]:
    raw = copy.deepcopy(raw)
    if rtype == LAUNCHER:  # a Skip-mode launcher: it runs with its template's account
        raw["spec"]["partitionMode"] = "Skip"
        del raw["spec"]["dglReplicaSpecs"][WORKER]
    raw["spec"]["dglReplicaSpecs"][rtype]["template"]["spec"][field] = account
    return raw


BORROWED = [
    (WORKER, "serviceAccountName", "other-launcher", "other", "launcher"),
    (WORKER, "serviceAccountName", "other-partitioner", "other", "partitioner"),
    (WORKER, "serviceAccountName", "dgl-graphsage-launcher", "dgl-graphsage", "launcher"),
    (WORKER, "serviceAccount", "dgl-graphsage-launcher", "dgl-graphsage", "launcher"),
    (LAUNCHER, "serviceAccountName", "other-launcher", "other", "launcher"),
    (LAUNCHER, "serviceAccount", "a-b-partitioner", "a-b", "partitioner"),
]


@pytest.mark.parametrize(("rtype", "field", "account", "owner", "role"), BORROWED)
def test_a_template_wearing_an_account_the_operator_makes_is_refused_naming_the_field(
    seed_job_raw: dict[str, Any],
    validator: Validator,
    rtype: str,
    field: str,
    account: str,
    owner: str,
    role: str,
) -> None:
    """Another job's launcher account (exec into its workers), this job's own (a worker
    borrowing its launcher's exec rights), a Skip launcher taking a partitioner's: refused
    by the operator's parser and at admission by the CRD, each naming the field."""
    raw = _with_account(seed_job_raw, rtype, field, account)
    where = f"spec.dglReplicaSpecs.{rtype}.template.spec.{field}"
    with pytest.raises(SpecError) as err:
        parse_job(raw)
    assert err.value.field == where
    assert str(err.value).startswith(
        f'{where}: "{account}" is the service account of DGLJob {owner}\'s {role}'
    ), str(err.value)
    errors = validator.validate(raw)
    assert [e for e in errors if e.startswith(where) and "service account the operator" in e], (
        errors
    )


@pytest.mark.parametrize(
    "account", ["trainer", "launcher", "launcher-reader", "my-launchers", "partitioner-x"]
)
@pytest.mark.parametrize("rtype", [WORKER, LAUNCHER])
def test_an_account_of_ones_own_is_accepted(
    seed_job_raw: dict[str, Any], validator: Validator, rtype: str, account: str
) -> None:
    """The twin: names that only look alike pass both checks."""
    raw = _with_account(seed_job_raw, rtype, "serviceAccountName", account)
    assert validator.validate(raw) == []
    job = parse_job(raw)
    template = job.spec.worker if rtype == WORKER else job.spec.launcher
    assert template is not None
    assert template.template["spec"]["serviceAccountName"] == account


# -- the operator's labels after an admission's placement ------------------------------------


OWNED_LABELS = (JOB_NAME_LABEL, REPLICA_NAME_LABEL, REPLICA_TYPE_LABEL, POD_GROUP_LABEL)
OWNED_ANNOTATIONS = (REPLICA_ANNOTATION, ATTEMPT_ANNOTATION, TRANSFER_SECRET_ANNOTATION)


def _admitted(job: DGLJob, updates: dict[str, Any]) -> DGLJob:
    """``job`` admitted by Kueue with one admission check's podSetUpdates for every pod set
    (as controller/features/kueue.py reads them from the Workload)."""
    status = {
        "conditions": [{"type": "Admitted", "status": "True", "reason": "Admitted"}],
        "admission": {
            "clusterQueue": "cq",
            "podSetAssignments": [
                {"name": name, "flavors": {}, "count": count}
                for name, count in (("partitioner", 1), ("worker", 2), ("launcher", 1))
            ],
        },
        "admissionChecks": [
            {
                "name": "check",
                "state": "Ready",
                "podSetUpdates": [
                    {"name": name, **updates} for name in ("partitioner", "worker", "launcher")
                ],
            }
        ],
    }
    placed = kueue.placement({"metadata": {"name": "w"}, "status": status}, {})
    assert set(placed) == {LAUNCHER, PARTITIONER, WORKER}
    return kueue.admitted(job, placed)


def test_an_admissions_labels_cannot_move_a_pod_into_another_job(
    seed_job_raw: dict[str, Any],
) -> None:
    """Attack: an admission check's podSetUpdates name another job (its NetworkPolicy and
    Service select pods by the job-name label), another replica, another attempt. The
    operator's labels and annotations stand; the admission's others are added, and replace
    the template's (the twin: the placement is applied at all)."""
    raw = copy.deepcopy(seed_job_raw)
    for rtype in (LAUNCHER, WORKER):
        raw["spec"]["dglReplicaSpecs"][rtype]["template"]["metadata"] = {
            "labels": {"team": "template"},
            "annotations": {"note": "template"},
        }
    labels = {key: "someone-elses" for key in OWNED_LABELS} | {"team": "admitted", "x": "y"}
    annotations = {key: "someone-elses" for key in OWNED_ANNOTATIONS} | {"note": "admitted"}
    job = _admitted(parse_job(raw), {"labels": labels, "annotations": annotations})
    gang = BuildOptions(gang_scheduling="scheduler-plugins")
    want = desired(job, gang)
    assert want.partitioner is not None
    pods = [*want.workers, want.partitioner, want.launcher]
    for pod in pods:
        meta = pod["metadata"]
        name = meta["name"]
        assert meta["labels"][JOB_NAME_LABEL] == "dgl-graphsage", name
        assert meta["labels"][REPLICA_NAME_LABEL] == name
        assert meta["labels"][POD_GROUP_LABEL] == "dgl-graphsage"
        assert meta["annotations"][ATTEMPT_ANNOTATION] == "0"
        assert meta["annotations"][TRANSFER_SECRET_ANNOTATION] != "someone-elses"
        assert (meta["labels"]["team"], meta["labels"]["x"]) == ("admitted", "y")
        assert meta["annotations"]["note"] == "admitted"
    for pod, rtype in ((want.workers[0], WORKER), (want.launcher, LAUNCHER)):
        assert pod["metadata"]["labels"][REPLICA_TYPE_LABEL] == rtype
        assert pod["metadata"]["annotations"][REPLICA_ANNOTATION] == rtype
    # the twin: the same placement applied after the operator's labels (the order before the
    # fix) moves the pod into the other job
    pod = worker_pod(job, 0)
    job.spec.placement[WORKER].apply(pod)
    assert pod["metadata"]["labels"][JOB_NAME_LABEL] == "someone-elses"


def test_a_placement_without_labels_leaves_the_pods_as_they_were(
    seed_job_raw: dict[str, Any],
) -> None:
    job = parse_job(seed_job_raw)
    placed = dataclasses.replace(job, spec=dataclasses.replace(job.spec, placement={}))
    assert worker_pod(placed, 1) == worker_pod(job, 1)
    nothing = dataclasses.replace(
        job, spec=dataclasses.replace(job.spec, placement={WORKER: Placement()})
    )
    assert worker_pod(nothing, 1) == worker_pod(job, 1)


# -- the operator's own account (--operator-service-account) ---------------------------------


def test_a_template_wearing_the_operators_own_account_fails_the_job_naming_the_field() -> None:
    """Attack: a job in the operator's namespace whose Worker template names the operator's
    own service account (its rights in every namespace). The operator knows it from the
    chart (--operator-service-account) and fails the job InvalidSpec, naming the field, with
    no pod made; the twin: another job there, wearing an account of its own, runs."""
    h = Harness(options=BuildOptions(operator_service_account=f"{NS}/dgl-operator")).start()
    try:
        wearing = seed()
        wearing["spec"]["dglReplicaSpecs"][WORKER]["template"]["spec"]["serviceAccountName"] = (
            "dgl-operator"
        )
        h.create_job(wearing)
        cond = h.wait_condition("Failed")
        assert cond["reason"] == "InvalidSpec"
        assert cond["message"].startswith(
            "invalid spec: spec.dglReplicaSpecs.Worker.template.spec.serviceAccountName: "
            '"dgl-operator" is the operator\'s own service account'
        ), cond["message"]
        assert h.pods() == {}
        own = seed()
        own["metadata"]["name"] = "own"
        own["spec"]["dglReplicaSpecs"][WORKER]["template"]["spec"]["serviceAccountName"] = "trainer"
        h.create_job(own)
        h.wait_pods("own-worker-0", "own-worker-1")
        assert h.condition("Failed", "own") is None
    finally:
        h.close()


@pytest.mark.parametrize(
    ("account", "refused"),
    [
        (f"{NS}/dgl-operator", True),
        ("elsewhere/dgl-operator", False),  # (an account of that name in another namespace)
        (f"{NS}/other", False),
        ("", False),  # unknown (run outside the chart): nothing to compare
    ],
)
def test_only_the_operators_own_account_in_its_namespace_is_refused(
    seed_job_raw: dict[str, Any], account: str, refused: bool
) -> None:
    assert seed_job_raw["metadata"]["namespace"] == NS
    for field in ("serviceAccountName", "serviceAccount"):
        job = _job(seed_job_raw, {field: "dgl-operator"})
        if refused:
            with pytest.raises(SpecError) as err:
                refuse_the_operators_account(job, account)
            assert err.value.field == f"spec.dglReplicaSpecs.Worker.template.spec.{field}"
        else:
            refuse_the_operators_account(job, account)
