"""Tests of the in-memory Kubernetes API fake (tests/fakekube/)."""

from __future__ import annotations

import re
import threading
import time
from typing import Any

import pytest

from clock import FakeClock
from kubeclient import (
    CONFIGMAPS,
    NAMESPACES,
    PODS,
    SERVICES,
    AlreadyExists,
    ApiError,
    BadRequest,
    Conflict,
    Invalid,
    NotFound,
    Resource,
    ServerError,
    TransportError,
    is_too_large_resource_version,
)
from tests.fakekube import (
    Action,
    FakeKube,
    FakeWatch,
    json_merge_patch,
    json_patch,
    match_label_selector,
    parse_label_selector,
)
from tests.support.threads import wait_parked

DGLJOBS = Resource("qihoo.net", "v1alpha1", "dgljobs", "DGLJob")
NS = "team"
T0 = 1_700_000_000.0  # 2023-11-14T22:13:20Z


def pod(name: str, labels: dict[str, str] | None = None, **extra: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if labels is not None:
        meta["labels"] = labels
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, **extra}


def job(name: str, **extra: Any) -> dict[str, Any]:
    return {
        "apiVersion": "qihoo.net/v1alpha1",
        "kind": "DGLJob",
        "metadata": {"name": name},
        "spec": {"replicas": 1},
        **extra,
    }


@pytest.fixture
def kube() -> FakeKube:
    return FakeKube(clock=FakeClock(start=T0))


def drain(stream: FakeWatch, n: int, timeout: float = 2.0) -> list[dict[str, Any]]:
    """Read exactly ``n`` events from a stream on a helper thread (fails instead of hanging)."""
    out: list[dict[str, Any]] = []

    def run() -> None:
        for ev in stream:
            out.append(ev)
            if len(out) == n:
                return

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(timeout)
    if t.is_alive():
        stream.close()
        t.join(1)
        pytest.fail(f"expected {n} events, got {len(out)}: {out}")
    return out


def summary(events: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(e["type"], e["object"].get("metadata", {}).get("name", "")) for e in events]


# --------------------------------------------------------------------------------------------
# create / get
# --------------------------------------------------------------------------------------------


def test_create_fills_server_fields_and_returns_copies(kube: FakeKube) -> None:
    body = pod("a")
    out = kube.create(PODS, NS, body)
    meta = out["metadata"]
    assert meta["namespace"] == NS
    assert meta["resourceVersion"] == "1"
    assert meta["generation"] == 1
    assert meta["creationTimestamp"] == "2023-11-14T22:13:20Z"
    assert len(meta["uid"]) == 36
    assert "uid" not in body["metadata"]  # the caller's body is not touched

    out["metadata"]["labels"] = {"mutated": "yes"}
    got = kube.get(PODS, NS, "a")
    assert "labels" not in got["metadata"]
    got["spec"] = {"evil": True}
    assert "spec" not in kube.get(PODS, NS, "a")
    assert got["kind"] == "Pod" and got["apiVersion"] == "v1"


def test_global_resource_version_across_resources(kube: FakeKube) -> None:
    kube.create(PODS, NS, pod("a"))
    cm = kube.create(CONFIGMAPS, "other", {"metadata": {"name": "c"}, "data": {"k": "v"}})
    kube.create(PODS, NS, pod("b"))
    assert cm["metadata"]["resourceVersion"] == "2"
    assert kube.resource_version == 3
    assert kube.list(CONFIGMAPS)["metadata"]["resourceVersion"] == "3"


def test_create_generate_name(kube: FakeKube) -> None:
    a = kube.create(PODS, NS, {"metadata": {"generateName": "worker-"}})
    b = kube.create(PODS, NS, {"metadata": {"generateName": "worker-"}})
    for o in (a, b):
        name = o["metadata"]["name"]
        assert re.fullmatch(r"worker-[a-z0-9]{5}", name), name
    assert a["metadata"]["name"] != b["metadata"]["name"]
    assert kube.actions[-1].name == b["metadata"]["name"]
    with pytest.raises(Invalid):
        kube.create(PODS, NS, {"metadata": {}})


def test_create_already_exists(kube: FakeKube) -> None:
    kube.create(PODS, NS, pod("a"))
    with pytest.raises(AlreadyExists) as ei:
        kube.create(PODS, NS, pod("a"))
    err = ei.value
    assert isinstance(err, Conflict)
    assert (err.status, err.reason, err.message) == (
        409,
        "AlreadyExists",
        'pods "a" already exists',
    )
    assert err.body["kind"] == "Status" and err.body["status"] == "Failure"
    assert err.body["code"] == 409
    kube.create(PODS, "elsewhere", pod("a"))  # names are per namespace


