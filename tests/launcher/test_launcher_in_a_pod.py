"""dglrun in its pods (the partitioner's, the launcher's) over the FAKE cluster of
fake_cluster.py: the launcher reaches the workers through their agents, never kubectl.

What is fake: only the pods' isolation (each worker pod is a folder bind-mounted over the
workspace in a mount namespace of its own, its IP a loopback address) and the API server
(fixtures/fake_kubectl.py and fake_kubexec.sh, which the partitioner still uses to deliver into
the launcher pod). What is real: dglrun and its phases, the verification, the worker agents
(``python -m workeragent`` in each pod), the processes they run and how they are stopped,
mpirun's daemons and ranks (DistParMETIS) through ``workeragent.rsh``. The same code runs
against real pods in the e2e tests.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from launcher.checksums import manifest
from launcher.workers.agent import UNREACHABLE_AFTER
from tests.launcher.chunked_graph import write_graph
from tests.launcher.fake_cluster import Cluster, launcher_args, partitioner_args, progress_log
from tests.launcher.helpers import dglrun
from tests.support.dgl_python import find_dgl_python
from tests.support.paths import REPO
from tests.support.prerequisites import require

TWO_WORKERS = "127.0.0.1 30050 job-worker-0 slots=1\n127.0.0.2 30050 job-worker-1 slots=1\n"


@pytest.fixture
def cluster(tmp_path: Path, root_needed: None) -> Iterator[Cluster]:
    c = Cluster(tmp_path)
    yield c
    c.close()


def workers(cluster: Cluster, hostfile: str = TWO_WORKERS, **pod_env: str) -> None:
    """The operator's hostfile, and the agents of the pods it names (with ``pod_env``)."""
    (cluster.dir / "hostfile").write_text(hostfile)
    cluster.start_agents(**pod_env)


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
        "3",  # (each `kubectl get` gets what is left of it: 1 s was too short on a busy machine)
        env={**cluster.env, "DGL_OPERATOR_PHASE_ENV": "Partitioner"},
    )
    assert proc.returncode == 1
    assert (
        "deliver failed: container watcher-loop-partitioner of pod job-launcher is not "
        "running after 3s (last state: terminated)"
    ) in proc.stdout


