"""dglrun's kubectl transport, driven through a FAKE kubectl and kubexec.sh (fixtures/).

There is no cluster in these tests: "pods" are folders bind-mounted in private mount
namespaces. What is real: dglrun, its phases, the verification, the remote session helper and
its kill path. The same code runs against real pods in the e2e tests.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from launcher.checksums import manifest
from tests.launcher.fake_cluster import Cluster, launcher_args, partitioner_args, progress_log
from tests.launcher.helpers import dglrun
from tests.support.paths import REPO


@pytest.fixture
def cluster(tmp_path: Path, root_needed: None) -> Cluster:
    return Cluster(tmp_path)


def test_partitioner_waits_for_the_launcher_container_then_delivers(cluster: Cluster) -> None:
    (cluster.dir / "leadfile").write_text("10.0.0.9 30050 job-launcher\n")
    cluster.init_container("job-launcher", "watcher-loop-partitioner", "waiting")
    flip = threading.Timer(
        1.5, cluster.init_container, ("job-launcher", "watcher-loop-partitioner", "running")
    )
    flip.start()
    proc = dglrun(
        *partitioner_args(cluster), env={**cluster.env, "DGL_OPERATOR_PHASE_ENV": "Partitioner"}
    )
    flip.cancel()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert cluster.calls("get pod job-launcher") >= 2, "it did not wait for the container"
    assert manifest(cluster.pod_ws("job-launcher") / "dataset") == manifest(cluster.ws / "dataset")
    assert "[2/5] deliver done in" in proc.stdout and "verified in job-launcher" in proc.stdout


def test_delivery_is_verified_and_retried(cluster: Cluster) -> None:
    cluster.init_container("job-launcher", "watcher-loop-partitioner", "running")
    proc = dglrun(
        *partitioner_args(cluster),
        env={
            **cluster.env,
            "DGL_OPERATOR_PHASE_ENV": "Partitioner",
            "FAKE_CORRUPT_FIRST": "1",
            "HOSTNAME": "job-partitioner",
        },
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "delivery attempt 1 failed" in proc.stdout and "did not arrive intact" in proc.stdout
    assert manifest(cluster.pod_ws("job-launcher") / "dataset") == manifest(cluster.ws / "dataset")


def test_delivery_gives_up_with_a_clear_message(cluster: Cluster) -> None:
    (cluster.dir / "leadfile").write_text("10.0.0.9 30050 job-launcher\n")
    cluster.init_container("job-launcher", "watcher-loop-partitioner", "terminated")
    proc = dglrun(
        *partitioner_args(cluster),
        "--deliver-timeout",
        "1",
        env={**cluster.env, "DGL_OPERATOR_PHASE_ENV": "Partitioner"},
    )
    assert proc.returncode == 1
    assert (
        "deliver failed: container watcher-loop-partitioner of pod job-launcher is not "
        "running after 1s (last state: terminated)"
    ) in proc.stdout


def test_launcher_dispatches_configures_and_trains(cluster: Cluster) -> None:
    cluster.partition()
    # file order on purpose: worker-1 first; two loopback addresses stand in for pod IPs
    (cluster.dir / "hostfile").write_text(
        "127.0.0.2 30050 job-worker-1 slots=1\n127.0.0.1 30050 job-worker-0 slots=1\n"
    )
    proc = dglrun(*launcher_args(cluster), env=cluster.env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for i in (0, 1):
        wl = cluster.pod_ws(f"job-worker-{i}") / "workload"
        assert (wl / f"part{i}").is_dir() and not (wl / f"part{1 - i}").exists()
        assert (wl / "ip_config.txt").read_text() == "127.0.0.1 30050\n127.0.0.2 30050\n"
    assert json.loads((cluster.ws / "output" / "metrics.json").read_text())["world_size"] == 2
    assert "[1/5] partition: done by the partitioner pod" in proc.stdout
    assert "[job-worker-1/trainer-0] trainer rank 1/2 met the master" in proc.stdout


def test_launcher_stops_remote_processes_when_a_trainer_fails(cluster: Cluster) -> None:
    cluster.partition()
    (cluster.dir / "hostfile").write_text(
        "127.0.0.1 30050 job-worker-0 slots=1\n127.0.0.2 30050 job-worker-1 slots=1\n"
    )
    started = time.monotonic()
    proc = dglrun(
        *launcher_args(cluster, "--train-args", "--sleep 120"),
        env={**cluster.env, "FAKE_FAIL_RANK": "0", "FAKE_FAIL_AFTER": "1"},
    )
    assert proc.returncode == 1
    assert time.monotonic() - started < 30
    assert "train failed: trainer 0 on job-worker-0 (127.0.0.1) exited with code 1" in proc.stdout
    left = subprocess.run(["pgrep", "-f", "fake_train.py"], capture_output=True, text=True)
    assert left.stdout.strip() == "", "remote DGL processes survived"
    assert cluster.calls("exec job-worker-1") > 0
    log = (cluster.dir / "calls.log").read_text()
    assert "launcher.workers.remote kill" in log


def test_launcher_refuses_more_workers_than_partitions(cluster: Cluster) -> None:
    cluster.partition()
    (cluster.dir / "hostfile").write_text(
        "".join(f"127.0.0.{i + 1} 30050 job-worker-{i} slots=1\n" for i in range(3))
    )
    proc = dglrun(*launcher_args(cluster), env=cluster.env)
    assert proc.returncode == 1
    assert "graph has 2 partitions but there are 3 workers" in proc.stdout
    assert cluster.calls("cp") == 0, "something was copied"


def test_launcher_without_a_dataset(cluster: Cluster) -> None:
    (cluster.dir / "hostfile").write_text("127.0.0.1 30050 job-worker-0 slots=1\n")
    proc = dglrun(*launcher_args(cluster), env=cluster.env)
    assert proc.returncode == 1
    assert "dispatch failed: no partition config g.json" in proc.stdout


def test_the_launcher_reports_progress_to_its_dgljob(cluster: Cluster) -> None:
    cluster.partition()
    (cluster.dir / "hostfile").write_text(
        "127.0.0.1 30050 job-worker-0 slots=1\n127.0.0.2 30050 job-worker-1 slots=1\n"
    )
    proc = dglrun(
        *launcher_args(cluster, "--num-epochs", "3"),
        env={**cluster.env, "DGL_OPERATOR_JOB_NAME": "job"},
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    sent = progress_log(cluster)
    # at most one patch per 2 s: what comes between the first and the last may be merged
    assert sent[0] == "3/5 dispatch" and sent[-1] == "done", sent
    allowed = {"3/5 dispatch", "4/5 configure", "5/5 train", "done"}
    allowed |= {f"5/5 train: epoch {k}/3" for k in (1, 2, 3)}
    assert set(sent) <= allowed, sent
    assert "cannot report progress" not in proc.stdout


def test_the_partitioner_reports_its_phases_but_not_done(cluster: Cluster) -> None:
    cluster.init_container("job-launcher", "watcher-loop-partitioner", "running")
    proc = dglrun(
        *partitioner_args(cluster),
        env={
            **cluster.env,
            "DGL_OPERATOR_PHASE_ENV": "Partitioner",
            "HOSTNAME": "job-partitioner",
            "DGL_OPERATOR_JOB_NAME": "job",
        },
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    sent = progress_log(cluster)
    assert sent[0] == "1/5 partition" and sent[-1] == "2/5 deliver", sent


def test_a_failed_training_reports_where_it_failed(cluster: Cluster) -> None:
    cluster.partition()
    (cluster.dir / "hostfile").write_text(
        "127.0.0.1 30050 job-worker-0 slots=1\n127.0.0.2 30050 job-worker-1 slots=1\n"
    )
    proc = dglrun(
        *launcher_args(cluster, "--train-args", "--sleep 120"),
        env={
            **cluster.env,
            "FAKE_FAIL_RANK": "1",
            "FAKE_FAIL_AFTER": "0.1",
            "DGL_OPERATOR_JOB_NAME": "job",
        },
    )
    assert proc.returncode == 1
    assert progress_log(cluster)[-1] == "failed in 5/5 train"


def test_refused_progress_never_fails_the_job(cluster: Cluster) -> None:
    cluster.partition()
    (cluster.dir / "hostfile").write_text(
        "127.0.0.1 30050 job-worker-0 slots=1\n127.0.0.2 30050 job-worker-1 slots=1\n"
    )
    proc = dglrun(
        *launcher_args(cluster),
        env={**cluster.env, "DGL_OPERATOR_JOB_NAME": "job", "FAKE_PATCH_FORBIDDEN": "1"},
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    warnings = [ln for ln in proc.stdout.splitlines() if "cannot report progress" in ln]
    assert len(warnings) == 1 and "Forbidden" in warnings[0], proc.stdout
    assert progress_log(cluster) == []


@pytest.mark.parametrize(
    ("hostfile", "message"),
    [
        (" 30050 job-worker-0 slots=1\n", "is not a number"),  # a line without an IP
        ("127.0.0.1 30050 job-worker-0 slots=one\n", "slots"),
    ],
)
def test_a_bad_hostfile_is_one_clear_line(cluster: Cluster, hostfile: str, message: str) -> None:
    cluster.partition()
    (cluster.dir / "hostfile").write_text(hostfile)
    proc = dglrun(*launcher_args(cluster), env=cluster.env)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    errors = [ln for ln in proc.stdout.splitlines() if ln.startswith("dglrun: error:")]
    assert len(errors) == 1 and message in errors[0], proc.stdout
    assert "Traceback" not in proc.stdout + proc.stderr
    assert cluster.calls("cp") == 0, "something was copied"


def test_sigterm_stops_every_remote_process(cluster: Cluster) -> None:
    """The launcher pod is deleted (suspend, restart, deadline): the kubelet sends SIGTERM;
    dglrun must stop what it started on the workers within the pod's grace period."""
    cluster.partition()
    (cluster.dir / "hostfile").write_text(
        "127.0.0.1 30050 job-worker-0 slots=1\n127.0.0.2 30050 job-worker-1 slots=1\n"
    )
    args = launcher_args(cluster, "--train-args", "--sleep 120")
    proc = subprocess.Popen(
        [sys.executable, "-m", "launcher.cli", *args],
        env={**os.environ, **cluster.env, "DGL_OPERATOR_JOB_NAME": "job"},
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert proc.stdout is not None
        met = 0
        for line in proc.stdout:  # both trainers run (and sleep) on their workers
            met += "met the master" in line
            if met == 2:
                break
        started = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        rest, _ = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 128 + signal.SIGTERM, rest
    assert time.monotonic() - started < 30
    assert "dglrun: terminated by signal 15; stopped every process it started" in rest
    left = subprocess.run(["pgrep", "-f", "fake_train.py"], capture_output=True, text=True)
    assert left.stdout.strip() == "", "remote DGL processes survived the SIGTERM"
    assert "launcher.workers.remote kill" in (cluster.dir / "calls.log").read_text()
    # the operator clears progress when it deletes pods: a stopped dglrun reports no outcome
    sent = progress_log(cluster)
    assert sent and not any(t.startswith(("failed", "done")) for t in sent), sent


def test_a_hanging_copy_ends_with_the_dispatch_timeout(cluster: Cluster) -> None:
    """A phase's timeout bounds each kubectl call in it, not only the gaps between them."""
    cluster.partition()
    (cluster.dir / "hostfile").write_text(
        "127.0.0.1 30050 job-worker-0 slots=1\n127.0.0.2 30050 job-worker-1 slots=1\n"
    )
    started = time.monotonic()
    proc = dglrun(
        *launcher_args(cluster, "--dispatch-timeout", "3"),
        env={**cluster.env, "FAKE_HANG_CP": "1"},
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert time.monotonic() - started < 60, "the hanging copy was waited for"
    last = proc.stdout.strip().splitlines()[-1]
    assert last.startswith("dglrun: error: dispatch failed: kubectl cp") and "timed out" in last