def test_create_rejects_resource_version_and_bad_input(kube: FakeKube) -> None:
    body = pod("a")
    body["metadata"]["resourceVersion"] = "7"
    with pytest.raises(BadRequest) as ei:
        kube.create(PODS, NS, body)
    assert ei.value.status == 400
    assert ei.value.message == "resourceVersion should not be set on objects to be created"
    with pytest.raises(BadRequest):  # namespace in the body differs from the request's
        kube.create(PODS, NS, {"metadata": {"name": "x", "namespace": "other"}})
    with pytest.raises(BadRequest):  # wrong kind for the resource
        kube.create(PODS, NS, {"kind": "ConfigMap", "metadata": {"name": "x"}})
    with pytest.raises(Invalid):  # label values are at most 63 characters
        kube.create(PODS, NS, pod("x", {"job": "j" * 64}))
    with pytest.raises(Invalid):  # not a DNS-1123 subdomain
        kube.create(PODS, NS, pod("Upper_Case"))
    with pytest.raises(Invalid):  # service names are DNS-1035 labels
        kube.create(SERVICES, NS, {"metadata": {"name": "1abc"}})
    with pytest.raises(Invalid):  # owner references need uid
        kube.create(
            PODS,
            NS,
            {"metadata": {"name": "x", "ownerReferences": [{"apiVersion": "v1", "kind": "P"}]}},
        )
    with pytest.raises(ApiError) as ei2:  # namespaced create needs a namespace
        kube.create(PODS, None, pod("x"))
    assert ei2.value.status == 405
    assert kube.objects(PODS) == []


def test_create_drops_status_only_with_status_subresource(kube: FakeKube) -> None:
    j = kube.create(DGLJOBS, NS, job("j", status={"phase": "Running"}))
    assert "status" not in j
    p = kube.create(PODS, NS, pod("p", status={"phase": "Running"}))
    assert p["status"] == {"phase": "Running"}


def test_cluster_scoped_resources(kube: FakeKube) -> None:
    n = kube.create(NAMESPACES, None, {"metadata": {"name": "ns1", "namespace": "junk"}})
    assert "namespace" not in n["metadata"]
    assert kube.get(NAMESPACES, "ignored", "ns1")["metadata"]["name"] == "ns1"
    assert [o["metadata"]["name"] for o in kube.list(NAMESPACES, "x")["items"]] == ["ns1"]


def test_get_not_found(kube: FakeKube) -> None:
    with pytest.raises(NotFound) as ei:
        kube.get(PODS, NS, "x")
    assert ei.value.message == 'pods "x" not found'
    assert ei.value.reason == "NotFound" and ei.value.body["code"] == 404
    with pytest.raises(NotFound) as ei2:
        kube.get(DGLJOBS, NS, "j")
    assert ei2.value.message == 'dgljobs.qihoo.net "j" not found'


# --------------------------------------------------------------------------------------------
# replace
# --------------------------------------------------------------------------------------------


def test_replace_conflict_on_stale_resource_version(kube: FakeKube) -> None:
    first = kube.create(PODS, NS, pod("a"))
    first["metadata"]["labels"] = {"v": "1"}
    second = kube.replace(PODS, NS, "a", first)
    assert second["metadata"]["resourceVersion"] == "2"
    first["metadata"]["labels"] = {"v": "2"}  # still carries resourceVersion "1"
    with pytest.raises(Conflict) as ei:
        kube.replace(PODS, NS, "a", first)
    err = ei.value
    assert not isinstance(err, AlreadyExists)
    assert (err.status, err.reason) == (409, "Conflict")
    assert (
        "the object has been modified; please apply your changes to the latest version "
        "and try again" in err.message
    )
    assert kube.get(PODS, NS, "a")["metadata"]["labels"] == {"v": "1"}
    # without a resourceVersion the update is unconditional
    del first["metadata"]["resourceVersion"]
    assert kube.replace(PODS, NS, "a", first)["metadata"]["labels"] == {"v": "2"}
    with pytest.raises(NotFound):
        kube.replace(PODS, NS, "zz", pod("zz"))
    with pytest.raises(BadRequest):  # body name differs from the URL's
        kube.replace(PODS, NS, "a", pod("b"))


def test_replace_keeps_immutable_fields_and_noop_does_not_bump(kube: FakeKube) -> None:
    created = kube.create(PODS, NS, pod("a", spec={"x": 1}))
    body = pod("a", spec={"x": 1})
    body["metadata"].update(uid="forged", creationTimestamp="1999-01-01T00:00:00Z")
    stream = kube.watch(PODS, NS, resource_version=created["metadata"]["resourceVersion"])
    same = kube.replace(PODS, NS, "a", body)
    assert same == created  # nothing changed: same resourceVersion, no event
    assert kube.resource_version == 1
    changed = kube.replace(PODS, NS, "a", pod("a", spec={"x": 2}))
    assert changed["metadata"]["uid"] == created["metadata"]["uid"]
    assert changed["metadata"]["creationTimestamp"] == created["metadata"]["creationTimestamp"]
    assert changed["metadata"]["generation"] == 2
    assert changed["metadata"]["resourceVersion"] == "2"
    assert summary(drain(stream, 1)) == [("MODIFIED", "a")]
    stream.close()


