"""The operator's Prometheus metrics: the DGLJobs' (created, finished, restarted, rescaled,
waiting; how long their partitioning, delivery and training took), beside what any controller
exports (controller/machinery/metrics.py), on one registry."""

from __future__ import annotations

from dataclasses import dataclass

from prometheus_client import Counter, Gauge, Histogram

from controller.machinery.metrics import ControllerMetrics

CONTROLLER = "dgljob"

# Training and partitioning of real graphs take minutes to hours.
DURATION_BUCKETS = (1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200, 14400, 43200, 86400)
DELIVERY_BUCKETS = (0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600)
BYTES_BUCKETS = tuple(float(10**e) for e in range(6, 12))  # 1 MB .. 100 GB


@dataclass
class Metrics(ControllerMetrics):
    controller: str = CONTROLLER

    def __post_init__(self) -> None:
        r = self.registry
        self.jobs_created = Counter(
            "dgl_operator_jobs_created_total",
            "DGLJobs the operator started.",
            ["namespace"],
            registry=r,
        )
        self.jobs_successful = Counter(
            "dgl_operator_jobs_successful_total",
            "DGLJobs that succeeded.",
            ["namespace"],
            registry=r,
        )
        self.jobs_failed = Counter(
            "dgl_operator_jobs_failed_total",
            "DGLJobs that failed, by condition reason.",
            ["namespace", "reason"],
            registry=r,
        )
        self.jobs_restarted = Counter(
            "dgl_operator_jobs_restarted_total",
            "Whole-job restarts after a pod failure (runPolicy.backoffLimit).",
            ["namespace"],
            registry=r,
        )
        self.jobs_rescaled = Counter(
            "dgl_operator_jobs_rescaled_total",
            "Elastic jobs' rescales (spec.elasticPolicy), by reason: Grew, Preempted, NodeLost, "
            "TooFewToFit.",
            ["namespace", "reason"],
            registry=r,
        )
        self.rescale_duration = Histogram(
            "dgl_operator_job_rescale_seconds",
            "Elastic jobs: from a rescale's decision to the new attempt's training.",
            ["namespace"],
            buckets=DURATION_BUCKETS,
            registry=r,
        )
        self.jobs_waiting = Gauge(
            "dgl_operator_jobs_waiting",
            "Unfinished DGLJobs whose pods wait, by the reason of the first one "
            "(Unschedulable, ErrImagePull, ...; the PodsReady condition's reason).",
            ["namespace", "reason"],
            registry=r,
        )
        self.node_losses = Counter(
            "dgl_operator_job_node_losses_total",
            "Job attempts ended by the loss of a node holding one of their pods (NodeLost); "
            "a node's loss is the cluster's, not a namespace's: no labels (exposed from 0).",
            registry=r,
        )
        self.partition_duration = Histogram(
            "dgl_operator_job_partition_duration_seconds",
            "How long partitioning took (dglrun's report; with partitionTransfer KubectlCp the "
            "partitioner pod's runtime).",
            ["namespace"],
            buckets=DURATION_BUCKETS,
            registry=r,
        )
        self.delivery_duration = Histogram(
            "dgl_operator_job_delivery_duration_seconds",
            "partitionTransfer HTTP: how long the workers took to pull their parts.",
            ["namespace"],
            buckets=DELIVERY_BUCKETS,
            registry=r,
        )
        self.delivery_bytes = Histogram(
            "dgl_operator_job_delivery_bytes",
            "partitionTransfer HTTP: bytes the workers pulled from the partitioner, per job.",
            ["namespace"],
            buckets=BYTES_BUCKETS,
            registry=r,
        )
        self.training_duration = Histogram(
            "dgl_operator_job_training_duration_seconds",
            "How long the launcher's main container (dglrun) ran.",
            ["namespace"],
            buckets=DURATION_BUCKETS,
            registry=r,
        )
        super().__post_init__()  # (after the jobs': the order /metrics lists them in)
