"""DGLJobs on a real cluster: real pods, containers, kubectl exec, DGL training."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from e2e.helpers import (
    EXAMPLE,
    JOB,
    accuracy,
    apply,
    conditions,
    event_messages,
    example_job,
    get_job,
    launcher_args,
    pods,
    single_process_accuracy,
    succeeded,
    wait_epochs,
    wait_finished,
)
from localcluster.ports import free_port
from soak.kinds import skip_mode
from tests.support.waiting import wait_for


@pytest.fixture(scope="session")
def baseline() -> float:
    """Single-process GraphSAGE with the batch the 2 distributed trainers see together."""
    return single_process_accuracy(2 * 128)


def test_graphsage_succeeds_close_to_the_baseline(
    cluster: Any, namespace: str, baseline: float
) -> None:
    apply(cluster, example_job(namespace))
    seen: list[str] = []
    job = wait_finished(cluster, namespace, progress=seen)
    conds = conditions(job)
    assert succeeded(job), conds
    assert job["status"]["phase"] == "Completed"
    # dglrun's progress reached the job (the PROGRESS column) from both pods, in order
    assert seen[0] == "1/5 partition" and seen[-1] == job["status"]["progress"] == "done", seen
    assert any(text.startswith("5/5 train") for text in seen), seen
    acc = accuracy(cluster.logs(f"{JOB}-launcher", "dgl-graphsage", namespace))
    assert abs(acc - baseline) <= 0.02, f"in-cluster {acc:.4f} vs single-process {baseline:.4f}"
    # ... and its values beside it: the whole job done, no time left, the last epoch's metrics
    detail = job["status"]["progressDetail"]
    assert (detail["stepName"], detail["percentage"], detail["estimatedRemainingSeconds"]) == (
        "train", 100, 0), detail  # fmt: skip
    assert "eta" not in detail, "nothing left to wait for"
    metrics = detail["metrics"]
    assert metrics["testAccuracy"] == pytest.approx(acc, abs=1e-4), metrics
    assert metrics["samplesPerSecond"] > 0 and metrics["loss"] > 0, metrics
    # cleanPodPolicy Running: no worker keeps running after the job
    running = [
        n
        for n, p in pods(cluster, namespace).items()
        if "-worker-" in n
        and p["status"].get("phase") in ("Pending", "Running")
        and not p["metadata"].get("deletionTimestamp")
    ]
    assert running == []
    assert event_messages(cluster, namespace, "DGLJobSucceeded")


def test_the_restricted_example_succeeds_in_a_locked_down_namespace(
    cluster: Any, namespace: str, baseline: float
) -> None:
    """Pod Security ``restricted`` enforced and a ResourceQuota that requires requests and
    limits, as platform teams lock a tenant's namespace (issue 42): the restricted example
    (examples/graphsage/dgljob-restricted.yaml) runs to Succeeded there, the operator's own
    init containers admitted beside the user's."""
    cluster.kubectl(
        ["label", "namespace", namespace, "pod-security.kubernetes.io/enforce=restricted",
         "pod-security.kubernetes.io/enforce-version=latest"],
        as_dict=False,
    )  # fmt: skip
    hard = {
        "requests.cpu": "4",
        "requests.memory": "12Gi",
        "limits.cpu": "8",
        "limits.memory": "16Gi",
    }
    quota = {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "team", "namespace": namespace},
        "spec": {"hard": hard},
    }
    apply(cluster, quota)
    wait_for(
        lambda: (
            (
                cluster.kubectl(["get", "resourcequota", "team", "-n", namespace]).get("status")
                or {}
            ).get("hard")
            == hard
        ),
        what="the quota's status",
        timeout=60,
    )
    job = yaml.safe_load((EXAMPLE / "dgljob-restricted.yaml").read_text())
    job["metadata"]["namespace"] = namespace
    name = job["metadata"]["name"]
    apply(cluster, job)
    done = wait_finished(cluster, namespace, name)
    assert succeeded(done), conditions(done)
    acc = accuracy(cluster.logs(f"{name}-launcher", "dgl-graphsage", namespace))
    assert abs(acc - baseline) <= 0.02, f"in-cluster {acc:.4f} vs single-process {baseline:.4f}"
    used = cluster.kubectl(["get", "resourcequota", "team", "-n", namespace])["status"]["used"]
    assert set(used) == set(hard)  # (every pod of the job was counted: each stated its own)