def test_status_subresource_isolation_and_generation(kube: FakeKube) -> None:
    j = kube.create(DGLJOBS, NS, job("j"))
    # status update: only status changes, generation stays
    j["status"] = {"phase": "Running"}
    j["spec"] = {"replicas": 99}
    s = kube.replace(DGLJOBS, NS, "j", j, subresource="status")
    assert s["status"] == {"phase": "Running"}
    assert s["spec"] == {"replicas": 1}
    assert s["metadata"]["generation"] == 1
    assert s["metadata"]["resourceVersion"] == "2"
    # main update: status in the body is ignored, spec change bumps generation
    s["status"] = {"phase": "Hacked"}
    s["spec"] = {"replicas": 2}
    m = kube.replace(DGLJOBS, NS, "j", s)
    assert m["status"] == {"phase": "Running"}
    assert m["spec"] == {"replicas": 2}
    assert m["metadata"]["generation"] == 2
    # metadata-only change: new resourceVersion, same generation
    m["metadata"]["labels"] = {"a": "b"}
    m2 = kube.replace(DGLJOBS, NS, "j", m)
    assert m2["metadata"]["generation"] == 2
    assert int(m2["metadata"]["resourceVersion"]) > int(m["metadata"]["resourceVersion"])
    # stale resourceVersion on the status subresource conflicts too
    with pytest.raises(Conflict):
        kube.replace(DGLJOBS, NS, "j", m, subresource="status")
    # no status subresource for pods, and no other subresources at all
    kube.create(PODS, NS, pod("p"))
    with pytest.raises(NotFound):
        kube.replace(PODS, NS, "p", pod("p"), subresource="status")
    with pytest.raises(NotFound):
        kube.replace(DGLJOBS, NS, "j", m2, subresource="scale")


def test_replace_without_status_subresource_replaces_everything(kube: FakeKube) -> None:
    kube.create(PODS, NS, pod("p", spec={"a": 1}, status={"phase": "Pending"}))
    out = kube.replace(PODS, NS, "p", pod("p", spec={"a": 1}, status={"phase": "Running"}))
    assert out["status"] == {"phase": "Running"}
    assert out["metadata"]["generation"] == 1  # status is not part of the generation


# --------------------------------------------------------------------------------------------
# patch
# --------------------------------------------------------------------------------------------


def test_merge_patch(kube: FakeKube) -> None:
    kube.create(PODS, NS, pod("a", {"x": "1", "y": "2"}, spec={"c": [1, 2]}))
    out = kube.patch(PODS, NS, "a", {"metadata": {"labels": {"x": None, "z": "3"}}})
    assert out["metadata"]["labels"] == {"y": "2", "z": "3"}
    out = kube.patch(PODS, NS, "a", {"spec": {"c": [9]}})
    assert out["spec"] == {"c": [9]}
    assert out["metadata"]["generation"] == 2
    # resourceVersion in a merge patch is a precondition
    stale = {"metadata": {"resourceVersion": "1", "labels": {"q": "1"}}}
    with pytest.raises(Conflict):
        kube.patch(PODS, NS, "a", stale)
    fresh = {"metadata": {"resourceVersion": out["metadata"]["resourceVersion"], "labels": None}}
    assert "labels" not in kube.patch(PODS, NS, "a", fresh)["metadata"]
    with pytest.raises(NotFound):
        kube.patch(PODS, NS, "missing", {"metadata": {"labels": {"a": "b"}}})


def test_patch_status_subresource(kube: FakeKube) -> None:
    kube.create(DGLJOBS, NS, job("j"))
    out = kube.patch(
        DGLJOBS,
        NS,
        "j",
        {"status": {"phase": "Done"}, "spec": {"replicas": 5}},
        subresource="status",
    )
    assert out["status"] == {"phase": "Done"} and out["spec"] == {"replicas": 1}
    out = kube.patch(DGLJOBS, NS, "j", {"status": {"phase": "X"}, "spec": {"replicas": 5}})
    assert out["status"] == {"phase": "Done"} and out["spec"] == {"replicas": 5}
    assert out["metadata"]["generation"] == 2
    out = kube.patch(
        DGLJOBS,
        NS,
        "j",
        [{"op": "replace", "path": "/status/phase", "value": "Failed"}],
        patch_type="json",
        subresource="status",
    )
    assert out["status"] == {"phase": "Failed"}


def test_json_patch(kube: FakeKube) -> None:
    kube.create(PODS, NS, pod("a", {"x": "1"}, spec={"list": [1, 2]}))
    ops = [
        {"op": "test", "path": "/metadata/labels/x", "value": "1"},
        {"op": "add", "path": "/metadata/labels/a~1b", "value": "2"},
        {"op": "replace", "path": "/spec/list/0", "value": 10},
        {"op": "add", "path": "/spec/list/-", "value": 3},
        {"op": "remove", "path": "/metadata/labels/x"},
    ]
    out = kube.patch(PODS, NS, "a", ops, patch_type="json")
    assert out["metadata"]["labels"] == {"a/b": "2"}
    assert out["spec"]["list"] == [10, 2, 3]
    rv = out["metadata"]["resourceVersion"]
    with pytest.raises(Invalid) as ei:  # failed test: 422, nothing applied
        kube.patch(
            PODS,
            NS,
            "a",
            [
                {"op": "remove", "path": "/spec"},
                {"op": "test", "path": "/metadata/resourceVersion", "value": "1"},
            ],
            patch_type="json",
        )
    assert ei.value.status == 422
    assert kube.get(PODS, NS, "a")["metadata"]["resourceVersion"] == rv
    with pytest.raises(Invalid):  # removing a missing path
        kube.patch(PODS, NS, "a", [{"op": "remove", "path": "/nope"}], patch_type="json")
    with pytest.raises(BadRequest):  # malformed
        kube.patch(PODS, NS, "a", {"op": "add"}, patch_type="json")
    with pytest.raises(Conflict):  # replacing resourceVersion acts as a precondition
        kube.patch(
            PODS,
            NS,
            "a",
            [{"op": "replace", "path": "/metadata/resourceVersion", "value": "1"}],
            patch_type="json",
        )


