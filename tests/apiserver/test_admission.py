"""The DGLJob CRD on a real API server: accepted, defaulted and rejected as documented."""

from __future__ import annotations

import copy

import pytest

from controller.api import DGLJOBS
from controller.features.elastic import STATUS_FIELDS
from kubeclient import BadRequest, Invalid, Obj, RestClient
from tests.support.dgljobs import load_fixture
from tests.support.malformed import CRD_CASES, Case, apply_case


def seed(ns: str) -> Obj:
    raw = load_fixture("seed_dgljob.yaml")
    raw["metadata"]["namespace"] = ns
    return raw


def test_seed_example_is_accepted_and_defaulted(api: RestClient, namespace: str) -> None:
    created = api.create(DGLJOBS, namespace, seed(namespace), field_validation="Strict")
    spec = created["spec"]
    assert spec["partitionMode"] == "DGL-API" and spec["cleanPodPolicy"] == "Running"
    assert spec["slotsPerWorker"] == 1
    assert spec["launcherCreationPolicy"] == "WaitForWorkersReady"
    assert spec["dglReplicaSpecs"]["Launcher"]["replicas"] == 1
    # the pod templates are kept whole (preserve-unknown-fields)
    c = spec["dglReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]
    assert c["command"] == ["dglrun"] and "--partition-entry-point" in c["args"]


@pytest.mark.parametrize("case", CRD_CASES, ids=[c.id for c in CRD_CASES])
def test_malformed_jobs_are_rejected_naming_the_field(
    api: RestClient, namespace: str, case: Case
) -> None:
    obj = apply_case(seed(namespace), case)
    # 422 Invalid; an unknown field is refused earlier, by Strict decoding (400)
    with pytest.raises((Invalid, BadRequest)) as err:
        api.create(DGLJOBS, namespace, obj, field_validation="Strict", dry_run=True)
    text = err.value.message
    assert case.field in text, f"{case.id}: {text}"


def test_unknown_fields_are_rejected_in_strict_mode(api: RestClient, namespace: str) -> None:
    obj = seed(namespace)
    obj["spec"]["cleanPodPolicyy"] = "All"
    with pytest.raises(Exception) as err:
        api.create(DGLJOBS, namespace, obj, field_validation="Strict", dry_run=True)
    assert "cleanPodPolicyy" in str(err.value)


def test_immutable_fields(api: RestClient, namespace: str) -> None:
    created = api.create(DGLJOBS, namespace, seed(namespace))
    for path, value, field in [
        (("partitionMode",), "Skip", "partitionMode is immutable"),
        (("slotsPerWorker",), 4, "slotsPerWorker is immutable"),
        (("dglReplicaSpecs", "Worker", "replicas"), 5, "Worker replicas are immutable"),
    ]:
        changed = copy.deepcopy(created)
        target = changed["spec"]
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value
        with pytest.raises(Invalid) as err:
            api.replace(DGLJOBS, namespace, created["metadata"]["name"], changed)
        assert field in err.value.message
    # runPolicy is mutable (suspend/resume, deadlines)
    changed = copy.deepcopy(created)
    changed["spec"]["runPolicy"] = {"suspend": True, "backoffLimit": 2}
    api.replace(DGLJOBS, namespace, created["metadata"]["name"], changed)


@pytest.mark.parametrize("mode", ["ParMETIS", "DistParMETIS"])
def test_the_parmetis_modes_are_accepted_defaulted_and_their_input_immutable(
    api: RestClient, namespace: str, mode: str
) -> None:
    obj = seed(namespace)
    obj["spec"].update(partitionMode=mode, chunkedGraph={"path": "/data/chunked"})
    created = api.create(DGLJOBS, namespace, obj, field_validation="Strict")
    assert created["spec"]["chunkedGraph"] == {"path": "/data/chunked", "layout": "Shared"}
    changed = copy.deepcopy(created)
    changed["spec"]["chunkedGraph"]["path"] = "/elsewhere"
    with pytest.raises(Invalid) as err:
        api.replace(DGLJOBS, namespace, created["metadata"]["name"], changed)
    assert "chunkedGraph is immutable" in err.value.message


def elastic(ns: str, name: str, **policy: object) -> Obj:
    """The seed (2 Worker replicas) on storage, with ``policy`` as its elasticPolicy."""
    obj = seed(ns)
    obj["metadata"]["name"] = name
    obj["spec"].update(storage={"claimName": "results"}, elasticPolicy=dict(policy))
    return obj


def test_an_elastic_job_is_accepted_and_defaulted(api: RestClient, namespace: str) -> None:
    created = api.create(
        DGLJOBS, namespace, elastic(namespace, "up-to-3", maxReplicas=3), field_validation="Strict"
    )
    assert created["spec"]["elasticPolicy"] == {
        "minReplicas": 1,
        "maxReplicas": 3,
        "settleSeconds": 30,
        "cooldownSeconds": 60,
    }
    # maxReplicas has no schema default: it is the Worker replicas, which the controller reads
    created = api.create(DGLJOBS, namespace, elastic(namespace, "fixed-max"))
    assert created["spec"]["elasticPolicy"] == {
        "minReplicas": 1,
        "settleSeconds": 30,
        "cooldownSeconds": 60,
    }
    # status.elastic is in the status schema: kept, not pruned
    report = {
        "workers": 2,
        "desiredWorkers": 3,
        "scale": "2/3",
        "members": ["up-to-3-worker-0", "up-to-3-worker-2"],
        "rescales": 1,
        "rescaleSeconds": 12.5,
        "lastRescale": {
            "reason": "Preempted",
            "from": 3,
            "to": 2,
            "time": "2024-01-01T00:00:00Z",
        },
        "rescalingSince": "2024-01-01T00:00:00Z",
        "settleSince": "2024-01-01T00:00:00Z",
        "attemptStarted": "2024-01-01T00:00:00Z",
        "growTo": 3,
        "minWorkers": 2,
        "partitioned": True,
    }
    assert set(report) == set(STATUS_FIELDS), "every field the controller writes"
    patched = api.patch(
        DGLJOBS, namespace, "up-to-3", {"status": {"elastic": report}}, subresource="status"
    )
    assert patched["status"]["elastic"] == report


def test_elastic_policy_is_immutable(api: RestClient, namespace: str) -> None:
    rigid = seed(namespace)
    rigid["metadata"]["name"] = "rigid"
    rigid["spec"]["storage"] = {"claimName": "results"}
    rigid = api.create(DGLJOBS, namespace, rigid)
    scaled = api.create(DGLJOBS, namespace, elastic(namespace, "scaled", maxReplicas=3))
    for what, before, policy, message in [
        ("added", rigid, {"minReplicas": 1}, "elasticPolicy cannot be added or removed"),
        ("removed", scaled, None, "elasticPolicy cannot be added or removed"),
        ("grown", scaled, {"maxReplicas": 4}, "elasticPolicy is immutable"),
        ("settled", scaled, {"settleSeconds": 5}, "elasticPolicy is immutable"),
    ]:
        changed = copy.deepcopy(before)
        if policy is None:
            del changed["spec"]["elasticPolicy"]
        else:
            changed["spec"].setdefault("elasticPolicy", {}).update(policy)
        with pytest.raises(Invalid) as err:
            api.replace(DGLJOBS, namespace, before["metadata"]["name"], changed)
        assert message in err.value.message, f"{what}: {err.value.message}"
