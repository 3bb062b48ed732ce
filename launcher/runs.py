"""dglrun's whole runs: which phases (launcher/phases.py) run where, and how a run ends.

* the partitioner pod (``Partitioner``): the memory plan, [1/5] partition, [2/5] deliver
  (serve the parts over HTTP, or copy them into the launcher pod);
* the launcher pod: [1/5] and [2/5] were the partitioner's (in DistParMETIS they happen on the
  workers), then [3/5] dispatch, [4/5] configure, [5/5] train through the workers' agents
  (launcher/workers/agent.py: over the pod network, never through the API server);
* Skip mode (``Launcher_Workload``): the training entry point alone, in this pod;
* ``--transport local``: all five phases on this machine, one network namespace per worker.

Any failure stops every process dglrun started on every worker and ends dglrun with exit code 1
and one line naming the phase, the worker and the exit code (the original reported such jobs as
Completed); what is said then, and kept, is launcher/report/outcome.py's. Usage errors exit 2.
"""

from __future__ import annotations

import dataclasses
import secrets
import threading
import time
from collections.abc import Callable
from contextlib import nullcontext
from pathlib import Path
from typing import TYPE_CHECKING

from launcher import programs
from launcher.console import (
    TOTAL,
    USER_ERRORS,
    Console,
    NoProgress,
    PhaseError,
    Report,
    memory_samples,
    phase,
)
from launcher.delivery.wire import TransferError, build_manifest
from launcher.errors import Terminated
from launcher.options import Options
from launcher.partition import output as parts
from launcher.partition import parmetis_modes
from launcher.partition.output import WORKLOAD
from launcher.phases import (
    PhaseInputs,
    Source,
    check_entry_point,
    configure,
    deliver_locally,
    deliver_to_launcher,
    dispatch,
    dispatch_pull,
    fetch_partition_config,
    partition,
    partition_on_workers,
    partition_server,
    phase_inputs,
    plan_memory,
    run_local_process,
    serve,
)
from launcher.plans import memory as memplan
from launcher.report import outcome
from launcher.report.progress import FAILED, for_job
from launcher.storage import keeping
from launcher.training.rescale import RescaleStop, wait_for_count
from launcher.training.train import TrainingRequest, train, train_argv
from launcher.workers.hostfile import Host, parse_hostfile
from launcher.workers.transport import Proc, Transport, WorkerTransportError
from podcontract import (
    DATASET,
    DIST_PARMETIS,
    PHASE_LAUNCHER_WORKLOAD,
    PHASE_PARTITIONER,
    TRANSFER_HTTP,
)
from podcontract import report as reporters

if TYPE_CHECKING:
    from launcher.workers.local import LocalTransport


def run_partitioner(opts: Options, inputs: PhaseInputs, console: Console, report: Report) -> None:
    """The partitioner pod's part: phases 1 and 2."""
    plan_memory(inputs.plan, console, report)
    pset = partition(inputs.partition, console, report)
    if opts.transfer.mode == TRANSFER_HTTP:
        serve(inputs.transfer, inputs.timeouts.deliver, pset, console, report)
    else:
        deliver_to_launcher(opts, pset, console, report)


def _hosts_from_hostfile(opts: Options) -> list[Host]:
    try:
        text = Path(opts.hostfile).read_text()
    except OSError as e:
        raise PhaseError(f"cannot read the hostfile {opts.hostfile}: {e.strerror}") from e
    return parse_hostfile(text, opts.hostfile)


