"""The settings the operator gives dglrun through its pods' environment, each declared once:
the variable's name, its value's type, its default, how the operator writes a value and how it
is read back. Nothing else spells a variable's name or default: both sides use the
declaration (``PAGE_CACHE_FRACTION.env``, ``PAGE_CACHE_FRACTION.default``).

The operator writes them (``controller.builders``: ``PAGE_CACHE_FRACTION.pair(0.5)``);
dglrun declares each of its options that one of them sets (``launcher.options``: the
option's ``setting``), so that the variable is the option's default, read with ``read``.
:data:`DGLRUN_SETTINGS` is the table of them all: ``tests/test_pod_contract.py`` checks
that every variable the operator sets on a dglrun pod is one of them, that an option of
dglrun reads it, and that what is written reads back as the value written.

Standard library only, like the rest of the pod contract.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import podcontract as pc
from podcontract.quantity import parse_quantity

T = TypeVar("T")


@dataclass(frozen=True, eq=False)
class Setting(Generic[T]):
    """One variable of dglrun's environment: ``env`` its name; it holds a value of type T,
    written by ``write`` and read back by ``read`` (a ValueError saying what is wrong with the
    text); ``default``: dglrun's value when the variable is unset or empty."""

    env: str
    read: Callable[[str], T]
    write: Callable[[T], str]
    default: T | None = None

    @property
    def when_unset(self) -> T:
        """dglrun's value when the variable is unset: the default, typed (a setting without
        one has no such value)."""
        if self.default is None:
            raise TypeError(f"{self.env} has no default")
        return self.default

    def pair(self, value: T) -> tuple[str, str]:
        """``(variable, text)``: what the operator puts in a container's env."""
        return self.env, self.write(value)

    def value_from(self, source: dict[str, Any]) -> dict[str, Any]:
        """A container's env entry whose value Kubernetes writes (``source``: the entry's
        ``valueFrom``, e.g. the downward API's ``resourceFieldRef``)."""
        return {"name": self.env, "valueFrom": source}


# -- how the values are read ----------------------------------------------------------------


def text(value: str) -> str:
    return value


def switch(on: str) -> Callable[[str], bool]:
    """A switch: on when the variable says ``on`` (any case); anything else is off."""

    def read(value: str) -> bool:
        return value.strip().lower() == on

    return read


def switch_text(on: str) -> Callable[[bool], str]:
    def write(value: bool) -> str:
        return on if value else "false"

    return write


def one_of(names: Sequence[str]) -> Callable[[str], str]:
    def read(value: str) -> str:
        if value not in names:
            raise ValueError(f"expected {', '.join(names[:-1])} or {names[-1]}")
        return value

    return read


def fraction(value: str) -> float:
    """A number from 0 to 1."""
    try:
        x = float(value)
    except ValueError:
        x = float("nan")
    if not 0.0 <= x <= 1.0:  # (nan fails too)
        raise ValueError(f"{value!r} is not a fraction between 0 and 1")
    return x


def write_fraction(value: float) -> str:
    return f"{value:g}"


def whole_count(value: str) -> int:
    """A whole number, 0 or more."""
    if not value.isascii() or not value.isdigit() or len(value) > 9:
        raise ValueError("must be a whole number (0 or more)")
    return int(value)


def positive_count(value: str) -> int:
    try:
        n = int(value)
    except ValueError:
        n = 0
    if n < 1:
        raise ValueError("must be a positive integer")
    return n


def byte_count(value: str) -> int:
    """A positive quantity of bytes (``8Gi``, ``6442450944``)."""
    n = parse_quantity(value)
    if n <= 0:
        raise ValueError(f"{value!r}: a size must be positive")
    return int(n)


def quantity(value: str) -> str:
    """A quantity of bytes as written (``20Gi``, ``0``), checked."""
    if parse_quantity(value) < 0:
        raise ValueError(f"{value!r}: a size cannot be negative")
    return value


def count_range(value: str) -> tuple[int, ...]:
    """``MIN-MAX`` (or one count): every count of the range, in order."""
    low, sep, high = value.partition("-")
    try:
        lo, hi = int(low), int(high if sep else low)
    except ValueError:
        lo = hi = 0
    if not 1 <= lo <= hi:
        raise ValueError(f"{value!r}: expected MIN-MAX, two whole numbers with 1 <= MIN <= MAX")
    return tuple(range(lo, hi + 1))


def write_count_range(counts: tuple[int, ...]) -> str:
    return f"{min(counts)}-{max(counts)}"


# -- the settings ---------------------------------------------------------------------------

