"""The DGLJob as typed Python: one dataclass per object of the CRD's spec, and the job.

The operator gets them from :func:`dgljob.parse.parse_job` (the raw object, checked); a user
builds them (:func:`dgljob.build.new_job`) and the client returns them. A spec part that a
user may set has ``to_dict()``, the JSON the CRD takes: its fields that differ from the
CRD's defaults, named as the CRD names them. A new spec field is one field here, one line in
its parser (:mod:`dgljob.parse`) and in its ``to_dict``, and its rule in the CRD.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from dgljob import modes
from dgljob.names import (
    CLAIM_RETAIN,
    DEFAULT_COOLDOWN_SECONDS,
    DEFAULT_SETTLE_SECONDS,
    TRANSFER_HTTP,
    WAIT_FOR_WORKERS_READY,
    run_name,
)
from podcontract import SHARED
from podcontract.progress import ProgressDetail as ProgressDetail  # (the client's, through here)
from podcontract.progress import ProgressReading, read
from podcontract.report import report_name
from podcontract.settings import OUT_OF_CORE_ORDER, PAGE_CACHE_FRACTION


def _set(pairs: dict[str, Any], defaults: dict[str, Any]) -> dict[str, Any]:
    """The pairs whose value is not the CRD's default (None: unset)."""
    return {k: v for k, v in pairs.items() if v is not None and v != defaults.get(k)}


@dataclass(frozen=True)
class ReplicaSpec:
    replicas: int
    template: dict[str, Any]


@dataclass(frozen=True)
class SchedulingPolicy:
    """``spec.runPolicy.schedulingPolicy``, field for field mpi-operator v2beta1's.

    ``min_available`` (default and maximum: :attr:`JobSpec.gang_size`) is the gang
    scheduler's PodGroup's minMember; ``priority_class`` goes on the pods whose template sets
    none; ``queue`` is accepted and ignored (Coscheduling has no queues);
    ``schedule_timeout_seconds`` is the PodGroup's timeout and, with or without a gang
    scheduler, how long the job's pods may wait (unschedulable, image not pulled, ...) before
    the job fails with their reason.
    """

    min_available: int | None = None
    queue: str = ""
    priority_class: str = ""
    schedule_timeout_seconds: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return _set(
            {
                "minAvailable": self.min_available,
                "queue": self.queue,
                "priorityClass": self.priority_class,
                "scheduleTimeoutSeconds": self.schedule_timeout_seconds,
            },
            {"queue": "", "priorityClass": ""},
        )


@dataclass(frozen=True)
class RunPolicy:
    """``spec.runPolicy``: the lifecycle policy, as in Kubeflow's training operators."""

    ttl_seconds_after_finished: int | None = None
    active_deadline_seconds: int | None = None
    backoff_limit: int = 0
    suspend: bool = False
    scheduling_policy: SchedulingPolicy = SchedulingPolicy()

    def to_dict(self) -> dict[str, Any]:
        return _set(
            {
                "ttlSecondsAfterFinished": self.ttl_seconds_after_finished,
                "activeDeadlineSeconds": self.active_deadline_seconds,
                "backoffLimit": self.backoff_limit,
                "suspend": self.suspend,
                "schedulingPolicy": self.scheduling_policy.to_dict(),
            },
            {"backoffLimit": 0, "suspend": False, "schedulingPolicy": {}},
        )


@dataclass(frozen=True)
class ChunkedGraphSpec:
    """``spec.chunkedGraph``: the ParMETIS modes' input, as the partitioning pods see it."""

    path: str
    layout: str = SHARED

    def to_dict(self) -> dict[str, Any]:
        return _set({"path": self.path, "layout": self.layout}, {"layout": SHARED})


@dataclass(frozen=True)
class StorageSpec:
    """``spec.storage``: the claim whose folder ``path`` holds what outlives the pods
    (results, checkpoints, cached partitions; launcher/storage/layout.py has the layout).
    Exactly one of ``claim_name`` and ``claim_template``; ``claim_policy`` (Retain, Delete)
    applies to the second only. ``cache_limit``: the bytes the partition cache may hold over
    every graph, a quantity as written (``20Gi``; None: dglrun's default, half the size of the
    filesystem the cache is on)."""

    claim_name: str | None = None  # the user's claim: never modified or deleted
    claim_template: dict[str, Any] | None = None  # a claim the operator makes (<job>-results)
    claim_policy: str = CLAIM_RETAIN
    path: str = ""
    share_partitions: bool = False
    cache_limit: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return _set(
            {
                "claimName": self.claim_name,
                "claimTemplate": self.claim_template,
                "claimPolicy": self.claim_policy,
                "path": self.path,
                "sharePartitions": self.share_partitions,
                "cacheLimit": self.cache_limit,
            },
            {"claimPolicy": CLAIM_RETAIN, "path": "", "sharePartitions": False},
        )