def run_launcher(opts: Options, inputs: PhaseInputs, console: Console, report: Report) -> None:
    """The launcher pod's part: phases 3-5 on the hostfile's workers (1-5 in DistParMETIS)."""
    from launcher.workers.agent import AgentTransport

    pset = None  # DistParMETIS: the workers partition (phases 1-2 in run_on_workers)
    source = None
    try:
        transport = AgentTransport(
            _hosts_from_hostfile(opts),
            token_file=opts.transfer.token_file,
            hostfile=opts.hostfile,
            workspace=str(opts.workspace),
            python=opts.python,
            sink=console.line,
            agent_port=opts.agent_port,
            attempt_tag=attempt_tag(opts),
        )
        if transport.attempt_training():
            pset = _config_on_worker(inputs, transport)
    except WorkerTransportError as e:
        raise PhaseError(str(e)) from e
    if pset is not None:  # (a launcher before this one was lost: its trainers run on)
        console.say(
            "re-attached: this attempt's DGL processes run on the workers (a launcher before "
            "this one started them and was lost); phases 1-4 were done"
        )
        run_on_workers(inputs, pset, transport, console, report, reattached=True)
        return
    # (in the other modes the partitioner pod checked the plan; this reports its estimates;
    # in DistParMETIS the plan is made once the workers have checked the graph they see)
    if opts.partition_mode != DIST_PARMETIS:
        plan_memory(inputs.plan, console, report, check=False)
    if opts.partition_mode != DIST_PARMETIS and opts.transfer.mode == TRANSFER_HTTP:
        source = partition_server(inputs.transfer, console)
        try:
            pset = fetch_partition_config(inputs.partition.request, source, console)
        except (TransferError, parts.PartitionError) as e:
            raise PhaseError(f"dispatch failed: {source.server}: {e}") from e
        reused = source.manifest.get("reused")
        if reused:
            console.say(
                f"[1/{TOTAL}] partition: skipped: the partitioner pod reused the partitions "
                f"cached at {reused} on the job's storage (same inputs)"
            )
        else:
            console.say(f"[1/{TOTAL}] partition: done by the partitioner pod")
        console.say(f"[2/{TOTAL}] deliver: the partitioner pod serves the parts at {source.url}")
    elif opts.partition_mode != DIST_PARMETIS:
        console.say(f"[1/{TOTAL}] partition: done by the partitioner pod")
        console.say(f"[2/{TOTAL}] deliver: done by the partitioner pod")
        what = inputs.partition.request
        try:
            config = parts.find_config(
                what.workspace / DATASET, what.job.graph_name, what.config_path
            )
            pset = parts.load(config, what.job.num_parts)
        except parts.PartitionError as e:
            raise PhaseError(f"dispatch failed: {e}") from e
    run_on_workers(inputs, pset, transport, console, report, source=source)


def _config_on_worker(inputs: PhaseInputs, transport: Transport) -> parts.PartitionSet:
    """The partition config the first worker trains with (phase 3 put it there), for a
    launcher that re-attaches: the partitioner may be gone by now."""
    what = inputs.partition.request
    host = transport.workers()[0]
    name = f"{what.job.graph_name}.json"
    dest = what.workspace / DATASET
    if not transport.fetch(host, f"{transport.workspace(host)}/{WORKLOAD}/{name}", dest / name):
        raise PhaseError(f"re-attach failed: no partition config {name} on {host.name}")
    try:
        return parts.load(dest / name, what.job.num_parts, check_files=False)
    except parts.PartitionError as e:
        raise PhaseError(f"re-attach failed: {host.name}'s {name}: {e}") from e


def attempt_tag(opts: Options) -> str:
    """What names this attempt's processes at the workers' agents, the same for every launcher
    pod of the attempt (one replacing a lost launcher re-attaches to them): the job's uid and
    the attempt; "" outside a DGLJob (each run its own)."""
    job = opts.job
    return f"{job.uid[:8]}-a{job.attempt}" if job.uid else ""


def run_on_workers(
    inputs: PhaseInputs,
    pset: parts.PartitionSet | None,
    transport: Transport,
    console: Console,
    report: Report,
    setup: Callable[[], object] = lambda: None,
    source: Source | None = None,
    reattached: bool = False,
) -> None:
    """Phases 3-5 over a transport, which is closed whatever happens; without ``pset``
    (DistParMETIS) phases 1-2 too, on the workers. With a ``source`` the workers pull their
    parts from it, else dglrun copies them. ``reattached``: phases 3-4 were done by a
    launcher before this one, whose processes run on: phase 5 follows them."""
    try:
        setup()
        if reattached:
            assert pset is not None
            train(inputs.training, pset, transport.workers(), transport, console, report)
            return
        script = str(inputs.training.options.script)
        if pset is None:
            _entry_point_on(transport, script)

            def plan(size: memplan.GraphSize, partitioning: bool) -> None:
                if not report.memory:  # (the local transport planned before: same graph)
                    plan_memory(inputs.plan, console, report, size=size, partitioning=partitioning)

            step = inputs.partition
            hosts = partition_on_workers(step, transport, console, report, plan)
            pset = parmetis_modes.verify_on_workers(
                step.request.job.graph_name, transport, hosts, console, report
            )
        elif source is not None:
            timeout, python = inputs.timeouts.dispatch, inputs.python
            hosts = dispatch_pull(pset, source, transport, console, report, timeout, script, python)
        else:
            hosts = dispatch(pset, transport, console, report, inputs.timeouts.dispatch, script)
        configure(hosts, transport, console, report, inputs.timeouts.configure)
        train(inputs.training, pset, hosts, transport, console, report)
    except Terminated:
        transport.release()  # (the agents' processes wait for the launcher replacing this one)
        raise
    finally:
        transport.close()