def test_patch_helpers_follow_the_rfcs() -> None:
    # RFC 7386 appendix A samples
    assert json_merge_patch({"a": "b"}, {"a": "c"}) == {"a": "c"}
    assert json_merge_patch({"a": [{"b": "c"}]}, {"a": [1]}) == {"a": [1]}
    assert json_merge_patch({"e": None}, {"a": 1}) == {"e": None, "a": 1}
    assert json_merge_patch({"a": {"b": "c"}}, {"a": {"b": "d", "c": None}}) == {"a": {"b": "d"}}
    # RFC 6902 move/copy and the whole-document pointer
    doc = {"a": {"b": 1}, "c": [1]}
    assert json_patch(doc, [{"op": "move", "from": "/a/b", "path": "/d"}]) == {
        "a": {},
        "c": [1],
        "d": 1,
    }
    assert json_patch(doc, [{"op": "copy", "from": "/c", "path": "/c/0"}]) == {
        "a": {"b": 1},
        "c": [[1], 1],
    }
    assert json_patch(doc, [{"op": "replace", "path": "", "value": 5}]) == 5
    assert doc == {"a": {"b": 1}, "c": [1]}  # inputs untouched
    with pytest.raises(ValueError):
        json_patch({"a": 1}, [{"op": "test", "path": "/a", "value": True}])  # 1 is not true


# --------------------------------------------------------------------------------------------
# delete and finalizers
# --------------------------------------------------------------------------------------------


def test_delete_and_uid_precondition(kube: FakeKube) -> None:
    created = kube.create(PODS, NS, pod("a"))
    stream = kube.watch(PODS, NS, resource_version="1")
    with pytest.raises(Conflict) as ei:
        kube.delete(PODS, NS, "a", uid="not-the-uid")
    assert "Precondition failed: UID in precondition: not-the-uid" in ei.value.message
    out = kube.delete(PODS, NS, "a", uid=created["metadata"]["uid"])
    assert out is not None and out["metadata"]["resourceVersion"] == "2"
    assert kube.objects(PODS) == []
    [ev] = drain(stream, 1)
    assert ev["type"] == "DELETED" and ev["object"]["metadata"]["resourceVersion"] == "2"
    with pytest.raises(NotFound):
        kube.delete(PODS, NS, "a")
    stream.close()


def test_a_pod_bound_to_a_node_goes_only_with_grace_period_zero(kube: FakeKube) -> None:
    """As a real API server with no kubelet: a graceful deletion of a scheduled pod waits for
    the node's kubelet; grace period 0 (a forced deletion) removes it."""
    kube.create(PODS, NS, pod("a", spec={"nodeName": "n1"}))
    kube.create(PODS, NS, pod("b"))
    marked = kube.delete(PODS, NS, "a")
    assert marked is not None and marked["metadata"]["deletionTimestamp"]
    assert marked["metadata"]["deletionGracePeriodSeconds"] == 30
    assert kube.delete(PODS, NS, "a") == marked  # again: no change
    kube.delete(PODS, NS, "b")  # never scheduled: gone at once
    assert [p["metadata"]["name"] for p in kube.objects(PODS)] == ["a"]
    kube.delete(PODS, NS, "a", grace_period_seconds=0)
    assert kube.objects(PODS) == []
    deletes = [a for a in kube.actions if a.verb == "delete" and a.name == "a"]
    assert [a.grace_period_seconds for a in deletes] == [None, None, 0]


def test_finalizers_hold_deletion_until_emptied(kube: FakeKube) -> None:
    created = kube.create(PODS, NS, {"metadata": {"name": "a", "finalizers": ["x/one", "x/two"]}})
    stream = kube.watch(PODS, NS, resource_version=created["metadata"]["resourceVersion"])
    marked = kube.delete(PODS, NS, "a")
    assert marked is not None
    assert marked["metadata"]["deletionTimestamp"] == "2023-11-14T22:13:20Z"
    assert kube.get(PODS, NS, "a")["metadata"]["deletionTimestamp"]
    again = kube.delete(PODS, NS, "a")  # already terminating: no change
    assert again == marked
    with pytest.raises(Invalid):  # no new finalizers while being deleted
        kube.patch(PODS, NS, "a", {"metadata": {"finalizers": ["x/one", "x/two", "x/three"]}})
    # the deletion timestamp cannot be cleared by an update
    body = kube.get(PODS, NS, "a")
    body["metadata"].pop("deletionTimestamp")
    body["metadata"]["finalizers"] = ["x/one"]
    kept = kube.replace(PODS, NS, "a", body)
    assert kept["metadata"]["deletionTimestamp"] and kept["metadata"]["finalizers"] == ["x/one"]
    gone = kube.patch(PODS, NS, "a", {"metadata": {"finalizers": None}})
    assert "finalizers" not in gone["metadata"]
    with pytest.raises(NotFound):
        kube.get(PODS, NS, "a")
    assert summary(drain(stream, 3)) == [
        ("MODIFIED", "a"),
        ("MODIFIED", "a"),
        ("DELETED", "a"),
    ]
    stream.close()