@dataclass(frozen=True)
class OutOfCoreSpec:
    """``spec.outOfCore``: the workers' node features stay on their disk, memory-mapped
    (dglrun's --out-of-core, the outofcore package); the memory plan counts
    ``page_cache_fraction`` of them as page cache."""

    enabled: bool = False
    page_cache_fraction: float = PAGE_CACHE_FRACTION.when_unset
    order: str = OUT_OF_CORE_ORDER.when_unset  # Exact | Buffer (outofcore.buffer)

    def to_dict(self) -> dict[str, Any]:
        return _set(
            {
                "enabled": self.enabled,
                "pageCacheFraction": self.page_cache_fraction,
                "order": self.order,
            },
            {"pageCacheFraction": PAGE_CACHE_FRACTION.default, "order": OUT_OF_CORE_ORDER.default},
        )


@dataclass(frozen=True)
class ElasticPolicy:
    """``spec.elasticPolicy``: the job trains with any number of workers in
    [``min_replicas``, ``max_replicas``] and changes it between attempts
    (controller/features/elastic.py).

    ``settle_seconds``: once ``min_replicas`` workers run, how long to wait for more before
    training starts with those that run; ``cooldown_seconds``: the least time between the
    start of an attempt and a rescale that grows it (a shrink never waits)."""

    min_replicas: int
    max_replicas: int
    settle_seconds: int = DEFAULT_SETTLE_SECONDS
    cooldown_seconds: int = DEFAULT_COOLDOWN_SECONDS
    # the maxReplicas the user declared, when a queue's admission lowered max_replicas for
    # this attempt (controller/features/kueue.py admitted; 0: not lowered). What is made once
    # for the job's whole life (the launcher's Role) covers this many workers.
    declared_max: int = 0

    @property
    def ceiling(self) -> int:
        """The most workers any attempt of the job may have."""
        return self.declared_max or self.max_replicas

    def to_dict(self) -> dict[str, Any]:
        return _set(
            {
                "minReplicas": self.min_replicas,
                "maxReplicas": self.max_replicas,
                "settleSeconds": self.settle_seconds,
                "cooldownSeconds": self.cooldown_seconds,
            },
            {"settleSeconds": DEFAULT_SETTLE_SECONDS, "cooldownSeconds": DEFAULT_COOLDOWN_SECONDS},
        )


@dataclass(frozen=True)
class Placement:
    """What a queue's admission adds to the pods of one replica type (Kueue's podSet info:
    controller/features/kueue.py): applied to every such pod the operator makes, never written into
    the job's spec."""

    node_selector: Mapping[str, str] = field(default_factory=dict)
    tolerations: tuple[dict[str, Any], ...] = ()
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    count: int | None = None  # the pods admitted (None: as many as asked)

    def apply(self, pod: dict[str, Any]) -> None:
        """Onto a pod: its labels, annotations and nodeSelector take the admission's (the
        admission's win over the template's: it is what the quota was counted on);
        tolerations are added. The operator's own labels and annotations (the job's name, the
        replica's, the attempt) are set after this (controller/builders/pods.py): an
        admission may add to them, never replace them."""
        meta, spec = pod["metadata"], pod["spec"]
        meta["labels"] = {**(meta.get("labels") or {}), **self.labels}
        meta["annotations"] = {**(meta.get("annotations") or {}), **self.annotations}
        if self.node_selector:
            spec["nodeSelector"] = {**(spec.get("nodeSelector") or {}), **self.node_selector}
        have = list(spec.get("tolerations") or [])
        added = [dict(t) for t in self.tolerations if t not in have]
        if added:
            spec["tolerations"] = have + added


