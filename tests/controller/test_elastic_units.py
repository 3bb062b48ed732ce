"""controller/features/elastic.py's pure decisions: the members an attempt takes, what counts as a
member taken away, the size of a grow, the memory plan's floor."""

from __future__ import annotations

from typing import Any

import pytest

from controller.api import ElasticPolicy, parse_job
from controller.features import elastic
from controller.status.conditions import now_rfc3339
from kubeclient import Obj
from tests.support.dgljobs import load_fixture

POLICY = ElasticPolicy(min_replicas=2, max_replicas=4, settle_seconds=30)
NOW = 1_700_000_000.0


def test_every_worker_running_is_taken_at_once() -> None:
    st: Obj = {"settleSince": now_rfc3339(NOW - 1)}
    assert elastic.size(POLICY, [0, 1, 2, 3], st, NOW).members == (0, 1, 2, 3)
    assert "settleSince" not in st


def test_below_min_it_waits_and_the_window_does_not_start() -> None:
    st: Obj = {}
    sizing = elastic.size(POLICY, [3], st, NOW)
    assert sizing.members is None and sizing.look_again is None
    assert sizing.waiting.startswith("1 of minReplicas 2 worker pods run")
    assert st == {}


def test_the_settling_window_starts_at_min_and_ends_with_those_running() -> None:
    st: Obj = {}
    first = elastic.size(POLICY, [0, 2], st, NOW)
    assert first.members is None and first.look_again == 30
    assert "waiting 30s more" in first.waiting and st["settleSince"] == now_rfc3339(NOW)
    assert elastic.size(POLICY, [0, 2], st, NOW + 29).look_again == 1
    assert elastic.size(POLICY, [0, 2, 3], st, NOW + 30).members == (0, 2, 3)
    assert "settleSince" not in st


def test_the_window_is_not_waited_out_when_no_other_worker_can_come() -> None:
    """After a lost node, the worker that cannot go elsewhere is Unschedulable: the ones
    running are the members at once; while one may still come, the window is waited."""
    st: Obj = {}
    assert elastic.size(POLICY, [0, 2], st, NOW, coming=1).look_again == 30
    assert elastic.size(POLICY, [0, 2], st, NOW + 1, coming=0).members == (0, 2)
    assert "settleSince" not in st
    # below min, nothing coming still waits (for room, not for the window)
    assert elastic.size(POLICY, [0], {}, NOW, coming=0).members is None


def test_coming_counts_the_workers_that_may_still_run() -> None:
    raw = load_fixture("seed_dgljob.yaml")
    raw["metadata"]["uid"] = "u"
    raw["spec"].update(storage={"claimName": "r"}, elasticPolicy={"maxReplicas": 4})
    j = parse_job(raw)
    running: Obj = {"status": {"phase": "Running", "podIP": "10.0.0.1"}}
    unschedulable: Obj = {
        "status": {
            "phase": "Pending",
            "conditions": [
                {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                 "message": "0/3 nodes are available"}
            ],
        }
    }  # fmt: skip
    pending: Obj = {"status": {"phase": "Pending"}}
    pods: dict[str, Obj] = {
        j.worker_name(0): {"metadata": {"name": j.worker_name(0)}, **running},
        j.worker_name(1): {"metadata": {"name": j.worker_name(1)}, **unschedulable},
        j.worker_name(2): {"metadata": {"name": j.worker_name(2)}, **running},
    }
    assert elastic.coming(j, pods) == 1  # worker 3: not made yet
    pods[j.worker_name(3)] = {"metadata": {"name": j.worker_name(3)}, **pending}
    assert elastic.coming(j, pods) == 1  # worker 3: not placed yet
    pods[j.worker_name(3)] = {"metadata": {"name": j.worker_name(3)}, **unschedulable}
    assert elastic.coming(j, pods) == 0


def test_falling_below_min_restarts_the_window() -> None:
    st: Obj = {}
    elastic.size(POLICY, [0, 1], st, NOW)
    elastic.size(POLICY, [0], st, NOW + 20)
    assert "settleSince" not in st
    assert elastic.size(POLICY, [0, 1], st, NOW + 40).look_again == 30


