"""The five phases of dglrun, with progress lines, timeouts and failure propagation.

Any failure stops every process dglrun started on every worker and ends dglrun with exit code 1
and one line naming the phase, the worker and the exit code (the original reported such jobs as
Completed). Usage errors exit 2.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from launcher import parmetis
from launcher import partitions as parts
from launcher.cli import DIST_PARMETIS, PARMETIS, PHASE_PARTITIONER, PHASE_WORKLOAD, Options
from launcher.console import (
    TOTAL,
    USER_ERRORS,
    Console,
    PhaseError,
    Report,
    mb,
    phase,
)
from launcher.dgl_env import Topology, server_env, trainer_env
from launcher.hostfile import Host, HostfileError, ip_config, parse_hostfile
from launcher.progress import ABANDONED, DONE, FAILED, NoProgress, from_env
from launcher.transport import (
    PopenProc,
    Proc,
    Transport,
    stop_all,
    time_limit,
)
from podutil import TERMINATION_LOG, write_termination_message

DATASET = "dataset"
WORKLOAD = "workload"
OUTPUT = "output"
SERVER_GRACE = 60.0  # seconds servers get to exit after the last trainer finished


class Terminated(BaseException):
    """SIGTERM (the pod is being deleted, suspended or restarted): like Ctrl-C, it unwinds
    through every ``finally`` so that what dglrun started on the workers is stopped."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


# -- phase 1: partition -------------------------------------------------------------------


def _entry_point(path: str | None, flag: str) -> str:
    if not path:
        raise PhaseError(f"{flag} is not set")
    if not Path(path).is_file():
        raise PhaseError(f"{flag} {path} does not exist (relative to {Path.cwd()})")
    return path


def run_local_process(
    console: Console,
    label: str,
    argv: list[str],
    env: dict[str, str],
    timeout: float,
    what: str,
) -> None:
    """Run a process on this machine, streaming its output; raise PhaseError if it fails."""
    proc = PopenProc(label, argv, console.line, env={**os.environ, **env})
    try:
        code = proc.wait(timeout or None)
    except subprocess.TimeoutExpired:
        proc.stop()
        raise PhaseError(f"{what} timed out after {timeout:.0f}s") from None
    except BaseException:
        proc.stop()
        raise
    if code != 0:
        raise PhaseError(f"{what} exited with code {code}")


def partition(opts: Options, console: Console, report: Report) -> parts.PartitionSet:
    out_dir = opts.workspace / DATASET
    with phase(console, report, 1, "partition"):
        if opts.partition_mode == PARMETIS:
            if out_dir.exists():
                shutil.rmtree(out_dir)
            out_dir.mkdir(parents=True)
            parmetis.partition_in_pod(opts, out_dir, console, report)
        elif opts.partition_entry_point:
            script = _entry_point(opts.partition_entry_point, "--partition-entry-point")
            if out_dir.exists():
                shutil.rmtree(out_dir)  # never ship a previous run's partitions
            out_dir.mkdir(parents=True)
            argv = [
                opts.python,
                script,
                "--graph_name",
                opts.graph_name,
                "--workspace",
                str(opts.workspace),
                "--rel_data_path",
                DATASET,
                "--num_parts",
                str(opts.num_partitions),
            ]
            if opts.balance_train:
                argv.append("--balance_train")
            if opts.balance_edges:
                argv.append("--balance_edges")
            if opts.dataset_url:
                argv += ["--dataset_url", opts.dataset_url]
            argv += opts.partition_args
            run_local_process(
                console,
                "partition",
                argv,
                {"OUTDATED_IGNORE": "1"},
                opts.partition_timeout,
                f"the partition entry point {script}",
            )
            # (the largest resident set of the processes dglrun waited for: the entry point)
            peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
            report.partition["peak_rss_mb_per_rank"] = [round(peak, 1)]
            console.say(f"  peak memory of the partition entry point: {peak:.1f} MB")
        config = parts.find_config(out_dir, opts.graph_name, opts.partition_config_path)
        pset = parts.load(config, opts.num_partitions)
        console.say(f"  {pset.num_parts} partitions in {config}")
    return pset


