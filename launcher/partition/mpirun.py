"""Open MPI's ``mpirun`` for the ParMETIS modes, as pure functions: the command line, the MPI
hostfile, and the one line that says why a run failed.

* ``ParMETIS``: ``mpirun -np P`` on this pod (the partitioner), ``--oversubscribe`` so that
  P may exceed the pod's cores.
* ``DistParMETIS``: one rank per worker pod. ``--hostfile`` lists the worker pods by name with
  one slot each (rank ``i`` runs on worker ``i``: ``--map-by node`` in hostfile order), and
  ``plm_rsh_agent`` is the transport's remote shell (in a launcher pod: ``workeragent.rsh``,
  launcher/workers/agent.py): mpirun starts its daemon on every worker with ``<rsh> <pod>
  orted ...`` through the worker's agent, the way MPI's ssh would. The daemons connect back
  to mpirun over the pod network; the ranks talk to each other over TCP.

Every rank runs under ``python -P -m launcher.workers.remote run --pidfile
.../rank-{rank}.pid`` (:mod:`launcher.programs`), so that dglrun can stop a rank by session on
its worker whatever happened to mpirun.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from chunkedgraph.job import PartitionJob
from launcher import programs
from launcher.workers.hostfile import Host
from launcher.workers.remote import RANK_END_RE, signal_name
from podcontract.settings import CPU_LIMIT  # the operator sets it from the pod's limits.cpu

PIDFILE_DIR = "/tmp/dglrun"
MIN_RANKS = 2


def rank_argv(python: str, job: PartitionJob, pidfile: str) -> list[str]:
    """What every rank runs: ``python -m distpart partition`` with ``job``'s arguments, under
    the wrapper that keeps its pid in ``pidfile``."""
    return [
        *programs.argv(python, programs.REMOTE, "run", "--pidfile", pidfile, "--"),
        *programs.argv(python, programs.PARTITION_RANK, "partition"),
        *job.argv(),
    ]


@dataclass(frozen=True)
class Launch:
    mpirun: str
    ranks: int
    hostfile: str | None = None  # DistParMETIS: the worker pods
    rsh_agent: str | None = None  # DistParMETIS: the transport's remote shell
    env: dict[str, str] = field(default_factory=dict)  # exported to every rank
    extra: tuple[str, ...] = ()  # the user's --mpirun-args


def pidfile(run_id: str) -> str:
    return f"{PIDFILE_DIR}/{run_id}-rank-{{rank}}.pid"


def rank_pidfile(run_id: str, rank: int) -> str:
    return pidfile(run_id).replace("{rank}", str(rank))


def mpirun_argv(
    launch: Launch, command: Sequence[str], *, as_root: bool | None = None
) -> list[str]:
    as_root = os.geteuid() == 0 if as_root is None else as_root
    argv = [launch.mpirun, "-np", str(launch.ranks), "--bind-to", "none"]
    if as_root:
        argv.append("--allow-run-as-root")
    # TCP between ranks, even inside one pod: Open MPI's shared-memory transport needs
    # cross-process memory copies (CMA, ptrace rights) that containers may forbid, and without
    # them ParMETIS' traffic was 3x slower than over TCP (24.8 s vs 8.0 s, 2 ranks, 4M edges)
    argv += ["--mca", "btl", "tcp,self"]
    # no topology in shared memory (Open MPI 4.1's rtc/hwloc): two daemons that share a /tmp
    # (two pods' agents on one host, as in the tests' cluster) write it to the same session
    # files, and one at times dies of SIGSEGV in hwloc_shmem_topology_write (3 two-daemon
    # starts of 60 here, 0 of 60 with this); a rank then finds the topology itself
    argv += ["--mca", "rtc_hwloc_vmhole", "none"]
    if launch.hostfile:
        argv += ["--hostfile", launch.hostfile, "--map-by", "node"]
    else:
        argv.append("--oversubscribe")
    if launch.rsh_agent:
        # the workers have no remote shell of their own (neither the script nor the
        # token): mpirun itself starts every daemon (no tree spawn)
        argv += ["--mca", "plm_rsh_agent", launch.rsh_agent]
        argv += ["--mca", "plm_rsh_no_tree_spawn", "1"]
        # each daemon stays the remote shell's process (not daemonized): its output (a
        # crash's) reaches mpirun, and its end is the remote shell's, which mpirun sees
        argv.append("--leave-session-attached")
    for key, value in sorted(launch.env.items()):
        argv += ["-x", f"{key}={value}"]
    return [*argv, *launch.extra, *command]


def mpi_hostfile(hosts: Sequence[Host]) -> str:
    """One line per worker pod, one slot each, in worker order."""
    return "".join(f"{h.name} slots=1\n" for h in hosts)


def default_ranks(env: dict[str, str] | None = None) -> int:
    """The pod's CPU limit (the operator passes it through the downward API), else the CPUs
    this process may use; at least 2."""
    env = dict(os.environ) if env is None else env
    raw = env.get(CPU_LIMIT.env, "")
    try:
        cpus = int(raw)
    except ValueError:
        cpus = len(os.sched_getaffinity(0))
    return max(MIN_RANKS, cpus)


_RANK_ERROR = re.compile(r"distpart: rank (\d+) on (\S+): (?:unexpected )?error:?\s*(.*)")
_NOTICED = re.compile(r"process rank (\d+) with PID \d+ on node (\S+) exited on signal (\d+)")
_EXIT_CODE = re.compile(r"Exit code:\s*(-?\d+)")
_PROCESS_NAME = re.compile(r"Process name:\s*\[\[\d+,\d+\],(\d+)\]")
_NOT_STARTED = ("ORTE was unable to reliably start", "ORTE does not know how to route")
_DAEMON_SIGNAL = re.compile(r"\] Signal: (.+?) \((\d+)\)")  # Open MPI's crash report


def _daemon_cause(lines: Sequence[str], marker: int) -> str:
    """What a daemon (or its remote shell) said before mpirun's help text at ``marker``: the
    signal it died of, else its last lines; the help text's own last lines if it said none."""
    before = lines[:marker]
    died = next(filter(None, map(_DAEMON_SIGNAL.search, before)), None)
    if died:
        return f"a daemon died of {died.group(1)} (signal {died.group(2)})"
    return " | ".join((_said(before) or _said(lines))[-3:])