def test_per_worker_chunks_need_every_worker_until_the_graph_is_partitioned() -> None:
    """DistParMETIS, chunks PerWorker: the first partitioning reads every worker's chunks, so
    the first attempt waits for all; once dglrun reported partitions (cached for every count),
    any count in [min, max] trains, as with Shared chunks."""
    job = parse_job(load_fixture("seed_dgljob.yaml"))
    assert not elastic.whole_first(job)
    spec = {"partitionMode": "DistParMETIS", "chunkedGraph": {"path": "/g", "layout": "PerWorker"}}
    raw = load_fixture("seed_dgljob.yaml")
    raw["spec"].update(spec)
    assert elastic.whole_first(parse_job(raw))
    raw["spec"]["chunkedGraph"]["layout"] = "Shared"
    assert not elastic.whole_first(parse_job(raw))
    status: Obj = {}
    sizing = elastic.size(POLICY, [0, 1, 2], status.setdefault("elastic", {}), NOW, whole=True)
    assert sizing.members is None and sizing.look_again is None
    assert "3 of all 4 (chunkedGraph.layout PerWorker: each worker holds its own" in sizing.waiting
    assert elastic.size(POLICY, [0, 1, 2, 3], status["elastic"], NOW, whole=True).members
    elastic.partitioned(status)  # (nothing reported yet: nothing changes)
    assert "partitioned" not in status["elastic"]
    status["partitions"] = {"key": "k", "path": "partitions/k", "reused": False}
    elastic.partitioned(status)
    assert status["elastic"]["partitioned"] is True
    later = elastic.size(POLICY, [0, 2], status["elastic"], NOW, whole=True)
    assert later.members is None and later.look_again == 30  # (settling, as without it)
    assert elastic.size(POLICY, [0, 2], status["elastic"], NOW + 30, whole=True).members == (0, 2)


def test_the_memory_plans_floor_raises_min() -> None:
    st: Obj = {"minWorkers": 3}
    sizing = elastic.size(POLICY, [0, 1], st, NOW)
    assert sizing.members is None
    assert "2 of the 3 the memory plan needs (minReplicas 2)" in sizing.waiting
    assert elastic.workers_needed("memory plan: ...: use 3 or more workers (smaller") == 3
    assert elastic.workers_needed("memory plan: ...: raise the Worker memory limit") is None


@pytest.mark.parametrize(
    ("have", "standby_up", "partitioner", "want"),
    [
        (1, 1, True, None),  # its room is the next attempt's partitioner's
        (1, 2, True, 2),
        (1, 1, False, 2),  # DistParMETIS: no partitioner pod
        (3, 3, False, 4),  # capped at maxReplicas
        (2, 0, False, None),
    ],
)
def test_a_grow_leaves_room_for_the_partitioner(
    have: int, standby_up: int, partitioner: bool, want: int | None
) -> None:
    assert elastic.grow_to(POLICY, have, standby_up, partitioner) == want


def pod(name: str, **status: Any) -> Obj:
    return {"metadata": {"name": name}, "status": {"phase": "Running", **status}}


def job(members: list[str]) -> Any:
    raw = load_fixture("seed_dgljob.yaml")
    raw["metadata"]["uid"] = "u"
    raw["spec"].update(storage={"claimName": "r"}, elasticPolicy={"maxReplicas": 3})
    return elastic.for_attempt(parse_job(raw), {"elastic": {"members": members}})


def test_members_taken_away_and_members_that_failed_on_their_own() -> None:
    j = job(["dgl-graphsage-worker-0", "dgl-graphsage-worker-2"])
    assert j.spec.members == (0, 2) and j.training_worker_names()[1] == "dgl-graphsage-worker-2"
    assert elastic.standby(j, "dgl-graphsage-worker-1")
    assert not elastic.standby(j, "dgl-graphsage-worker-0")
    w0, w2 = "dgl-graphsage-worker-0", "dgl-graphsage-worker-2"
    crashed = pod(w0, phase="Failed")
    evicted = pod(w2, phase="Failed", reason="Evicted")
    assert elastic.lost_members(j, {w0: crashed, w2: evicted}) == [(w2, "Evicted")]
    preempted = pod(
        w2,
        conditions=[
            {"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler"}
        ],
    )
    preempted["metadata"]["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    assert elastic.lost_members(j, {w0: pod(w0), w2: preempted}) == [
        (w2, "being deleted (PreemptionByScheduler)")
    ]
    assert elastic.lost_members(j, {w0: pod(w0)}) == [(w2, "deleted")]


def test_recorded_members_the_spec_no_longer_has_are_chosen_again() -> None:
    j = job(["dgl-graphsage-worker-0", "dgl-graphsage-worker-7"])
    assert j.spec.members is None


def test_the_attempt_counts_restarts_and_rescales() -> None:
    assert elastic.attempt({"restartCount": 1, "elastic": {"rescales": 2}}) == 3
    assert elastic.attempt({}) == 0
