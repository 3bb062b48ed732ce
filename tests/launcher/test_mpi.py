"""mpirun for the ParMETIS modes as pure functions (launcher.partition.mpirun), and dglrun's
options for them (launcher.options). Real MPI runs in tests/examples/test_parmetis.py."""

from __future__ import annotations

import pytest

from chunkedgraph.job import PartitionJob
from launcher import options
from launcher.partition import mpirun
from launcher.workers.hostfile import Host

HOSTS = [Host("10.0.0.1", 30050, "j-worker-0"), Host("10.0.0.2", 30050, "j-worker-1")]


def test_parmetis_runs_every_rank_here_and_oversubscribes() -> None:
    job = PartitionJob("graphsage", 2, "/g", "Shared", ("/w/dataset",), balance_train=True)
    argv = mpirun.mpirun_argv(
        mpirun.Launch("mpirun", 3, env={"A": "1"}),
        mpirun.rank_argv("python3", job, "/tmp/dglrun/x-rank-{rank}.pid"), as_root=False,
    )  # fmt: skip
    assert argv[:5] == ["mpirun", "-np", "3", "--bind-to", "none"]
    assert "--oversubscribe" in argv and "--hostfile" not in argv
    assert "--allow-run-as-root" not in argv
    assert argv[argv.index("btl") + 1] == "tcp,self"  # no shared memory: containers
    assert argv[argv.index("-x") + 1] == "A=1"
    rank = argv[argv.index("python3") :]
    assert rank[:8] == [
        "python3", "-P", "-m", "launcher.workers.remote", "run", "--pidfile",
        "/tmp/dglrun/x-rank-{rank}.pid", "--",
    ]  # fmt: skip
    assert rank[8:13] == ["python3", "-P", "-m", "distpart", "partition"]
    assert rank[rank.index("--out") + 1 :] == [
        "/w/dataset",
        "--balance-train",
        "--partitioner",
        "kaminpar",
    ]
    assert rank[rank.index("--num-parts") + 1] == "2"


def test_distparmetis_uses_the_worker_pods_through_their_agents() -> None:
    """mpirun's remote shell is AgentTransport.rsh_agent()'s script (workeragent.rsh); the
    run through real agents: test_launcher_in_a_pod.py's DistParMETIS test."""
    rsh = "/tmp/dglrun-agent-x/agent-rsh"
    launch = mpirun.Launch("mpirun", 2, hostfile="/tmp/h", rsh_agent=rsh)
    argv = mpirun.mpirun_argv(launch, ["cmd"], as_root=True)
    assert "--allow-run-as-root" in argv and "--oversubscribe" not in argv
    assert argv[argv.index("--hostfile") + 1] == "/tmp/h"
    assert argv[argv.index("--map-by") + 1] == "node"  # rank i on worker i
    assert argv[argv.index("plm_rsh_agent") + 1] == rsh
    # the launcher starts every daemon (the workers have neither the script nor the token)
    assert argv[argv.index("plm_rsh_no_tree_spawn") + 1] == "1"
    # each daemon stays its remote shell's process: its crash reaches mpirun (a daemonized
    # one's is silent: test_a_daemon_that_crashes_fails_the_partition_at_once_saying_so)
    assert "--leave-session-attached" in argv
    assert argv[-1] == "cmd"
    assert mpirun.mpi_hostfile(HOSTS) == "j-worker-0 slots=1\nj-worker-1 slots=1\n"


def test_rank_pidfiles() -> None:
    assert mpirun.pidfile("ab") == "/tmp/dglrun/ab-rank-{rank}.pid"
    assert mpirun.rank_pidfile("ab", 3) == "/tmp/dglrun/ab-rank-3.pid"
    from pathlib import Path

    from launcher.workers.remote import expand_pidfile

    assert expand_pidfile(Path(mpirun.pidfile("ab")), {"OMPI_COMM_WORLD_RANK": "1"}) == Path(
        "/tmp/dglrun/ab-rank-1.pid"
    )


