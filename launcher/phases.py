"""The five phases of dglrun, with progress lines, timeouts and failure propagation; which of
them run where is launcher/runs.py's.

1. partition: the partition entry point, or ParMETIS's MPI ranks
   (launcher/partition/parmetis_modes.py), into the storage's cache when there is one
   (launcher/storage/keeping.py); the memory plan is made first;
2. deliver: serve the parts over HTTP (the workers pull them), or copy them into the launcher
   pod (KubectlCp), or locally;
3. dispatch: part i to worker i (pulled, or copied by dglrun), every file's checksum verified;
4. configure: DGL's ip_config on every worker;
5. train: the DGL servers, then the trainers, on every worker (launcher/training/train.py).

Each phase takes its own value (:class:`PhaseInputs`), built once per run from dglrun's
options by :func:`phase_inputs`: below the drivers, no step reads the options.

A phase's failure is a :class:`~launcher.console.PhaseError`, one line naming the phase, the
worker and the exit code.
"""

from __future__ import annotations

import dataclasses
import os
import resource
import shutil
import socket
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from chunkedgraph.job import PartitionJob
from launcher import checksums, programs
from launcher.console import Console, PhaseError, Refused, Report, mb, phase
from launcher.delivery.pull import Puller
from launcher.delivery.wire import TransferError, build_manifest, read_token
from launcher.options import Options, PartitionTransfer, Timeouts
from launcher.partition import mpirun, parmetis_modes
from launcher.partition import output as parts
from launcher.partition.output import WORKLOAD
from launcher.partition.request import EntryPoint, PartitionRequest, Ranks
from launcher.plans import memory as memplan
from launcher.plans import time as timeplan
from launcher.storage import keeping
from launcher.storage.layout import Storage
from launcher.training.train import OUTPUT, TrainingRequest
from launcher.workers import oom, refusal
from launcher.workers.hostfile import Host, HostfileError, ip_config, parse_hostfile
from launcher.workers.transport import PopenProc, Proc, Transport, stop_all, time_limit
from podcontract import (
    DATASET,
    DGL_API,
    DIST_PARMETIS,
    PARMETIS,
    STATUS_DELIVERY_BYTES,
    STATUS_DELIVERY_SECONDS,
    STATUS_MEMORY,
    STATUS_PARTITION_SECONDS,
    WATCHER_PARTITIONER,
)

# -- phase 1: partition -------------------------------------------------------------------


def check_entry_point(path: str | None, flag: str) -> str:
    """``path``, an entry point on this machine (PhaseError if it is not there)."""
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
    """Run a process on this machine, streaming its output; raise PhaseError if it fails
    (after telling ``console`` when the kernel killed it for memory), Refused if it refused a
    file it was to load (launcher.workers.refusal: its last line names the file)."""
    watch = oom.Watch()
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
        if watch.killed(code):
            console.killed_for_memory(label, oom.here())
        refused = refusal.describe(code, console.last_line(label), what)
        if refused is not None:  # (the job's next attempt would refuse the file again)
            raise Refused(refused)
        raise PhaseError(f"{what} exited with code {code}")


def mode_partitions_counts(opts: Options) -> bool:
    """Whether this run partitions for every count of an elastic job at once: the ParMETIS
    modes (distpart groups one partitioning into each count) with the cache to keep them."""
    return opts.partition_mode in (PARMETIS, DIST_PARMETIS) and opts.storage is not None


def partition_request(opts: Options) -> PartitionRequest:
    """The partition phase's one input, built once from dglrun's flags: what the partition
    step, the partition cache and distpart's ranks take (launcher.partition.request)."""
    return PartitionRequest(
        mode=opts.partition_mode,
        job=PartitionJob(
            graph_name=opts.graph_name,
            num_parts=opts.num_partitions,
            chunked=opts.chunked_graph,
            layout=opts.chunked_layout,
            balance_train=opts.balance_train,
            balance_edges=opts.balance_edges,
            feature_files=opts.training.out_of_core.enabled,
            counts=opts.partition_counts if mode_partitions_counts(opts) else (),
            partitioner=opts.partitioner,
            seed=opts.partition_seed,
        ),
        python=opts.python,
        workspace=opts.workspace,
        entry=EntryPoint(
            opts.partition_entry_point, opts.partition_args, opts.dataset_url, opts.partition_inputs
        ),
        ranks=Ranks(opts.mpirun, opts.mpirun_args, opts.num_ranks),
        timeout=opts.timeouts.partition,
        config_path=opts.partition_config_path,
    )