# --------------------------------------------------------------------------------------------
# list and selectors
# --------------------------------------------------------------------------------------------


def test_list_sorted_with_namespaces(kube: FakeKube) -> None:
    kube.create(PODS, "b", pod("z"))
    kube.create(PODS, "a", pod("y"))
    kube.create(PODS, "b", pod("a"))
    out = kube.list(PODS)
    assert out["apiVersion"] == "v1" and out["kind"] == "PodList"
    assert out["metadata"] == {"resourceVersion": "3"}
    assert [(i["metadata"]["namespace"], i["metadata"]["name"]) for i in out["items"]] == [
        ("a", "y"),
        ("b", "a"),
        ("b", "z"),
    ]
    assert "kind" not in out["items"][0]  # built-in list items carry no type meta
    assert [i["metadata"]["name"] for i in kube.list(PODS, "b")["items"]] == ["a", "z"]
    kube.create(DGLJOBS, NS, job("j"))
    jobs = kube.list(DGLJOBS, NS)
    assert jobs["kind"] == "DGLJobList" and jobs["apiVersion"] == "qihoo.net/v1alpha1"
    assert jobs["items"][0]["kind"] == "DGLJob"  # custom resources keep it


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("", True),
        ("app=web", True),
        ("app==web", True),
        ("app=db", False),
        ("app!=db", True),
        ("app!=web", False),
        ("missing!=x", True),
        ("tier", True),
        ("missing", False),
        ("!missing", True),
        ("!tier", False),
        ("app in (db, web)", True),
        ("app in (db)", False),
        ("missing in (x)", False),
        ("app notin (db,cache)", True),
        ("app notin (web)", False),
        ("missing notin (x)", True),
        ("app=web,tier=front", True),
        ("app=web, tier=back", False),
        (" app in (web) , !missing , tier ", True),
        ("idx>2", True),
        ("idx<2", False),
        ("example.com/role=worker", True),
        ("empty=", True),
        ("empty in ()", True),
    ],
)
def test_label_selector_operators(selector: str, expected: bool) -> None:
    labels = {
        "app": "web",
        "tier": "front",
        "idx": "3",
        "example.com/role": "worker",
        "empty": "",
    }
    assert match_label_selector(selector, labels) is expected


@pytest.mark.parametrize(
    "selector",
    ["=x", "app in web", "app in (a", "app,,b", "app=a=b", "idx>x", "a b", "-bad-=1", "a=b c"],
)
def test_label_selector_syntax_errors(selector: str) -> None:
    with pytest.raises(ValueError):
        parse_label_selector(selector)


def test_label_selector_empty_values() -> None:
    assert parse_label_selector("app=")[0].values == ("",)
    assert parse_label_selector("app in (a,)")[0].values == ("a", "")
    assert not match_label_selector("app=", {"app": "x"})


def test_list_selectors(kube: FakeKube) -> None:
    kube.create(PODS, NS, pod("a", {"job": "j1", "role": "worker"}, status={"phase": "Running"}))
    kube.create(PODS, NS, pod("b", {"job": "j1", "role": "launcher"}, status={"phase": "Pending"}))
    kube.create(PODS, NS, pod("c", {"job": "j2"}, status={"phase": "Running"}))

    def names(**kw: Any) -> list[str]:
        return [i["metadata"]["name"] for i in kube.list(PODS, NS, **kw)["items"]]

    assert names(label_selector="job=j1") == ["a", "b"]
    assert names(label_selector="job=j1,role notin (launcher)") == ["a"]
    assert names(label_selector="!role") == ["c"]
    assert names(field_selector="status.phase=Running") == ["a", "c"]
    assert names(field_selector="status.phase!=Running") == ["b"]
    assert names(field_selector="metadata.name=b") == ["b"]
    assert names(field_selector="metadata.namespace==team,metadata.name!=a") == ["b", "c"]
    assert names(label_selector="job=j1", field_selector="status.phase=Running") == ["a"]
    with pytest.raises(BadRequest):
        kube.list(PODS, NS, label_selector="job in (")
    with pytest.raises(BadRequest):
        kube.list(PODS, NS, field_selector="spec.bogus=1")


def test_list_resource_version_too_large(kube: FakeKube) -> None:
    kube.create(PODS, NS, pod("a"))
    assert len(kube.list(PODS, resource_version="1")["items"]) == 1
    with pytest.raises(ServerError) as ei:
        kube.list(PODS, resource_version="5")
    assert is_too_large_resource_version(ei.value)


# --------------------------------------------------------------------------------------------
# watch
# --------------------------------------------------------------------------------------------


