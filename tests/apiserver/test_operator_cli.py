"""The ``dgl-operator`` process against the real API server: leader election between two
replicas, hand-over on SIGTERM, exit 1 when the Lease is lost, and the per-reconcile log
context (job key and reconcile id on every line a sync logs)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

from kubeclient import LEASES, PODS, RestClient
from localcluster.cluster import ControlPlane
from localcluster.operator_process import OperatorProcess
from tests.support.dgljobs import make_job
from tests.support.waiting import LIVE_TIMEOUT, wait_for

LEASE = "dgl-operator-test-leader"
# short but not tight: both replicas run on a 2-core machine next to other tests
ELECTION = (
    "--leader-elect",
    "--leader-elect-id", LEASE,
    "--leader-elect-lease-duration", "6",
    "--leader-elect-renew-deadline", "4",
    "--leader-elect-retry-period", "0.5",
)  # fmt: skip


def is_leader(op: OperatorProcess) -> bool | None:
    """``dgl_operator_is_leader`` from the replica's /metrics (None while it does not answer)."""
    try:
        text = op.metrics()
    except RuntimeError:
        return None
    m = re.search(r"^dgl_operator_is_leader (\S+)$", text, re.MULTILINE)
    return None if m is None else float(m.group(1)) == 1.0


def leaders(ops: list[OperatorProcess]) -> int | None:
    """How many of the replicas lead (None while any of them does not answer)."""
    flags = [is_leader(op) for op in ops]
    return None if None in flags else flags.count(True)


@contextmanager
def replicas(
    control_plane: ControlPlane, namespace: str, tmp: Path, n: int, *extra: str
) -> Iterator[list[OperatorProcess]]:
    flags = ("--namespace", namespace, "--leader-elect-namespace", namespace, *extra)
    with ExitStack() as stack:
        ops = []
        for i in range(n):
            log = tmp / f"op-{i}.log"
            op = OperatorProcess(control_plane.kubeconfig, log, *flags, metrics=True)
            stack.callback(op.stop)  # SIGTERM, then SIGKILL: nothing outlives the test
            ops.append(op.start())
        for op in ops:
            op.wait_ready()
        yield ops


def holder(api: RestClient, namespace: str) -> str:
    return str(api.get(LEASES, namespace, LEASE)["spec"].get("holderIdentity") or "")


def job_pods(api: RestClient, namespace: str, job: str) -> list[str]:
    items = api.list(PODS, namespace, label_selector=f"dgl.qihoo.net/job-name={job}")["items"]
    return sorted(p["metadata"]["name"] for p in items)


def test_one_replica_leads_and_sigterm_hands_over(
    api: RestClient, namespace: str, control_plane: ControlPlane, tmp_path: Path
) -> None:
    with replicas(control_plane, namespace, tmp_path, 2, *ELECTION) as ops:
        wait_for(
            lambda: leaders(ops) == 1,  # both answer, one of them leads
            what="exactly one leader",
            timeout=LIVE_TIMEOUT,
        )
        leader = next(op for op in ops if is_leader(op))
        standby = next(op for op in ops if op is not leader)
        make_job(api, namespace, "first", workers=2)
        wait_for(
            lambda: len(job_pods(api, namespace, "first")) == 3,
            what="the leader's pods",
            timeout=LIVE_TIMEOUT,
        )
        # SIGTERM: the leader drains, releases the Lease and exits 0; the standby takes over
        # at once (a released Lease needs no waiting for its expiry)
        assert leader.terminate() == 0, leader.tail()
        assert "shutting down" in leader.tail() or "stopped" in leader.tail()
        wait_for(lambda: is_leader(standby), what="the standby to lead", timeout=20)
        assert holder(api, namespace) != ""
        make_job(api, namespace, "second", workers=2)
        wait_for(
            lambda: len(job_pods(api, namespace, "second")) == 3,
            what="the new leader's pods",
            timeout=LIVE_TIMEOUT,
        )
        assert standby.proc is not None and standby.proc.poll() is None


def test_a_replica_that_loses_the_lease_exits_1(
    api: RestClient, namespace: str, control_plane: ControlPlane, tmp_path: Path
) -> None:
    with replicas(control_plane, namespace, tmp_path, 1, *ELECTION) as (op,):
        wait_for(lambda: is_leader(op), what="the replica to lead", timeout=LIVE_TIMEOUT)
        # someone else takes the Lease (as a replica on a partitioned node would once ours
        # had expired): the renewals fail, and the replica must stop its workers and exit
        lease = api.get(LEASES, namespace, LEASE)
        lease["spec"].update(holderIdentity="intruder", leaseDurationSeconds=3600)
        api.replace(LEASES, namespace, LEASE, lease)
        assert op.proc is not None
        assert op.proc.wait(30) == 1, op.tail()
        assert "leader lease lost" in op.tail()
        assert holder(api, namespace) == "intruder", "the lost Lease was taken back"


def test_every_log_line_of_a_sync_names_the_job_and_the_reconcile(
    api: RestClient, namespace: str, control_plane: ControlPlane, tmp_path: Path
) -> None:
    with replicas(control_plane, namespace, tmp_path, 1, "--log-level", "debug") as (op,):
        make_job(api, namespace, "logged", workers=1)
        wait_for(
            lambda: len(job_pods(api, namespace, "logged")) == 2,
            what="the pods",
            timeout=LIVE_TIMEOUT,
        )
        assert op.terminate() == 0
    records = []
    for line in (tmp_path / "op-0.log").read_text().splitlines():
        try:
            records.append(json.loads(line))
        except ValueError:
            raise AssertionError(f"not a JSON log line: {line!r}") from None
    created = [r for r in records if r.get("event") == "created"]
    assert created, "no 'created' record"
    for r in created:
        assert r["job"] == f"{namespace}/logged", r
        assert re.fullmatch(r"[0-9a-f]{12}", r["reconcile_id"]), r
        assert r["level"] == "debug" and "timestamp" in r
    # records outside a sync carry no stale job context
    assert all("job" not in r for r in records if r.get("event") == "stopped")