@dataclass(frozen=True)
class PartitionStep:
    """Phase 1's input: the request, the storage whose partition cache keeps what it makes
    (None: no cache), and the memory plan's input (which of an elastic job's other counts
    fit: :func:`fitting_counts`)."""

    request: PartitionRequest
    storage: Storage | None
    plan: memplan.PlanInput | None = None


@dataclass(frozen=True)
class PhaseInputs:
    """Every phase's input, built once per run from dglrun's options (:func:`phase_inputs`):
    only the drivers (this module and launcher/runs.py) read the options, and each step
    takes its own value from here."""

    plan: memplan.PlanInput  # the memory plan, before phase 1
    partition: PartitionStep  # phase 1
    transfer: PartitionTransfer  # phases 2 and 3
    timeouts: Timeouts  # phases 2-4 (phase 1's and 5's are in their requests)
    python: str  # the partition server's and the pulls' interpreter
    training: TrainingRequest  # phase 5 (Skip mode's one process)


def phase_inputs(opts: Options) -> PhaseInputs:
    """Each phase's value, from dglrun's flags (as this attempt counts its partitions)."""
    mode, training = opts.partition_mode, opts.training
    ranks = opts.num_ranks or (mpirun.default_ranks() if mode == PARMETIS else 1)
    shape = memplan.Shape(
        mode,
        workers=opts.num_partitions,
        parts=opts.num_partitions,
        ranks=ranks,
        processes=training.processes,
        out_of_core=training.out_of_core,
        batch_size=training.batch_size,
        partitioner=opts.partitioner,
    )
    chunked = opts.chunked_graph if mode != DGL_API else None
    plan = memplan.PlanInput(shape, opts.worker_memory_limit, chunked, opts.graph_size)
    return PhaseInputs(
        plan=plan,
        partition=PartitionStep(partition_request(opts), opts.storage, plan),
        transfer=opts.transfer,
        timeouts=opts.timeouts,
        python=opts.python,
        training=TrainingRequest(
            options=training,
            graph_name=opts.graph_name,
            python=opts.python,
            timeout=opts.timeouts.train,
            elastic=opts.global_batch is not None,
            storage=opts.storage,
            output=opts.workspace / OUTPUT,
        ),
    )


def partition(step: PartitionStep, console: Console, report: Report) -> parts.PartitionSet:
    """Phase 1 in this pod: the partitions, from the storage's cache when their inputs did
    not change (their files' checksums then in ``report.partition_files``)."""
    with phase(console, report, 1, "partition"):
        what = fitting_counts(step, _size_or_none(step), console)
        done = keeping.partition_cached(
            step.storage,
            what,
            console,
            report,
            lambda out: _partition_into(what, out, console, report),
        )
        report.partition_files = done.files
        console.say(f"  {done.pset.num_parts} partitions in {done.pset.config}")
    return done.pset


def _size_or_none(step: PartitionStep) -> memplan.GraphSize | None:
    """The graph's sizes as this pod sees them (None when it cannot tell)."""
    if step.plan is None or not step.request.job.counts:
        return None
    try:
        return step.plan.size()
    except memplan.PlanError:
        return None


