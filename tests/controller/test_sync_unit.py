"""JobSync driven directly, with caches the test controls (they lag behind the API on purpose)."""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from typing import Any

import pytest

from controller.api import DGLJOBS
from controller.builders import BuildOptions
from controller.children import CHILDREN, Listers
from controller.machinery.events import EventRecorder
from controller.machinery.expectations import Expectations
from controller.machinery.mutation_cache import OwnWrite
from controller.machinery.slim import slim_pod
from controller.metrics import Metrics
from controller.sync import JobSync
from informers.lister import Lister
from informers.store import (
    CONTROLLER_UID_INDEX,
    NAMESPACE_INDEX,
    ThreadSafeStore,
    controller_uid_index,
    meta_namespace_key,
    namespace_index,
)
from kubeclient import PODS, Conflict, Obj
from tests.controller.harness import NS, fake_clock
from tests.fakekube import FakeKube
from tests.support.dgljobs import load_fixture

KEY = f"{NS}/dgl-graphsage"


def _store() -> ThreadSafeStore:
    return ThreadSafeStore(
        {NAMESPACE_INDEX: namespace_index, CONTROLLER_UID_INDEX: controller_uid_index}
    )


class Rig:
    """JobSync over FakeKube, with stores filled only when the test says so."""

    def __init__(self, pod_transform: Callable[[Obj], Obj] | None = None) -> None:
        # what the pod informer applies before a pod enters its cache
        self.pod_transform = pod_transform
        self.clock = fake_clock()
        self.kube = FakeKube(clock=self.clock)
        # the caches, by plural: the DGLJobs' and one for each kind of child
        self.resources = [DGLJOBS, *(child.resource for child in CHILDREN)]
        self.stores = {res.plural: _store() for res in self.resources}
        self.listers = Listers(
            Lister(self.stores["dgljobs"]),
            {child.resource: Lister(self.stores[child.resource.plural]) for child in CHILDREN},
        )
        self.metrics = Metrics()
        self.expectations = Expectations(ttl=300, clock=self.clock)
        self.sync = self.new_sync()

    def new_sync(self) -> JobSync:
        """A JobSync over the same API, caches and metrics, with nothing of its own in hand
        (a new leader)."""
        return JobSync(
            self.kube,
            self.listers,
            options=BuildOptions(),
            recorder=EventRecorder(self.kube),
            metrics=self.metrics,
            expectations=self.expectations,
            clock=self.clock,
        )

    def create_job(self, **spec: Any) -> dict[str, Any]:
        raw = load_fixture("seed_dgljob.yaml")
        raw["spec"].update(spec)
        job = self.kube.create(DGLJOBS, NS, raw)
        self.cache("dgljobs", job)
        return job

    def cache(self, store: str, obj: dict[str, Any]) -> None:
        self.stores[store].put(meta_namespace_key(obj), obj)

    def catch_up(self) -> None:
        """Make every cache show what the API holds (the informers caught up)."""
        for res in self.resources:
            objs = self.kube.objects(res, NS)
            if res == PODS and self.pod_transform is not None:
                objs = [self.pod_transform(o) for o in objs]
            self.stores[res.plural].replace({meta_namespace_key(o): o for o in objs})
            for o in objs:
                for op in ("add",):
                    self.expectations.observe(KEY, op, res.plural, o["metadata"]["name"])

    def writes(self) -> list[Any]:
        return self.kube.writes()


def test_a_second_sync_before_the_cache_caught_up_creates_nothing() -> None:
    rig = Rig()
    rig.create_job()
    rig.kube.clear_actions()
    rig.sync.sync(KEY)
    pod_creates = [a for a in rig.writes() if a.verb == "create" and a.resource == "pods"]
    assert {a.name for a in pod_creates} == {
        "dgl-graphsage-worker-0",
        "dgl-graphsage-worker-1",
        "dgl-graphsage-partitioner",
    }
    rig.kube.clear_actions()
    rig.sync.sync(KEY)  # caches still empty: without expectations it would create again
    assert rig.kube.actions == []
    assert not rig.expectations.satisfied(KEY)
    rig.catch_up()
    assert rig.expectations.satisfied(KEY)
    rig.kube.clear_actions()
    rig.sync.sync(KEY)
    assert [a for a in rig.writes() if a.verb == "create"] == []