@pytest.mark.parametrize(
    ("env", "ranks"), [({"DGL_OPERATOR_CPU_LIMIT": "4"}, 4), ({"DGL_OPERATOR_CPU_LIMIT": "1"}, 2)]
)
def test_default_ranks_is_the_cpu_limit_at_least_two(env: dict[str, str], ranks: int) -> None:
    assert mpirun.default_ranks(env) == ranks
    assert mpirun.default_ranks({}) >= 2


# mpirun's own words, as Open MPI 4.1 prints them (captured from real runs)
KILLED = """
--------------------------------------------------------------------------
Primary job  terminated normally, but 1 process returned
a non-zero exit code. Per user-direction, the job has been aborted.
--------------------------------------------------------------------------
--------------------------------------------------------------------------
mpirun detected that one or more processes exited with non-zero status, thus causing
the job to be terminated. The first process to do so was:

  Process name: [[61856,1],1]
  Exit code:    137
--------------------------------------------------------------------------
"""
SIGNALLED = """
mpirun noticed that process rank 0 with PID 812 on node j-worker-0 exited on signal 9 (Killed).
"""
RANK_ERROR = """
distpart: rank 1 on j-worker-1: error: /data/e-1.npy: edges chunk 1, row 3: node id [5, 99] \
outside 0..9
--------------------------------------------------------------------------
MPI_ABORT was invoked on rank 1 in communicator MPI_COMM_WORLD
with errorcode 1.
"""
NO_DAEMONS = """
+ /opt/kube/kubectl exec j-worker-1 -- /bin/sh -c orted -mca ess "env"
error: pods "j-worker-1" is forbidden: User cannot create resource "pods/exec"
--------------------------------------------------------------------------
ORTE was unable to reliably start one or more daemons.
This usually is caused by:
--------------------------------------------------------------------------
"""


# what mpirun printed when its daemon died in rtc/hwloc (Open MPI 4.1, trimmed)
DAEMON_CRASHED = """
[vm:05720] *** Process received signal ***
[vm:05720] Signal: Segmentation fault (11)
[vm:05720] Signal code: Address not mapped (1)
[vm:05720] [ 7] /lib/x86_64-linux-gnu/libhwloc.so.15(hwloc_shmem_topology_write+0xf9)
[vm:05720] *** End of error message ***
Segmentation fault
--------------------------------------------------------------------------
ORTE was unable to reliably start one or more daemons.
This usually is caused by:
* an inability to create a connection back to mpirun due to a
  lack of common network interfaces and/or no route found between
  them. Please check network connectivity (including firewalls
  and network routing requirements).
--------------------------------------------------------------------------
"""


def test_every_mpirun_keeps_the_topology_out_of_shared_memory() -> None:
    """Open MPI 4.1's rtc/hwloc shares the topology through files in the session
    directory: two daemons that share a /tmp (the tests' cluster runs two pods' agents on
    one host) wrote the same ones, and one died of SIGSEGV about one start in ten (the
    rank-killed DistParMETIS test, CI). Both modes turn it off."""
    for launch in (
        mpirun.Launch("mpirun", 2),
        mpirun.Launch("mpirun", 2, hostfile="/tmp/h", rsh_agent="/tmp/rsh"),
    ):
        argv = mpirun.mpirun_argv(launch, ["cmd"], as_root=True)
        assert argv[argv.index("rtc_hwloc_vmhole") + 1] == "none"


def test_a_daemon_that_died_is_named_by_its_signal_not_mpiruns_help_text() -> None:
    hosts = ["j-worker-0", "j-worker-1"]
    assert mpirun.failure(DAEMON_CRASHED.splitlines(), 1, hosts) == (
        "mpirun could not start its daemons on the workers: a daemon died of Segmentation "
        "fault (signal 11)"
    )
    # the help text alone (nothing said before it): its last lines, as before
    help_only = DAEMON_CRASHED.split("Segmentation fault\n", 1)[1]
    assert mpirun.failure(help_only.splitlines(), 1, hosts).endswith(
        "and network routing requirements)."
    )