def _partition_into(
    what: PartitionRequest, out_dir: Path, console: Console, report: Report
) -> parts.PartitionSet:
    """Run the partitioning (ParMETIS ranks, or the partition entry point) into ``out_dir``."""
    job = what.job
    if what.mode == PARMETIS:
        _empty(out_dir)
        parmetis_modes.partition_in_pod(what, out_dir, console, report)
    elif what.entry.script:
        script = check_entry_point(what.entry.script, "--partition-entry-point")
        _empty(out_dir)  # never ship a previous run's partitions
        argv = [
            what.python,
            script,
            "--graph_name",
            job.graph_name,
            "--workspace",
            str(what.workspace),
            "--rel_data_path",  # (the storage's cache is outside the workspace: ../...)
            os.path.relpath(out_dir, what.workspace),
            "--num_parts",
            str(job.num_parts),
        ]
        if job.balance_train:
            argv.append("--balance_train")
        if job.balance_edges:
            argv.append("--balance_edges")
        if what.entry.dataset_url:
            argv += ["--dataset_url", what.entry.dataset_url]
        argv += what.entry.args
        run_local_process(
            console,
            "partition",
            argv,
            {"OUTDATED_IGNORE": "1"},
            what.timeout,
            f"the partition entry point {script}",
        )
        # (the largest resident set of the processes dglrun waited for: the entry point)
        peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        report.partition["peak_rss_mb_per_rank"] = [round(peak, 1)]
        console.say(f"  peak memory of the partition entry point: {peak:.1f} MB")
    config = parts.find_config(out_dir, job.graph_name, what.config_path)
    if job.feature_files and what.mode == DGL_API:
        # (distpart writes them with each part)
        run_local_process(
            console,
            "partition",
            programs.argv(what.python, programs.OUT_OF_CORE, "export", str(config)),
            programs.local_env({**os.environ, "OUTDATED_IGNORE": "1"}),
            what.timeout,
            "the node features' .npy export (--out-of-core)",
        )
    return parts.load(config, job.num_parts)


def partition_on_workers(
    step: PartitionStep,
    transport: Transport,
    console: Console,
    report: Report,
    plan: Callable[[memplan.GraphSize, bool], None] | None = None,
) -> list[Host]:
    """Phases 1 and 2 of DistParMETIS: partition on the workers (nothing to deliver). The
    partitions the run recorded for this count are placed without reading the chunks (the
    memory plan takes the sizes recorded with them). Else the workers check their chunks;
    ``plan`` then gets the graph's sizes as they see them (the memory plan, which may refuse:
    before any rank starts); the partition cache places a partition set it holds, else the
    ranks run (for every count of an elastic job) and the cache keeps what they wrote."""
    hosts = transport.workers()
    with phase(console, report, 1, "partition"):
        what = step.request
        if not _place_recorded(step, transport, hosts, console, report, plan):
            hashed = step.storage is not None
            size, hashes = parmetis_modes.check_workers(what, transport, hosts, console, hashed)
            if plan is not None and size is not None:
                plan(size, True)
            what = fitting_counts(step, size, console)
            cached = keeping.DistCache.open(step.storage, what, hashes)
            if cached is None or not cached.place(transport, hosts, console, report):
                parmetis_modes.partition_with_mpi(what, transport, hosts, console, report)
                if cached is not None:
                    recorded = dataclasses.asdict(size) if size is not None else None
                    cached.store(transport, hosts, console, recorded)
    console.progress.record(
        STATUS_PARTITION_SECONDS, round(report.seconds.get("partition", 0.0), 1)
    )
    with phase(console, report, 2, "deliver"):
        console.say("  nothing to deliver: every worker wrote its own partition")
    return hosts


def _place_recorded(
    step: PartitionStep,
    transport: Transport,
    hosts: list[Host],
    console: Console,
    report: Report,
    plan: Callable[[memplan.GraphSize, bool], None] | None,
) -> bool:
    """The run's own partitions for this count, placed on the workers (the memory plan first,
    from the sizes recorded with them): False when the run recorded none, or they are gone."""
    found = keeping.DistCache.recorded(step.storage, step.request)
    if found is None:
        return False
    cached, size = found
    if plan is not None and size:
        plan(memplan.GraphSize(**size, source="the run's first partitioning"), False)
    console.say(
        f"  this run partitioned the graph for {len(hosts)} workers before: the workers' "
        "chunks are not read"
    )
    if cached.place(transport, hosts, console, report):
        return True
    report.memory = []  # (the graph is partitioned after all: planned again, with that step)
    return False