def test_watch_from_resource_version_replays_only_newer_events(kube: FakeKube) -> None:
    kube.create(PODS, NS, pod("a"))  # rv 1
    kube.create(PODS, NS, pod("b"))  # rv 2
    rv = kube.list(PODS, NS)["metadata"]["resourceVersion"]
    kube.create(PODS, NS, pod("c"))  # rv 3
    kube.create(CONFIGMAPS, NS, {"metadata": {"name": "cm"}})  # rv 4, other resource
    kube.create(PODS, "other", pod("d"))  # rv 5, other namespace
    kube.patch(PODS, NS, "a", {"metadata": {"labels": {"x": "y"}}})  # rv 6
    stream = kube.watch(PODS, NS, resource_version=rv)
    events = drain(stream, 2)
    assert summary(events) == [("ADDED", "c"), ("MODIFIED", "a")]
    assert [e["object"]["metadata"]["resourceVersion"] for e in events] == ["3", "6"]
    assert events[0]["object"]["kind"] == "Pod"
    kube.delete(PODS, NS, "b")  # live events follow the replay
    assert summary(drain(stream, 1)) == [("DELETED", "b")]
    all_ns = kube.watch(PODS, resource_version="4")
    assert summary(drain(all_ns, 3)) == [("ADDED", "d"), ("MODIFIED", "a"), ("DELETED", "b")]
    for s in (stream, all_ns):
        s.close()


def test_watch_from_now(kube: FakeKube) -> None:
    kube.create(PODS, NS, pod("old"))
    for rv in (None, "", "0"):
        stream = kube.watch(PODS, NS, resource_version=rv)
        kube.create(PODS, NS, pod(f"new{kube.resource_version}"))
        [ev] = drain(stream, 1)
        assert ev["type"] == "ADDED" and ev["object"]["metadata"]["name"] != "old"
        stream.close()
    with pytest.raises(ServerError) as ei:
        kube.watch(PODS, NS, resource_version="999")
    assert is_too_large_resource_version(ei.value)


def test_expired_watch_after_compaction(kube: FakeKube) -> None:
    kube.create(PODS, NS, pod("a"))
    kube.create(PODS, NS, pod("b"))
    kube.compact()
    stream = kube.watch(PODS, NS, resource_version="1")
    assert kube.open_watches() == 0
    events = list(stream)  # one ERROR, then a clean end
    assert len(events) == 1
    ev = events[0]
    assert ev["type"] == "ERROR"
    status = ev["object"]
    assert status["kind"] == "Status" and status["apiVersion"] == "v1"
    assert (status["code"], status["reason"], status["status"]) == (410, "Expired", "Failure")
    assert status["message"] == "too old resource version: 1 (2)"
    # watching from the compaction point itself is fine
    ok = kube.watch(PODS, NS, resource_version="2")
    kube.create(PODS, NS, pod("c"))
    assert summary(drain(ok, 1)) == [("ADDED", "c")]
    ok.close()


def test_expired_watch_after_history_overflow() -> None:
    kube = FakeKube(history=2)
    for n in "abcd":  # rv 1..4, history keeps 3 and 4
        kube.create(PODS, NS, pod(n))
    assert next(iter(kube.watch(PODS, NS, resource_version="1")))["type"] == "ERROR"
    stream = kube.watch(PODS, NS, resource_version="2")
    assert summary(drain(stream, 2)) == [("ADDED", "c"), ("ADDED", "d")]
    stream.close()
    kube.compact(3)
    assert next(iter(kube.watch(PODS, NS, resource_version="2")))["type"] == "ERROR"


def test_watch_selector_transitions(kube: FakeKube) -> None:
    kube.create(PODS, NS, pod("p", {"app": "other"}))
    stream = kube.watch(PODS, NS, resource_version="1", label_selector="app=web")
    kube.patch(PODS, NS, "p", {"metadata": {"labels": {"app": "web"}}})  # starts matching
    kube.patch(PODS, NS, "p", {"spec": {"x": 1}})  # still matching
    kube.patch(PODS, NS, "p", {"metadata": {"labels": {"app": "db"}}})  # stops matching
    kube.patch(PODS, NS, "p", {"spec": {"x": 2}})  # not matching: nothing
    kube.delete(PODS, NS, "p")  # not matching: nothing
    kube.create(PODS, NS, pod("q", {"app": "web"}))
    events = drain(stream, 4)
    assert summary(events) == [
        ("ADDED", "p"),
        ("MODIFIED", "p"),
        ("DELETED", "p"),
        ("ADDED", "q"),
    ]
    gone = events[2]["object"]
    assert gone["metadata"]["labels"] == {"app": "web"}  # last matching content ...
    assert gone["metadata"]["resourceVersion"] == "4"  # ... at the event's resourceVersion
    stream.close()

    phase = kube.watch(PODS, NS, field_selector="status.phase=Running")
    kube.patch(PODS, NS, "q", {"status": {"phase": "Running"}})
    kube.patch(PODS, NS, "q", {"status": {"phase": "Succeeded"}})
    assert summary(drain(phase, 2)) == [("ADDED", "q"), ("DELETED", "q")]
    phase.close()