# -- phase 2: deliver ---------------------------------------------------------------------


def launcher_pod_name(opts: Options) -> str:
    """The launcher's pod: from the leadfile, else derived from this pod's name."""
    try:
        hosts = parse_hostfile(Path(opts.leadfile).read_text(), opts.leadfile)
        if hosts:
            return hosts[0].name
    except (OSError, HostfileError):
        pass
    me = os.environ.get("HOSTNAME") or socket.gethostname()
    if me.endswith("-partitioner"):
        return me[: -len("-partitioner")] + "-launcher"
    raise PhaseError(
        f"cannot tell the launcher pod: {opts.leadfile} is empty and {me!r} is not "
        "a partitioner pod name"
    )


def deliver_to_launcher(opts: Options, console: Console, report: Report) -> None:
    from launcher.transport.kubectl import KubectlTransport, deliver

    src = opts.workspace / DATASET
    with phase(console, report, 2, "deliver"):
        expected = parts.manifest(src)
        pod = launcher_pod_name(opts)
        transport = KubectlTransport(
            [],
            kubexec=opts.kubexec,
            kubectl=opts.kubectl,
            workspace=str(opts.workspace),
            python=opts.python,
            sink=console.line,
        )
        deliver(
            transport,
            src,
            pod,
            "watcher-loop-partitioner",
            str(opts.workspace / DATASET),
            expected,
            timeout=opts.deliver_timeout,
        )
        console.say(f"  {mb(parts.total_bytes(expected))} verified in {pod}")


def deliver_locally(src: Path, dst: Path, console: Console, report: Report) -> None:
    with phase(console, report, 2, "deliver"):
        expected = parts.manifest(src)
        if dst.exists():
            shutil.rmtree(dst)
        shutil.copytree(src, dst)
        got = parts.manifest(dst)
        if got != expected:
            raise PhaseError("the copied dataset differs from the partitioner's")
        console.say(f"  {mb(parts.total_bytes(expected))} verified in {dst}")


# -- phase 3 and 4: dispatch, configure ---------------------------------------------------


def dispatch(
    pset: parts.PartitionSet,
    transport: Transport,
    console: Console,
    report: Report,
    timeout: float,
    train_script: str,
) -> list[Host]:
    hosts = transport.workers()
    with phase(console, report, 3, "dispatch"), time_limit(transport, timeout) as deadline:
        if hosts and not transport.exists(hosts[0], train_script):
            raise PhaseError(
                f"--train-entry-point {train_script} does not exist on {hosts[0].name}; "
                "nothing was copied"
            )
        if len(hosts) != pset.num_parts:
            raise PhaseError(
                f"the graph has {pset.num_parts} partitions but there are "
                f"{len(hosts)} workers ({', '.join(h.name for h in hosts) or 'none'}); nothing "
                "was copied"
            )
        for i, host in enumerate(hosts):
            remote = f"{transport.workspace(host)}/{WORKLOAD}"
            part_dir = pset.part_dir(i)
            transport.copy_to(host, pset.config, f"{remote}/{pset.config.name}")
            transport.copy_to(host, pset.root / part_dir, f"{remote}/{part_dir}")
            expected = {
                k: v
                for k, v in parts.manifest(pset.root).items()
                if k == pset.config.name or k.startswith(f"{part_dir}/")
            }
            got = transport.manifest(host, remote)
            bad = [k for k, v in expected.items() if got.get(k) != v]
            if bad:
                raise PhaseError(f"{host.name}: {bad[0]} did not arrive intact")
            size = parts.total_bytes(expected)
            report.dispatch_bytes += size
            console.say(f"  part {i} -> {host.name} ({host.ip}): {mb(size)} verified")
            if time.monotonic() > deadline:
                raise PhaseError(f"timed out after {timeout:.0f}s")
    return hosts