def test_launcher_dispatches_configures_and_trains(cluster: Cluster) -> None:
    cluster.partition()
    # file order on purpose: worker-1 first; two loopback addresses stand in for pod IPs
    hostfile = "127.0.0.2 30050 job-worker-1 slots=1\n127.0.0.1 30050 job-worker-0 slots=1\n"
    workers(cluster, hostfile)
    proc = dglrun(*launcher_args(cluster), env=cluster.env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for i in (0, 1):
        wl = cluster.pod_ws(f"job-worker-{i}") / "workload"
        assert (wl / f"part{i}").is_dir() and not (wl / f"part{1 - i}").exists()
        assert manifest(wl / f"part{i}") == manifest(cluster.ws / "dataset" / f"part{i}")
        assert (wl / "ip_config.txt").read_text() == "127.0.0.1 30050\n127.0.0.2 30050\n"
        said = f"  part {i} -> job-worker-{i} (127.0.0.{i + 1}): "
        assert any(
            ln.startswith(said) and ln.endswith(" verified") for ln in proc.stdout.splitlines()
        ), proc.stdout
    assert json.loads((cluster.ws / "output" / "metrics.json").read_text())["world_size"] == 2
    assert "[1/5] partition: done by the partitioner pod" in proc.stdout
    assert "[job-worker-1/trainer-0] trainer rank 1/2 met the master" in proc.stdout
    # every worker's server and trainer ran through its own agent, and nothing through kubectl
    for pod in ("job-worker-0", "job-worker-1"):
        ran = [
            p for p in cluster.agent_procs(pod) if p.id.endswith(("server-0-1", "trainer-0-1"))
        ]  # (the 1st start of each)
        assert len(ran) == 2 and all(p.exit == 0 for p in ran), ran
    assert cluster.worker_calls() == []
    cluster.assert_pods_empty()


def test_launcher_stops_remote_processes_when_a_trainer_fails(cluster: Cluster) -> None:
    cluster.partition()
    workers(cluster, FAKE_FAIL_RANK="0", FAKE_FAIL_AFTER="1")
    proc = dglrun(*launcher_args(cluster, "--train-args", "--sleep 120"), env=cluster.env)
    assert proc.returncode == 1
    assert "train failed: trainer 0 on job-worker-0 (127.0.0.1) exited with code 1" in proc.stdout
    # worker-1's trainer (sleeping for 120 s) and both servers were stopped, not waited for
    assert "trainer rank 1 finished" not in proc.stdout
    trainer = [p for p in cluster.agent_procs("job-worker-1") if "trainer" in p.id]
    assert len(trainer) == 1 and trainer[0].exit not in (None, 0), trainer
    cluster.assert_pods_empty()
    assert cluster.worker_calls() == []


def test_launcher_refuses_more_workers_than_partitions(cluster: Cluster) -> None:
    cluster.partition()
    workers(cluster, "".join(f"127.0.0.{i + 1} 30050 job-worker-{i} slots=1\n" for i in range(3)))
    proc = dglrun(*launcher_args(cluster), env=cluster.env)
    assert proc.returncode == 1
    assert "graph has 2 partitions but there are 3 workers" in proc.stdout
    assert not any((cluster.pod_ws(f"job-worker-{i}") / "workload").exists() for i in range(3))
    assert cluster.worker_calls() == []


def test_launcher_without_a_dataset(cluster: Cluster) -> None:
    workers(cluster, "127.0.0.1 30050 job-worker-0 slots=1\n")
    proc = dglrun(*launcher_args(cluster), env=cluster.env)
    assert proc.returncode == 1
    assert "dispatch failed: no partition config g.json" in proc.stdout


def test_a_token_that_is_not_the_jobs_is_refused_by_the_agents(
    cluster: Cluster, tmp_path: Path
) -> None:
    """The attack: a launcher that has not the job's token (another job's pod) drives the
    workers. Their agents refuse it: one line naming the worker, nothing copied or run. The
    twin, the job's own token, is test_launcher_dispatches_configures_and_trains."""
    cluster.partition()
    workers(cluster)
    wrong = tmp_path / "wrong-token"
    wrong.write_text("not-the-jobs\n")
    proc = dglrun(*launcher_args(cluster, "--transfer-token-file", str(wrong)), env=cluster.env)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    last = proc.stdout.strip().splitlines()[-1]
    assert last.startswith("dglrun: error: dispatch failed: ") and "job-worker-0" in last, last
    assert "refused the token (401)" in last, last
    assert "Traceback" not in proc.stdout + proc.stderr
    assert not any((cluster.pod_ws(f"job-worker-{i}") / "workload").exists() for i in (0, 1))
    assert all(cluster.agent_procs(pod) == [] for pod in cluster.agents)


def test_the_launcher_reports_progress_to_its_dgljob(cluster: Cluster) -> None:
    cluster.partition()
    workers(cluster)
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
    workers(cluster, FAKE_FAIL_RANK="1", FAKE_FAIL_AFTER="0.1")
    proc = dglrun(
        *launcher_args(cluster, "--train-args", "--sleep 120"),
        env={**cluster.env, "DGL_OPERATOR_JOB_NAME": "job"},
    )
    assert proc.returncode == 1
    assert "train failed: trainer 0 on job-worker-1 (127.0.0.2) exited with code 1" in proc.stdout
    assert progress_log(cluster)[-1] == "failed in 5/5 train"


def test_refused_progress_never_fails_the_job(cluster: Cluster) -> None:
    cluster.partition()
    workers(cluster)
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
    assert list((cluster.dir / "pods").iterdir()) == [], "something reached a pod"
    assert cluster.worker_calls() == []


def test_sigterm_stops_every_remote_process(cluster: Cluster) -> None:
    """The launcher pod is deleted (suspend, restart, deadline): the kubelet sends SIGTERM;
    dglrun must stop what it started on the workers within the pod's grace period (the
    agents would let it run on: their orphan grace is off here)."""
    cluster.partition()
    workers(cluster)
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
        assert cluster.pod_processes(), "nothing runs on the workers"
        proc.send_signal(signal.SIGTERM)
        rest, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 128 + signal.SIGTERM, rest
    assert "dglrun: terminated by signal 15; stopped every process it started" in rest
    assert "finished" not in rest  # (the trainers were stopped, not waited for)
    cluster.assert_pods_empty()
    for pod in cluster.agents:
        ran = [p for p in cluster.agent_procs(pod) if "trainer" in p.id or "server" in p.id]
        assert len(ran) == 2 and all(p.exit not in (None, 0) for p in ran), ran
    assert cluster.worker_calls() == []
    # the operator clears progress when it deletes pods: a stopped dglrun reports no outcome
    sent = progress_log(cluster)
    assert sent and not any(t.startswith(("failed", "done")) for t in sent), sent


def test_a_hanging_agent_ends_with_the_dispatch_timeout(cluster: Cluster) -> None:
    """A phase's timeout bounds each call to an agent in it, not only the gaps between them:
    a worker's agent that stops answering (SIGSTOP: connections hang, as across a network
    partition) fails the dispatch when its time is up, naming the worker (without the bound
    dglrun would wait for the agent's retries)."""
    cluster.partition()
    workers(cluster)
    cluster.pause("job-worker-0")
    proc = dglrun(*launcher_args(cluster, "--dispatch-timeout", "3"), env=cluster.env)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    last = proc.stdout.strip().splitlines()[-1]
    assert last.startswith("dglrun: error: dispatch failed: ") and "job-worker-0" in last, last
    assert "timed out, the phase's time ran out" in last, last
    # it gave up when the phase's 3 s were over, not after its usual retries (the twin)
    waited = re.search(r"unreachable for (\d+)s", last)
    assert waited is not None and int(waited[1]) < UNREACHABLE_AFTER, last


def distparmetis_args(cluster: Cluster, tmp_path: Path) -> list[str]:
    """The launcher's arguments in DistParMETIS on a small chunked graph (Shared: outside the
    pods' folders, every pod sees it), with the DGL interpreter (distpart's ranks need
    mpi4py, KaMinPar and DGL); skipped without it or mpirun."""
    dgl = find_dgl_python()
    require(dgl is not None, "no DGL interpreter (distpart's ranks need mpi4py, KaMinPar, DGL)")
    require(shutil.which("mpirun") is not None, "no mpirun: hack/tools.sh mpi installs Open MPI")
    assert dgl is not None
    graph = write_graph(tmp_path / "chunked")
    return launcher_args(cluster, "--partition-mode", "DistParMETIS", "--chunked-graph",
                         str(graph), "--python", dgl)  # fmt: skip


def test_distparmetis_runs_its_ranks_in_the_worker_pods_through_their_agents(
    cluster: Cluster, tmp_path: Path
) -> None:
    """DistParMETIS: mpirun (in the launcher) starts its daemon in each worker pod through
    ``workeragent.rsh`` and the pod's agent; rank i (real distpart, KaMinPar) writes part i
    in worker i's own folder, which the launcher verifies, configures and trains on."""
    args = distparmetis_args(cluster, tmp_path)
    workers(cluster)
    proc = dglrun(*args, env=cluster.env, timeout=300)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    out = proc.stdout
    assert "one rank of distpart on each of job-worker-0, job-worker-1 (through " in out
    assert "/agent-rsh)" in out
    assert "nothing to deliver: every worker wrote its own partition" in out
    for i in (0, 1):
        workload = cluster.pod_ws(f"job-worker-{i}") / "workload"
        # (only a process worker i's agent started sees worker i's folder there)
        assert sorted(p.name for p in workload.glob("part[0-9]*")) == [f"part{i}"]
    assert not (cluster.ws / "workload").exists(), "a rank wrote in the launcher's workspace"
    assert json.loads((cluster.ws / "output" / "metrics.json").read_text())["world_size"] == 2
    assert cluster.worker_calls() == []
    cluster.assert_pods_empty()


# a daemon that dies of SIGSEGV after mpirun started it, as Open MPI 4.1's did at times here
# (two daemons' topology files in one /tmp, before mpirun_argv's rtc_hwloc_vmhole none): one
# told to daemonize goes to the background first, as orted does, and its crash is silent
CRASHING_DAEMON = """#!/bin/sh
crash() { echo "[$(hostname):$$] *** Process received signal ***"
  echo "[$(hostname):$$] Signal: Segmentation fault (11)"; kill -SEGV $$; }
case " $* " in *" --daemonize "*) (crash >/dev/null 2>&1 &); exit 0;; esac
crash
"""


def test_a_daemon_that_crashes_fails_the_partition_at_once_saying_so(
    cluster: Cluster, tmp_path: Path
) -> None:
    """DistParMETIS: mpirun's daemon on a worker dies of SIGSEGV as it starts. Each daemon
    stays its remote shell's process (mpirun_argv's --leave-session-attached): mpirun sees
    it end and prints what it said, and dglrun fails at once naming the signal, instead of
    waiting RANK_START_TIMEOUT for a daemonized one that never calls back (the twin: the
    same daemon daemonized)."""
    daemon = tmp_path / "orted"
    daemon.write_text(CRASHING_DAEMON)
    daemon.chmod(0o755)
    args = distparmetis_args(cluster, tmp_path)
    workers(cluster)
    agent = f"--mca orte_launch_agent {daemon}"
    proc = dglrun(*args, "--mpirun-args", agent, env=cluster.env, timeout=100)
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert proc.stdout.strip().splitlines()[-1] == (
        "dglrun: error: partition failed: mpirun could not start its daemons on the workers: "
        "a daemon died of Segmentation fault (signal 11); stopped every MPI rank"
    ), proc.stdout[-3000:]
    # the twin: told to daemonize (Open MPI's default), the crash says nothing and mpirun
    # waits on; dglrun's bound ends it (a short one here, --partition-timeout)
    twin = dglrun(*args, "--mpirun-args", f"{agent} --mca orte_leave_session_attached 0",
                  "--partition-timeout", "8", env=cluster.env, timeout=100)  # fmt: skip
    assert twin.returncode == 1, twin.stdout[-3000:]
    assert "Segmentation fault" not in twin.stdout, twin.stdout[-3000:]
    assert twin.stdout.strip().splitlines()[-1] == (
        "dglrun: error: partition failed: timed out after 8s; stopped every MPI rank"
    ), twin.stdout[-3000:]
    cluster.assert_pods_empty()


def test_a_rank_killed_in_its_pod_fails_the_partition_and_stops_every_rank(
    cluster: Cluster, tmp_path: Path
) -> None:
    """DistParMETIS: rank 1 is killed (SIGKILL) in worker-1's pod while the ranks work:
    dglrun stops mpirun and every rank (through the agents: mpirun's daemons, and the ranks'
    sessions by their pidfiles), and fails naming the rank and its worker; nothing is left in
    the pods."""
    args = distparmetis_args(cluster, tmp_path)
    workers(cluster)
    proc = subprocess.Popen(
        [sys.executable, "-m", "launcher.cli", *args],
        env={**os.environ, **cluster.env},
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines: list[str] = []
    killed = None
    watchdog = threading.Timer(240, proc.kill)  # (a launcher that hangs fails the test)
    watchdog.start()
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            if killed is None and "[distpart]" in line:  # every rank is up
                killed = next(
                    p for p in cluster.pod_processes()
                    if p.startswith("job-worker-1: ") and " distpart " in p
                    and "launcher.workers.remote" not in p
                )  # fmt: skip
                os.kill(int(killed.split()[1]), signal.SIGKILL)
        code = proc.wait(timeout=120)
    finally:
        watchdog.cancel()
        if proc.poll() is None:
            proc.kill()
    assert killed is not None, "".join(lines)[-3000:]
    assert code == 1, "".join(lines)[-3000:]
    # mpirun's own report, or (Open MPI's teardown hanging, as it once did here) dglrun's
    assert re.fullmatch(
        r"dglrun: error: partition failed: MPI rank 1 on job-worker-1 was killed by SIGKILL"
        r"( \(exit code 137\)|; mpirun had not ended \d+s later); stopped every MPI rank",
        lines[-1].strip(),
    ), "".join(lines)[-3000:]
    cluster.assert_pods_empty()
    assert cluster.worker_calls() == []


def test_a_launcher_lost_mid_training_is_replaced_and_re_attaches(cluster: Cluster) -> None:
    """Issue 58: the launcher pod of a DGLJob's attempt is deleted while its trainers train
    (SIGTERM): its DGL processes go on under the workers' agents, and a new launcher of the
    same attempt (the job's uid and attempt in its env) re-attaches: phases 1-4 are not done
    again, it follows the running trainers to their end, and each trainer ran once. The
    twin: the same run outside a DGLJob (no uid) stops them at SIGTERM
    (test_sigterm_stops_every_remote_process)."""
    cluster.partition()
    workers(cluster)
    args = launcher_args(cluster, "--train-args", "--sleep 6")
    env = {**os.environ, **cluster.env, "DGL_OPERATOR_JOB_NAME": "job",
           "DGL_OPERATOR_JOB_UID": "0f1e2d3c-0000-4000-8000-000000000001",
           "DGL_OPERATOR_ATTEMPT": "0"}  # fmt: skip
    first = subprocess.Popen(
        [sys.executable, "-m", "launcher.cli", *args], env=env, cwd=REPO,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        assert first.stdout is not None
        met = 0
        for line in first.stdout:  # both trainers run (and sleep) on their workers
            met += "met the master" in line
            if met == 2:
                break
        first.send_signal(signal.SIGTERM)
        rest, _ = first.communicate(timeout=60)
    finally:
        if first.poll() is None:
            first.kill()
    assert first.returncode == 128 + signal.SIGTERM, rest
    assert "go on for the launcher that replaces this one" in rest, rest
    running = [p for pod in cluster.agents for p in cluster.agent_procs(pod) if p.running]
    assert len([p for p in running if "trainer" in p.id]) == 2, running  # (they go on)
    second = dglrun(*args, env=env, timeout=120)
    assert second.returncode == 0, second.stdout + second.stderr
    assert "re-attached: this attempt's DGL processes run on the workers" in second.stdout
    assert "[3/5] dispatch" not in second.stdout and "[4/5] configure" not in second.stdout
    assert "[job-worker-1/trainer-0] trainer rank 1/2 met the master" in second.stdout
    assert json.loads((cluster.ws / "output" / "metrics.json").read_text())["world_size"] == 2
    for pod in cluster.agents:  # each server and trainer started once, ended 0
        ran = [p for p in cluster.agent_procs(pod) if "trainer" in p.id or "server" in p.id]
        assert len(ran) == 2 and all(p.exit == 0 for p in ran), ran
    cluster.assert_pods_empty()