def fitting_counts(
    step: PartitionStep, size: memplan.GraphSize | None, console: Console
) -> PartitionRequest:
    """The request with the other counts (an elastic job's) whose memory plan fits the
    Worker's limit: a count that does not fit is not partitioned for (its attempt would be
    refused: the job waits for more workers, as today), and a line says so."""
    what = step.request
    others = what.job.every_count()[1:]
    if not others or size is None or step.plan is None:
        return what
    keep = []
    shape, limit = step.plan.shape, step.plan.limit
    for count in others:
        # this attempt's ranks write the count's parts; its own attempt only trains on them
        steps = (
            memplan.partition_step(size, dataclasses.replace(shape, parts=count), limit),
            memplan.train_step(size, dataclasses.replace(shape, workers=count, parts=count), limit),
        )
        worst = next((s for s in steps if not s.fits), None)
        if worst is None:
            keep.append(count)
            continue
        console.say(
            f"  {count} workers would not fit the Worker's memory limit ({worst.name} step: "
            f"{memplan.gib(worst.need)} of {memplan.gib(limit or 0)}): no partitions "
            "made for that count"
        )
    return dataclasses.replace(what, job=dataclasses.replace(what.job, counts=tuple(keep)))


def _empty(folder: Path) -> None:
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)


# -- the memory plan (before phase 1) ------------------------------------------------------


def plan_memory(
    what: memplan.PlanInput,
    console: Console,
    report: Report,
    *,
    check: bool = True,
    size: memplan.GraphSize | None = None,
    partitioning: bool = True,
) -> None:
    """Estimate every step's peak memory (for the graph ``size``, or as this dglrun sees the
    graph); with ``check``, fail at once (:class:`PlanError`) when one will not fit the worker
    pods' limit. Where the graph cannot be seen (the launcher of a job the partitioner pod
    partitioned) this says so and plans nothing."""
    try:
        size = size or what.size()
    except memplan.PlanError as e:
        # (a bad chunked graph: the partition phase checks every file and says which)
        if check:
            console.say(f"memory plan: skipped: {e}")
        return
    if size is None:
        if check:
            console.say(
                "memory plan: skipped: the graph's sizes are unknown (give dglrun "
                "--graph-size nodes=N,edges=E,node_bytes=B, or use a ParMETIS mode)"
            )
        return
    shape = what.shape
    limit = what.limit
    report.memory = memplan.plan(size, shape, limit)
    if not partitioning:  # (the run's cached partitions are placed: nothing is partitioned)
        report.memory = [s for s in report.memory if s.name != "partition"]
    where = "no memory limit set" if limit is None else f"limit {memplan.gib(limit)} per pod"
    console.say(f"memory plan for {size.describe()} ({where}):")
    console.say(memplan.table(report.memory, {}))
    if not partitioning:
        console.say("  (no partition step: the partitions are cached)")
    needed = memplan.workers_line(size, shape, limit) if partitioning else None
    if needed:
        console.say(needed)
    if partitioning:
        took = timeplan.estimate(size, shape)
        console.say(took.line())
        console.progress.expect(took)
    for step in report.memory:
        if step.smallest is not None:
            console.say(memplan.out_of_core_line(step, shape))
        if limit is not None and step.fits and step.need > memplan.WARN_FRACTION * limit:
            console.say(f"  warning: the {step.name} step is estimated close to the limit")
    console.progress.record(STATUS_MEMORY, memplan.status(report.memory, {}))
    if check:
        memplan.check(size, shape, report.memory)


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


def deliver_to_launcher(
    opts: Options, pset: parts.PartitionSet, console: Console, report: Report
) -> None:
    from launcher.workers.kubectl import KubectlTransport, deliver

    src = pset.root
    with phase(console, report, 2, "deliver"):
        expected = checksums.manifest(src)
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
            WATCHER_PARTITIONER,
            str(opts.workspace / DATASET),
            expected,
            timeout=opts.timeouts.deliver,
        )
        console.say(f"  {mb(checksums.total_bytes(expected))} verified in {pod}")


