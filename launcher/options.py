"""dglrun's options: :class:`Options`, parsed from its flags and the environment the operator
gives its pod (``parse``).

In a DGLJob the operator sets the pod contract's variables (podcontract): which part of the
work this pod does (``DGL_OPERATOR_PHASE_ENV``), the files it mounts (hostfile, partfile,
leadfile, kubexec.sh, kubectl), the DGLJob it reports to, and defaults of flags from the job's
spec (partition mode, chunked graph, partition transfer, storage, the workers' memory limit).
Flags given on the command line win over those defaults. A usage error exits 2 with
argparse's message.

Standard library only, like the rest of dglrun's process: ``dglrun --help`` is instant.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from chunkedgraph.job import KAMINPAR, PARTITIONERS
from launcher.plans.memory import GraphSize, PlanError, parse_bytes, parse_graph_size
from launcher.report.progress import ProgressTarget
from launcher.storage.layout import Storage, check_run_name, claim_mount
from podcontract import (
    CACHE_LIMIT_ENV,
    CHUNKED_GRAPH_ENV,
    CHUNKED_LAYOUT_ENV,
    CHUNKED_LAYOUTS,
    DATASET,
    DEFAULT_PAGE_CACHE_FRACTION,
    DGL_API,
    DIST_PARMETIS,
    ELASTIC_ENV,
    ELASTIC_ON,
    HOSTFILE_PATH,
    HOSTFILE_PATH_ENV,
    JOB_NAME_ENV,
    JOB_NAMESPACE_ENV,
    JOB_UID_ENV,
    KUBECTL_PATH,
    KUBECTL_PATH_ENV,
    KUBEXEC_PATH,
    KUBEXEC_PATH_ENV,
    LEADFILE_PATH,
    LEADFILE_PATH_ENV,
    NUM_PARTITIONS_ENV,
    OPERATOR_ENV,
    OPERATOR_ENV_ON,
    OUT_OF_CORE_ENV,
    OUT_OF_CORE_ON,
    PAGE_CACHE_FRACTION_ENV,
    PARMETIS,
    PARTFILE_PATH,
    PARTFILE_PATH_ENV,
    PARTITION_COUNTS_ENV,
    PARTITION_MODE_ENV,
    PARTITION_MODES,
    PARTITION_TRANSFER_ENV,
    PHASE_ENV,
    PHASE_LAUNCHER_WORKLOAD,
    PHASE_PARTITIONER,
    RUN_NAME_ENV,
    SHARE_PARTITIONS_ENV,
    SHARE_PARTITIONS_ON,
    SHARED,
    STORAGE_DIR,
    STORAGE_ENV,
    TRANSFER_HTTP,
    TRANSFER_KUBECTL,
    TRANSFER_PORT,
    TRANSFER_TOKEN_PATH,
    TRANSFERS,
    WORKER_MEMORY_LIMIT_ENV,
    WORKSPACE,
)
from podcontract.quantity import parse_quantity
from podprogram.argtypes import non_negative_int, number_type, positive_int, seconds


@dataclass(frozen=True)
class Options:
    graph_name: str
    num_partitions: int
    partition_entry_point: str | None
    balance_train: bool
    balance_edges: bool
    train_entry_point: str | None
    workspace: Path
    num_epochs: int
    batch_size: int
    num_trainers: int
    num_samplers: int
    num_servers: int
    dataset_url: str | None
    partition_config_path: str | None
    partition_args: list[str] = field(default_factory=list)
    train_args: list[str] = field(default_factory=list)
    python: str = sys.executable
    transport: str = "kubectl"
    local_workers: int | None = None
    local_root: Path | None = None
    local_shm_size: str = "2g"  # each local worker's /dev/shm (tmpfs size=)
    keep_local: bool = False
    partition_timeout: float = 0.0
    deliver_timeout: float = 1800.0
    dispatch_timeout: float = 1800.0
    configure_timeout: float = 300.0
    train_timeout: float = 0.0
    master_port: int = 29500
    partition_mode: str = DGL_API
    chunked_graph: str | None = None
    chunked_layout: str = SHARED
    num_ranks: int | None = None
    partitioner: str = KAMINPAR
    mpirun: str = "mpirun"
    mpirun_args: list[str] = field(default_factory=list)
    partition_transfer: str = TRANSFER_HTTP
    transfer_port: int = TRANSFER_PORT
    transfer_max_rate: float = 0.0  # MB/s per worker connection; 0: unlimited
    transfer_token_file: str = TRANSFER_TOKEN_PATH
    graph_size: GraphSize | None = None  # the memory plan's input in DGL-API mode
    worker_memory_limit: int | None = None  # bytes; None: no limit known
    storage: Storage | None = None  # results, checkpoints, cached partitions (spec.storage)
    partition_inputs: list[str] = field(default_factory=list)  # what the cache key hashes
    phase: str = ""  # PHASE_ENV's value: "" (the launcher), or which part this pod does
    kubexec: str = KUBEXEC_PATH
    hostfile: str = HOSTFILE_PATH
    leadfile: str = LEADFILE_PATH
    partfile: str = PARTFILE_PATH
    kubectl: str = KUBECTL_PATH
    # the DGLJob progress and Events go to
    job: ProgressTarget = field(default_factory=ProgressTarget)
    # an elastic DGLJob's attempt: --batch-size as given, the global batch of a step, which
    # batch_size (each trainer's) divides among the attempt's trainers; None: not elastic
    global_batch: int | None = None
    # an elastic DGLJob's partitioner: the count is the attempt's, read from the job's status
    count_from_job: bool = False
    # node features memory-mapped from the workers' disk (outofcore), and the share of them
    # the memory plan counts as page cache
    out_of_core: bool = False
    page_cache_fraction: float = DEFAULT_PAGE_CACHE_FRACTION
    # an elastic job's worker counts (--partition-counts): the ParMETIS modes partition for
    # all of them at once; () when not elastic
    partition_counts: tuple[int, ...] = ()


_rate = number_type(float, "a number of MB/s", 0.0)


def _fraction(value: str) -> float:
    try:
        x = float(value)
    except ValueError:
        x = float("nan")
    if not 0.0 <= x <= 1.0:  # (nan fails too)
        raise argparse.ArgumentTypeError(f"{value!r} is not a fraction between 0 and 1")
    return x


def _cache_limit(value: str) -> int:
    """A quantity of bytes (``20Gi``, ``500G``, ``0``: only the partitions in use stay)."""
    try:
        n = parse_quantity(value)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    if n < 0:
        raise argparse.ArgumentTypeError(f"{value!r}: a size cannot be negative")
    return int(n)


def _counts(value: str) -> tuple[int, ...]:
    """``MIN-MAX`` (or one count): every count of the range, in order."""
    low, sep, high = value.partition("-")
    try:
        lo, hi = int(low), int(high if sep else low)
    except ValueError:
        lo = hi = 0
    if not 1 <= lo <= hi:
        raise argparse.ArgumentTypeError(
            f"{value!r}: expected MIN-MAX, two whole numbers with 1 <= MIN <= MAX"
        )
    return tuple(range(lo, hi + 1))


def _run_name(value: str) -> str:
    try:
        return check_run_name(value)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _plan_input(parse: Callable[[str], object]) -> Callable[[str], object]:
    """An argparse type from one of memplan's parsers (their errors name what is wrong)."""

    def convert(value: str) -> object:
        try:
            return parse(value)
        except PlanError as e:
            raise argparse.ArgumentTypeError(str(e)) from None

    return convert