def test_failure_names_the_rank_and_its_worker() -> None:
    hosts = ["j-worker-0", "j-worker-1"]
    assert (
        mpirun.failure(KILLED.splitlines(), 137, hosts)
        == "MPI rank 1 on j-worker-1 was killed by SIGKILL (exit code 137)"
    )
    assert mpirun.failure(SIGNALLED.splitlines(), 137, hosts) == (
        "MPI rank 0 on j-worker-0 was killed by SIGKILL"
    )
    assert mpirun.failure(RANK_ERROR.splitlines(), 1, hosts) == (
        "MPI rank 1 on j-worker-1 (j-worker-1): /data/e-1.npy: edges chunk 1, row 3: node id "
        "[5, 99] outside 0..9"
    )
    text = mpirun.failure(NO_DAEMONS.splitlines(), 1, hosts)
    assert text.startswith("mpirun could not start its daemons on the workers: ")
    assert 'pods "j-worker-1" is forbidden' in text
    # mpirun said nothing of its own (it exited 255): the ranks' wrappers name the rank; the one
    # killed from outside, not the one mpirun stopped with SIGTERM
    wrappers = [
        "launcher.remote: MPI rank 0 was killed by SIGTERM",
        "launcher.remote: peak memory 61.0 MiB",
        "launcher.remote: MPI rank 1 was killed by SIGKILL",
        "launcher.remote: peak memory 48.0 MiB",
    ]
    assert mpirun.failure(wrappers, 255, hosts) == "MPI rank 1 on j-worker-1 was killed by SIGKILL"
    assert mpirun.failure(wrappers[:2], 255, ["p"]) == "MPI rank 0 on p was killed by SIGTERM"
    assert mpirun.failure(["[w] launcher.remote: MPI rank 1 exited with code 2"], 255) == (
        "MPI rank 1 exited with code 2"
    )
    assert mpirun.failure(["oops"], 3) == "mpirun exited with code 3: oops"
    assert mpirun.failure([], 3) == "mpirun exited with code 3: no output"


# -- dglrun's options -----------------------------------------------------------------------


def parse(*argv: str, **env: str) -> options.Options:
    base = ["-g", "g", "--train-entry-point", "t.py"]
    return options.parse([*base, *argv], env)


def test_the_mode_and_its_input_come_from_the_operators_env() -> None:
    opts = parse(
        DGL_OPERATOR_PARTITION_MODE="DistParMETIS",
        DGL_OPERATOR_CHUNKED_GRAPH="/dgl_workspace/chunked",
        DGL_OPERATOR_CHUNKED_LAYOUT="PerWorker",
    )
    assert (opts.partition_mode, opts.chunked_graph, opts.chunked_layout) == (
        "DistParMETIS",
        "/dgl_workspace/chunked",
        "PerWorker",
    )
    assert parse().partition_mode == "DGL-API"
    flags = parse("--partition-mode", "ParMETIS", "--chunked-graph", "/g", "--num-ranks", "3",
                  "--mpirun-args", "--mca btl_tcp_if_include eth0")  # fmt: skip
    assert flags.num_ranks == 3 and flags.mpirun_args == ("--mca", "btl_tcp_if_include", "eth0")


@pytest.mark.parametrize(
    ("argv", "env", "says"),
    [
        (["--partition-mode", "ParMETIS"], {}, "--chunked-graph is required"),
        (
            [
                "--partition-mode",
                "ParMETIS",
                "--chunked-graph",
                "/g",
                "--chunked-layout",
                "PerWorker",
            ],
            {},
            "ParMETIS runs every rank in one pod",
        ),
        (
            ["--partition-mode", "DistParMETIS", "--chunked-graph", "/g"],
            {"DGL_OPERATOR_PHASE_ENV": "Partitioner"},
            "no partitioner pod",
        ),
        (["--partition-mode", "Bogus"], {}, "invalid choice"),
    ],
)
def test_bad_mode_options_are_usage_errors(
    argv: list[str], env: dict[str, str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exc:
        parse(*argv, **env)
    assert exc.value.code == 2
    assert says in capsys.readouterr().err


def test_the_parmetis_modes_need_no_partition_entry_point() -> None:
    opts = parse("--partition-mode", "ParMETIS", "--chunked-graph", "/g",
                 DGL_OPERATOR_PHASE_ENV="Partitioner")  # fmt: skip
    assert opts.partition_entry_point is None
