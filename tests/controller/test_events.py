"""Events: written asynchronously, repeats folded into a count."""

from __future__ import annotations

from controller.events import NORMAL, WARNING, EventRecorder
from kubeclient import EVENTS, ServerError
from tests.controller.harness import fake_clock
from tests.fakekube import FakeKube

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