@dataclass(frozen=True)
class JobSpec:
    partition_mode: str
    clean_pod_policy: str
    slots_per_worker: int
    launcher_creation_policy: str
    launcher: ReplicaSpec
    worker: ReplicaSpec | None
    run_policy: RunPolicy
    chunked_graph: ChunkedGraphSpec | None = None
    partition_transfer: str = TRANSFER_HTTP
    storage: StorageSpec | None = None
    elastic: ElasticPolicy | None = None
    out_of_core: OutOfCoreSpec | None = None
    # elastic jobs: the indices of the workers this attempt trains on, once chosen
    # (controller/features/elastic.py); None: every worker (rigid jobs, and elastic ones still
    # sizing)
    members: tuple[int, ...] | None = None
    # a queued job's admission, by replica type (controller/features/kueue.py); empty: none
    placement: Mapping[str, Placement] = field(default_factory=dict)

    @property
    def mode(self) -> modes.PartitionMode:
        return modes.MODES[self.partition_mode]

    @property
    def pulls_partitions(self) -> bool:
        """The workers pull their parts from the partitioner pod over HTTP."""
        return self.mode.partitioner and self.partition_transfer == TRANSFER_HTTP

    @property
    def workers(self) -> int:
        """The worker pods the job has: Worker ``replicas``, or ``maxReplicas`` when elastic."""
        if self.worker is None:
            return 0
        return self.elastic.max_replicas if self.elastic else self.worker.replicas

    @property
    def training_workers(self) -> tuple[int, ...]:
        """The indices of the workers this attempt trains on (in the hostfile, in order)."""
        return self.members if self.members is not None else tuple(range(self.workers))

    @property
    def gang(self) -> bool:
        """The job may join a gang (--gang-scheduling): rigid jobs only, since an elastic
        one starts with the workers that fit, which a gang would forbid."""
        return self.elastic is None

    @property
    def launcher_with_the_rest(self) -> bool:
        """The launcher is created with the other pods (not only once the workers run)."""
        return not self.mode.workers or self.launcher_creation_policy != WAIT_FOR_WORKERS_READY

    @property
    def gang_size(self) -> int:
        """The pods the operator creates together when the job (or a restart) starts: the
        partitioner (in the modes with one), the workers, and the launcher unless
        WaitForWorkersReady creates it once they run. The default of
        ``schedulingPolicy.minAvailable``, and its maximum: a gang that counts a pod created
        only later would wait forever."""
        partitioner = 1 if self.mode.partitioner else 0
        return partitioner + self.workers + (1 if self.launcher_with_the_rest else 0)

    @property
    def min_available(self) -> int:
        """The PodGroup's minMember."""
        return self.run_policy.scheduling_policy.min_available or self.gang_size


@dataclass(frozen=True)
class DGLJob:
    """A DGLJob whose spec parsed: its identity, its typed ``spec`` and the ``raw`` object
    it was read from (``job["status"]`` reads the raw object too, as a dict would)."""

    namespace: str
    name: str
    uid: str
    generation: int
    spec: JobSpec
    raw: dict[str, Any]
    # partitionTransfer HTTP: the name of the job's token Secret (controller/features/transfer.py
    # chooses it, at random, and status.transferSecret keeps it; "": <name>-transfer)
    transfer_secret: str = ""

    def __getitem__(self, key: str) -> Any:
        return self.raw[key]

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def status(self) -> dict[str, Any]:
        st = self.raw.get("status")
        return st if isinstance(st, dict) else {}

    @property
    def progress(self) -> ProgressReading:
        """dglrun's progress (:func:`podcontract.progress.read`): ``detail`` the values (step,
        epochs done and their total, percentage, ETAs, metrics; None when absent or invalid,
        then ``problem`` says why), ``text`` ``status.progress``, for display."""
        return read(self.status)

    @property
    def progress_detail(self) -> ProgressDetail | None:
        """dglrun's ``status.progressDetail`` (step, epochs, percentage, ETAs, metrics), if
        any and valid (:attr:`progress`)."""
        return self.progress.detail

    # Derived child names (the original operator's naming, kept for compatibility).
    @property
    def launcher_name(self) -> str:
        return f"{self.name}-launcher"

    @property
    def partitioner_name(self) -> str:
        return f"{self.name}-partitioner"

    @property
    def probe_name(self) -> str:
        return f"{self.name}-probe"

    @property
    def config_name(self) -> str:
        return f"{self.name}-config"

    @property
    def report_name(self) -> str:
        """dglrun's report (podcontract/report.py)."""
        return report_name(self.name)

    def worker_name(self, index: int) -> str:
        return f"{self.name}-worker-{index}"

    @property
    def claim_name(self) -> str | None:
        """The storage's PersistentVolumeClaim: the user's, or the one made from the
        template."""
        st = self.spec.storage
        if st is None:
            return None
        return st.claim_name or f"{self.name}-results"

    @property
    def run_name(self) -> str:
        """This job's folder on its storage (:func:`dgljob.names.run_name`)."""
        return run_name(self.name, self.uid)

    def worker_names(self) -> list[str]:
        return [self.worker_name(i) for i in range(self.spec.workers)]

    def every_worker_name(self) -> list[str]:
        """The workers of any attempt: up to the declared maxReplicas of an elastic job whose
        admission gave this attempt fewer."""
        ceiling = self.spec.elastic.ceiling if self.spec.elastic else self.spec.workers
        return [self.worker_name(i) for i in range(ceiling)]

    def training_worker_names(self) -> list[str]:
        """The workers of this attempt's hostfile (all of them unless elastic)."""
        return [self.worker_name(i) for i in self.spec.training_workers]
