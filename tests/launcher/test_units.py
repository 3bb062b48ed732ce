"""dglrun's pure parts: hostfile, ip_config, the DGL env contract, partition checks, flags."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from launcher.checksums import manifest
from launcher.options import parse
from launcher.partition.output import PartitionError, find_config, load
from launcher.workers.dgl_env import Topology, server_env, trainer_env
from launcher.workers.hostfile import HostfileError, ip_config, parse_hostfile
from podcontract import AGENT_PORT
from tests.launcher.helpers import dglrun, fake_partition
from tests.support.paths import REPO

BASE = ["--graph-name", "g", "--train-entry-point", "t.py"]


def test_hostfile_numeric_order() -> None:
    text = "".join(f"10.0.0.{i} 30050 job-worker-{i} slots=2\n" for i in (10, 2, 0, 11, 1))
    hosts = parse_hostfile(text)
    assert [h.name for h in hosts] == [f"job-worker-{i}" for i in (0, 1, 2, 10, 11)]
    assert hosts[3].ip == "10.0.0.10" and hosts[0].slots == 2 and hosts[0].port == 30050
    assert ip_config(hosts).splitlines()[0] == "10.0.0.0 30050"
    assert all(len(line.split()) == 2 for line in ip_config(hosts).splitlines())


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("10.0.0.1 30050\n", "hostfile:1: expected"),
        ("10.0.0.1 port job-worker-0\n", "is not a number"),
        ("10.0.0.1 30050 job-worker-0 gpus=1\n", "unexpected field"),
        ("1.1.1.1 30050 a-0\n1.1.1.2 30050 a-0\n", "listed twice"),
        ("worker-0 30050 a-0\n", "'worker-0' is not an IP address"),
    ],
)
def test_hostfile_errors(text: str, message: str) -> None:
    with pytest.raises(HostfileError, match=message):
        parse_hostfile(text)


def test_env_contract_arithmetic() -> None:
    topo = Topology(num_workers=3, num_servers=2, num_trainers=2, num_samplers=1)
    assert topo.num_clients == 2 * (1 + 1) * 3
    s = server_env(topo, worker=2, local_index=1, ip_config="/w/ip", part_config="/w/g.json")
    assert s["DGL_ROLE"] == "server" and s["DGL_SERVER_ID"] == "5"
    assert s["DGL_NUM_CLIENT"] == "12" and s["DGL_NUM_SERVER"] == "2"
    assert s["DGL_CONF_PATH"] == "/w/g.json" and s["DGL_IP_CONFIG"] == "/w/ip"
    assert s["DGL_GRAPH_FORMAT"] == "csc" and s["OUTDATED_IGNORE"] == "1"
    t = trainer_env(topo, 1, 1, "/w/ip", "/w/g.json", "10.0.0.1", 29500)
    assert t["DGL_ROLE"] == "client" and t["DGL_DIST_MODE"] == "distributed"
    assert (t["RANK"], t["WORLD_SIZE"], t["LOCAL_RANK"]) == ("3", "6", "1")
    assert (t["MASTER_ADDR"], t["MASTER_PORT"]) == ("10.0.0.1", "29500")
    assert t["DGL_NUM_SAMPLER"] == "1" and t["DGL_GROUP_ID"] == "0"


def _partition(tmp: Path, parts: int = 2) -> Path:
    return fake_partition(tmp, parts)


def test_partition_checks(tmp_path: Path) -> None:
    ds = _partition(tmp_path)
    pset = load(find_config(ds, "g"), 2)
    assert pset.num_parts == 2 and pset.part_dir(1) == "part1"
    with pytest.raises(PartitionError, match="2 partitions but 3 were expected"):
        load(pset.config, 3)
    (ds / "part1" / "graph.dgl").unlink()
    with pytest.raises(PartitionError, match=r"part-1 file part1/graph\.dgl is missing"):
        load(pset.config, 2)
    with pytest.raises(PartitionError, match=r"no partition config other\.json"):
        find_config(tmp_path, "other")
    m = manifest(ds / "part0")
    assert set(m) == {"graph.dgl", "node_feat.dgl", "edge_feat.dgl"}
    assert all(size == 1000 and len(digest) == 64 for size, digest in m.values())


def test_partition_config_outside_is_refused(tmp_path: Path) -> None:
    ds = _partition(tmp_path, 1)
    meta = json.loads((ds / "g.json").read_text())
    meta["part-0"]["part_graph"] = "../../etc/passwd"
    (ds / "g.json").write_text(json.dumps(meta))
    with pytest.raises(PartitionError, match="must be relative and inside"):
        load(ds / "g.json", 1)


def test_flags_and_the_original_misspelling() -> None:
    o = parse(
        [
            *BASE,
            "--worksapce",
            "/ws",
            "--num-partitions",
            "4",
            "--num-samplers",
            "2",
            "--train-args",
            "--lr 0.1 --fan_out '10, 5'",
        ],
        env={},
    )
    assert o.workspace == Path("/ws") and o.num_partitions == 4
    assert o.training.processes.samplers == 2
    assert o.training.args == ("--lr", "0.1", "--fan_out", "10, 5")
    assert o.phase == "" and o.python == "python3", "pods run entry points with python3"
    assert o.agent_port == AGENT_PORT  # the pod contract's (the workers' agents listen there)
    assert parse([*BASE, "--agent-port", "31000"], env={}).agent_port == 31000
    e = {
        "DGL_OPERATOR_PHASE_ENV": "Partitioner",
        "DGL_OPERATOR_KUBEXEC_PATH": "/k.sh",
        "DGL_OPERATOR_HOSTFILE_PATH": "/h",
        "DGL_OPERATOR_KUBECTL_PATH": "/kc",
    }
    o = parse(["-g", "g", "--partition-entry-point", "p.py"], env=e)
    assert (o.phase, o.kubexec, o.hostfile, o.kubectl) == ("Partitioner", "/k.sh", "/h", "/kc")


@pytest.mark.parametrize(
    ("argv", "env", "message"),
    [
        ([*BASE, "--bogus"], {}, "unrecognized arguments: --bogus"),
        ([*BASE, "--work"], {}, "unrecognized arguments: --work"),
        (["--graph-name", "g"], {}, "--train-entry-point is required"),
        ([*BASE, "--num-partitions", "0"], {}, "--num-partitions: must be at least 1"),
        ([*BASE, "--transport", "local"], {}, "--partition-entry-point is required"),
        (BASE, {"DGL_OPERATOR_PHASE_ENV": "Trainer"}, "DGL_OPERATOR_PHASE_ENV='Trainer'"),
        ([*BASE, "--train-args", "'unclosed"], {}, "--train-args"),
        (
            [*BASE, "--workspace", "/ws", "--partition-transfer", "kubectl"],
            {"DGL_OPERATOR_ENV": "1"},
            "--workspace /ws: in a DGLJob",
        ),
        ([*BASE, "--partition-transfer", "scp"], {}, "--partition-transfer: invalid choice"),
        ([*BASE, "--agent-port", "0"], {}, "--agent-port: must be at least 1"),
        ([*BASE, "--agent-port", "65536"], {}, "--agent-port: must be at most 65535"),
    ],
)
def test_bad_usage_exits_2(argv: list[str], env: dict[str, str], message: str) -> None:
    proc = dglrun(*argv, env=env)
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr
    assert "Traceback" not in proc.stderr


def test_help_is_instant_and_imports_no_dgl() -> None:
    code = (
        "import sys, launcher.cli, launcher.runs, launcher.workers.local, "
        "launcher.workers.kubectl; "
        "bad = [m for m in ('dgl', 'torch', 'numpy', 'kubernetes') if m in sys.modules]; "
        "print(bad)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True
    )
    assert out.stdout.strip() == "[]"
    assert dglrun("--help").returncode == 0


def test_failure_reason_goes_to_the_termination_log(tmp_path: Path) -> None:
    from launcher.report.outcome import termination_message

    log = tmp_path / "termination-log"
    termination_message("train failed: trainer 0 on worker-1 exited with code 1", log)
    assert not log.exists(), "outside a pod (no file) nothing is written"
    log.write_text("")
    termination_message("train failed: trainer 0 on worker-1 exited with code 1", log)
    assert log.read_text() == "train failed: trainer 0 on worker-1 exited with code 1"


def test_a_remote_kill_that_comes_before_the_process_still_stops_it(tmp_path: Path) -> None:
    """dglrun may stop a worker's process before ``launcher.workers.remote run`` recorded its
    session (a failure right at start): the kill leaves a marker and the process never runs."""
    from launcher.workers import remote

    pidfile = tmp_path / "dglrun" / "run-1-w0-trainer-0.pid"
    assert remote.main(["kill", "--pidfile", str(pidfile), "--grace", "1"]) == 0
    marker = tmp_path / "ran"
    code = remote.main(["run", "--pidfile", str(pidfile), "--", "touch", str(marker)])
    assert code == 128 + 15 and not marker.exists(), "the cancelled process ran"


@pytest.mark.parametrize(
    ("command", "code", "line"),
    [
        ("kill -9 $$", 137, "launcher.remote: MPI rank 1 was killed by SIGKILL"),
        ("exit 3", 3, "launcher.remote: MPI rank 1 exited with code 3"),
        ("exit 0", 0, None),
    ],
)
def test_a_rank_that_starts_or_ends_badly_is_named_by_its_wrapper(
    tmp_path: Path, command: str, code: int, line: str | None
) -> None:
    """mpirun does not always report a rank it lost (it may exit 255 saying nothing): the
    wrapper of an MPI rank says how its command ended, and dglrun names the rank from that."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMPI_COMM_WORLD_RANK": "1"}
    run = ["run", "--pidfile", str(tmp_path / "r-{rank}.pid"), "--", "sh", "-c", command]
    out = subprocess.run(
        [sys.executable, "-m", "launcher.workers.remote", *run],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert out.returncode == code, out.stderr
    said = [ln for ln in out.stderr.splitlines() if "MPI rank" in ln]
    # its start (dglrun gives up on ranks that never start), then how it ended when badly
    assert said == ["launcher.remote: MPI rank 1 started", *([line] if line else [])], out.stderr
    assert out.stderr.splitlines()[-1].startswith("launcher.remote: peak memory ")


def test_a_remote_kill_stops_the_recorded_session(tmp_path: Path) -> None:
    pidfile = tmp_path / "p.pid"
    run = ["run", "--pidfile", str(pidfile), "--", "sh", "-c", "sleep 60 & sleep 60"]
    helper = subprocess.Popen(
        [sys.executable, "-m", "launcher.workers.remote", *run],
        cwd=REPO,
    )
    try:
        deadline = time.monotonic() + 10
        while not pidfile.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        pgid = int(pidfile.read_text())
        from launcher.workers import remote

        assert remote.main(["kill", "--pidfile", str(pidfile), "--grace", "2"]) == 0
        assert helper.wait(10) != 0
        assert not remote._alive(pgid), "a process of the session survived"
        assert not pidfile.exists()
    finally:
        if helper.poll() is None:
            helper.kill()