def _entry_point_on(transport: Transport, script: str) -> None:
    """The training entry point exists on the first worker (checked before anything runs)."""
    hosts = transport.workers()
    if hosts and not transport.exists(hosts[0], script):
        raise PhaseError(
            f"--train-entry-point {script} does not exist on {hosts[0].name}; nothing was started"
        )


def _local_workers(opts: Options, n: int, root: Path, console: Console) -> LocalTransport:
    """``--transport local``'s ``n`` worker namespaces under ``root``, as the flags ask."""
    from launcher.workers.local import LocalTransport

    return LocalTransport(
        n, root, sink=console.line, keep=opts.keep_local, shm_size=opts.local_shm_size
    )


def run_local(opts: Options, inputs: PhaseInputs, console: Console, report: Report) -> None:
    """``--transport local``: every phase on this machine."""
    from launcher.workers.local import check_prerequisites

    # what can fail without partitioning fails before it
    check_entry_point(inputs.training.options.script, "--train-entry-point")
    check_prerequisites()
    plan_memory(inputs.plan, console, report)
    n = opts.local_workers or opts.num_partitions
    root = opts.local_root or opts.workspace / "workers"
    if opts.partition_mode == DIST_PARMETIS:
        dist = _local_workers(opts, n, root, console)

        def dist_setup() -> None:
            hosts = dist.setup()
            console.say(f"  local workers: {', '.join(f'{h.name}={h.ip}' for h in hosts)}")

        run_on_workers(inputs, None, dist, console, report, dist_setup)
        return
    pset = partition(inputs.partition, console, report)
    if opts.transfer.mode == TRANSFER_HTTP:
        transport = _local_workers(opts, n, root, console)
        _run_local_http(inputs, pset, transport, root, console, report)
        return
    launcher_ws = opts.workspace / "launcher"
    deliver_locally(pset.root, launcher_ws / DATASET, console, report)
    what = inputs.partition.request
    config = parts.find_config(launcher_ws / DATASET, what.job.graph_name, what.config_path)
    pset = parts.load(config, pset.num_parts)
    transport = _local_workers(opts, n, root, console)

    def setup() -> None:
        hosts = transport.setup()
        console.say(f"  local workers: {', '.join(f'{h.name}={h.ip}' for h in hosts)}")

    run_on_workers(inputs, pset, transport, console, report, setup)


def _run_local_http(
    inputs: PhaseInputs,
    pset: parts.PartitionSet,
    transport: LocalTransport,
    root: Path,
    console: Console,
    report: Report,
) -> None:
    """Phases 2-5 locally over HTTP, on ``transport``'s workers (whose folders are under
    ``root``): the server runs in the launcher's network namespace (as the partitioner pod's
    would), the workers pull from it."""
    transfer = inputs.transfer
    root.mkdir(parents=True, exist_ok=True)
    token_file = root / "transfer-token"
    token_file.write_text(secrets.token_hex(16))
    token_file.chmod(0o600)
    url = f"http://{transport.coordinator_ip}:{transfer.port}"
    server: list[Proc] = []

    def done() -> None:
        argv = [*programs.argv(inputs.python, programs.PULL), "--url", url, "--done",
                "--token-file", str(token_file)]  # fmt: skip
        if transport.start_coordinator(argv, {}, "pull", console.line).wait(60) != 0:
            raise PhaseError(f"cannot stop the partition server: {console.last_line('pull')}")
        if server and server[0].wait(60) != 0:
            raise PhaseError(f"the partition server: {console.last_line('partition-server')}")

    source = Source(url, str(token_file), done, "the launcher namespace", build_manifest(pset))

    def setup() -> None:
        hosts = transport.setup()
        console.say(f"  local workers: {', '.join(f'{h.name}={h.ip}' for h in hosts)}")
        with phase(console, report, 2, "deliver"):
            server.append(_start_local_server(inputs, pset, transport, str(token_file), console))

    run_on_workers(inputs, pset, transport, console, report, setup, source=source)