# The paths of the operator's files (mounted from the job's ConfigMap and kubectl's emptyDir)
OPERATOR = Setting("DGL_OPERATOR_ENV", switch("1"), switch_text("1"))  # in every pod with workers
KUBEXEC_PATH = Setting("DGL_OPERATOR_KUBEXEC_PATH", text, str, pc.KUBEXEC_PATH)
HOSTFILE_PATH = Setting("DGL_OPERATOR_HOSTFILE_PATH", text, str, pc.HOSTFILE_PATH)
LEADFILE_PATH = Setting("DGL_OPERATOR_LEADFILE_PATH", text, str, pc.LEADFILE_PATH)  # partitioner's
# partitionTransfer HTTP: where the partitioner's IP is
PARTFILE_PATH = Setting("DGL_OPERATOR_PARTFILE_PATH", text, str, pc.PARTFILE_PATH)
KUBECTL_PATH = Setting("DGL_OPERATOR_KUBECTL_PATH", text, str, pc.KUBECTL_PATH)
# Which part of the work the pod's dglrun does: unset in the launcher of a job with workers
PHASE = Setting(
    "DGL_OPERATOR_PHASE_ENV", one_of((pc.PHASE_PARTITIONER, pc.PHASE_LAUNCHER_WORKLOAD)), str, ""
)
# The DGLJob dglrun reports its progress and Events to (the uid: the Events' involvedObject.uid)
JOB_NAME = Setting("DGL_OPERATOR_JOB_NAME", text, str, "")
JOB_UID = Setting("DGL_OPERATOR_JOB_UID", text, str, "")
JOB_NAMESPACE = Setting("DGL_OPERATOR_JOB_NAMESPACE", text, str, "")
# The attempt the pod belongs to (its dglrun's report says it: the operator copies only the
# running attempt's, podcontract/report.py)
ATTEMPT = Setting("DGL_OPERATOR_ATTEMPT", whole_count, str, 0)
# spec.partitionMode as dglrun's --partition-mode (Skip is pc.PHASE_LAUNCHER_WORKLOAD instead);
# spec.chunkedGraph (the ParMETIS modes) as its --chunked-graph and --chunked-layout
PARTITION_MODE = Setting("DGL_OPERATOR_PARTITION_MODE", one_of(pc.PARTITION_MODES), str, pc.DGL_API)
CHUNKED_GRAPH: Setting[str] = Setting("DGL_OPERATOR_CHUNKED_GRAPH", text, str)
CHUNKED_LAYOUT = Setting("DGL_OPERATOR_CHUNKED_LAYOUT", one_of(pc.CHUNKED_LAYOUTS), str, pc.SHARED)
# whole cores (the downward API writes it: Setting.value_from): ParMETIS's default ranks
CPU_LIMIT = Setting("DGL_OPERATOR_CPU_LIMIT", positive_count, str)
# spec.partitionTransfer as dglrun's --partition-transfer
PARTITION_TRANSFER = Setting(
    "DGL_OPERATOR_PARTITION_TRANSFER", one_of(pc.TRANSFERS), str, pc.TRANSFER_HTTP
)
# The Worker template's memory limit in bytes: what dglrun's memory plan checks against
WORKER_MEMORY_LIMIT = Setting("DGL_OPERATOR_WORKER_MEMORY_LIMIT", byte_count, str)
# spec.outOfCore as dglrun's --out-of-core and --page-cache-fraction: the workers' node
# features stay on their local disk, memory-mapped (outofcore); the memory plan counts this
# share of them as page cache
OUT_OF_CORE = Setting("DGL_OPERATOR_OUT_OF_CORE", switch("true"), switch_text("true"), False)
PAGE_CACHE_FRACTION = Setting("DGL_OPERATOR_PAGE_CACHE_FRACTION", fraction, write_fraction, 0.5)
OUT_OF_CORE_ORDER = Setting(
    "DGL_OPERATOR_OUT_OF_CORE_ORDER", one_of(pc.OUT_OF_CORE_ORDERS), str, pc.ORDER_EXACT
)
# spec.storage: the folder dglrun keeps things in (under pc.STORAGE_DIR), the run's name in it
# (``<job name>-<first 8 characters of its uid>``), whether other jobs' partitions count, and
# the partition cache's limit over every graph (spec.storage.cacheLimit as written, a quantity
# of bytes: dglrun's --cache-limit)
STORAGE: Setting[str] = Setting("DGL_OPERATOR_STORAGE", text, str)
RUN_NAME = Setting("DGL_OPERATOR_RUN_NAME", text, str, "local")
SHARE_PARTITIONS = Setting(
    "DGL_OPERATOR_SHARE_PARTITIONS", switch("true"), switch_text("true"), False
)
CACHE_LIMIT: Setting[str] = Setting("DGL_OPERATOR_CACHE_LIMIT", quantity, str)
# spec.elasticPolicy: ELASTIC on every pod dglrun runs in: --batch-size is the global batch of
# a step, shared by every trainer of the attempt, and the partition count is the attempt's,
# whatever --num-partitions says: NUM_PARTITIONS where the operator knows it when it makes the
# pod (the launcher; the partitioner reads it from status.elastic.members, pc.STATUS_MEMBERS)
ELASTIC = Setting("DGL_OPERATOR_ELASTIC", switch("true"), switch_text("true"), False)
NUM_PARTITIONS = Setting("DGL_OPERATOR_NUM_PARTITIONS", positive_count, str)
# an elastic job's counts, "minReplicas-maxReplicas" (dglrun's --partition-counts): in the
# ParMETIS modes the first partitioning writes every one of them, and the run's later attempts
# take theirs from the partition cache (no partitioner runs again)
PARTITION_COUNTS = Setting("DGL_OPERATOR_PARTITION_COUNTS", count_range, write_count_range)

DGLRUN_SETTINGS: tuple[Setting[Any], ...] = (
    OPERATOR,
    KUBEXEC_PATH,
    HOSTFILE_PATH,
    LEADFILE_PATH,
    PARTFILE_PATH,
    KUBECTL_PATH,
    PHASE,
    JOB_NAME,
    JOB_UID,
    JOB_NAMESPACE,
    ATTEMPT,
    PARTITION_MODE,
    CHUNKED_GRAPH,
    CHUNKED_LAYOUT,
    CPU_LIMIT,
    PARTITION_TRANSFER,
    WORKER_MEMORY_LIMIT,
    OUT_OF_CORE,
    PAGE_CACHE_FRACTION,
    OUT_OF_CORE_ORDER,
    STORAGE,
    RUN_NAME,
    SHARE_PARTITIONS,
    CACHE_LIMIT,
    ELASTIC,
    NUM_PARTITIONS,
    PARTITION_COUNTS,
)


def env_pairs(*pairs: tuple[str, str] | None) -> tuple[tuple[str, str], ...]:
    """The pairs given (``Setting.pair``), without the Nones (settings a job does not set)."""
    return tuple(p for p in pairs if p is not None)