def test_expectations_expire_so_a_lost_event_cannot_wedge_a_job() -> None:
    rig = Rig()
    rig.create_job()
    rig.sync.sync(KEY)
    assert not rig.expectations.satisfied(KEY)
    rig.clock.step(301)
    assert rig.expectations.satisfied(KEY)


def test_status_conflict_is_retried_on_the_latest_object() -> None:
    rig = Rig()
    job = rig.create_job()
    # someone else writes the status after our cache copy was taken
    other = copy.deepcopy(rig.kube.get(DGLJOBS, NS, "dgl-graphsage"))
    other["status"] = {"progress": "epoch 3/10"}
    rig.kube.replace(DGLJOBS, NS, "dgl-graphsage", other, subresource="status")
    assert rig.stores["dgljobs"].get(KEY) == job  # stale
    rig.kube.clear_actions()
    rig.sync.sync(KEY)
    status_writes = [a for a in rig.writes() if a.subresource == "status"]
    assert len(status_writes) == 2, "one conflicted write, one retry"
    st = rig.kube.get(DGLJOBS, NS, "dgl-graphsage")["status"]
    assert st["progress"] == "epoch 3/10", "the other writer's field was lost"
    assert any(c["type"] == "Created" for c in st["conditions"])
    assert (
        rig.metrics.registry.get_sample_value("dgl_operator_jobs_created_total", {"namespace": NS})
        == 1
    )


def test_a_cleared_field_stays_cleared_when_the_write_is_rebased() -> None:
    """Suspending (like restarting) clears dglrun's progress. When dglrun's patch reached the
    API after our cache copy was taken, our write conflicts and is re-applied to the newer
    object: the progress we never saw must still go (it used to survive as "not ours")."""
    rig = Rig()
    rig.create_job(runPolicy={"suspend": True})
    rig.kube.patch(DGLJOBS, NS, "dgl-graphsage", {"status": {"progress": "5/5 train"}},
                   subresource="status")  # fmt: skip
    assert "status" not in (rig.stores["dgljobs"].get(KEY) or {})  # the cache has not seen it
    rig.kube.clear_actions()
    rig.sync.sync(KEY)
    assert len([a for a in rig.writes() if a.subresource == "status"]) == 2  # conflict, retry
    st = rig.kube.get(DGLJOBS, NS, "dgl-graphsage")["status"]
    assert st["phase"] == "Suspended"
    assert "progress" not in st, "the abandoned attempt's progress survived the rebase"


def _worker_0_failed(rig: Rig) -> None:
    """A running job (backoffLimit 1) whose worker 0 exited 1, seen by every cache."""
    rig.create_job(runPolicy={"backoffLimit": 1})
    rig.sync.sync(KEY)
    rig.catch_up()
    rig.sync.sync(KEY)  # the launcher
    rig.catch_up()
    for pod in rig.kube.objects(PODS, NS):
        name = pod["metadata"]["name"]
        status: dict[str, Any] = {"phase": "Running"}
        if name.endswith("worker-0"):
            terminated = {"exitCode": 1, "reason": "Error"}
            status = {"phase": "Failed", "containerStatuses": [
                {"name": "dgl-graphsage", "state": {"terminated": terminated}}]}  # fmt: skip
        rig.kube.patch(PODS, NS, name, {"status": status})
    rig.catch_up()


def _restarts(rig: Rig) -> float | None:
    return rig.metrics.registry.get_sample_value(
        "dgl_operator_jobs_restarted_total", {"namespace": NS}
    )