def build_parser(env: Mapping[str, str] | None = None) -> argparse.ArgumentParser:
    """dglrun's flags; defaults that the operator sets through the pod's env come from
    ``env`` (default: this process's environment)."""
    env = os.environ if env is None else env
    p = argparse.ArgumentParser(
        prog="dglrun",
        description="DGL workflow on DGL Operator pods: partition, dispatch, train.",
        allow_abbrev=False,
    )
    g = p.add_argument_group("graph and partitioning")
    g.add_argument("-g", "--graph-name", required=True, help="graph name (partition JSON name)")
    g.add_argument("--num-partitions", type=positive_int, default=1)
    g.add_argument(
        "--partition-entry-point",
        help="script called with --graph_name "
        "--workspace --rel_data_path --num_parts [--balance_train] [--balance_edges]",
    )
    g.add_argument(
        "--partition-mode",
        choices=PARTITION_MODES,
        default=env.get(PARTITION_MODE_ENV) or DGL_API,
        help=f"DGL-API: the partition entry point; ParMETIS: MPI ranks in this pod; "
        f"DistParMETIS: one MPI rank per worker (default: ${PARTITION_MODE_ENV}, else DGL-API)",
    )
    g.add_argument(
        "--chunked-graph",
        default=env.get(CHUNKED_GRAPH_ENV) or None,
        help=f"the ParMETIS modes' input: a chunked graph's folder or metadata.json, as the "
        f"partitioning pods see it (default: ${CHUNKED_GRAPH_ENV})",
    )
    g.add_argument(
        "--chunked-layout",
        choices=CHUNKED_LAYOUTS,
        default=env.get(CHUNKED_LAYOUT_ENV) or SHARED,
        help="Shared: every rank sees every chunk; PerWorker (DistParMETIS): worker i holds "
        f"only its own chunks (default: ${CHUNKED_LAYOUT_ENV}, else Shared)",
    )
    g.add_argument(
        "--num-ranks",
        type=positive_int,
        help="ParMETIS: MPI ranks in the partitioner pod (default: its CPU limit, at least 2); "
        "DistParMETIS always runs one per worker",
    )
    g.add_argument(
        "--partitioner",
        choices=PARTITIONERS,
        default=KAMINPAR,
        help="the ParMETIS modes' partitioner: KaMinPar on the first rank (default), or "
        "PT-Scotch across the ranks ($DGL_PARMETIS_LIB, when set, names a ParMETIS used instead)",
    )
    g.add_argument("--mpirun", default="mpirun", help="Open MPI's mpirun (the ParMETIS modes)")
    g.add_argument(
        "--mpirun-args",
        default="",
        help="extra mpirun arguments (one shell-quoted string), e.g. '--mca btl_tcp_if_include "
        "eth0'",
    )
    g.add_argument(
        "--graph-size",
        type=_plan_input(parse_graph_size),
        metavar="nodes=N,edges=E[,node_bytes=B]",
        help="the graph's sizes (directed edges; node data bytes per node), for the memory "
        "plan in DGL-API mode (the ParMETIS modes read them from the chunked graph)",
    )
    g.add_argument(
        "--worker-memory-limit",
        type=_plan_input(parse_bytes),
        default=env.get(WORKER_MEMORY_LIMIT_ENV) or None,
        metavar="QUANTITY",
        help="the worker and partitioner pods' memory limit (e.g. 8Gi), which the memory plan "
        f"checks every step against (default: ${WORKER_MEMORY_LIMIT_ENV}, set by the operator from "
        "the Worker template)",
    )
    g.add_argument(
        "--partition-inputs",
        action="append",
        default=[],
        metavar="PATH[,PATH]",
        help="DGL-API with --storage: the files or folders the partition entry point reads "
        "(the graph); their content is part of the cached partitions' key, which lets "
        "--share-partitions reuse them across jobs (repeatable)",
    )
    g.add_argument("--balance-train", action="store_true")
    g.add_argument("--balance-edges", action="store_true")
    g.add_argument("--partition-config-path", help="partition JSON (default <graph>.json)")
    g.add_argument("--dataset-url", help="passed to the partition entry point as --dataset_url")
    g.add_argument(
        "--partition-args",
        default="",
        help="extra arguments for the partition entry point (one shell-quoted string)",
    )
    t = p.add_argument_group("training")
    t.add_argument(
        "--train-entry-point",
        help="script run by every DGL server and trainer with "
        "--graph_name --ip_config --part_config --num_epochs --batch_size",
    )
    t.add_argument("--num-epochs", type=positive_int, default=1)
    t.add_argument("--batch-size", type=positive_int, default=1000)
    t.add_argument("--num-trainers", type=positive_int, default=1, help="trainers per worker")
    t.add_argument("--num-samplers", type=non_negative_int, default=0, help="samplers per trainer")
    t.add_argument("--num-servers", type=positive_int, default=1, help="DGL servers per worker")
    t.add_argument(
        "--train-args",
        default="",
        help="extra arguments for the training entry point (one shell-quoted string)",
    )
    t.add_argument("--master-port", type=positive_int, default=29500, help="torch rendezvous port")
    t.add_argument(
        "--out-of-core",
        action="store_true",
        default=(env.get(OUT_OF_CORE_ENV) or "").lower() == OUT_OF_CORE_ON,
        help="keep each worker's node features on its local disk, memory-mapped, instead of in "
        "memory: partitions get .npy feature files and the DGL servers and trainers run under "
        f"python -m outofcore (DGL 2.1; default: ${OUT_OF_CORE_ENV})",
    )
    t.add_argument(
        "--page-cache-fraction",
        type=_fraction,
        default=env.get(PAGE_CACHE_FRACTION_ENV) or DEFAULT_PAGE_CACHE_FRACTION,
        metavar="F",
        help="--out-of-core: the share of a worker's node features the memory plan counts as "
        f"page cache, between 0 and 1 (default: ${PAGE_CACHE_FRACTION_ENV}, else "
        f"{DEFAULT_PAGE_CACHE_FRACTION})",
    )
    w = p.add_argument_group("where and how")
    w.add_argument(
        "--workspace",
        "--worksapce",
        dest="workspace",
        default=WORKSPACE,
        help="workspace folder (the original's misspelling --worksapce works too)",
    )
    w.add_argument(
        "--storage",
        default=env.get(STORAGE_ENV) or None,
        metavar="DIR",
        help="where results, checkpoints and cached partitions outlive the pods (default: "
        f"${STORAGE_ENV}, set by the operator from spec.storage); it must exist, except below "
        f"{STORAGE_DIR} (a DGLJob's claim), where only {STORAGE_DIR} must and the rest is made",
    )
    w.add_argument(
        "--run-name",
        type=_run_name,
        default=env.get(RUN_NAME_ENV) or "local",
        help=f"this run's folder under --storage (default: ${RUN_NAME_ENV}, else local)",
    )
    w.add_argument(
        "--share-partitions",
        action="store_true",
        default=(env.get(SHARE_PARTITIONS_ENV) or "").lower() == SHARE_PARTITIONS_ON,
        help="reuse partitions another run cached on --storage from the same inputs (default: "
        f"${SHARE_PARTITIONS_ENV}; without it only this run's restarts reuse them)",
    )
    w.add_argument(
        "--cache-limit",
        type=_cache_limit,
        default=env.get(CACHE_LIMIT_ENV) or None,
        metavar="QUANTITY",
        help="the bytes the partition cache on --storage may hold over every graph (e.g. 20Gi): "
        "beyond it the least recently used partition sets go, never the one in use (default: "
        f"${CACHE_LIMIT_ENV}, set by the operator from spec.storage.cacheLimit, else half the "
        "size of the filesystem the cache is on)",
    )
    w.add_argument(
        "--partition-counts",
        type=_counts,
        default=env.get(PARTITION_COUNTS_ENV) or None,
        metavar="MIN-MAX",
        help="an elastic job's worker counts: in the ParMETIS modes the first partitioning "
        "writes the partitions of every count in the range (one partitioning, grouped into "
        "each) and caches them on --storage, so that an attempt with another count partitions "
        f"nothing (default: ${PARTITION_COUNTS_ENV}, set by the operator from "
        "spec.elasticPolicy)",
    )
    w.add_argument(
        "--python",
        default=os.environ.get("DGLRUN_PYTHON"),
        help="interpreter for the entry points (default: $DGLRUN_PYTHON, else this "
        "one locally and python3 in pods)",
    )
    w.add_argument(
        "--transport",
        choices=["kubectl", "local"],
        default=os.environ.get("DGLRUN_TRANSPORT", "kubectl"),
    )
    w.add_argument(
        "--local-workers",
        type=positive_int,
        help="local transport: workers (default: --num-partitions)",
    )
    w.add_argument(
        "--local-root",
        help="local transport: where worker filesystems live "
        "(default: a folder under the workspace)",
    )
    w.add_argument("--keep-local", action="store_true", help="keep the local workers' files")
    w.add_argument(
        "--local-shm-size",
        default="2g",
        metavar="SIZE",
        help="local transport: each worker's /dev/shm, as tmpfs's size= (e.g. 8g; DGL's "
        "servers keep the partition there, its node features unless --out-of-core)",
    )
    w.add_argument(
        "--partition-transfer",
        choices=TRANSFERS,
        default=env.get(PARTITION_TRANSFER_ENV) or TRANSFER_HTTP,
        help="http: workers pull their parts straight from the pod that holds them; kubectl: "
        "kubectl cp through the API server, via the launcher (default: "
        f"${PARTITION_TRANSFER_ENV}, else http)",
    )
    w.add_argument(
        "--transfer-port",
        type=positive_int,
        default=TRANSFER_PORT,
        help="http: the partition server's port",
    )
    w.add_argument(
        "--transfer-max-rate",
        type=_rate,
        default=0.0,
        metavar="MB_PER_S",
        help="http: cap each worker's pull at this many MB/s (0 = no cap), to spare a shared "
        "network",
    )
    w.add_argument(
        "--transfer-token-file",
        default=TRANSFER_TOKEN_PATH,
        help="http: the job's token (the operator mounts its Secret here)",
    )
    o = p.add_argument_group("timeouts (seconds, 0 = none)")
    o.add_argument("--partition-timeout", type=seconds, default=0.0)
    o.add_argument("--deliver-timeout", type=seconds, default=1800.0)
    o.add_argument("--dispatch-timeout", type=seconds, default=1800.0)
    o.add_argument("--configure-timeout", type=seconds, default=300.0)
    o.add_argument("--train-timeout", type=seconds, default=0.0)
    return p


