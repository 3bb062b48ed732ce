"""spec.storage's ``status.results`` (the RESULTS column): shown once the job's claim exists,
never for a claim that was refused, taken by someone else, or never appeared."""

from __future__ import annotations

from typing import Any

from kubeclient import PERSISTENTVOLUMECLAIMS as PVCS
from kubeclient import Invalid
from tests.controller.harness import NS, PART, W0, W1, Harness, seed
from tests.support.waiting import wait_for

J = "dgl-graphsage"
CLAIM = f"{J}-results"
CLAIM_SPEC = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}


def claim(name: str, **labels: str) -> dict[str, Any]:
    meta = {"name": name, "namespace": NS, "labels": labels}
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": meta,
            "spec": CLAIM_SPEC}  # fmt: skip


def test_a_claim_the_api_server_refuses_leaves_no_results(h: Harness) -> None:
    """issue 26: a claimTemplate without resources fails the job InvalidSpec, and RESULTS
    must not name the claim that was never made."""
    refusal = f'PersistentVolumeClaim "{CLAIM}" is invalid: spec.resources[storage]: Required value'
    h.kube.fail_next("create", PVCS, Invalid(422, "Invalid", refusal))
    template = {"spec": {"accessModes": ["ReadWriteOnce"]}}
    h.create_job(seed(storage={"claimTemplate": template, "path": "team-a"}))
    cond = h.wait_condition("Failed")
    assert cond["reason"] == "InvalidSpec"
    assert "the API server refused a child object" in cond["message"]
    assert "spec.resources[storage]: Required value" in cond["message"]
    h.settle()
    status = h.status()
    assert "results" not in status, status
    assert h.names(PVCS) == [] and h.pods() == {}


def test_someone_elses_claim_is_not_shown_as_the_results(h: Harness) -> None:
    h.kube.create(PVCS, NS, claim(CLAIM))
    h.create_job(seed(storage={"claimTemplate": {"spec": CLAIM_SPEC}}))
    assert h.wait_condition("Failed")["reason"] == "InvalidSpec"
    h.settle()
    assert "results" not in h.status()


def test_a_users_claim_shows_the_results_once_it_exists(h: Harness) -> None:
    created = h.create_job(seed(storage={"claimName": "later", "path": "team-a"}))
    uid = created["metadata"]["uid"]
    h.wait_pods(W0, W1, PART)  # (they wait for the claim, which the kubelet would say)
    h.settle()
    assert "results" not in h.status()
    h.kube.create(PVCS, NS, claim("later"))
    h.step(10)  # (the sync looks again 10 s after it found none)
    results = wait_for(lambda: h.status().get("results"), what="status.results")
    assert results == f"later:/team-a/runs/{J}-{uid[:8]}/output"


def test_a_job_that_ends_before_its_claim_exists_shows_no_results(h: Harness) -> None:
    h.create_job(seed(storage={"claimName": "never"}, runPolicy={"activeDeadlineSeconds": 30}))
    h.wait_pods(W0, W1, PART)
    h.settle()
    h.step(30)
    assert h.wait_condition("Failed")["reason"] == "DeadlineExceeded"
    h.settle()
    assert "results" not in h.status()


def test_a_claim_made_from_the_template_shows_the_results(h: Harness) -> None:
    created = h.create_job(seed(storage={"claimTemplate": {"spec": CLAIM_SPEC}, "path": "a/b"}))
    uid = created["metadata"]["uid"]
    wait_for(lambda: h.names(PVCS) == [CLAIM], what="the claim")
    results = wait_for(lambda: h.status().get("results"), what="status.results")
    assert results == f"{CLAIM}:/a/b/runs/{J}-{uid[:8]}/output"
