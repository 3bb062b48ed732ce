"""partitionTransfer HTTP on the real cluster: parts that never pass through the API server."""

from __future__ import annotations

import calendar
import json
import re
import time
import urllib.parse
from pathlib import Path
from typing import Any

from e2e.helpers import (
    apply,
    conditions,
    example_job,
    figure,
    kubectl_run,
    launcher_args,
    progress_of,
    succeeded,
    wait_finished,
    wait_job,
    wait_ready,
)
from localcluster.node import AUDIT_LOG, DEFAULT_DIR

# The partitioner makes a graph whose partitions weigh ~215 MB (50k nodes x 1024 float32
# features, ogb's npz layout: seconds to write), then dglrun runs as usual.
BIG_NODES, BIG_FEATURES = 50_000, 1024
MAKE_BIG = (
    'if [ "$DGL_OPERATOR_PHASE_ENV" = Partitioner ]; then '
    f"python3 code/make_dataset.py --root /tmp/big --num-nodes {BIG_NODES} "
    f'--feat-dim {BIG_FEATURES} --binary || exit 1; fi; exec dglrun "$@"'
)


def audit_log() -> Path:
    path = DEFAULT_DIR / "control-plane" / AUDIT_LOG
    assert path.is_file(), (
        f"{path} is missing: the cluster was started before the API server's audit log was "
        "configured; `make cluster-down` and run again"
    )
    return path


def requests_in(namespace: str, since: float) -> list[tuple[str, str, str, str, list[str]]]:
    """(verb, resource, subresource, name, command) of every request on an object of
    ``namespace`` the API server logged after ``since`` (time.time())."""
    out = []
    for line in audit_log().read_text().splitlines():
        event = json.loads(line)
        ref = event.get("objectRef") or {}
        if ref.get("namespace") != namespace:
            continue
        stamp = event.get("requestReceivedTimestamp", "")
        when = calendar.timegm(time.strptime(stamp[:19], "%Y-%m-%dT%H:%M:%S"))
        if when < since - 1:
            continue
        query = urllib.parse.parse_qs(urllib.parse.urlsplit(event["requestURI"]).query)
        out.append(
            (
                str(event.get("verb", "")),
                str(ref.get("resource", "")),
                str(ref.get("subresource", "")),
                str(ref.get("name", "")),
                query.get("command", []),
            )
        )
    return out


def test_partitions_of_200_mb_reach_the_workers_without_the_api_server(
    cluster: Any, namespace: str
) -> None:
    started = time.time()
    job = example_job(namespace, "big")
    launcher = job["spec"]["dglReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]
    launcher["command"] = ["sh", "-c", MAKE_BIG, "sh"]
    args = launcher_args(job)
    args[args.index("--num-epochs") + 1] = "1"
    args[args.index("--batch-size") + 1] = "1000"
    worker = job["spec"]["dglReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    worker["env"] = [{"name": "DGL_DATASET_ROOT", "value": "/tmp/big"}]
    apply(cluster, job)
    # the control of the audit check below: one exec of the test's own into a worker
    wait_ready(cluster, namespace, "big-worker-0", 600)
    kubectl_run(cluster, ["exec", "-n", namespace, "big-worker-0", "--", "true"])
    done = wait_finished(cluster, namespace, "big", timeout=900)
    assert succeeded(done), conditions(done)
    log = cluster.logs("big-launcher", "dgl-graphsage", namespace)
    m = re.search(r"  ([\d.]+) MB pulled by 2 workers from http://([\d.]+):30070 in ([\d.]+)s", log)
    assert m, log[-4000:]
    moved = float(m.group(1))
    assert moved >= 200, f"only {moved} MB of partitions"
    took = float(m.group(3))
    figure(f"HTTP delivery: {moved:.1f} MB pulled by 2 workers in {took:.1f}s "
           f"({moved / max(took, 1e-3):.0f} MB/s)")  # fmt: skip
    # per-worker progress in the launcher's log, and the figures in the status
    assert re.search(r"\[big-worker-1/pull\] pull: part 1: \d+/\d+ bytes \(100%\)", log)
    status = done["status"]
    assert status["deliveryBytes"] >= 200e6 and status["deliverySeconds"] > 0
    # the API server saw no exec, attach or port-forward into the job's pods but the test's
    # own (the control: the audit log does catch one): dglrun reaches the workers through
    # their agents (issue 58), where it once made one exec per process
    calls = requests_in(namespace, started)
    streams = {
        (sub, name, tuple(cmd))  # (a stream is logged at its start and at its end)
        for _, res, sub, name, cmd in calls
        if res == "pods" and sub in ("exec", "attach", "portforward")
    }
    assert streams == {("exec", "big-worker-0", ("true",))}, streams
    # the partitioner was Ready while it served, and exited once told every part arrived
    events = cluster.kubectl(["get", "events", "-n", namespace])["items"]
    assert any(
        e["reason"] == "PartitionSucceeded" and "Graph partitioned in" in e["message"]
        for e in events
    ), [(e["reason"], e["message"]) for e in events]


def test_the_partitioner_deleted_mid_delivery_restarts_the_job(
    cluster: Any, namespace: str
) -> None:
    """Each worker's pull is capped at 0.5 MB/s (~9 s for the example's parts): the
    partitioner pod is deleted while they pull; backoffLimit 1 restarts the job, which
    then succeeds."""
    job = example_job(namespace, "cut")
    job["spec"]["runPolicy"] = {"backoffLimit": 1}
    launcher_args(job).extend(["--transfer-max-rate", "0.5"])
    apply(cluster, job)

    wait_job(
        cluster,
        namespace,
        "cut",
        lambda j: progress_of(j).startswith("3/5 dispatch: "),
        600,
        "the workers pulling their parts",
    )
    cluster.kubectl(
        ["delete", "pod", "cut-partitioner", "-n", namespace, "--wait=false"], as_dict=False
    )
    done = wait_finished(cluster, namespace, "cut", timeout=900)
    assert succeeded(done), conditions(done)
    assert done["status"]["restartCount"] == 1
    events = cluster.kubectl(["get", "events", "-n", namespace])["items"]
    restarts = [e["message"] for e in events if e["reason"] == "DGLJobRestarting"]
    assert restarts, [(e["reason"], e["message"]) for e in events]
    assert "cut-partitioner" in restarts[0], restarts
