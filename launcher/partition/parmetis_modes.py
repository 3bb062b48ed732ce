"""dglrun's partition phase in the ParMETIS modes: check the chunked graph where it lives,
then run the ranks of ``python -m distpart partition`` under mpirun.

* ``ParMETIS`` (:func:`partition_in_pod`, the partitioner pod): every rank here, writing the
  partitions into ``<workspace>/dataset``; delivery and dispatch follow as in ``DGL-API``.
* ``DistParMETIS`` (:func:`partition_with_mpi`, the launcher): one rank per worker, started
  through the transport's remote shell (``workeragent.rsh`` in a cluster); rank ``i`` writes
  partition ``i`` into worker ``i``'s ``<workspace>/workload``. :func:`verify_on_workers` then
  checks that every worker holds its part and the same partition JSON: nothing is copied.
  launcher.phases.partition_on_workers runs the phase: :func:`check_workers`, the partition
  cache (launcher.storage), then :func:`partition_with_mpi` on a miss.

Before any rank starts, the input is checked where the ranks will read it (every chunk file a
rank reads exists and is as long as ``metadata.json`` says): a missing or truncated chunk is
one line naming the file. When mpirun fails (a rank died or exited non-zero, a daemon did not
start) the phase fails with one line naming the rank and its worker, after mpirun is stopped
and every rank's session on every worker is killed.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import os
import secrets
import shlex
import subprocess
import tempfile
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path

import chunkedgraph
from launcher import checksums, programs
from launcher.console import Console, PhaseError, Report, mb, phase
from launcher.partition import mpirun
from launcher.partition import output as parts
from launcher.partition.output import WORKLOAD
from launcher.partition.request import PartitionRequest
from launcher.plans.memory import GraphSize
from launcher.workers.hostfile import Host
from launcher.workers.remote import RANK_START_RE
from launcher.workers.transport import (
    LineSink,
    PopenProc,
    Proc,
    Transport,
    WorkerTransportError,
    in_parallel,
    run_everywhere,
)
from podcontract import SHARED

STATS_PREFIX = "distpart-stats "
# what mpirun may relay from a remote shell (kubexec.sh's `set -x` trace, kubectl's note when
# a worker pod has init containers: the original's remote shell; workeragent.rsh says neither)
TRANSPORT_NOISE = ("+ ", "Defaulted container ")
CHECK_TIMEOUT = 600.0  # seconds to verify one worker's chunk files
# Open MPI can wait forever: for a daemon that never calls back (its rank never starts), and
# in its teardown after a rank's failure. dglrun gives up on mpirun after these (seconds):
RANK_START_TIMEOUT = 120.0  # from mpirun's start to every rank's wrapper saying it started
RANK_FAILURE_GRACE = 20.0  # from a rank's failure to mpirun's end
# what every rank needs whatever its image sets (ogb's PyPI check, DGL's backend)
RANK_ENV = {"OUTDATED_IGNORE": "1", "DGLBACKEND": "pytorch", "PYTHONUNBUFFERED": "1"}
# mpirun's own environment: pods have no SHELL, and mpirun warns when it cannot tell its shell
MPIRUN_ENV = {**RANK_ENV, "SHELL": "/bin/sh"}


def _describe(graph: chunkedgraph.ChunkedGraph) -> str:
    return (
        f"{graph.num_nodes} nodes, {graph.num_edges} edges in {len(graph.node_counts)} node and "
        f"{len(graph.edges.counts)} edge chunk(s); node data "
        f"{', '.join(sorted(graph.node_data)) or 'none'}"
    )


def run_mpirun(
    start: Callable[[LineSink], Proc],
    console: Console,
    report: Report,
    *,
    timeout: float,
    hosts: list[str],
    cleanup: Callable[[], None],
) -> None:
    """Run mpirun to its end; on failure (or SIGTERM, or the timeout, or ranks that never
    start, or an end that never comes after a rank's failure) stop it, then ``cleanup``
    (kill every rank's session), and raise one line saying why. ``hosts[i]``: rank i's."""
    watch = _Watch(hosts)

    def sink(label: str, text: str) -> None:
        if text.startswith(STATS_PREFIX):
            with contextlib.suppress(ValueError):
                report.partition = json.loads(text[len(STATS_PREFIX) :])
            return
        if watch.hear(text):
            return
        if not text.startswith(TRANSPORT_NOISE):  # kept for the failure line, not shown
            console.line(label, text)

    proc = start(sink)
    deadline = time.monotonic() + timeout if timeout else None
    try:
        code = watch.wait(proc, deadline)
    except subprocess.TimeoutExpired:
        proc.stop()
        cleanup()
        raise PhaseError(f"timed out after {timeout:.0f}s; stopped every MPI rank") from None
    except BaseException:
        proc.stop()
        cleanup()
        raise
    if code != 0:
        proc.stop()
        cleanup()
        # (a str: dglrun gave up on mpirun, saying why)
        why = code if isinstance(code, str) else mpirun.failure(list(watch.lines), code, hosts)
        raise PhaseError(f"{why}; stopped every MPI rank")


@dataclasses.dataclass
class _Watch:
    """What mpirun's output tells of its ranks, and when dglrun stops waiting for it: when a
    rank has not started :data:`RANK_START_TIMEOUT` seconds in, or mpirun has not ended
    :data:`RANK_FAILURE_GRACE` seconds after a rank failed. Open MPI waits forever in both
    (a daemon that never calls back; its teardown, seen once)."""

    hosts: list[str]
    began: float = dataclasses.field(default_factory=time.monotonic)
    started: set[int] = dataclasses.field(default_factory=set)
    failed_at: float | None = None
    lines: deque[str] = dataclasses.field(default_factory=lambda: deque(maxlen=500))

    def hear(self, line: str) -> bool:
        """Note ``line`` (kept for the failure line); True for a line of dglrun's own, not
        to show."""
        m = RANK_START_RE.search(line.strip())
        if m:
            self.started.add(int(m.group(1)))
            return True
        self.lines.append(line)
        if self.failed_at is None and mpirun.rank_failed(line):
            self.failed_at = time.monotonic()
        return False

    def overdue(self, now: float) -> str | None:
        """Why dglrun stops waiting for mpirun now; None while it waits on."""
        if self.failed_at is not None and now >= self.failed_at + RANK_FAILURE_GRACE:
            return (
                f"{mpirun.failure(list(self.lines), 1, self.hosts)}; mpirun had not ended "
                f"{RANK_FAILURE_GRACE:.0f}s later"
            )
        missing = sorted({h for i, h in enumerate(self.hosts) if i not in self.started})
        if missing and now >= self.began + RANK_START_TIMEOUT:
            return (
                f"no MPI rank started on {', '.join(missing)} within {RANK_START_TIMEOUT:.0f}s "
                "(mpirun's daemon there did not start, or did not call back)"
            )
        return None

    def wait(self, proc: Proc, deadline: float | None) -> int | str:
        """mpirun's exit code, or why it was given up on (:meth:`overdue`);
        :class:`subprocess.TimeoutExpired` at ``deadline``."""
        while True:
            now = time.monotonic()
            step = 1.0 if deadline is None else min(1.0, deadline - now)
            try:
                return proc.wait(max(0.01, step))
            except subprocess.TimeoutExpired:
                now = time.monotonic()
                why = self.overdue(now)
                if why is not None:
                    return why
                if deadline is not None and now >= deadline:
                    raise


def _summary(console: Console, report: Report) -> None:
    stats = report.partition
    if not stats:
        return
    fraction = 100 * float(str(stats.get("edge_cut_fraction")))
    console.say(
        f"  edge cut {stats.get('edge_cut')} ({fraction:.2f}% of {stats.get('num_edges')} "
        f"edges); nodes per part {stats.get('nodes_per_part')}; "
        f"peak memory per rank {stats.get('peak_rss_mb_per_rank')} MB"
    )
    steps = stats.get("seconds")
    if isinstance(steps, dict):
        console.say("  ranks' steps: " + ", ".join(f"{k} {v:.1f}s" for k, v in steps.items()))
    profile = stats.get("memory_mb_per_step")
    peaks = profile.get("peak") if isinstance(profile, dict) else None
    if isinstance(peaks, dict) and peaks:
        largest = {step: max(ranks) for step, ranks in peaks.items() if ranks}
        top = max(largest, key=lambda step: largest[step])
        console.say(
            "  ranks' memory per step (the largest rank's peak): "
            + ", ".join(f"{k} {v:.0f} MiB" for k, v in largest.items())
            + f"; the peak is in {top}"
        )


# -- ParMETIS: every rank in this pod ---------------------------------------------------------


def partition_in_pod(
    what: PartitionRequest, out_dir: Path, console: Console, report: Report
) -> None:
    """Partition into ``out_dir`` with ``--num-ranks`` local ranks (inside phase 1)."""
    assert what.job.chunked is not None
    ranks = what.ranks.count or mpirun.default_ranks()
    try:
        graph = chunkedgraph.load(what.job.chunked)
        chunkedgraph.shares(graph, ranks, SHARED)  # every rank owns some nodes
        files = chunkedgraph.verify(graph)
    except chunkedgraph.ChunkedError as e:
        raise PhaseError(f"{e}; no MPI rank was started") from e
    console.say(f"  chunked graph {graph.metadata}: {_describe(graph)}; {files} files verified")
    run_id = secrets.token_hex(4)
    job = dataclasses.replace(what.job, outs=(str(out_dir),))
    launch = mpirun.Launch(what.ranks.mpirun, ranks, env=RANK_ENV, extra=what.ranks.args)
    argv = mpirun.mpirun_argv(launch, mpirun.rank_argv(what.python, job, mpirun.pidfile(run_id)))
    console.say(f"  mpirun: {ranks} ranks of distpart in this pod")

    def start(sink: LineSink) -> Proc:
        return PopenProc(
            "partition", argv, sink, env=programs.local_env({**os.environ, **MPIRUN_ENV})
        )

    def cleanup() -> None:
        from launcher.workers.remote import kill_pidfiles

        kill_pidfiles([Path(mpirun.rank_pidfile(run_id, r)) for r in range(ranks)])

    me = os.environ.get("HOSTNAME") or "this pod"
    run_mpirun(
        start,
        console,
        report,
        timeout=what.timeout,
        hosts=[me] * ranks,
        cleanup=cleanup,
    )
    _summary(console, report)


# -- DistParMETIS: one rank per worker ------------------------------------------------------


def check_on_workers(
    what: PartitionRequest, transport: Transport, hosts: list[Host], console: Console, hashed: bool
) -> tuple[GraphSize | None, dict[str, str]]:
    """Each worker checks the chunk files its rank will read (in parallel): the graph's
    sizes as worker 0 sees them (None if it could not tell) and, with ``hashed``, the
    SHA-256 of every file each rank reads (``rank<i>/<path>``: the partition cache's key)."""

    def argv(i: int, _host: Host) -> list[str]:
        return [
            *programs.argv(what.python, programs.CHECK_CHUNKS), "check", str(what.job.chunked),
            "--ranks", str(len(hosts)), "--layout", what.job.layout, "--rank", str(i),
            *(["--hash"] if hashed else []),
        ]  # fmt: skip

    results = run_everywhere(transport, hosts, argv, CHECK_TIMEOUT)
    size = None
    hashes: dict[str, str] = {}
    for i, (host, result) in enumerate(zip(hosts, results, strict=True)):
        if isinstance(result, WorkerTransportError):
            raise PhaseError(f"{host.name}: cannot check the chunked graph: {result}")
        code, out = result
        last = (out.strip().splitlines() or ["no output"])[-1]
        if code != 0:
            raise PhaseError(f"{host.name}: {last}; no MPI rank was started")
        try:
            doc = json.loads(last)
        except ValueError:
            doc = {}
        hashes.update({f"rank{i}/{k}": str(v) for k, v in (doc.get("hashes") or {}).items()})
        if i == 0:
            console.say(
                f"  chunked graph {what.job.chunked} ({what.job.layout}): "
                f"{doc.get('num_nodes')} nodes, {doc.get('num_edges')} edges; every worker "
                "verified the chunks it reads"
            )
            size = _size_of(doc, f"{host.name}:{what.job.chunked}")
    return size, hashes


def _size_of(doc: dict[str, object], where: str) -> GraphSize | None:
    """The memory plan's sizes from ``chunkedgraph check``'s report."""
    keys = ("num_nodes", "num_edges", "node_bytes", "edge_bytes")
    values = [v for v in (doc.get(k) for k in keys) if isinstance(v, int)]
    if len(values) != len(keys):
        return None
    nodes, edges, node_bytes, edge_bytes = values
    return GraphSize(nodes, edges, node_bytes, edge_bytes, where)


def check_workers(
    what: PartitionRequest, transport: Transport, hosts: list[Host], console: Console, hashed: bool
) -> tuple[GraphSize | None, dict[str, str]]:
    """DistParMETIS's checks before any rank starts: one partition per worker, one rank per
    worker, and every worker's chunk files (:func:`check_on_workers`; ``hashed``: with
    storage, the partition cache's key)."""
    n = len(hosts)
    if n != what.job.num_parts:
        raise PhaseError(
            f"--num-partitions is {what.job.num_parts} but there are {n} workers "
            f"({', '.join(h.name for h in hosts) or 'none'}): DistParMETIS writes one "
            "partition on every worker"
        )
    if what.ranks.count not in (None, n):
        raise PhaseError(f"--num-ranks {what.ranks.count}: DistParMETIS runs one rank per worker")
    return check_on_workers(what, transport, hosts, console, hashed)


def partition_with_mpi(
    what: PartitionRequest,
    transport: Transport,
    hosts: list[Host],
    console: Console,
    report: Report,
) -> None:
    """One rank of distpart on every worker (inside phase 1)."""
    n = len(hosts)
    run_id = secrets.token_hex(4)
    outs = tuple(f"{transport.workspace(h)}/{WORKLOAD}" for h in hosts)
    job = dataclasses.replace(what.job, outs=outs if len(set(outs)) > 1 else outs[:1])
    with tempfile.NamedTemporaryFile(
        "w", prefix=f"dglrun-{run_id}-", suffix=".hosts", delete=False
    ) as f:
        f.write(mpirun.mpi_hostfile(hosts))
    try:
        launch = mpirun.Launch(
            what.ranks.mpirun,
            n,
            hostfile=f.name,
            rsh_agent=transport.rsh_agent(),
            env=RANK_ENV,
            extra=what.ranks.args,
        )
        argv = mpirun.mpirun_argv(
            launch, mpirun.rank_argv(what.python, job, mpirun.pidfile(run_id))
        )
        console.say(
            f"  mpirun: one rank of distpart on each of {', '.join(h.name for h in hosts)} "
            f"(through {launch.rsh_agent})"
        )

        def start(sink: LineSink) -> Proc:
            return transport.start_coordinator(argv, MPIRUN_ENV, "partition", sink)

        def cleanup() -> None:
            in_parallel(
                [
                    functools.partial(transport.kill, h, [mpirun.rank_pidfile(run_id, i)])
                    for i, h in enumerate(hosts)
                ]
            )

        run_mpirun(
            start,
            console,
            report,
            timeout=what.timeout,
            hosts=[h.name for h in hosts],
            cleanup=cleanup,
        )
    finally:
        Path(f.name).unlink(missing_ok=True)
    _summary(console, report)


def verify_on_workers(
    graph_name: str,
    transport: Transport,
    hosts: list[Host],
    console: Console,
    report: Report,
) -> parts.PartitionSet:
    """Phase 3 of DistParMETIS: every worker holds its own part and the same partition JSON
    (the launcher keeps a copy of the JSON, for the phases after this one)."""
    with phase(console, report, 3, "dispatch"):
        name = f"{graph_name}.json"
        local = Path(tempfile.mkdtemp(prefix="dglrun-config-")) / name
        remote0 = f"{transport.workspace(hosts[0])}/{WORKLOAD}"
        if not transport.fetch(hosts[0], f"{remote0}/{name}", local):
            raise PhaseError(f"{hosts[0].name}: no partition JSON {remote0}/{name}")
        pset = parts.load(local, len(hosts), check_files=False)
        want = checksums.manifest(local.parent)[name]
        for i, host in enumerate(hosts):
            remote = f"{transport.workspace(host)}/{WORKLOAD}"
            got = transport.manifest(host, remote)
            if got.get(name) != want:
                raise PhaseError(f"{host.name}: {remote}/{name} differs from {hosts[0].name}'s")
            missing = [f for f in pset.files[i] if f not in got or got[f][0] == 0]
            if missing:
                raise PhaseError(f"{host.name}: part {i} file {remote}/{missing[0]} is missing")
            size = sum(got[f][0] for f in pset.files[i])
            console.say(
                f"  part {i} on {host.name} ({host.ip}): {mb(size)} written there "
                f"({shlex.quote(remote)}), nothing copied"
            )
    return pset