def deliver_locally(src: Path, dst: Path, console: Console, report: Report) -> None:
    with phase(console, report, 2, "deliver"):
        expected = checksums.manifest(src)
        if dst.exists():
            shutil.rmtree(dst)
        shutil.copytree(src, dst)
        got = checksums.manifest(dst)
        if got != expected:
            raise PhaseError("the copied dataset differs from the partitioner's")
        console.say(f"  {mb(checksums.total_bytes(expected))} verified in {dst}")


def serve(
    transfer: PartitionTransfer,
    timeout: float,
    pset: parts.PartitionSet,
    console: Console,
    report: Report,
) -> None:
    """Phase 2 over HTTP: serve the parts until the launcher says every worker has its own,
    for ``timeout`` seconds at most (0: no limit)."""
    from launcher.delivery.server import PartitionServer, serve_and_wait

    # the partitioner's runtime includes serving: the partition time goes to the status
    console.progress.record(
        STATUS_PARTITION_SECONDS, round(report.seconds.get("partition", 0.0), 1)
    )
    with phase(console, report, 2, "deliver"):
        token = read_token(transfer.token_file)
        manifest = build_manifest(pset, report.partition_files or None)
        if report.partition.get("reused"):  # the launcher says so in its log
            manifest["reused"] = report.partition["reused"]
        total = sum(int(f["size"]) for f in manifest["files"].values())

        def started(server: PartitionServer) -> None:
            console.say(
                f"  serving {mb(total)} ({len(manifest['files'])} files) on :{server.port}; "
                "each worker pulls its own part"
            )

        stats = serve_and_wait(
            pset.root,
            manifest,
            token,
            port=transfer.port,
            timeout=timeout or None,
            max_rate=transfer.max_rate * 1e6,
            on_start=started,
        )
        if not stats.told_done:
            console.say(
                f"  warning: no launcher said the workers have their parts within "
                f"{timeout:.0f}s; every file was served to its end: stopping"
            )
        console.say(f"  {mb(stats.bytes_sent)} served to {len(stats.peers)} pods")


@dataclass
class Source:
    """Where the workers pull their parts from (``--partition-transfer http``)."""

    url: str
    token_file: str
    done: Callable[[], None]  # tells the server every worker has its part
    server: str  # who serves, for messages: "pod <name>"
    manifest: dict[str, Any] = field(default_factory=dict)  # what the server offers

    def part_bytes(self) -> int:
        """The bytes all workers pull (each gets the partition config and its own part)."""
        files = self.manifest.get("files") or {}
        return sum(
            int(files[rel]["size"])
            for rels in (self.manifest.get("parts") or {}).values()
            for rel in rels
        )


def partition_server(transfer: PartitionTransfer, console: Console) -> Source:
    """The partitioner pod's server, from the partfile the operator keeps up to date."""
    partfile = transfer.partfile
    try:
        hosts = parse_hostfile(Path(partfile).read_text(), partfile)
    except OSError as e:
        raise PhaseError(f"cannot read the partfile {partfile}: {e.strerror}") from e
    if not hosts:
        raise PhaseError(f"the partfile {partfile} names no partitioner pod with an IP")
    url = f"http://{hosts[0].ip}:{transfer.port}"
    token_file = transfer.token_file

    def done() -> None:
        Puller(url, read_token(token_file), on_retry=_say_to(console)).done()

    return Source(url, token_file, done, f"pod {hosts[0].name}")


def _say_to(console: Console) -> Callable[[str], None]:
    return lambda message: console.say(f"  {message}")