def _said(lines: Sequence[str]) -> list[str]:
    """``lines`` stripped, without blank ones and Open MPI's ``----`` rules."""
    return [ln.strip() for ln in lines if ln.strip() and not ln.strip().startswith("-")]


def rank_failed(line: str) -> bool:
    """Whether mpirun's output ``line`` says an MPI rank ended badly (its wrapper's line, or
    mpirun's own notice of a signal): mpirun should then stop the rest and end itself."""
    return bool(RANK_END_RE.search(line) or _NOTICED.search(line))


def _where(rank: int, hosts: Sequence[str]) -> str:
    return f"MPI rank {rank}" + (f" on {hosts[rank]}" if rank < len(hosts) else "")


def failure(lines: Sequence[str], code: int, hosts: Sequence[str] = ()) -> str:
    """Why ``mpirun`` exited with ``code``, in one line, from its output ``lines``.
    ``hosts[i]``: where rank ``i`` ran (the worker pod), when known."""
    for line in lines:
        m = _RANK_ERROR.search(line)
        if m and m.group(3):
            return f"{_where(int(m.group(1)), hosts or ())} ({m.group(2)}): {m.group(3)}"
    text = "\n".join(lines)
    m = _NOTICED.search(text)
    if m:
        rank, node, sig = int(m.group(1)), m.group(2), int(m.group(3))
        return f"MPI rank {rank} on {node} was killed by {signal_name(sig)}"
    code_m, name_m = _EXIT_CODE.search(text), _PROCESS_NAME.search(text)
    if code_m and name_m:
        rank, exit_code = int(name_m.group(1)), int(code_m.group(1))
        how = f"exited with code {exit_code}"
        if exit_code > 128:
            how = f"was killed by {signal_name(exit_code - 128)} (exit code {exit_code})"
        return f"{_where(rank, hosts)} {how}"
    ended = [m for m in map(RANK_END_RE.search, lines) if m]
    # a rank its wrapper saw end: one killed from outside (not mpirun's SIGTERM) first
    ended.sort(key=lambda m: not m.group(2).startswith("was killed") or "SIGTERM" in m.group(2))
    if ended:
        rank, how = int(ended[0].group(1)), ended[0].group(2)
        return f"{_where(rank, hosts)} {how}"
    for i, line in enumerate(lines):
        if any(marker in line for marker in _NOT_STARTED):
            return "mpirun could not start its daemons on the workers: " + _daemon_cause(lines, i)
    tail = _said(lines)
    last = tail[-1] if tail else "no output"
    return f"mpirun exited with code {code}: {last[-300:]}"