def _start_local_server(
    inputs: PhaseInputs,
    pset: parts.PartitionSet,
    transport: Transport,
    token_file: str,
    console: Console,
) -> Proc:
    ready = threading.Event()

    def sink(label: str, line: str) -> None:
        console.line(label, line)
        if line.startswith("serving "):
            ready.set()

    transfer = inputs.transfer
    argv = [*programs.argv(inputs.python, programs.SERVE), "--config", str(pset.config),
            "--port", str(transfer.port), "--token-file", token_file,
            "--timeout", str(inputs.timeouts.deliver),
            "--max-rate", str(transfer.max_rate)]  # fmt: skip
    proc = transport.start_coordinator(argv, {}, "partition-server", sink)
    deadline = time.monotonic() + 300
    while not ready.wait(0.1):
        code = proc.poll()
        if code is not None:
            raise PhaseError(
                f"the partition server exited with code {code}: "
                f"{console.last_line('partition-server')}"
            )
        if time.monotonic() > deadline:
            raise PhaseError("the partition server did not start within 300s")
    return proc


def run_workload(what: TrainingRequest, console: Console, report: Report) -> None:
    """Skip mode: the training entry point alone, in this pod."""
    script = check_entry_point(what.options.script, "--train-entry-point")
    with phase(console, report, 5, "train"):
        argv = train_argv(what, script)
        env = {
            "OUTDATED_IGNORE": "1",
            "DGLRUN_OUTPUT_DIR": str(what.output),
            **keeping.trainer_env(what.storage, what.options.num_epochs, console),
        }
        run_local_process(
            console, "train", argv, env, what.timeout, f"the training entry point {script}"
        )
    out = keeping.results(what.storage)
    if out is not None:
        outcome.read_metrics(out, console, report)


def run(opts: Options, console: Console | None = None) -> int:
    """This pod's part of the job (or all of it, locally); dglrun's exit code."""
    console = console or Console()
    if opts.transport != "local" and isinstance(console.progress, NoProgress):
        epochs = opts.training.num_epochs
        console.progress = for_job(opts.job, opts.kubectl, epochs, console.say, _role(opts))
    progress = console.progress
    report = Report()
    try:
        with memory_samples(console, _role(opts)) if opts.transport != "local" else nullcontext():
            code = _run(opts, console, report)
    except BaseException:
        progress.finish(FAILED)
        raise
    outcome.finish_progress(_ending(opts), progress, code)
    return code


def _role(opts: Options) -> str:
    """This pod's role: its log's name on the claim, its memory samples' label, its key of the
    job's report (podcontract/report.py)."""
    return reporters.PARTITIONER if opts.phase == PHASE_PARTITIONER else reporters.LAUNCHER


def _run(opts: Options, console: Console, report: Report) -> int:
    try:
        if opts.storage is not None:
            opts.storage.prepare()
            console.copy_to(keeping.open_log(opts.storage, _role(opts)))
        if opts.global_batch is not None:
            each = opts.training.batch_size
            trainers = opts.num_partitions * opts.training.processes.trainers
            console.say(
                f"elastic: this attempt has {opts.num_partitions} workers (partitions); global "
                f"batch {opts.global_batch} = {each} per trainer x {trainers} trainers"
            )
        inputs = phase_inputs(_counted(opts, console))
        if opts.transport == "local":
            run_local(opts, inputs, console, report)
        elif opts.phase == PHASE_PARTITIONER:
            run_partitioner(opts, inputs, console, report)
        elif opts.phase == PHASE_LAUNCHER_WORKLOAD:
            run_workload(inputs.training, console, report)
        else:
            run_launcher(opts, inputs, console, report)
    except RescaleStop as e:
        return outcome.rescaling(_ending(opts), console, report, str(e))
    except USER_ERRORS as e:
        return outcome.failed(_ending(opts), console, report, str(e))
    except KeyboardInterrupt:
        return outcome.interrupted(_ending(opts), console, report)
    except Terminated as e:
        left = opts.transport != "local" and not opts.phase and bool(attempt_tag(opts))
        return outcome.terminated(_ending(opts), console, report, e.signum, left)
    return outcome.succeeded(_ending(opts), console, report)


def _counted(opts: Options, console: Console) -> Options:
    """``opts`` with the attempt's partition count in an elastic DGLJob's partitioner (read
    from the job's status: the partitioner is made before the attempt's workers are chosen),
    before any phase's input is built from them."""
    if opts.transport == "local" or opts.phase != PHASE_PARTITIONER or not opts.count_from_job:
        return opts
    count = wait_for_count(getattr(console.progress, "members", None), console.say)
    return dataclasses.replace(opts, num_partitions=count)


def _ending(opts: Options) -> outcome.Ending:
    return outcome.Ending(opts.phase, opts.partition_mode, opts.storage)