def configure(
    hosts: list[Host], transport: Transport, console: Console, report: Report, timeout: float
) -> None:
    with phase(console, report, 4, "configure"), time_limit(transport, timeout):
        text = ip_config(hosts)
        for host in hosts:
            transport.write_file(
                host, f"{transport.workspace(host)}/{WORKLOAD}/ip_config.txt", text
            )
        console.say(f"  ip_config: {', '.join(f'{h.ip}:{h.port}' for h in hosts)}")


# -- phase 5: train -----------------------------------------------------------------------


@dataclass
class _Running:
    host: Host
    role: str  # "server" or "trainer"
    index: int
    proc: Proc


def train(
    opts: Options,
    pset: parts.PartitionSet,
    hosts: list[Host],
    transport: Transport,
    console: Console,
    report: Report,
) -> None:
    topo = Topology(len(hosts), opts.num_servers, opts.num_trainers, opts.num_samplers)
    script = opts.train_entry_point
    assert script is not None
    running: list[_Running] = []
    with phase(console, report, 5, "train"):
        try:
            for i, host in enumerate(hosts):
                ws = f"{transport.workspace(host)}/{WORKLOAD}"
                args = train_argv(opts, script, f"{ws}/ip_config.txt", f"{ws}/{pset.config.name}")
                for k in range(topo.num_servers):
                    env = server_env(topo, i, k, f"{ws}/ip_config.txt", f"{ws}/{pset.config.name}")
                    proc = transport.start(host, args, env, f"{host.name}/server-{k}")
                    running.append(_Running(host, "server", k, proc))
            for i, host in enumerate(hosts):
                ws = f"{transport.workspace(host)}/{WORKLOAD}"
                args = train_argv(opts, script, f"{ws}/ip_config.txt", f"{ws}/{pset.config.name}")
                for t in range(topo.num_trainers):
                    env = trainer_env(
                        topo,
                        i,
                        t,
                        f"{ws}/ip_config.txt",
                        f"{ws}/{pset.config.name}",
                        hosts[0].ip,
                        opts.master_port,
                    )
                    env["DGLRUN_OUTPUT_DIR"] = f"{ws}/{OUTPUT}"
                    proc = transport.start(host, args, env, f"{host.name}/trainer-{t}")
                    running.append(_Running(host, "trainer", t, proc))
            _supervise(running, opts.train_timeout, console)
        except BaseException:
            stop_all(r.proc for r in running)
            raise
    out = opts.workspace / OUTPUT
    if transport.fetch(hosts[0], f"{transport.workspace(hosts[0])}/{WORKLOAD}/{OUTPUT}", out):
        metrics = out / "metrics.json"
        if metrics.is_file():
            try:
                report.metrics = json.loads(metrics.read_text())
            except ValueError:
                console.say(f"  warning: {metrics} is not valid JSON")
        console.say(f"  results of {hosts[0].name} copied to {out}")


def train_argv(opts: Options, script: str, ip_conf: str, part_conf: str) -> list[str]:
    return [
        opts.python,
        script,
        "--graph_name",
        opts.graph_name,
        "--ip_config",
        ip_conf,
        "--part_config",
        part_conf,
        "--num_epochs",
        str(opts.num_epochs),
        "--batch_size",
        str(opts.batch_size),
        *opts.train_args,
    ]


def _supervise(running: list[_Running], timeout: float, console: Console) -> None:
    """Wait for every trainer; the first failure stops everything."""
    started = time.monotonic()
    trainers_done_at: float | None = None
    while True:
        pending = []
        for r in running:
            code = r.proc.poll()
            if code is None:
                pending.append(r)
            elif code != 0:
                stop_all(other.proc for other in running)
                raise PhaseError(
                    f"{r.role} {r.index} on {r.host.name} ({r.host.ip}) exited with "
                    f"code {code}; stopped every DGL process on every worker"
                )
        if not pending:
            return
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