def test_the_next_sync_after_a_rebased_write_reads_that_write() -> None:
    """After a conflicted, re-applied status write, the sync that follows must act on what it
    wrote, not on the cache's older copy: a restart decided twice is counted twice."""
    rig = Rig()
    _worker_0_failed(rig)
    # dglrun's progress reaches the API after the job cache was filled: our write conflicts
    rig.kube.patch(DGLJOBS, NS, "dgl-graphsage", {"status": {"progress": "5/5 train"}},
                   subresource="status")  # fmt: skip
    rig.kube.clear_actions()
    rig.sync.sync(KEY)
    assert len([a for a in rig.writes() if a.subresource == "status"]) == 2  # conflict, retry
    assert rig.kube.get(DGLJOBS, NS, "dgl-graphsage")["status"]["restartCount"] == 1
    rig.sync.sync(KEY)  # the job cache is still at the copy before the restart
    assert _restarts(rig) == 1, f"one failure restarted the job {_restarts(rig)} times"
    assert rig.kube.get(DGLJOBS, NS, "dgl-graphsage")["status"]["restartCount"] == 1


def test_a_decision_on_a_copy_older_than_our_last_transition_is_dropped() -> None:
    """A sync without our earlier write in hand (a new leader whose job cache lags) restarts
    a job that was already restarted: its write conflicts, the API's status shows the
    controller's fields moved on, and the plan is dropped for a fresh sync."""
    rig = Rig()
    _worker_0_failed(rig)
    rig.sync.sync(KEY)
    assert _restarts(rig) == 1
    successor = rig.new_sync()
    rig.kube.clear_actions()
    result = successor.sync(KEY)  # the job cache still shows restartCount 0
    assert result.requeue_after == 0.0
    assert len([a for a in rig.writes() if a.subresource == "status"]) == 1  # the conflict
    assert _restarts(rig) == 1, "a restart recorded by the earlier sync was counted again"
    successor.sync(KEY)  # reads the copy the conflict fetched
    assert _restarts(rig) == 1
    assert rig.kube.get(DGLJOBS, NS, "dgl-graphsage")["status"]["restartCount"] == 1


def test_persistent_status_conflicts_surface_as_an_error() -> None:
    rig = Rig()
    rig.create_job()
    rig.kube.fail_next("update", DGLJOBS, Conflict(409, "Conflict", "busy"), times=10)
    with pytest.raises(Conflict):
        rig.sync.sync(KEY)
    assert (
        rig.metrics.registry.get_sample_value("dgl_operator_jobs_created_total", {"namespace": NS})
        is None
    ), "a transition counted although its status was never written"


def test_a_sync_right_after_our_status_write_uses_our_copy() -> None:
    rig = Rig()
    created = rig.create_job()
    rig.sync.sync(KEY)  # writes status (Created, and the pods it created counted)
    assert len([a for a in rig.writes() if a.subresource == "status"]) == 1
    status = rig.kube.get(DGLJOBS, NS, "dgl-graphsage")["status"]
    assert status["replicaStatuses"]["Worker"]["active"] == 2
    rig.catch_up()
    rig.cache("dgljobs", created)  # ...but the job cache still shows the copy without it
    rig.kube.clear_actions()
    rig.sync.sync(KEY)
    # The pods now show in the cache as the first write counted them: on our own copy there
    # is nothing to write (the stale one would write Created again, and conflict).
    assert [a for a in rig.writes() if a.subresource == "status"] == []
    assert rig.kube.get(DGLJOBS, NS, "dgl-graphsage")["status"] == status
    assert (
        rig.metrics.registry.get_sample_value("dgl_operator_jobs_created_total", {"namespace": NS})
        == 1
    )


def test_configmap_update_uses_our_last_write_not_the_stale_cache() -> None:
    rig = Rig()
    rig.create_job()
    rig.sync.sync(KEY)
    rig.catch_up()
    for i, name in enumerate(["dgl-graphsage-worker-0", "dgl-graphsage-worker-1"]):
        rig.kube.patch(PODS, NS, name, {"status": {"phase": "Running", "podIP": f"10.0.0.{i}"}})
    rig.catch_up()
    rig.kube.clear_actions()
    rig.sync.sync(KEY)  # hostfile changes: one ConfigMap update
    cm_updates = [a for a in rig.writes() if a.resource == "configmaps" and a.verb == "update"]
    assert len(cm_updates) == 1
    # the configmap cache still holds the old copy (no catch_up): no second update, no conflict
    rig.kube.clear_actions()
    rig.sync.sync(KEY)
    assert [a for a in rig.writes() if a.resource == "configmaps"] == []


