"""The settings the operator gives dglrun through its pods' environment, each declared once:
the variable, its value's type, how the operator writes a value and how it is read back.

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
    """One variable of dglrun's environment: ``env`` holds a value of type T, written by
    ``write`` and read back by ``read`` (a ValueError saying what is wrong with the text);
    ``default``: dglrun's value when the variable is unset or empty."""

    env: str
    read: Callable[[str], T]
    write: Callable[[T], str]
    default: T | None = None

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

OPERATOR = Setting(pc.OPERATOR_ENV, switch(pc.OPERATOR_ENV_ON), switch_text(pc.OPERATOR_ENV_ON))
KUBEXEC_PATH = Setting(pc.KUBEXEC_PATH_ENV, text, str, pc.KUBEXEC_PATH)
HOSTFILE_PATH = Setting(pc.HOSTFILE_PATH_ENV, text, str, pc.HOSTFILE_PATH)
LEADFILE_PATH = Setting(pc.LEADFILE_PATH_ENV, text, str, pc.LEADFILE_PATH)
PARTFILE_PATH = Setting(pc.PARTFILE_PATH_ENV, text, str, pc.PARTFILE_PATH)
KUBECTL_PATH = Setting(pc.KUBECTL_PATH_ENV, text, str, pc.KUBECTL_PATH)
PHASE = Setting(pc.PHASE_ENV, one_of((pc.PHASE_PARTITIONER, pc.PHASE_LAUNCHER_WORKLOAD)), str, "")
JOB_NAME = Setting(pc.JOB_NAME_ENV, text, str, "")
JOB_UID = Setting(pc.JOB_UID_ENV, text, str, "")
JOB_NAMESPACE = Setting(pc.JOB_NAMESPACE_ENV, text, str, "")
PARTITION_MODE = Setting(pc.PARTITION_MODE_ENV, one_of(pc.PARTITION_MODES), str, pc.DGL_API)
CHUNKED_GRAPH: Setting[str] = Setting(pc.CHUNKED_GRAPH_ENV, text, str)
CHUNKED_LAYOUT = Setting(pc.CHUNKED_LAYOUT_ENV, one_of(pc.CHUNKED_LAYOUTS), str, pc.SHARED)
CPU_LIMIT = Setting(pc.CPU_LIMIT_ENV, positive_count, str)  # (the downward API writes it)
PARTITION_TRANSFER = Setting(pc.PARTITION_TRANSFER_ENV, one_of(pc.TRANSFERS), str, pc.TRANSFER_HTTP)
WORKER_MEMORY_LIMIT = Setting(pc.WORKER_MEMORY_LIMIT_ENV, byte_count, str)
OUT_OF_CORE = Setting(
    pc.OUT_OF_CORE_ENV, switch(pc.OUT_OF_CORE_ON), switch_text(pc.OUT_OF_CORE_ON), False
)
PAGE_CACHE_FRACTION = Setting(
    pc.PAGE_CACHE_FRACTION_ENV, fraction, write_fraction, pc.DEFAULT_PAGE_CACHE_FRACTION
)
STORAGE: Setting[str] = Setting(pc.STORAGE_ENV, text, str)
RUN_NAME = Setting(pc.RUN_NAME_ENV, text, str, "local")
SHARE_PARTITIONS = Setting(
    pc.SHARE_PARTITIONS_ENV,
    switch(pc.SHARE_PARTITIONS_ON),
    switch_text(pc.SHARE_PARTITIONS_ON),
    False,
)
CACHE_LIMIT: Setting[str] = Setting(pc.CACHE_LIMIT_ENV, quantity, str)
ELASTIC = Setting(pc.ELASTIC_ENV, switch(pc.ELASTIC_ON), switch_text(pc.ELASTIC_ON), False)
NUM_PARTITIONS = Setting(pc.NUM_PARTITIONS_ENV, positive_count, str)
PARTITION_COUNTS = Setting(pc.PARTITION_COUNTS_ENV, count_range, write_count_range)

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
    PARTITION_MODE,
    CHUNKED_GRAPH,
    CHUNKED_LAYOUT,
    CPU_LIMIT,
    PARTITION_TRANSFER,
    WORKER_MEMORY_LIMIT,
    OUT_OF_CORE,
    PAGE_CACHE_FRACTION,
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