def test_skip_mode_runs_the_launcher_alone(cluster: Any, namespace: str) -> None:
    job = skip_mode(example_job(namespace, "skip"), epochs=1)
    apply(cluster, job)
    done = wait_finished(cluster, namespace, "skip")
    assert succeeded(done), conditions(done)
    assert set(pods(cluster, namespace)) == {"skip-launcher"}
    assert "test_accuracy" in cluster.logs("skip-launcher", "dgl-graphsage", namespace)


def test_a_worker_deleted_mid_training_fails_the_job_naming_it(
    cluster: Any, namespace: str
) -> None:
    job = example_job(namespace)
    args = launcher_args(job)
    args[args.index("--num-epochs") + 1] = "500"
    apply(cluster, job)
    wait_epochs(cluster, namespace, JOB)  # the trainers are under way
    cluster.kubectl(
        ["delete", "pod", f"{JOB}-worker-1", "-n", namespace, "--wait=false"], as_dict=False
    )
    done = wait_finished(cluster, namespace, timeout=300)
    failed = conditions(done).get("Failed", {})
    assert failed.get("status") == "True", conditions(done)
    assert f"{JOB}-worker-1" in failed["message"], failed
    wait_for(
        lambda: (
            not [
                n
                for n, p in pods(cluster, namespace).items()
                if p["status"].get("phase") == "Running"
            ]
        ),
        what="no pod of the failed job left running",
        timeout=120,
        interval=1.0,
    )


def test_a_worker_deleted_mid_training_restarts_the_job_within_its_backoff_limit(
    cluster: Any, namespace: str
) -> None:
    """backoffLimit 1: the whole job restarts (every pod deleted: dglrun gets SIGTERM and
    stops its DGL processes) and the second attempt trains to the end."""
    job = example_job(namespace, "again")
    job["spec"]["runPolicy"] = {"backoffLimit": 1}
    args = launcher_args(job)
    # (long enough to be deleted mid-training after the first epoch's line, short enough
    # that the second attempt, which trains them all, is not the test's longest part)
    args[args.index("--num-epochs") + 1] = "15"
    apply(cluster, job)
    wait_epochs(cluster, namespace, "again")  # the trainers are under way
    first = {n: p["metadata"]["uid"] for n, p in pods(cluster, namespace).items()}
    # (a grace of 5 s, a stopped attempt's: the worker's `sleep` ignores SIGTERM, and the
    # restart, which reuses its name, would wait the default 30 s for it; the kubelet does not
    # shorten a stop already under way when the operator deletes it again with 5 s)
    cluster.kubectl(
        ["delete", "pod", "again-worker-1", "-n", namespace, "--wait=false", "--grace-period=5"],
        as_dict=False,
    )
    done = wait_finished(cluster, namespace, "again", timeout=900)
    assert succeeded(done), conditions(done)
    assert done["status"]["restartCount"] == 1
    restarting = conditions(done)["Restarting"]
    assert restarting["status"] == "False" and done["status"]["phase"] == "Completed"
    events = cluster.kubectl(["get", "events", "-n", namespace])["items"]
    restarts = [e for e in events if e["reason"] == "DGLJobRestarting"]
    assert restarts and "again-worker-1" in restarts[0]["message"], restarts
    # the second attempt ran in new pods
    launcher = cluster.kubectl(["get", "pod", "again-launcher", "-n", namespace])
    assert launcher["metadata"]["uid"] != first["again-launcher"]
    assert launcher["metadata"]["annotations"]["dgl.qihoo.net/restart-attempt"] == "1"