# -- the whole runs -----------------------------------------------------------------------


def summary(report: Report) -> str:
    bits = []
    if "partition" in report.seconds:
        bits.append(f"partition {report.seconds['partition']:.1f}s")
    if report.partition.get("edge_cut") is not None:
        bits.append(f"edge cut {report.partition['edge_cut']}")
    if "dispatch" in report.seconds and report.dispatch_bytes:  # (DistParMETIS copies nothing)
        bits.append(f"dispatch {mb(report.dispatch_bytes)} in {report.seconds['dispatch']:.1f}s")
    if "train" in report.seconds:
        bits.append(f"training {report.seconds['train']:.1f}s")
    for key in ("test_accuracy", "val_accuracy"):
        value = report.metrics.get(key)
        if isinstance(value, (int, float)):
            bits.append(f"{key.replace('_', ' ')} {value:.4f}")
    return "dglrun: done: " + ", ".join(bits)


def run_partitioner(opts: Options, console: Console, report: Report) -> None:
    partition(opts, console, report)
    deliver_to_launcher(opts, console, report)


def _hosts_from_hostfile(opts: Options) -> list[Host]:
    try:
        text = Path(opts.hostfile).read_text()
    except OSError as e:
        raise PhaseError(f"cannot read the hostfile {opts.hostfile}: {e.strerror}") from e
    return parse_hostfile(text, opts.hostfile)


def run_launcher(opts: Options, console: Console, report: Report) -> None:
    from launcher.transport.kubectl import KubectlTransport

    pset = None  # DistParMETIS: the workers partition (phases 1-2 in run_on_workers)
    if opts.partition_mode != DIST_PARMETIS:
        console.say(f"[1/{TOTAL}] partition: done by the partitioner pod")
        console.say(f"[2/{TOTAL}] deliver: done by the partitioner pod")
        dataset = opts.workspace / DATASET
        try:
            config = parts.find_config(dataset, opts.graph_name, opts.partition_config_path)
            pset = parts.load(config, opts.num_partitions)
        except parts.PartitionError as e:
            raise PhaseError(f"dispatch failed: {e}") from e
    transport = KubectlTransport(
        _hosts_from_hostfile(opts),
        kubexec=opts.kubexec,
        kubectl=opts.kubectl,
        workspace=str(opts.workspace),
        python=opts.python,
        sink=console.line,
    )
    run_on_workers(opts, pset, transport, console, report)


def run_on_workers(
    opts: Options,
    pset: parts.PartitionSet | None,
    transport: Transport,
    console: Console,
    report: Report,
    setup: Callable[[], object] = lambda: None,
) -> None:
    """Phases 3-5 over a transport, which is closed whatever happens; without ``pset``
    (DistParMETIS) phases 1-2 too, on the workers."""
    try:
        setup()
        if pset is None:
            _entry_point_on(transport, str(opts.train_entry_point))
            hosts = parmetis.partition_on_workers(opts, transport, console, report)
            pset = parmetis.verify_on_workers(opts, transport, hosts, console, report)
        else:
            hosts = dispatch(
                pset, transport, console, report, opts.dispatch_timeout, str(opts.train_entry_point)
            )
        configure(hosts, transport, console, report, opts.configure_timeout)
        train(opts, pset, hosts, transport, console, report)
    finally:
        transport.close()


def _entry_point_on(transport: Transport, script: str) -> None:
    """The training entry point exists on the first worker (checked before anything runs)."""
    hosts = transport.workers()
    if hosts and not transport.exists(hosts[0], script):
        raise PhaseError(
            f"--train-entry-point {script} does not exist on {hosts[0].name}; nothing was started"
        )