def test_close_wakes_blocked_iterator_from_another_thread(kube: FakeKube) -> None:
    stream = kube.watch(PODS, NS)
    assert kube.open_watches() == 1
    ended = threading.Event()
    got: list[Any] = []

    def consume() -> None:
        got.extend(stream)
        ended.set()

    t = threading.Thread(target=consume, daemon=True)
    t.start()
    wait_parked(t, where=FakeWatch.__next__)  # blocked waiting for events
    assert not ended.is_set()
    started = time.monotonic()
    stream.close()
    assert ended.wait(1.0)
    assert time.monotonic() - started < 1.0
    assert got == []
    assert kube.open_watches() == 0
    kube.create(PODS, NS, pod("late"))
    assert list(stream) == []


def test_watch_timeout_seconds_ends_cleanly(kube: FakeKube) -> None:
    stream = kube.watch(PODS, NS, timeout_seconds=1)
    started = time.monotonic()
    assert list(stream) == []
    assert 0.9 <= time.monotonic() - started < 3
    assert kube.open_watches() == 0


def test_read_timeout_raises_transport_error(kube: FakeKube) -> None:
    stream = kube.watch(PODS, NS, read_timeout=0.2)
    with pytest.raises(TransportError):
        list(stream)


def test_end_watches_delivers_queued_events_then_stops(kube: FakeKube) -> None:
    stream = kube.watch(PODS, NS)
    other = kube.watch(CONFIGMAPS)
    assert kube.open_watches() == 2
    assert kube.wait_for_watches(2, timeout=0.1)
    kube.create(PODS, NS, pod("a"))
    kube.end_watches()
    assert kube.open_watches() == 0
    assert not kube.wait_for_watches(1, timeout=0.05)
    assert summary(list(stream)) == [("ADDED", "a")]
    assert list(other) == []


def test_break_watches_raises_transport_error(kube: FakeKube) -> None:
    stream = kube.watch(PODS, NS)
    errors: list[BaseException] = []

    def consume() -> None:
        try:
            for _ in stream:
                pass
        except TransportError as e:
            errors.append(e)

    t = threading.Thread(target=consume, daemon=True)
    t.start()
    wait_parked(t, where=FakeWatch.__next__)  # the break must wake a blocked read
    kube.break_watches()
    t.join(1.0)
    assert not t.is_alive()
    assert len(errors) == 1
    assert kube.open_watches() == 0


def test_send_bookmark(kube: FakeKube) -> None:
    kube.create(DGLJOBS, NS, job("j"))
    with_bm = kube.watch(DGLJOBS, NS)
    without = kube.watch(DGLJOBS, NS, allow_bookmarks=False)
    kube.create(PODS, NS, pod("p"))  # moves the global resourceVersion
    kube.send_bookmark()
    [bm] = drain(with_bm, 1)
    assert bm == {
        "type": "BOOKMARK",
        "object": {
            "kind": "DGLJob",
            "apiVersion": "qihoo.net/v1alpha1",
            "metadata": {"resourceVersion": "2"},
        },
    }
    kube.end_watches()
    assert list(without) == []


def test_watch_events_are_independent_copies(kube: FakeKube) -> None:
    a = kube.watch(PODS, NS)
    b = kube.watch(PODS, NS)
    kube.create(PODS, NS, pod("p"))
    [ea] = drain(a, 1)
    ea["object"]["metadata"]["name"] = "mutated"
    [eb] = drain(b, 1)
    assert eb["object"]["metadata"]["name"] == "p"
    assert kube.get(PODS, NS, "p")["metadata"]["name"] == "p"
    a.close()
    b.close()


# --------------------------------------------------------------------------------------------
# fault injection, action log
# --------------------------------------------------------------------------------------------


def test_fail_next(kube: FakeKube) -> None:
    boom = TransportError("connection refused")
    kube.fail_next("create", PODS, boom, times=2)
    for _ in range(2):
        with pytest.raises(TransportError):
            kube.create(PODS, NS, pod("a"))
    kube.create(CONFIGMAPS, NS, {"metadata": {"name": "c"}})  # other resources unaffected
    kube.create(PODS, NS, pod("a"))  # third call works
    kube.fail_next("replace", None, Conflict(409, "Conflict", "nope"))
    with pytest.raises(Conflict):
        kube.replace(CONFIGMAPS, NS, "c", {"metadata": {"name": "c"}})
    kube.fail_next("watch", PODS, TransportError("refused"))
    with pytest.raises(TransportError):
        kube.watch(PODS, NS)
    assert kube.open_watches() == 0
    kube.fail_next("list", None, ServerError(500, "InternalError", "etcd down"))
    with pytest.raises(ServerError):
        kube.list(PODS)
    kube.list(PODS)
    with pytest.raises(ValueError):
        kube.fail_next("explode", None, boom)
    assert len(kube.objects(PODS)) == 1


