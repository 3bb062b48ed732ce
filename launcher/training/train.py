"""Phase 5, train: the DGL servers, then the trainers, on every worker, from one
:class:`TrainingRequest`; the first failure stops all and is named, unless it died of a
peer's (launcher/workers/blame.py); a trainer that refused a file it was to load (a
checkpoint that could run code) is quoted (launcher/workers/refusal.py). An elastic attempt
stops at an epoch boundary when the operator asks it to grow (launcher/training/rescale.py).

The request is built once per run from dglrun's options (``launcher.phases.phase_inputs``),
whose training options are one group, :class:`Training`, held whole; Skip mode
(launcher/runs.py) runs the same command line, :func:`train_argv`, as one process.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from launcher import programs
from launcher.console import Console, PhaseError, Refused, Report, phase
from launcher.errors import Terminated
from launcher.partition import output as parts
from launcher.partition.output import WORKLOAD
from launcher.plans.memory import OutOfCore, Processes, buffer_capacity
from launcher.report.outcome import read_metrics
from launcher.storage import keeping
from launcher.storage.layout import Storage
from launcher.training.rescale import GrowWatch, RescaleStop
from launcher.workers import blame, refusal
from launcher.workers.dgl_env import Topology, server_env, trainer_env
from launcher.workers.hostfile import Host
from launcher.workers.transport import Proc, Transport, stop_all
from podcontract import (
    BUFFER_CAPACITY_ENV,
    BUFFER_PARTITIONS,
    BUFFER_PARTITIONS_ENV,
    OUT_OF_CORE_ORDER_ENV,
)
from podcontract.settings import OUT_OF_CORE_ORDER

OUTPUT = "output"  # the results' folder, under a workload folder and this pod's workspace
SERVER_GRACE = 60.0  # seconds servers get to exit after the last trainer finished


@dataclass(frozen=True, kw_only=True)
class Training:
    """dglrun's training options, a group of its options (launcher.options) that phase 5
    takes whole: the training entry point and the values of its command line, DGL's
    processes on each worker (the memory plan's too), torch's rendezvous port, and whether
    the node features stay on the workers' disk."""

    script: str | None  # the training entry point (None: this pod does not train)
    num_epochs: int
    batch_size: int  # each trainer's (an elastic attempt's share of the global batch)
    processes: Processes
    args: tuple[str, ...]  # --train-args, after the ones dglrun passes
    master_port: int  # torch's rendezvous, on the first worker
    out_of_core: OutOfCore  # enabled: the servers and trainers run under python -m outofcore


@dataclass(frozen=True, kw_only=True)
class TrainingRequest:
    """What phase 5 (and Skip mode) runs: the training ``options``, the graph, the
    interpreter, the time the processes get, and where the results go. Built once from
    dglrun's options (``launcher.phases.phase_inputs``)."""

    options: Training
    graph_name: str
    python: str
    timeout: float  # seconds; 0: none
    elastic: bool  # an elastic DGLJob's attempt: the operator may ask it to grow
    storage: Storage | None  # checkpoints, resume and results (None: results copied back)
    output: Path  # where this pod keeps the results without storage

    def topology(self, num_workers: int) -> Topology:
        """DGL's process counts over ``num_workers`` workers."""
        p = self.options.processes
        return Topology(num_workers, p.servers, p.trainers, p.samplers)


@dataclass
class _Running:
    host: Host
    role: str  # "server" or "trainer"
    index: int
    proc: Proc


def train(
    what: TrainingRequest,
    pset: parts.PartitionSet,
    hosts: list[Host],
    transport: Transport,
    console: Console,
    report: Report,
) -> None:
    """Phase 5 on ``hosts``, each holding its part of ``pset`` in its workload folder; then
    the results are read from the storage, or copied from the first worker."""
    topo = what.topology(len(hosts))
    script = what.options.script
    assert script is not None
    running: list[_Running] = []
    with phase(console, report, 5, "train"):
        # checkpoints, resume, results on storage
        kept = keeping.trainer_env(what.storage, what.options.num_epochs, console)
        order = order_env(what.options.out_of_core)
        try:
            # each worker's workload folder, its (ip_config, partition config) and argv
            where = []
            for host in hosts:
                ws = f"{transport.workspace(host)}/{WORKLOAD}"
                configs = (f"{ws}/ip_config.txt", f"{ws}/{pset.config.name}")
                where.append((ws, configs, train_argv(what, script, configs)))
            for i, host in enumerate(hosts):
                _, configs, args = where[i]
                for k in range(topo.num_servers):
                    env = {**server_env(topo, i, k, *configs), **order}
                    proc = transport.start(host, args, env, f"{host.name}/server-{k}")
                    running.append(_Running(host, "server", k, proc))
            for i, host in enumerate(hosts):
                ws, configs, args = where[i]
                for t in range(topo.num_trainers):
                    port = what.options.master_port
                    env = trainer_env(topo, i, t, *configs, hosts[0].ip, port)
                    env.update({"DGLRUN_OUTPUT_DIR": f"{ws}/{OUTPUT}", **kept, **order})
                    proc = transport.start(host, args, env, f"{host.name}/trainer-{t}")
                    running.append(_Running(host, "trainer", t, proc))
            _supervise(running, what.timeout, console, _grow_watch(what, console))
        except Terminated:  # (this pod is being deleted: the agents' processes wait for the
            transport.release()  # launcher that replaces it; the others are stopped)
            stop_all(r.proc for r in running)
            raise
        except BaseException:
            stop_all(r.proc for r in running)
            raise
    out = keeping.results(what.storage)
    if out is not None:
        read_metrics(out, console, report)
        console.say(f"  results are on the job's storage: {out}")
        return
    out = what.output
    if transport.fetch(hosts[0], f"{transport.workspace(hosts[0])}/{WORKLOAD}/{OUTPUT}", out):
        read_metrics(out, console, report)
        console.say(f"  results of {hosts[0].name} copied to {out}")


def _the_cause(running: list[_Running]) -> tuple[_Running, int, str]:
    """The failed process to name, its exit code and last line: failures are collected in the
    order seen, for up to blame.CAUSE_WINDOW seconds while only consequences have failed."""
    deadline = time.monotonic() + blame.CAUSE_WINDOW
    seen: dict[int, tuple[_Running, int, str]] = {}
    while True:
        for i, r in enumerate(running):
            code = r.proc.poll()
            if i not in seen and code:
                r.proc.wait(5)  # its last lines are read
                seen[i] = (r, code, r.proc.last_line())
        found = blame.cause(list(seen.values()), lambda f: f[2])
        if not blame.is_consequence(found[2]) or time.monotonic() >= deadline:
            return found
        time.sleep(0.05)


def order_env(ooc: OutOfCore) -> dict[str, str]:
    """The order out-of-core DGL processes train in (outofcore.buffer reads it), said only
    when it is not the default, Exact; buffer order's partitions and its buffer, within the
    page cache the memory plan counts (``--page-cache-fraction``)."""
    if not ooc.enabled or ooc.order == OUT_OF_CORE_ORDER.when_unset:
        return {}
    return {
        OUT_OF_CORE_ORDER_ENV: ooc.order,
        BUFFER_PARTITIONS_ENV: str(BUFFER_PARTITIONS),
        BUFFER_CAPACITY_ENV: str(buffer_capacity(ooc.page_cache_fraction)),
    }


def train_argv(
    what: TrainingRequest, script: str, configs: tuple[str, str] | None = None
) -> list[str]:
    """The training entry point's command line: with ``configs`` (ip_config, partition config)
    a DGL server's or trainer's on a worker, without (Skip mode) the one process in the pod."""
    given = what.options
    argv = [what.python, script, "--graph_name", what.graph_name]
    if configs is not None:  # under a runner: DGL's start without its fixed waits (dglprocess)
        runner = programs.OUT_OF_CORE if given.out_of_core.enabled else programs.DGL_PROCESS
        argv[1:1] = programs.argv("", runner, "run")[1:]
        ip_conf, part_conf = configs
        argv += ["--ip_config", ip_conf, "--part_config", part_conf]
    return [
        *argv,
        "--num_epochs",
        str(given.num_epochs),
        "--batch_size",
        str(given.batch_size),
        *given.args,
    ]


def _grow_watch(what: TrainingRequest, console: Console) -> GrowWatch | None:
    """An elastic attempt with storage, in a DGLJob: the operator's grow requests."""
    ask = getattr(console.progress, "grow_to", None)
    if not what.elastic or what.storage is None or ask is None:
        return None
    return GrowWatch(ask, what.storage.checkpoints, last_epoch=what.options.num_epochs)


def _supervise(
    running: list[_Running], timeout: float, console: Console, grow: GrowWatch | None = None
) -> None:
    """Wait for every trainer; the first failure stops everything and is named, unless it
    died of a peer's (launcher/workers/blame.py)."""
    started = time.monotonic()
    trainers_done_at: float | None = None
    while True:
        codes = [r.proc.poll() for r in running]
        if any(codes):
            r, code, last = _the_cause(running)
            stop_all(other.proc for other in running)
            who = f"{r.role} {r.index} on {r.host.name} ({r.host.ip})"
            refused = refusal.describe(code, r.proc.last_error_line() or last, who)
            if refused is not None:  # (the job's next attempt would refuse the file again)
                raise Refused(f"{refused}; stopped every DGL process on every worker")
            raise PhaseError(
                f"{who} exited with code {code}{f' ({last[-200:]})' if last else ''}; "
                "stopped every DGL process on every worker"
            )
        pending = [r for r, code in zip(running, codes, strict=True) if code is None]
        if not pending:
            return
        why = grow.check() if grow is not None else None
        if why:
            stop_all(r.proc for r in running)
            raise RescaleStop(why)
        now = time.monotonic()
        if all(r.role == "server" for r in pending):
            trainers_done_at = trainers_done_at or now
            if now - trainers_done_at > SERVER_GRACE:
                console.say("  warning: DGL servers did not exit after training; stopping them")
                stop_all(r.proc for r in pending)
                return
        if timeout and now - started > timeout:
            stop_all(r.proc for r in running)
            raise PhaseError(f"timed out after {timeout:.0f}s; stopped every DGL process")
        time.sleep(0.05)