def run_local(opts: Options, console: Console, report: Report) -> None:
    from launcher.transport.local import LocalTransport, check_prerequisites

    # what can fail without partitioning fails before it
    _entry_point(opts.train_entry_point, "--train-entry-point")
    check_prerequisites()
    n = opts.local_workers or opts.num_partitions
    root = opts.local_root or opts.workspace / "workers"
    if opts.partition_mode == DIST_PARMETIS:
        dist = LocalTransport(n, root, sink=console.line, keep=opts.keep_local)

        def dist_setup() -> None:
            hosts = dist.setup()
            console.say(f"  local workers: {', '.join(f'{h.name}={h.ip}' for h in hosts)}")

        run_on_workers(opts, None, dist, console, report, dist_setup)
        return
    pset = partition(opts, console, report)
    launcher_ws = opts.workspace / "launcher"
    deliver_locally(opts.workspace / DATASET, launcher_ws / DATASET, console, report)
    config = parts.find_config(launcher_ws / DATASET, opts.graph_name, opts.partition_config_path)
    pset = parts.load(config, pset.num_parts)
    transport = LocalTransport(n, root, sink=console.line, keep=opts.keep_local)

    def setup() -> None:
        hosts = transport.setup()
        console.say(f"  local workers: {', '.join(f'{h.name}={h.ip}' for h in hosts)}")

    run_on_workers(opts, pset, transport, console, report, setup)


def run_workload(opts: Options, console: Console, report: Report) -> None:
    """Skip mode: the training entry point alone, in this pod."""
    script = _entry_point(opts.train_entry_point, "--train-entry-point")
    with phase(console, report, 5, "train"):
        argv = [
            opts.python,
            script,
            "--graph_name",
            opts.graph_name,
            "--num_epochs",
            str(opts.num_epochs),
            "--batch_size",
            str(opts.batch_size),
            *opts.train_args,
        ]
        env = {"OUTDATED_IGNORE": "1", "DGLRUN_OUTPUT_DIR": str(opts.workspace / OUTPUT)}
        run_local_process(
            console, "train", argv, env, opts.train_timeout, f"the training entry point {script}"
        )


def termination_message(text: str, path: str | Path = TERMINATION_LOG) -> None:
    """In a pod, the kubelet puts this text into the container's terminated state; the
    operator quotes it in the job's Failed condition, so the reason reaches `kubectl get`."""
    write_termination_message(text[:4000], path)


def run(opts: Options, console: Console | None = None) -> int:
    console = console or Console()
    if opts.transport != "local" and isinstance(console.progress, NoProgress):
        console.progress = from_env(opts.kubectl, opts.num_epochs, console.say)
    progress = console.progress
    report = Report()
    try:
        code = _run(opts, console, report)
    except BaseException:
        progress.finish(FAILED)
        raise
    # The partitioner's end is not the job's: its last phase stays until the launcher's.
    if code == 0:
        progress.finish(None if opts.phase == PHASE_PARTITIONER else DONE)
    elif code == 128 + signal.SIGTERM:
        progress.finish(ABANDONED)
    else:
        progress.finish(FAILED)
    return code


def _run(opts: Options, console: Console, report: Report) -> int:
    try:
        if opts.transport == "local":
            run_local(opts, console, report)
        elif opts.phase == PHASE_PARTITIONER:
            run_partitioner(opts, console, report)
        elif opts.phase == PHASE_WORKLOAD:
            run_workload(opts, console, report)
        else:
            run_launcher(opts, console, report)
    except USER_ERRORS as e:
        console.say(f"dglrun: error: {e}")
        termination_message(str(e))
        return 1
    except KeyboardInterrupt:
        console.say("dglrun: interrupted; stopped every process it started")
        return 130
    except Terminated as e:
        text = f"terminated by signal {e.signum}; stopped every process it started"
        console.say(f"dglrun: {text}")
        termination_message(text)
        return 128 + e.signum
    console.say(summary(report))
    return 0