def _split(text: str, flag: str, parser: argparse.ArgumentParser) -> list[str]:
    try:
        return shlex.split(text)
    except ValueError as e:
        parser.error(f"{flag}: {e}")


def parse(argv: Sequence[str] | None = None, env: dict[str, str] | None = None) -> Options:
    env = dict(os.environ if env is None else env)
    parser = build_parser(env)
    a = parser.parse_args(argv)
    phase = env.get(PHASE_ENV, "")
    if phase not in ("", PHASE_PARTITIONER, PHASE_LAUNCHER_WORKLOAD):
        parser.error(
            f"{PHASE_ENV}={phase!r}: expected {PHASE_PARTITIONER}, {PHASE_LAUNCHER_WORKLOAD} "
            "or unset"
        )
    _elastic(a, env, parser)
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
    if phase != PHASE_PARTITIONER and not a.train_entry_point:
        parser.error("--train-entry-point is required")
    if a.out_of_core and a.num_samplers:
        parser.error(
            f"--out-of-core with --num-samplers {a.num_samplers}: sampler processes are spawned "
            "by DGL without the out-of-core patch; use --num-samplers 0"
        )
    in_dgljob = env.get(OPERATOR_ENV) == OPERATOR_ENV_ON and a.transport == "kubectl"
    if (
        in_dgljob
        and phase != PHASE_LAUNCHER_WORKLOAD
        and a.partition_transfer == TRANSFER_KUBECTL
        and Path(a.workspace) != Path(WORKSPACE)
    ):
        parser.error(
            f"--workspace {a.workspace}: in a DGLJob the partitions travel through the volume "
            f"the operator mounts at {WORKSPACE}/{DATASET}; leave --workspace at {WORKSPACE}"
        )
    python = a.python or (sys.executable if a.transport == "local" or phase else "python3")
    inputs = [x for given in a.partition_inputs for x in given.split(",") if x]
    if inputs and mode != DGL_API:
        parser.error(
            "--partition-inputs: only DGL-API needs it (the ParMETIS modes' cache key covers "
            "the chunked graph's files)"
        )
    storage = None
    if a.storage:
        root = Path(a.storage)
        storage = Storage(
            root, a.run_name, a.share_partitions, claim_mount(root), cache_limit=a.cache_limit
        )
    elif a.cache_limit is not None:
        parser.error("--cache-limit: the partition cache is on --storage, which is not given")
    if a.partition_counts and storage is None:
        parser.error(
            "--partition-counts: the other counts' partitions are kept in the partition cache "
            "on --storage, which is not given"
        )
    return Options(
        graph_name=a.graph_name,
        num_partitions=a.num_partitions,
        partition_entry_point=a.partition_entry_point,
        balance_train=a.balance_train,
        balance_edges=a.balance_edges,
        train_entry_point=a.train_entry_point,
        workspace=Path(a.workspace),
        num_epochs=a.num_epochs,
        batch_size=a.batch_size,
        num_trainers=a.num_trainers,
        num_samplers=a.num_samplers,
        num_servers=a.num_servers,
        dataset_url=a.dataset_url,
        partition_config_path=a.partition_config_path,
        partition_args=_split(a.partition_args, "--partition-args", parser),
        train_args=_split(a.train_args, "--train-args", parser),
        python=python,
        transport=a.transport,
        local_workers=a.local_workers,
        local_root=Path(a.local_root) if a.local_root else None,
        keep_local=a.keep_local,
        local_shm_size=a.local_shm_size,
        partition_timeout=a.partition_timeout,
        deliver_timeout=a.deliver_timeout,
        dispatch_timeout=a.dispatch_timeout,
        configure_timeout=a.configure_timeout,
        train_timeout=a.train_timeout,
        master_port=a.master_port,
        partition_mode=mode,
        chunked_graph=a.chunked_graph,
        chunked_layout=a.chunked_layout,
        num_ranks=a.num_ranks,
        partitioner=a.partitioner,
        mpirun=a.mpirun,
        mpirun_args=_split(a.mpirun_args, "--mpirun-args", parser),
        partition_transfer=a.partition_transfer,
        transfer_port=a.transfer_port,
        transfer_max_rate=a.transfer_max_rate,
        transfer_token_file=a.transfer_token_file,
        graph_size=a.graph_size,
        worker_memory_limit=a.worker_memory_limit,
        storage=storage,
        partition_inputs=inputs,
        phase=phase,
        kubexec=env.get(KUBEXEC_PATH_ENV, KUBEXEC_PATH),
        hostfile=env.get(HOSTFILE_PATH_ENV, HOSTFILE_PATH),
        leadfile=env.get(LEADFILE_PATH_ENV, LEADFILE_PATH),
        partfile=env.get(PARTFILE_PATH_ENV, PARTFILE_PATH),
        kubectl=env.get(KUBECTL_PATH_ENV, KUBECTL_PATH),
        job=ProgressTarget(
            env.get(JOB_NAME_ENV, ""), env.get(JOB_UID_ENV, ""), env.get(JOB_NAMESPACE_ENV, "")
        ),
        global_batch=a.global_batch,
        count_from_job=a.count_from_job,
        out_of_core=a.out_of_core,
        page_cache_fraction=float(a.page_cache_fraction),
        partition_counts=tuple(a.partition_counts or ()),
    )


def _elastic(
    a: argparse.Namespace, env: Mapping[str, str], parser: argparse.ArgumentParser
) -> None:
    """An elastic DGLJob's attempt (the operator's env): as many partitions as the attempt
    has workers, whatever --num-partitions says, and --batch-size as the global batch of a
    step: each trainer takes ``batch_size // (workers x trainers per worker)`` (at least 1),
    so that the learning rate means the same at every count. Without the count (the
    partitioner, made before the workers are chosen), it is read from the job's status."""
    a.global_batch = None
    a.count_from_job = False
    count = env.get(NUM_PARTITIONS_ENV)
    if count:
        try:
            a.num_partitions = positive_int(count)
        except argparse.ArgumentTypeError:
            parser.error(f"${NUM_PARTITIONS_ENV}={count!r}: must be a positive integer")
    if env.get(ELASTIC_ENV) != ELASTIC_ON:
        return
    if not count:
        a.count_from_job = True
        return
    a.global_batch = a.batch_size
    a.batch_size = max(1, a.batch_size // (a.num_partitions * a.num_trainers))