def test_action_log(kube: FakeKube) -> None:
    kube.create(DGLJOBS, NS, job("j"))
    kube.get(DGLJOBS, NS, "j")
    kube.list(PODS)
    kube.watch(PODS, NS).close()
    kube.patch(DGLJOBS, NS, "j", {"status": {"phase": "R"}}, subresource="status")
    kube.replace(DGLJOBS, NS, "j", kube.get(DGLJOBS, NS, "j"))
    with pytest.raises(NotFound):
        kube.delete(PODS, NS, "nope")
    assert kube.actions == [
        Action("create", "dgljobs.qihoo.net", NS, "j", None),
        Action("get", "dgljobs.qihoo.net", NS, "j", None),
        Action("list", "pods", None, None, None),
        Action("watch", "pods", NS, None, None),
        Action("patch", "dgljobs.qihoo.net", NS, "j", "status"),
        Action("get", "dgljobs.qihoo.net", NS, "j", None),
        Action("update", "dgljobs.qihoo.net", NS, "j", None),
        Action("delete", "pods", NS, "nope", None),
    ]
    assert [a.verb for a in kube.writes()] == ["create", "patch", "update", "delete"]
    kube.clear_actions()
    assert kube.actions == [] and kube.writes() == []


# --------------------------------------------------------------------------------------------
# garbage collection
# --------------------------------------------------------------------------------------------


def owner_ref(obj: dict[str, Any], controller: bool = True) -> dict[str, Any]:
    return {
        "apiVersion": obj["apiVersion"],
        "kind": obj["kind"],
        "name": obj["metadata"]["name"],
        "uid": obj["metadata"]["uid"],
        "controller": controller,
    }


def test_garbage_collection_cascades_two_levels(kube: FakeKube) -> None:
    j = kube.create(DGLJOBS, NS, job("j"))
    cm = kube.create(
        CONFIGMAPS, NS, {"metadata": {"name": "cm", "ownerReferences": [owner_ref(j)]}}
    )
    p = kube.create(PODS, NS, {"metadata": {"name": "p", "ownerReferences": [owner_ref(j)]}})
    grandchild = kube.create(
        PODS, NS, {"metadata": {"name": "gc", "ownerReferences": [owner_ref(p)]}}
    )
    keeper = kube.create(CONFIGMAPS, NS, {"metadata": {"name": "keeper"}})
    shared = kube.create(
        CONFIGMAPS,
        NS,
        {
            "metadata": {
                "name": "shared",
                "ownerReferences": [owner_ref(j), owner_ref(keeper, controller=False)],
            }
        },
    )
    assert grandchild and cm and shared
    assert kube.collect_garbage() == 0
    stream = kube.watch(PODS, NS, resource_version=str(kube.resource_version))
    kube.delete(DGLJOBS, NS, "j")
    assert kube.collect_garbage() == 3  # cm, p, then gc
    assert [o["metadata"]["name"] for o in kube.objects(PODS)] == []
    remaining = {o["metadata"]["name"]: o for o in kube.objects(CONFIGMAPS, NS)}
    assert set(remaining) == {"keeper", "shared"}
    # an object with another live owner only loses the dangling reference
    assert [r["name"] for r in remaining["shared"]["metadata"]["ownerReferences"]] == ["keeper"]
    assert summary(drain(stream, 2)) == [("DELETED", "p"), ("DELETED", "gc")]
    assert kube.writes()[-1] == Action(
        "delete", "dgljobs.qihoo.net", NS, "j", None
    )  # GC is not a client
    stream.close()


def test_garbage_collection_respects_finalizers(kube: FakeKube) -> None:
    j = kube.create(DGLJOBS, NS, job("j"))
    kube.create(
        PODS,
        NS,
        {"metadata": {"name": "p", "finalizers": ["x/f"], "ownerReferences": [owner_ref(j)]}},
    )
    p = kube.get(PODS, NS, "p")
    kube.create(PODS, NS, {"metadata": {"name": "c", "ownerReferences": [owner_ref(p)]}})
    kube.delete(DGLJOBS, NS, "j")
    assert kube.collect_garbage() == 1  # p is marked; c survives while p exists
    assert kube.get(PODS, NS, "p")["metadata"]["deletionTimestamp"]
    assert kube.collect_garbage() == 0
    kube.patch(PODS, NS, "p", {"metadata": {"finalizers": []}})
    assert kube.collect_garbage() == 1
    assert kube.objects(PODS) == []


# --------------------------------------------------------------------------------------------
# concurrency
# --------------------------------------------------------------------------------------------


def test_concurrent_writers_get_unique_resource_versions(kube: FakeKube) -> None:
    stream = kube.watch(PODS, NS)
    rvs: list[str] = []
    lock = threading.Lock()

    def writer(i: int) -> None:
        for k in range(25):
            out = kube.create(PODS, NS, pod(f"p-{i}-{k}"))
            with lock:
                rvs.append(out["metadata"]["resourceVersion"])

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(map(int, rvs)) == list(range(1, 101))
    events = drain(stream, 100)
    assert [int(e["object"]["metadata"]["resourceVersion"]) for e in events] == list(range(1, 101))
    stream.close()


def test_create_metadata_only_answers_with_partial_object_metadata(kube: FakeKube) -> None:
    body = pod("a", {"app": "x"}, spec={"containers": [{"name": "c"}]})
    out = kube.create(PODS, NS, body, metadata_only=True)
    assert out["kind"] == "PartialObjectMetadata" and out["apiVersion"] == "meta.k8s.io/v1"
    assert set(out) == {"kind", "apiVersion", "metadata"}
    assert out["metadata"]["labels"] == {"app": "x"} and out["metadata"]["uid"]
    assert kube.get(PODS, NS, "a")["spec"] == body["spec"]  # the whole object was stored