def test_own_write_is_preferred_while_newer_than_the_cache() -> None:
    mine_slot = OwnWrite()
    cached = {"metadata": {"uid": "u", "resourceVersion": "5"}}
    mine = {"metadata": {"uid": "u", "resourceVersion": "7"}}
    mine_slot.remember(mine)
    assert mine_slot.newest(cached) is mine
    newer = {"metadata": {"uid": "u", "resourceVersion": "8"}}
    assert mine_slot.newest(newer) is newer
    assert mine_slot.newest(cached) is cached, "forgotten once the cache caught up"
    mine_slot.remember(mine)
    other_uid = {"metadata": {"uid": "v", "resourceVersion": "1"}}
    assert mine_slot.newest(other_uid) is other_uid, "a recreated object is not ours"
    assert mine_slot.newest(None) is None


def test_a_deleted_job_leaves_nothing_behind_in_the_sync() -> None:
    """Every per-job memo lives in the job's one record, and deleting the job drops it:
    its own writes, the Secret and the claim seen, the Warnings told, the waiting gauge,
    and the expectations."""
    rig = Rig()
    rig.create_job(
        storage={"claimTemplate": {"spec": {"resources": {"requests": {"storage": "1Gi"}}}}}
    )
    rig.sync.sync(KEY)  # the claim, the transfer Secret, the pods; the status written
    rig.catch_up()
    pod = rig.kube.get(PODS, NS, "dgl-graphsage-worker-0")
    unschedulable = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}
    pod["status"] = {"phase": "Pending", "conditions": [unschedulable]}
    rig.cache("pods", pod)
    rig.sync.sync(KEY)
    memo = rig.sync.memos.peek(KEY)
    assert memo is not None
    assert memo.job_written.written is not None
    uid = rig.kube.get(DGLJOBS, NS, "dgl-graphsage")["metadata"]["uid"]
    assert memo.secret_made_for == uid and memo.claim_ready_for == uid
    assert memo.waiting == (NS, "Unschedulable")
    waiting = {"namespace": NS, "reason": "Unschedulable"}
    assert rig.metrics.registry.get_sample_value("dgl_operator_jobs_waiting", waiting) == 1
    rig.sync.expectations.expect(KEY, "add", "pods", ["late"])  # one still pending

    rig.kube.delete(DGLJOBS, NS, "dgl-graphsage")
    rig.stores["dgljobs"].replace({})
    rig.sync.sync(KEY)
    assert KEY not in rig.sync.memos and len(rig.sync.memos) == 0
    assert rig.sync.expectations.pending(KEY) == []
    assert rig.metrics.registry.get_sample_value("dgl_operator_jobs_waiting", waiting) == 0
    # and no other attribute of the sync holds the key (a memo kept beside the record)
    assert KEY not in repr(vars(rig.sync))


# -- the pod cache keeps only what the sync reads (controller/machinery/slim.py) -------------

_SCHEDULED = {"type": "PodScheduled", "status": "True"}
_POD_STATES: dict[str, Callable[[str], Obj]] = {
    "unschedulable": lambda name: {"phase": "Pending", "conditions": [
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
         "message": "0/3 nodes are available: 3 Insufficient memory."}]},
    "pulling": lambda name: {"phase": "Pending", "conditions": [_SCHEDULED],
        "containerStatuses": [{"name": "dgl-graphsage", "state": {"waiting": {
            "reason": "ErrImagePull", "message": "pull access denied for nope"}}}]},
    "running": lambda name: {"phase": "Running", "podIP": "10.88.1.7", "hostIP": "10.88.1.1",
        "startTime": "2026-11-24T10:00:00Z", "conditions": [
            _SCHEDULED, {"type": "Ready", "status": "True"}],
        "containerStatuses": [{"name": "dgl-graphsage", "ready": True, "image": "x",
            "state": {"running": {"startedAt": "2026-11-24T10:00:01Z"}}}]},
    "oom": lambda name: {"phase": "Failed" if name.endswith("worker-1") else "Running",
        "podIP": "10.88.1.8", "conditions": [_SCHEDULED],
        "containerStatuses": [{"name": "dgl-graphsage", "state": {"terminated": {
            "exitCode": 137, "reason": "OOMKilled",
            "startedAt": "2026-11-24T10:00:01Z", "finishedAt": "2026-11-24T10:05:01Z"}}
            if name.endswith("worker-1") else {"running": {}}}]},
}  # fmt: skip


