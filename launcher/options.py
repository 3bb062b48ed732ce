"""dglrun's options: :class:`Options`, parsed from its flags and the environment the operator
gives its pod (``parse``).

In a DGLJob the operator sets the pod contract's variables (podcontract): which part of the
work this pod does (``DGL_OPERATOR_PHASE_ENV``), the files it mounts (hostfile, partfile,
leadfile, kubexec.sh, kubectl), the DGLJob it reports to, and defaults of flags from the job's
spec (partition mode, chunked graph, partition transfer, storage, the workers' memory limit).
Flags given on the command line win over those defaults. A usage error exits 2 with
argparse's message.

Each option is declared once, on its field of :class:`Options` (:func:`option`): its flag,
the operator's variable that gives its default (a ``podcontract.settings`` declaration, which
the operator writes with), type, default, help and group. The parser (:func:`build_parser`)
and the values (:func:`parse`) are made from the fields (``podprogram.flagfields``); adding an
option is adding a field, and using it.

The options a step takes together are a group: a nested field whose value is the step's own
dataclass, its fields' flags declared here (``training``: phase 5's
:class:`~launcher.training.train.Training`, holding the memory plan's ``Processes`` and
``OutOfCore``; ``transfer``: :class:`PartitionTransfer`; ``timeouts``: :class:`Timeouts`). The steps
take the groups whole (launcher/phases.py): nothing copies their fields one by one.

Standard library only, like the rest of dglrun's process: ``dglrun --help`` is instant.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import shlex
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from chunkedgraph.job import KAMINPAR, PARTITIONERS
from launcher.plans.memory import (
    GraphSize,
    OutOfCore,
    PlanError,
    Processes,
    parse_bytes,
    parse_graph_size,
)
from launcher.report.progress import ProgressTarget
from launcher.storage.layout import Storage, check_run_name, claim_mount
from launcher.training.train import Training
from podcontract import (
    AGENT_PORT,
    CHUNKED_LAYOUTS,
    DATASET,
    DGL_API,
    DIST_PARMETIS,
    OUT_OF_CORE_ORDERS,
    PARMETIS,
    PARTITION_MODES,
    PHASE_LAUNCHER_WORKLOAD,
    PHASE_PARTITIONER,
    SHARED,
    STORAGE_DIR,
    TRANSFER_KUBECTL,
    TRANSFER_PORT,
    TRANSFER_TOKEN_PATH,
    TRANSFERS,
    WORKSPACE,
)
from podcontract import settings as pc
from podcontract.quantity import parse_quantity
from podcontract.settings import Setting
from podprogram.argtypes import non_negative_int, number_type, positive_int, seconds
from podprogram.flagfields import Flag, add_flags, declare, flag, nested, values

# argparse's groups of flags (dglrun --help)
GRAPH = "graph and partitioning"
TRAINING = "training"
WHERE = "where and how"
TIMEOUTS = "timeouts (seconds, 0 = none)"


def _argtype(read: Callable[[str], object]) -> Callable[[str], object]:
    """An argparse type from a reader whose ValueError says what is wrong (a setting's, one
    of memplan's parsers)."""

    def convert(value: str) -> object:
        try:
            return read(value)
        except (ValueError, PlanError) as e:
            raise argparse.ArgumentTypeError(str(e)) from None

    return convert


def option(*names: str, setting: Setting[Any] | None = None, **how: Any) -> Any:
    """A field of :class:`Options` and how it is set: the flag ``names`` (podprogram's
    :func:`~podprogram.flagfields.flag`), or without names the variable alone. With the
    operator's ``setting``, its variable is the default, read as the setting reads it (unless
    the option gives its own ``type``), and so is the setting's default; ``{env}`` in the help
    names the variable."""
    if setting is not None:
        how["env"] = setting.env
        how.setdefault("default", setting.default)
        if how.get("action") == "store_true" or not names:
            how["read_env"] = setting.read
        elif "choices" not in how:
            how.setdefault("type", _argtype(setting.read))
        if how.get("help"):
            how["help"] = how["help"].format(env=f"${setting.env}")
    return flag(*names, **how)


def variable(setting: Setting[Any]) -> Flag:
    """The Flag of a field set by the operator's ``setting`` alone (a field declared apart)."""
    return declare(env=setting.env, read_env=setting.read)


def _cache_limit(value: str) -> int:
    """A quantity of bytes (``20Gi``, ``500G``, ``0``: only the partitions in use stay)."""
    return int(parse_quantity(pc.quantity(value)))


def _port(value: str) -> int:
    """A TCP port (1 to 65535)."""
    port = positive_int(value)
    if port > 65535:
        raise argparse.ArgumentTypeError(f"must be at most 65535 (a port), got {port}")
    return port


def _shell_words(text: str) -> tuple[str, ...]:
    return tuple(shlex.split(text))  # (a ValueError: a usage error naming the flag)


def _comma_paths(given: list[str]) -> tuple[str, ...]:
    return tuple(x for each in given for x in each.split(",") if x)


@dataclass(frozen=True, kw_only=True)
class PartitionTransfer:
    """How the partitions travel from the pod that made them to the workers (phases 2 and 3,
    launcher/phases.py): over HTTP (the partition server's port, the job's token, each
    worker connection's rate cap; the partfile names the partitioner pod that serves) or by
    ``kubectl cp``. A group of :class:`Options`, passed whole to the phases."""

    mode: str = option(
        "--partition-transfer",
        group=WHERE,
        setting=pc.PARTITION_TRANSFER,
        choices=TRANSFERS,
        help="http: workers pull their parts straight from the pod that holds them; kubectl: "
        "kubectl cp through the API server, via the launcher (default: {env}, else http)",
    )
    port: int = option(
        "--transfer-port",
        group=WHERE,
        type=positive_int,
        default=TRANSFER_PORT,
        help="http: the partition server's port",
    )
    # MB/s per worker connection; 0: unlimited
    max_rate: float = option(
        "--transfer-max-rate",
        group=WHERE,
        type=number_type(float, "a number of MB/s", 0.0),
        default=0.0,
        metavar="MB_PER_S",
        help="http: cap each worker's pull at this many MB/s (0 = no cap), to spare a shared "
        "network",
    )
    token_file: str = option(
        "--transfer-token-file",
        group=WHERE,
        default=TRANSFER_TOKEN_PATH,
        help="the job's token (the operator mounts its Secret here): the partition server and "
        "the workers' agents ask it",
    )
    # the partitioner pod, whose server the launcher's workers pull from
    partfile: str = option(setting=pc.PARTFILE_PATH)


@dataclass(frozen=True, kw_only=True)
class Timeouts:
    """Each phase's seconds (0: none): a group of :class:`Options`."""

    partition: float = option("--partition-timeout", group=TIMEOUTS, type=seconds, default=0.0)
    deliver: float = option("--deliver-timeout", group=TIMEOUTS, type=seconds, default=1800.0)
    dispatch: float = option("--dispatch-timeout", group=TIMEOUTS, type=seconds, default=1800.0)
    configure: float = option("--configure-timeout", group=TIMEOUTS, type=seconds, default=300.0)
    train: float = option("--train-timeout", group=TIMEOUTS, type=seconds, default=0.0)


@dataclass(frozen=True, kw_only=True)
class Options:
    """dglrun's options: each field declares, once, the flag or variable that sets it (its
    metadata: :func:`option`), or is a group of them (:func:`~podprogram.flagfields.nested`),
    from which :func:`build_parser` makes the parser and :func:`parse` the values; the rest
    (``storage``, ``global_batch``, ``count_from_job``) :func:`parse` derives from them."""

    # -- graph and partitioning
    graph_name: str = option(
        "-g", "--graph-name", group=GRAPH, required=True, help="graph name (partition JSON name)"
    )
    num_partitions: int = option("--num-partitions", group=GRAPH, type=positive_int, default=1)
    partition_entry_point: str | None = option(
        "--partition-entry-point",
        group=GRAPH,
        default=None,
        help="script called with --graph_name "
        "--workspace --rel_data_path --num_parts [--balance_train] [--balance_edges]",
    )
    partition_mode: str = option(
        "--partition-mode",
        group=GRAPH,
        setting=pc.PARTITION_MODE,
        choices=PARTITION_MODES,
        help="DGL-API: the partition entry point; ParMETIS: MPI ranks in this pod; "
        "DistParMETIS: one MPI rank per worker (default: {env}, else DGL-API)",
    )
    chunked_graph: str | None = option(
        "--chunked-graph",
        group=GRAPH,
        setting=pc.CHUNKED_GRAPH,
        help="the ParMETIS modes' input: a chunked graph's folder or metadata.json, as the "
        "partitioning pods see it (default: {env})",
    )
    chunked_layout: str = option(
        "--chunked-layout",
        group=GRAPH,
        setting=pc.CHUNKED_LAYOUT,
        choices=CHUNKED_LAYOUTS,
        help="Shared: every rank sees every chunk; PerWorker (DistParMETIS): worker i holds "
        "only its own chunks (default: {env}, else Shared)",
    )
    num_ranks: int | None = option(
        "--num-ranks",
        group=GRAPH,
        type=positive_int,
        default=None,
        help="ParMETIS: MPI ranks in the partitioner pod (default: its CPU limit, at least 2); "
        "DistParMETIS always runs one per worker",
    )
    partitioner: str = option(
        "--partitioner",
        group=GRAPH,
        choices=PARTITIONERS,
        default=KAMINPAR,
        help="the ParMETIS modes' partitioner: KaMinPar on the first rank (default), or "
        "PT-Scotch across the ranks ($DGL_PARMETIS_LIB, when set, names a ParMETIS used instead)",
    )
    mpirun: str = option(
        "--mpirun", group=GRAPH, default="mpirun", help="Open MPI's mpirun (the ParMETIS modes)"
    )
    mpirun_args: tuple[str, ...] = option(
        "--mpirun-args",
        group=GRAPH,
        default="",
        convert=_shell_words,
        help="extra mpirun arguments (one shell-quoted string), e.g. '--mca btl_tcp_if_include "
        "eth0'",
    )
    # the memory plan's input in DGL-API mode
    graph_size: GraphSize | None = option(
        "--graph-size",
        group=GRAPH,
        type=_argtype(parse_graph_size),
        default=None,
        metavar="nodes=N,edges=E[,node_bytes=B]",
        help="the graph's sizes (directed edges; node data bytes per node), for the memory "
        "plan in DGL-API mode (the ParMETIS modes read them from the chunked graph)",
    )
    # bytes; None: no limit known
    worker_memory_limit: int | None = option(
        "--worker-memory-limit",
        group=GRAPH,
        setting=pc.WORKER_MEMORY_LIMIT,
        type=_argtype(parse_bytes),
        metavar="QUANTITY",
        help="the worker and partitioner pods' memory limit (e.g. 8Gi), which the memory plan "
        "checks every step against (default: {env}, set by the operator from the Worker "
        "template)",
    )
    # what the cache key hashes
    partition_inputs: tuple[str, ...] = option(
        "--partition-inputs",
        group=GRAPH,
        action="append",
        default_factory=list,
        convert=_comma_paths,
        metavar="PATH[,PATH]",
        help="DGL-API with --storage: the files or folders the partition entry point reads "
        "(the graph); their content is part of the cached partitions' key, which lets "
        "--share-partitions reuse them across jobs (repeatable)",
    )
    # ParMETIS' and PT-Scotch's seed; KaMinPar's (0: each partitioner's own default)
    partition_seed: int = option(
        "--partition-seed",
        group=GRAPH,
        type=non_negative_int,
        default=0,
        help="the ParMETIS modes: the partitioner's random seed (0: its default); another seed "
        "makes other partitions, and another entry in the partition cache",
    )
    balance_train: bool = option("--balance-train", group=GRAPH, action="store_true", default=False)
    balance_edges: bool = option("--balance-edges", group=GRAPH, action="store_true", default=False)
    partition_config_path: str | None = option(
        "--partition-config-path",
        group=GRAPH,
        default=None,
        help="partition JSON (default <graph>.json)",
    )
    dataset_url: str | None = option(
        "--dataset-url",
        group=GRAPH,
        default=None,
        help="passed to the partition entry point as --dataset_url",
    )
    partition_args: tuple[str, ...] = option(
        "--partition-args",
        group=GRAPH,
        default="",
        convert=_shell_words,
        help="extra arguments for the partition entry point (one shell-quoted string)",
    )
    # -- training: phase 5's options (the memory plan's too: the processes, out of core)
    training: Training = nested(
        Training,
        {
            "script": option(
                "--train-entry-point",
                group=TRAINING,
                default=None,
                help="script run by every DGL server and trainer with "
                "--graph_name --ip_config --part_config --num_epochs --batch_size",
            ),
            "num_epochs": option("--num-epochs", group=TRAINING, type=positive_int, default=1),
            # each trainer's (an elastic attempt's: its share of the global batch, global_batch)
            "batch_size": option("--batch-size", group=TRAINING, type=positive_int, default=1000),
            # DGL's processes on each worker
            "processes": nested(
                Processes,
                {
                    "trainers": option(
                        "--num-trainers",
                        group=TRAINING,
                        type=positive_int,
                        default=1,
                        help="trainers per worker",
                    ),
                    "samplers": option(
                        "--num-samplers",
                        group=TRAINING,
                        type=non_negative_int,
                        default=0,
                        help="samplers per trainer",
                    ),
                    "servers": option(
                        "--num-servers",
                        group=TRAINING,
                        type=positive_int,
                        default=1,
                        help="DGL servers per worker",
                    ),
                },
            ),
            "args": option(
                "--train-args",
                group=TRAINING,
                default="",
                convert=_shell_words,
                help="extra arguments for the training entry point (one shell-quoted string)",
            ),
            "master_port": option(
                "--master-port",
                group=TRAINING,
                type=positive_int,
                default=29500,
                help="torch rendezvous port",
            ),
            # node features memory-mapped from the workers' disk (outofcore), and the share
            # of them the memory plan counts as page cache
            "out_of_core": nested(
                OutOfCore,
                {
                    "enabled": option(
                        "--out-of-core",
                        group=TRAINING,
                        setting=pc.OUT_OF_CORE,
                        action="store_true",
                        help="keep each worker's node features on its local disk, "
                        "memory-mapped, instead of in memory: partitions get .npy feature "
                        "files and the DGL servers and trainers run under python -m "
                        "outofcore (DGL 2.1; default: {env})",
                    ),
                    "page_cache_fraction": option(
                        "--page-cache-fraction",
                        group=TRAINING,
                        setting=pc.PAGE_CACHE_FRACTION,
                        metavar="F",
                        help="--out-of-core: the share of a worker's node features the "
                        "memory plan counts as page cache, between 0 and 1 (default: {env}, "
                        f"else {pc.PAGE_CACHE_FRACTION.default})",
                    ),
                    "order": option(
                        "--out-of-core-order",
                        group=TRAINING,
                        setting=pc.OUT_OF_CORE_ORDER,
                        choices=list(OUT_OF_CORE_ORDERS),
                        help="--out-of-core: Exact reads the rows each minibatch pulls (the "
                        "in-memory run's losses); Buffer trains MariusGNN's way, the "
                        "minibatches sampled inside a buffer of whole partitions read in "
                        "sequence (outofcore.buffer; default: {env}, "
                        f"else {pc.OUT_OF_CORE_ORDER.default})",
                    ),
                },
            ),
        },
    )
    # -- where and how
    workspace: Path = option(
        "--workspace",
        "--worksapce",
        group=WHERE,
        default=Path(WORKSPACE),
        convert=Path,
        help="workspace folder (the original's misspelling --worksapce works too)",
    )
    # results, checkpoints, cached partitions (spec.storage): these four make ``storage``
    storage_dir: str | None = option(
        "--storage",
        group=WHERE,
        setting=pc.STORAGE,
        metavar="DIR",
        help="where results, checkpoints and cached partitions outlive the pods (default: "
        "{env}, set by the operator from spec.storage); it must exist, except below "
        f"{STORAGE_DIR} (a DGLJob's claim), where only {STORAGE_DIR} must and the rest is made",
    )
    run_name: str = option(
        "--run-name",
        group=WHERE,
        setting=pc.RUN_NAME,
        type=_argtype(check_run_name),
        help="this run's folder under --storage (default: {env}, else local)",
    )
    share_partitions: bool = option(
        "--share-partitions",
        group=WHERE,
        setting=pc.SHARE_PARTITIONS,
        action="store_true",
        help="reuse partitions another run cached on --storage from the same inputs (default: "
        "{env}; without it only this run's restarts reuse them)",
    )
    cache_limit: int | None = option(
        "--cache-limit",
        group=WHERE,
        setting=pc.CACHE_LIMIT,
        type=_argtype(_cache_limit),
        metavar="QUANTITY",
        help="the bytes the partition cache on --storage may hold over every graph (e.g. 20Gi): "
        "beyond it the least recently used partition sets go, never the one in use (default: "
        "{env}, set by the operator from spec.storage.cacheLimit, else half the size of the "
        "filesystem the cache is on)",
    )
    # an elastic job's worker counts: the ParMETIS modes partition for all of them at once;
    # () when not elastic
    partition_counts: tuple[int, ...] = option(
        "--partition-counts",
        group=WHERE,
        setting=pc.PARTITION_COUNTS,
        default=(),
        metavar="MIN-MAX",
        help="an elastic job's worker counts: in the ParMETIS modes the first partitioning "
        "writes the partitions of every count in the range (one partitioning, grouped into "
        "each) and caches them on --storage, so that an attempt with another count partitions "
        "nothing (default: {env}, set by the operator from spec.elasticPolicy)",
    )
    # the entry points' interpreter (parse: this one locally, python3 in pods)
    python: str = option(
        "--python",
        group=WHERE,
        env="DGLRUN_PYTHON",
        default=None,
        help="interpreter for the entry points (default: $DGLRUN_PYTHON, else this "
        "one locally and python3 in pods)",
    )
    transport: str = option(
        "--transport",
        group=WHERE,
        env="DGLRUN_TRANSPORT",
        choices=["kubectl", "local"],
        default="kubectl",
    )
    local_workers: int | None = option(
        "--local-workers",
        group=WHERE,
        type=positive_int,
        default=None,
        help="local transport: workers (default: --num-partitions)",
    )
    local_root: Path | None = option(
        "--local-root",
        group=WHERE,
        default=None,
        convert=Path,
        help="local transport: where worker filesystems live "
        "(default: a folder under the workspace)",
    )
    keep_local: bool = option(
        "--keep-local",
        group=WHERE,
        action="store_true",
        default=False,
        help="keep the local workers' files",
    )
    # each local worker's /dev/shm (tmpfs size=)
    local_shm_size: str = option(
        "--local-shm-size",
        group=WHERE,
        default="2g",
        metavar="SIZE",
        help="local transport: each worker's /dev/shm, as tmpfs's size= (e.g. 8g; DGL's "
        "servers keep the partition there, its node features unless --out-of-core)",
    )
    # the port every worker's agent serves on (workeragent/), at the hostfile's IPs
    agent_port: int = option(
        "--agent-port",
        group=WHERE,
        type=_port,
        default=AGENT_PORT,
        metavar="PORT",
        help="the workers' agents' port",
    )
    # how the partitions travel to the workers (phases 2 and 3)
    transfer: PartitionTransfer = nested(PartitionTransfer)
    # -- timeouts
    timeouts: Timeouts = nested(Timeouts)
    # -- the operator's variables alone
    # which part of the job this pod does: "" (the launcher), or PHASE's
    phase: str = option(setting=pc.PHASE)
    kubexec: str = option(setting=pc.KUBEXEC_PATH)
    hostfile: str = option(setting=pc.HOSTFILE_PATH)
    leadfile: str = option(setting=pc.LEADFILE_PATH)
    kubectl: str = option(setting=pc.KUBECTL_PATH)
    in_dgljob: bool = option(setting=pc.OPERATOR)  # a pod of a DGLJob with workers
    # an elastic DGLJob's attempt, and its count of workers once they are chosen (parse:
    # num_partitions, global_batch, count_from_job)
    elastic: bool = option(setting=pc.ELASTIC)
    elastic_workers: int | None = option(setting=pc.NUM_PARTITIONS)
    # the DGLJob dglrun reports its progress and Events to
    job: ProgressTarget = nested(
        ProgressTarget,
        {
            "name": variable(pc.JOB_NAME),
            "uid": variable(pc.JOB_UID),
            "namespace": variable(pc.JOB_NAMESPACE),
            "attempt": variable(pc.ATTEMPT),
        },
    )
    # -- made by parse from the above
    storage: Storage | None = None  # from --storage, --run-name, --share-partitions, --cache-limit
    # an elastic DGLJob's attempt: --batch-size as given, the global batch of a step, which
    # batch_size (each trainer's) divides among the attempt's trainers; None: not elastic
    global_batch: int | None = None
    # an elastic DGLJob's partitioner: the count is the attempt's, read from the job's status
    count_from_job: bool = False


def build_parser(env: Mapping[str, str] | None = None) -> argparse.ArgumentParser:
    """dglrun's flags (:class:`Options`' fields); defaults that the operator sets through the
    pod's env come from ``env`` (default: this process's environment)."""
    p = argparse.ArgumentParser(
        prog="dglrun",
        description="DGL workflow on DGL Operator pods: partition, dispatch, train.",
        allow_abbrev=False,
    )
    add_flags(p, Options, os.environ if env is None else env)
    return p


def parse(argv: Sequence[str] | None = None, env: dict[str, str] | None = None) -> Options:
    env = dict(os.environ if env is None else env)
    parser = build_parser(env)
    given = values(Options, parser.parse_args(argv), env, parser)
    a = argparse.Namespace(**given)
    phase = a.phase
    _elastic(a)
    mode = a.partition_mode
    needs_partition = a.transport == "local" or phase == PHASE_PARTITIONER
    if (
        mode == DGL_API
        and needs_partition
        and not a.partition_entry_point
        and not a.partition_config_path
    ):
        parser.error("--partition-entry-point is required to partition the graph")
    if mode != DGL_API and phase != PHASE_LAUNCHER_WORKLOAD and not a.chunked_graph:
        parser.error(
            f"--chunked-graph is required with --partition-mode {mode} (in a DGLJob the operator "
            "sets it from spec.chunkedGraph.path)"
        )
    if mode == PARMETIS and a.chunked_layout != SHARED:
        parser.error(
            f"--chunked-layout {a.chunked_layout}: ParMETIS runs every rank in one pod, which "
            "sees the whole chunked graph; use Shared (PerWorker is for DistParMETIS)"
        )
    if mode == DIST_PARMETIS and phase == PHASE_PARTITIONER:
        parser.error("--partition-mode DistParMETIS partitions on the workers: no partitioner pod")
    training = a.training
    if phase != PHASE_PARTITIONER and not training.script:
        parser.error("--train-entry-point is required")
    if training.out_of_core.enabled and training.processes.samplers:
        parser.error(
            f"--out-of-core with --num-samplers {training.processes.samplers}: sampler "
            "processes are spawned by DGL without the out-of-core patch; use --num-samplers 0"
        )
    order = training.out_of_core.order
    if order != pc.OUT_OF_CORE_ORDER.when_unset and not training.out_of_core.enabled:
        parser.error(
            f"--out-of-core-order {order}: an order of out-of-core reads; add --out-of-core"
        )
    if (
        a.in_dgljob
        and a.transport == "kubectl"
        and phase != PHASE_LAUNCHER_WORKLOAD
        and a.transfer.mode == TRANSFER_KUBECTL
        and a.workspace != Path(WORKSPACE)
    ):
        parser.error(
            f"--workspace {a.workspace}: in a DGLJob the partitions travel through the volume "
            f"the operator mounts at {WORKSPACE}/{DATASET}; leave --workspace at {WORKSPACE}"
        )
    a.python = a.python or (sys.executable if a.transport == "local" or phase else "python3")
    if a.partition_inputs and mode != DGL_API:
        parser.error(
            "--partition-inputs: only DGL-API needs it (the ParMETIS modes' cache key covers "
            "the chunked graph's files)"
        )
    if a.storage_dir:
        root = Path(a.storage_dir)
        a.storage = Storage(
            root, a.run_name, a.share_partitions, claim_mount(root), cache_limit=a.cache_limit
        )
    elif a.cache_limit is not None:
        parser.error("--cache-limit: the partition cache is on --storage, which is not given")
    if a.partition_counts and a.storage is None:
        parser.error(
            "--partition-counts: the other counts' partitions are kept in the partition cache "
            "on --storage, which is not given"
        )
    return Options(**vars(a))


def _elastic(a: argparse.Namespace) -> None:
    """An elastic DGLJob's attempt (the operator's env): as many partitions as the attempt
    has workers, whatever --num-partitions says, and --batch-size as the global batch of a
    step: each trainer takes ``batch_size // (workers x trainers per worker)`` (at least 1),
    so that the learning rate means the same at every count. Without the count (the
    partitioner, made before the workers are chosen), it is read from the job's status."""
    a.global_batch = None
    a.count_from_job = False
    if a.elastic_workers is not None:
        a.num_partitions = a.elastic_workers
    if not a.elastic:
        return
    if a.elastic_workers is None:
        a.count_from_job = True
        return
    given = a.training
    a.global_batch = given.batch_size
    share = max(1, given.batch_size // (a.num_partitions * given.processes.trainers))
    a.training = dataclasses.replace(given, batch_size=share)