def fetch_partition_config(
    what: PartitionRequest, source: Source, console: Console
) -> parts.PartitionSet:
    """The partition config alone, from the server (the parts go to the workers), into the
    request's workspace."""
    puller = Puller(source.url, read_token(source.token_file), on_retry=_say_to(console))
    manifest = puller.manifest()
    source.manifest = manifest
    dest = what.workspace / DATASET
    if dest.exists():
        shutil.rmtree(dest)
    puller.pull_files(manifest, [str(manifest["config"])], dest)
    return parts.load(dest / str(manifest["config"]), what.job.num_parts, check_files=False)


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
        _check_workers(pset, hosts, transport, train_script)
        for i, host in enumerate(hosts):
            remote = f"{transport.workspace(host)}/{WORKLOAD}"
            part_dir = pset.part_dir(i)
            transport.copy_to(host, pset.config, f"{remote}/{pset.config.name}")
            transport.copy_to(host, pset.root / part_dir, f"{remote}/{part_dir}")
            expected = {
                k: v
                for k, v in checksums.manifest(pset.root).items()
                if k == pset.config.name or k.startswith(f"{part_dir}/")
            }
            got = transport.manifest(host, remote)
            bad = [k for k, v in expected.items() if got.get(k) != v]
            if bad:
                raise PhaseError(f"{host.name}: {bad[0]} did not arrive intact")
            size = checksums.total_bytes(expected)
            report.dispatch_bytes += size
            console.say(f"  part {i} -> {host.name} ({host.ip}): {mb(size)} verified")
            if time.monotonic() > deadline:
                raise PhaseError(f"timed out after {timeout:.0f}s")
    return hosts


def _check_workers(
    pset: parts.PartitionSet, hosts: list[Host], transport: Transport, train_script: str
) -> None:
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


def dispatch_pull(
    pset: parts.PartitionSet,
    source: Source,
    transport: Transport,
    console: Console,
    report: Report,
    timeout: float,
    train_script: str,
    python: str,
) -> list[Host]:
    """Phase 3 over HTTP: every worker pulls its own part from ``source`` at once, with
    ``python`` (dglrun only starts the pulls and shows their progress: nothing passes
    through this pod)."""
    hosts = transport.workers()
    with phase(console, report, 3, "dispatch"), time_limit(transport, timeout) as deadline:
        _check_workers(pset, hosts, transport, train_script)
        started = time.monotonic()
        pulls: list[tuple[Host, Proc]] = []
        try:
            for i, host in enumerate(hosts):
                argv = [*programs.argv(python, programs.PULL), "--url", source.url, "--part",
                        str(i), "--dest", f"{transport.workspace(host)}/{WORKLOAD}",
                        "--token-file", source.token_file]  # fmt: skip
                pulls.append((host, transport.start(host, argv, {}, f"{host.name}/pull")))
            _wait_pulls(pulls, deadline, timeout, console, source.server)
        except BaseException:
            stop_all(proc for _, proc in pulls)
            raise
        took = time.monotonic() - started
        try:
            source.done()
        except (TransferError, PhaseError) as e:  # the parts are in place: only a warning
            console.say(f"  warning: could not tell {source.server} to stop serving: {e}")
        total = source.part_bytes()
        report.dispatch_bytes += total
        console.progress.record(STATUS_DELIVERY_BYTES, total)
        console.progress.record(STATUS_DELIVERY_SECONDS, round(took, 3))
        console.say(
            f"  {mb(total)} pulled by {len(hosts)} workers from {source.url} in {took:.1f}s "
            f"({total / max(took, 1e-6) / 1e6:.0f} MB/s), every file's SHA-256 verified"
        )
    return hosts


def _wait_pulls(
    pulls: list[tuple[Host, Proc]],
    deadline: float,
    timeout: float,
    console: Console,
    server: str,
) -> None:
    pending = list(pulls)
    while pending:
        for host, proc in list(pending):
            code = proc.poll()
            if code is None:
                continue
            pending.remove((host, proc))
            if code != 0:
                last = console.last_line(f"{host.name}/pull")
                why = last.removeprefix("pull: error: ") if last else f"exit code {code}"
                raise PhaseError(f"{host.name} could not pull its part from {server}: {why}")
        if pending and time.monotonic() > deadline:
            names = ", ".join(h.name for h, _ in pending)
            raise PhaseError(f"timed out after {timeout:.0f}s ({names} still pulling)")
        time.sleep(0.05)


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