def _as_the_api_returns_it(pod: Obj, state: Callable[[str], Obj]) -> Obj:
    """A pod with the spec defaults, volumes and status fields the API server adds."""
    out = copy.deepcopy(pod)
    name = out["metadata"]["name"]
    spec = out["spec"]
    spec.update(
        nodeName="node-1",
        serviceAccountName="default",
        dnsPolicy="ClusterFirst",
        tolerations=[{"key": "node.kubernetes.io/not-ready", "operator": "Exists"}],
    )
    spec.setdefault("volumes", []).append(
        {
            "name": "kube-api-access",
            "projected": {
                "sources": [{"serviceAccountToken": {"path": "token", "expirationSeconds": 3607}}]
            },
        }
    )
    out["metadata"].update(generation=1, managedFields=[{"manager": "dgl-operator"}])
    out["status"] = {"qosClass": "Burstable", **state(name)}
    return out  # fmt: skip


def _sync_over(transform: Callable[[Obj], Obj] | None, state: str) -> tuple[Any, Any]:
    rig = Rig(pod_transform=transform)
    rig.create_job(runPolicy={"backoffLimit": 1})
    rig.sync.sync(KEY)
    rig.catch_up()
    for pod in rig.kube.objects(PODS, NS):
        full = _as_the_api_returns_it(pod, _POD_STATES[state])
        rig.kube.patch(PODS, NS, pod["metadata"]["name"], {"spec": full["spec"],
                       "metadata": full["metadata"], "status": full["status"]})  # fmt: skip
    rig.catch_up()
    rig.kube.clear_actions()
    rig.sync.sync(KEY)
    rig.catch_up()
    rig.sync.sync(KEY)
    writes = [(a.verb, a.resource, a.name, a.subresource) for a in rig.writes()]
    status = rig.kube.get(DGLJOBS, NS, "dgl-graphsage")["status"]
    for cond in status.get("conditions") or []:
        cond.pop("lastTransitionTime", None), cond.pop("lastUpdateTime", None)
    # random per job (controller/features/transfer.py): the same shape, another value
    assert re.fullmatch(r"dgl-graphsage-transfer-[0-9a-f]{8}", status.pop("transferSecret"))
    return writes, status


@pytest.mark.parametrize("state", sorted(_POD_STATES))
def test_the_sync_decides_the_same_on_slim_pods(state: str) -> None:
    """Every field of a pod the sync reads survives slim_pod: over full pods and over their
    slim copies it makes the same writes and the same status."""
    full_writes, full_status = _sync_over(None, state)
    slim_writes, slim_status = _sync_over(slim_pod, state)
    assert slim_writes == full_writes
    assert slim_status == full_status
    assert full_writes, "the scenario changed nothing: it tests nothing"


def test_slim_pod_keeps_what_is_read_and_drops_the_rest() -> None:
    pod = _as_the_api_returns_it(
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "j-worker-0", "namespace": NS,
         "uid": "u", "labels": {"a": "b"}, "annotations": {"x": "y"}, "ownerReferences": []},
         "spec": {"containers": [{"name": "main", "image": "i", "env": [{"name": "A"}]}],
                  "initContainers": [{"name": "init", "image": "i"}]}},
        _POD_STATES["running"],
    )  # fmt: skip
    slim = slim_pod(copy.deepcopy(pod))
    assert slim["spec"] == {"nodeName": "node-1", "containers": [{"name": "main"}],
                            "initContainers": [{"name": "init"}]}  # fmt: skip
    assert slim["status"] == pod["status"]
    assert "managedFields" not in slim["metadata"] and "generation" not in slim["metadata"]
    assert slim["metadata"]["labels"] == {"a": "b"}
    other = slim_pod(copy.deepcopy(pod))
    assert other["status"]["phase"] is slim["status"]["phase"]  # interned: one string
