"""What any controller exports to Prometheus, on a registry of its own (tests get a fresh one):
its reconciliations, workers and leadership (named as controller-runtime names them), its API
requests and the Events it dropped. A controller's own metrics extend :class:`ControllerMetrics`
(the DGLJobs': controller/metrics.py)."""

from __future__ import annotations

from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

RECONCILE_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)


@dataclass
class ControllerMetrics:
    registry: CollectorRegistry = field(default_factory=CollectorRegistry)
    controller: str = "controller"  # the ``controller`` label of the reconciliations' metrics

    def __post_init__(self) -> None:
        r = self.registry
        self.reconcile_total = Counter(
            "controller_runtime_reconcile_total",
            "Reconciliations by result (success, error, requeue, requeue_after).",
            ["controller", "result"],
            registry=r,
        )
        self.reconcile_errors = Counter(
            "controller_runtime_reconcile_errors_total",
            "Reconciliations that returned an error.",
            ["controller"],
            registry=r,
        )
        self.reconcile_time = Histogram(
            "controller_runtime_reconcile_time_seconds",
            "Time per reconciliation.",
            ["controller"],
            buckets=RECONCILE_BUCKETS,
            registry=r,
        )
        self.active_workers = Gauge(
            "controller_runtime_active_workers",
            "Workers currently reconciling.",
            ["controller"],
            registry=r,
        )
        self.max_concurrent = Gauge(
            "controller_runtime_max_concurrent_reconciles",
            "Configured number of workers.",
            ["controller"],
            registry=r,
        )
        self.is_leader = Gauge(
            "dgl_operator_is_leader", "1 while this replica holds the leader lease.", registry=r
        )
        self.rest_requests = Counter(
            "rest_client_requests_total",
            "API server requests by verb, resource and HTTP status (0: no answer).",
            ["verb", "resource", "code"],
            registry=r,
        )
        self.events_dropped = Counter(
            "dgl_operator_events_dropped_total",
            "Kubernetes Events dropped because the event queue was full.",
            registry=r,
        )
        for result in ("success", "error", "requeue", "requeue_after"):
            self.reconcile_total.labels(self.controller, result)
        self.reconcile_errors.labels(self.controller)

    def observe_request(self, verb: str, resource: str, code: int, _seconds: float) -> None:
        self.rest_requests.labels(verb, resource, str(code)).inc()
