"""Events: written asynchronously, repeats folded into a count."""

from __future__ import annotations

import pytest

from controller.api import DGLJob, parse_job
from controller.machinery.apply import Applier, summarize_names
from controller.machinery.events import NORMAL, WARNING, EventRecorder
from controller.machinery.expectations import Expectations
from kubeclient import CONFIGMAPS, EVENTS, PODS, SERVICES, ServerError
from tests.controller.harness import fake_clock
from tests.fakekube import FakeKube
from tests.support.dgljobs import load_fixture

JOB = {
    "apiVersion": "qihoo.net/v1alpha1",
    "kind": "DGLJob",
    "metadata": {"name": "j", "namespace": "ns", "uid": "u1", "resourceVersion": "7"},
}


def test_event_fields_and_dedup() -> None:
    kube = FakeKube()
    clock = fake_clock()
    rec = EventRecorder(kube, clock=clock, host="op-0")
    rec.start()
    rec.record(JOB, NORMAL, "DGLJobCreated", "DGLJob ns/j is created.")
    rec.record(JOB, WARNING, "ErrResourceExists", "Pod j-worker-0 already exists")
    clock.step(5)
    rec.record(JOB, WARNING, "ErrResourceExists", "Pod j-worker-0 already exists")
    assert rec.flush()
    events = sorted(kube.objects(EVENTS, "ns"), key=lambda e: e["reason"])
    assert [e["reason"] for e in events] == ["DGLJobCreated", "ErrResourceExists"]
    created, warning = events
    assert created["type"] == "Normal" and created["count"] == 1
    assert created["involvedObject"] == {
        "apiVersion": "qihoo.net/v1alpha1",
        "kind": "DGLJob",
        "namespace": "ns",
        "name": "j",
        "uid": "u1",
        "resourceVersion": "7",
    }
    assert created["source"] == {"component": "dgl-operator", "host": "op-0"}
    assert warning["type"] == "Warning" and warning["count"] == 2
    assert warning["lastTimestamp"] > warning["firstTimestamp"]
    rec.stop()


def test_repeat_after_the_window_is_a_new_event() -> None:
    kube = FakeKube()
    clock = fake_clock()
    rec = EventRecorder(kube, clock=clock, dedup_window=60)
    rec.start()
    rec.record(JOB, NORMAL, "R", "m")
    clock.step(61)
    rec.record(JOB, NORMAL, "R", "m")
    assert rec.flush()
    assert [e["count"] for e in kube.objects(EVENTS, "ns")] == [1, 1]
    rec.stop()


def test_api_errors_do_not_kill_the_sender() -> None:
    kube = FakeKube()
    rec = EventRecorder(kube)
    rec.start()
    kube.fail_next("create", EVENTS, ServerError(500, "InternalError", "boom"))
    rec.record(JOB, NORMAL, "Lost", "this one fails")
    rec.record(JOB, NORMAL, "Kept", "this one is written")
    assert rec.flush()
    assert [e["reason"] for e in kube.objects(EVENTS, "ns")] == ["Kept"]
    rec.stop()


def test_a_full_queue_drops_instead_of_blocking_and_counts() -> None:
    drops: list[int] = []
    rec = EventRecorder(FakeKube(), max_queue=2, on_drop=lambda: drops.append(1))
    for i in range(5):  # not started: nothing drains the queue
        rec.record(JOB, NORMAL, "R", str(i))
    assert rec.dropped == 3 and len(drops) == 3


# -- children's Events, one per job and happening per sync (controller/machinery/apply.py) ---


def test_names_are_summarized_by_numbered_runs() -> None:
    names = ["j-worker-2", "j-partitioner", "j-worker-0", "j-worker-1", "j-worker-5"]
    assert summarize_names(names) == "j-partitioner, j-worker-{0..2}, j-worker-5"
    assert summarize_names(["j-worker-10", "j-worker-9"]) == "j-worker-{9..10}"
    assert summarize_names(["a-01", "a-02"]) == "a-01, a-02"  # zero-padded: not a run
    assert summarize_names(["solo"]) == "solo"


def _job(name: str, uid: str) -> DGLJob:
    raw = load_fixture("seed_dgljob.yaml")
    raw["metadata"] = {"name": name, "namespace": "ns", "uid": uid}
    return parse_job(raw)


def test_a_batch_tells_each_job_one_event_per_happening() -> None:
    kube = FakeKube()
    rec = EventRecorder(kube)
    rec.start()
    apply = Applier(kube, Expectations(), rec)
    a, b = _job("a", "ua"), _job("b", "ub")
    pod = {"apiVersion": "v1", "kind": "Pod", "spec": {"containers": [{"name": "c"}]}}
    svc = {"apiVersion": "v1", "kind": "Service", "spec": {}}
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "data": {}}
    with apply.batch():
        for i in range(3):
            made = apply.create(a, PODS, {**pod, "metadata": {"name": f"a-worker-{i}"}})
            assert made is not None and made["metadata"]["name"] == f"a-worker-{i}"
            apply.create(a, SERVICES, {**svc, "metadata": {"name": f"a-worker-{i}"}})
        apply.create(a, CONFIGMAPS, {**cm, "metadata": {"name": "a-config"}})  # not told
        apply.create(b, PODS, {**pod, "metadata": {"name": "b-launcher"}})
        with apply.batch():  # nested: the outer batch tells
            apply.create(a, PODS, {**pod, "metadata": {"name": "a-partitioner"}})
        assert rec.flush() and kube.objects(EVENTS, "ns") == []  # nothing told yet
    assert rec.flush()
    told = sorted((e["involvedObject"]["name"], e["reason"], e["message"]) for e in
                  kube.objects(EVENTS, "ns"))  # fmt: skip
    assert told == [
        ("a", "SuccessfulCreate",
         "Created 4 pods: a-partitioner, a-worker-{0..2}; 3 services: a-worker-{0..2}"),
        ("b", "SuccessfulCreate", "Created 1 pod: b-launcher"),
    ]  # fmt: skip
    # outside a batch (and with the deletion's cause): told at once
    worker = kube.get(PODS, "ns", "a-worker-0")
    apply.delete(a, PODS, worker, "cleanPodPolicy Running")
    assert rec.flush()
    assert [e["message"] for e in kube.objects(EVENTS, "ns") if e["reason"] == "SuccessfulDelete"] \
        == ["Deleted 1 pod: a-worker-0 (cleanPodPolicy Running)"]  # fmt: skip
    rec.stop()


def test_a_batch_tells_what_was_done_before_an_error() -> None:
    kube = FakeKube()
    rec = EventRecorder(kube)
    rec.start()
    apply = Applier(kube, Expectations(), rec)
    a = _job("a", "ua")
    pod = {"apiVersion": "v1", "kind": "Pod", "spec": {"containers": [{"name": "c"}]}}
    kube.fail_next("create", PODS, ServerError(500, "InternalError", "boom"))
    with pytest.raises(ServerError), apply.batch():
        apply.create(a, SERVICES, {"apiVersion": "v1", "kind": "Service", "spec": {},
                                   "metadata": {"name": "a-worker-0"}})  # fmt: skip
        apply.create(a, PODS, {**pod, "metadata": {"name": "a-worker-0"}})
    assert rec.flush()
    assert [e["message"] for e in kube.objects(EVENTS, "ns")] == ["Created 1 service: a-worker-0"]
    rec.stop()