def test_deleting_the_job_removes_everything(cluster: Any, namespace: str) -> None:
    job = example_job(namespace, "gone")
    spec = job["spec"]
    launcher_args(job)[launcher_args(job).index("--num-epochs") + 1] = "500"
    spec["cleanPodPolicy"] = "None"
    apply(cluster, job)
    wait_for(
        lambda: len(pods(cluster, namespace)) == 4, what="all four pods", timeout=300, interval=1.0
    )
    # one headless Service for the job's workers; the cluster's EndpointSlice controller names
    # each worker by its hostname, as DNS serves it: gone-worker-i.gone-worker
    want = {f"gone-worker-{i}" for i in range(2)}

    def named_workers() -> dict[str, str] | None:
        selector = "kubernetes.io/service-name=gone-worker"
        slices = cluster.kubectl(["get", "endpointslices", "-n", namespace, "-l", selector])
        slices = slices["items"]
        named = {
            e.get("hostname"): e["addresses"][0] for s in slices for e in s.get("endpoints") or []
        }
        return named if set(named) == want else None

    named = wait_for(
        named_workers, what="the workers' Service to name both workers", timeout=120, interval=1.0
    )
    ips = {n: p["status"].get("podIP") for n, p in pods(cluster, namespace).items()}
    assert named == {n: ips[n] for n in want}, (named, ips)
    services = cluster.kubectl(["get", "services", "-n", namespace])["items"]
    assert [s["metadata"]["name"] for s in services] == ["gone-worker"]
    cluster.kubectl(
        ["delete", "dgljob", "gone", "-n", namespace, "--wait=true"], as_dict=False, timeout=120
    )
    kinds = "pods,services,endpointslices,configmaps,serviceaccounts,roles,rolebindings"

    def nothing_left() -> bool:
        items = cluster.kubectl(
            ["get", kinds, "-n", namespace, "-l", "dgl.qihoo.net/job-name=gone"]
        )["items"]
        return not items

    wait_for(
        nothing_left, what="the garbage collector to remove every child", timeout=180, interval=1.0
    )


def test_the_operators_metrics_are_scraped_by_prometheus(
    cluster: Any, operator: str, tmp_path: Path
) -> None:
    from tests.support.prometheus import PrometheusServer
    from tests.support.tools import tool_paths

    prometheus = tool_paths("prometheus")["prometheus"]  # skips, or fails in CI, if missing
    port = free_port()
    forward = cluster.port_forwarding("deployment/dgl-operator", port, 8080, operator)
    with forward:
        server = PrometheusServer(prometheus, tmp_path, f"127.0.0.1:{port}").start()
        try:
            created = wait_for(
                lambda: server.value("sum(dgl_operator_jobs_created_total)"),
                what="dgl_operator_jobs_created_total in Prometheus",
                timeout=60,
                interval=1.0,
            )
            assert created >= 1
            assert server.value('sum(workqueue_adds_total{name="dgljob"})')
            assert server.value("max(dgl_operator_is_leader)") == 1
        finally:
            server.stop()


def test_jobs_are_independent(cluster: Any, namespace: str) -> None:
    """Two jobs' pods never mix (names, hostfiles, RBAC)."""
    a, b = example_job(namespace, "first"), example_job(namespace, "second")
    for j in (a, b):
        launcher_args(j)[launcher_args(j).index("--num-epochs") + 1] = "1"
    apply(cluster, a)
    apply(cluster, b)
    for name in ("first", "second"):
        done = wait_finished(cluster, namespace, name)
        assert succeeded(done), conditions(done)
    cm = cluster.kubectl(["get", "configmap", "first-config", "-n", namespace])
    assert "second" not in cm["data"]["hostfile"] and "first-worker-0" in cm["data"]["hostfile"]


# -- the ParMETIS modes ---------------------------------------------------------------------

PROCESSES = (  # (not itself: its own command line holds the words)
    "import os\n"
    "for p in os.listdir('/proc'):\n"
    "    if not p.isdigit() or p == str(os.getpid()):\n"
    "        continue\n"
    "    try:\n"
    "        cmd = open(f'/proc/{p}/cmdline', 'rb').read().replace(b'\\0', b' ').decode()\n"
    "    except OSError:\n"
    "        continue\n"
    "    if any(w in cmd for w in ('orted', 'mpirun', 'distpart', 'train_dist')):\n"
    "        print(p, cmd)\n"
)
KILL_RANK = (
    "import os, signal\n"
    "for p in os.listdir('/proc'):\n"
    "    try:\n"
    "        cmd = open(f'/proc/{p}/cmdline', 'rb').read().split(b'\\0')\n"
    "        env = open(f'/proc/{p}/environ', 'rb').read().split(b'\\0')\n"
    "    except OSError:\n"
    "        continue\n"
    "    if b'distpart' in cmd and b'launcher.workers.remote' not in cmd and "
    "b'OMPI_COMM_WORLD_RANK=1' in env:\n"
    "        os.kill(int(p), signal.SIGKILL); print('killed', p)\n"
)


def mode_job(namespace: str, manifest: str, name: str) -> dict[str, Any]:
    job: dict[str, Any] = yaml.safe_load((EXAMPLE / manifest).read_text())
    job["metadata"].update(name=name, namespace=namespace)
    return job


def in_pod(cluster: Any, ns: str, pod: str, script: str) -> str:
    """A Python script run in the pod's main container (argv as is: pytest-kubernetes would
    pass it through a shell)."""
    out = subprocess.run(
        ["kubectl", "--kubeconfig", str(cluster.kubeconfig), "exec", pod, "-n", ns, "--",
         "python3", "-c", script],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    if out.returncode != 0:
        raise RuntimeError(f"kubectl exec {pod}: {out.stderr.strip()}")
    return out.stdout


def follow(
    cluster: Any, ns: str, name: str, timeout: float = 900
) -> tuple[dict[str, Any], list[str]]:
    """The finished job and every phase it went through."""
    phases: list[str] = []

    def done() -> dict[str, Any] | None:
        job = get_job(cluster, ns, name)
        phase = (job.get("status") or {}).get("phase")
        if phase and (not phases or phases[-1] != phase):
            phases.append(phase)
        return job if succeeded(job) or conditions(job).get("Failed", {}).get("status") else None

    return wait_for(
        done, what=f"DGLJob {ns}/{name} to finish", timeout=timeout, interval=1.0
    ), phases


def test_parmetis_example_trains_close_to_the_baseline(
    cluster: Any, namespace: str, baseline: float
) -> None:
    """The Partitioner pod partitions with MPI ranks through the ParMETIS API; then the same
    delivery and training as DGL-API."""
    name = "sage-parmetis"
    apply(cluster, mode_job(namespace, "dgljob-parmetis.yaml", name))
    job, phases = follow(cluster, namespace, name)
    assert succeeded(job), conditions(job)
    assert phases[-1] == "Completed" and "Training" in phases, phases
    part_log = cluster.logs(f"{name}-partitioner", "dgl-graphsage", namespace)
    assert "mpirun: 2 ranks of distpart in this pod" in part_log, part_log[-3000:]
    assert "edge cut" in part_log
    log = cluster.logs(f"{name}-launcher", "dgl-graphsage", namespace)
    acc = accuracy(log)
    seconds = job["status"]["partitionSeconds"]
    cut = next(ln for ln in part_log.splitlines() if ln.strip().startswith("edge cut"))
    print(f"ParMETIS in the cluster: partition {seconds}s; {cut.strip()}; test accuracy "
          f"{acc:.4f} (single process {baseline:.4f})")  # fmt: skip
    assert abs(acc - baseline) <= 0.02, f"in-cluster {acc:.4f} vs single-process {baseline:.4f}"
    reasons = {e["reason"] for e in cluster.kubectl(["get", "events", "-n", namespace])["items"]}
    assert {"DGLJobPartitioning", "PartitionSucceeded", "DGLJobSucceeded"} <= reasons


def test_distparmetis_example_each_worker_partitions_its_own_slice(
    cluster: Any, namespace: str, baseline: float
) -> None:
    """No Partitioner pod: one MPI rank per worker (mpirun's daemons through kubexec.sh), each
    worker holding only its own chunks and writing only its own partition; nothing copied.
    Out of core (spec.outOfCore): each rank also writes its part's node features as .npy, and
    the worker's DGL server maps them instead of loading them into shared memory."""
    name = "sage-dist"
    job = mode_job(namespace, "dgljob-distparmetis.yaml", name)
    job["spec"]["cleanPodPolicy"] = "None"  # keep the workers to look at their disks
    job["spec"]["outOfCore"] = {"enabled": True, "pageCacheFraction": 0.25}
    apply(cluster, job)
    done, phases = follow(cluster, namespace, name)
    assert succeeded(done), conditions(done)
    assert "Partitioning" in phases and phases[-1] == "Completed", phases
    assert set(pods(cluster, namespace)) == {f"{name}-launcher", f"{name}-worker-0",
                                             f"{name}-worker-1"}  # fmt: skip
    assert (
        "replicaStatuses" in done["status"]
        and "Partitioner" not in done["status"]["replicaStatuses"]
    )
    log = cluster.logs(f"{name}-launcher", "dgl-graphsage", namespace)
    assert f"one rank of distpart on each of {name}-worker-0, {name}-worker-1" in log, log[-3000:]
    assert f"ranks ({name}-worker-0, {name}-worker-1)" in log  # where the ranks really ran
    assert "nothing to deliver: every worker wrote its own partition" in log
    # the launcher cannot see the chunked graph: it plans from the sizes worker 0 reported
    memory = done["status"].get("memory") or {}
    assert memory.get("partition", {}).get("estimateMiB"), memory
    assert memory["partition"].get("peakMiB") and memory["train"].get("estimateMiB"), memory
    assert "memory plan for " in log, log[-3000:]
    assert "out of core: structure " in log and "page cache 0.25 x " in log, log[-3000:]
    for i in (0, 1):
        part = f"/dgl_workspace/workload/part{i}/node_feat_npy"
        assert f"[{name}-worker-{i}/server-0] out-of-core: part {i}: 5 node feature(s)" in log
        assert f"memory-mapped from {part}" in log, log[-3000:]
        files = in_pod(cluster, namespace, f"{name}-worker-{i}",
                       f"import os; print(sorted(os.listdir('{part}')))")  # fmt: skip
        assert "'index.json'" in files and "'0.npy'" in files, files
        listing = in_pod(
            cluster, namespace, f"{name}-worker-{i}",
            "import os; print(sorted(os.listdir('/dgl_workspace/workload')), "
            "sorted(os.listdir('/data/chunked/edges')))",
        )  # fmt: skip
        assert f"'part{i}'" in listing and f"'part{1 - i}'" not in listing, listing
        mine = [f"'edges-{j}.npy'" for j in range(4) if j * 2 // 4 == i]
        assert all(f in listing for f in mine) and listing.count("edges-") == 2, listing
    acc = accuracy(log)
    seconds = done["status"].get("partitionSeconds")
    cut = next(ln for ln in log.splitlines() if ln.strip().startswith("edge cut"))
    print(f"DistParMETIS in the cluster: partition {seconds}s; {cut.strip()}; test accuracy "
          f"{acc:.4f} (single process {baseline:.4f})")  # fmt: skip
    assert abs(acc - baseline) <= 0.02, f"in-cluster {acc:.4f} vs single-process {baseline:.4f}"
    events = cluster.kubectl(["get", "events", "-n", namespace])["items"]
    partitioned = [e["message"] for e in events if e["reason"] == "PartitionSucceeded"]
    assert partitioned and partitioned[0].startswith("Graph partitioned on the workers in")


@pytest.mark.parametrize("mode", ["ParMETIS", "DistParMETIS"])
def test_a_rank_killed_mid_partition_fails_the_job_within_a_minute(
    cluster: Any, namespace: str, mode: str
) -> None:
    """kill -9 of MPI rank 1 while the ranks partition: the job is Failed within 60 s, its
    reason naming the pod and the phase, and no MPI or DGL process is left on any pod."""
    name = "kill-" + mode.lower()
    manifest = "dgljob-parmetis.yaml" if mode == "ParMETIS" else "dgljob-distparmetis.yaml"
    job = mode_job(namespace, manifest, name)
    job["spec"]["cleanPodPolicy"] = "None"
    apply(cluster, job)
    victim = f"{name}-partitioner" if mode == "ParMETIS" else f"{name}-worker-1"
    pod_of_rank = victim if mode == "ParMETIS" else f"{name}-worker-1"

    def kill() -> float | None:
        try:
            out = in_pod(cluster, namespace, victim, KILL_RANK)
        except Exception:  # the pod is not running yet
            return None
        return time.monotonic() if "killed" in out else None

    killed_at: float = wait_for(
        kill, what=f"MPI rank 1 running in {victim}", timeout=600, interval=1.0
    )
    failed_job = wait_finished(cluster, namespace, name, timeout=120)
    took = time.monotonic() - killed_at
    failed = conditions(failed_job).get("Failed", {})
    assert failed.get("status") == "True", conditions(failed_job)
    print(f"{mode}: rank 1 killed in {victim}; the job was Failed {took:.1f}s later: "
          f"{failed['reason']}: {failed['message']}")  # fmt: skip
    assert took < 60
    assert "partition failed" in failed["message"], failed
    assert f"MPI rank 1 on {pod_of_rank}" in failed["message"], failed
    expected_reason = "PartitionerFailed" if mode == "ParMETIS" else "LauncherFailed"
    assert failed["reason"] == expected_reason, failed
    for pod, p in pods(cluster, namespace).items():
        if p["status"].get("phase") != "Running":
            continue
        left = wait_for(
            lambda pod=pod: in_pod(cluster, namespace, pod, PROCESSES).strip() == "" or None,
            what=f"no MPI or DGL process in {pod}",
            timeout=30,
            interval=1.0,
        )
        assert left
