"""``dgl-operator``: flags, wiring, health and metrics servers, leader election, signals."""

from __future__ import annotations

import argparse
import faulthandler
import logging
import os
import re
import signal
import socket
import sys
import threading
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import structlog

from controller.api import DGLJOBS
from controller.builders import GANG_SCHEDULERS, BuildOptions
from controller.builders.kind import ChildKind, WatchedKind
from controller.children import active, watched
from controller.controller import Controller
from controller.machinery.events import EventRecorder
from controller.machinery.leader import LeaderConfig, LeaderElector
from controller.machinery.metrics_server import MetricsServer, Reviewer, cert_files
from controller.metrics import Metrics
from informers.factory import SharedInformerFactory
from kubeclient import Forbidden, KubeClient, KubeError, NotFound, RestClient
from podprogram.argtypes import positive_int, seconds
from podprogram.flagfields import Flag, add_flags, declare, flag, values

log = structlog.get_logger("controller.main")

VERSION = "0.2.0"
SHUTDOWN_SECONDS = 20.0
"""From SIGTERM to exit: in-flight syncs finish and Events are sent within this (a pod's
default grace period is 30 s); what still runs then is abandoned (syncs are idempotent)."""


def _none_if_empty(value: str) -> str | None:
    return value or None


def _folder(value: str) -> Path | None:
    return Path(value) if value else None


@dataclass(frozen=True, kw_only=True)
class OperatorSettings:
    """The operator's command line, checked: what to watch, how many workers, leader election,
    the metrics and health addresses, what the builders put in a job's pods, and the logs.
    Each field declares its flag (podprogram.flagfields); ``options`` is made of the flags
    BUILD_FLAGS declares for BuildOptions' fields."""

    kubeconfig: str | None = flag(
        "--kubeconfig",
        default=None,
        help="kubeconfig file (default: $KUBECONFIG, ~/.kube/config, "
        "else the in-cluster service account)",
    )
    context: str | None = flag("--context", default=None, help="kubeconfig context")
    namespace: str | None = flag(
        "--namespace",
        default="",
        convert=_none_if_empty,
        help="watch only this namespace (default: all)",
    )
    workers: int = flag("--workers", type=positive_int, default=4, help="concurrent reconciles")
    resync_period: float = flag(
        "--resync-period",
        type=seconds,
        default=600.0,
        help="seconds between periodic resyncs of every DGLJob (0: off)",
    )
    leader_elect: bool = flag(
        "--leader-elect",
        action="store_true",
        default=False,
        help="run workers only while holding the leader Lease",
    )
    leader_elect_namespace: str = flag(
        "--leader-elect-namespace",
        env="POD_NAMESPACE",
        default="default",
        help="namespace of the leader Lease (default: $POD_NAMESPACE, else default)",
    )
    leader_elect_id: str = flag(
        "--leader-elect-id", default="dgl-operator-leader", help="Lease name"
    )
    lease_duration: float = flag("--leader-elect-lease-duration", type=seconds, default=15.0)
    renew_deadline: float = flag("--leader-elect-renew-deadline", type=seconds, default=10.0)
    retry_period: float = flag("--leader-elect-retry-period", type=seconds, default=2.0)
    metrics_addr: str = flag(
        "--metrics-addr", default=":8080", help="Prometheus metrics address ('0': off)"
    )
    metrics_secure: bool = flag(
        "--metrics-secure",
        action="store_true",
        default=False,
        help="serve /metrics over HTTPS only to callers with a bearer token the API server "
        "authenticates (TokenReview) and authorizes for get on /metrics (SubjectAccessReview)",
    )
    # --metrics-secure: /metrics over TLS with this folder's certificate, for callers the API
    # server authenticates and authorizes (controller/machinery/metrics_server.py); None: open
    metrics_cert_dir: Path | None = flag(
        "--metrics-cert-dir",
        default="",
        convert=_folder,
        help="with --metrics-secure: the folder of the serving certificate (tls.crt, tls.key)",
    )
    health_addr: str = flag(
        "--health-addr", default=":8081", help="/healthz and /readyz address ('0': off)"
    )
    options: BuildOptions = field(default_factory=BuildOptions)  # (BUILD_FLAGS)
    log_format: str = flag("--log-format", choices=["json", "console"], default="json")
    log_level: str = flag(
        "--log-level", choices=["debug", "info", "warning", "error"], default="info"
    )


# The flags of BuildOptions' fields (what the builders put in a job's pods): their defaults
# are the fields'
BUILD_FLAGS: dict[str, Flag] = {
    "kubectl_download_image": declare("--kubectl-download-image"),
    "watcher_loop_image": declare("--watcher-loop-image"),
    "init_image_pull_policy": declare(
        "--init-image-pull-policy", choices=["Always", "IfNotPresent", "Never"]
    ),
    "kubectl_download_url": declare(
        "--kubectl-download-url",
        help="URL kubectl-download fetches kubectl from (needs --kubectl-download-sha256)",
    ),
    "kubectl_download_sha256": declare("--kubectl-download-sha256"),
    "gang_scheduling": declare(
        "--gang-scheduling",
        choices=GANG_SCHEDULERS,
        help="place each job's pods all or none: scheduler-plugins = a PodGroup per job for "
        "scheduler-plugins' Coscheduling (its PodGroup CRD must be installed)",
    ),
    "gang_scheduler_name": declare(
        "--gang-scheduler-name",
        help="schedulerName of the gang scheduler, set on the job's pods",
    ),
    "kueue": declare(
        "--kueue",
        action="store_true",
        help="queue the DGLJobs labelled kueue.x-k8s.io/queue-name in Kueue: each gets a "
        "Workload and runs only once Kueue admits it (Kueue v0.17+ with DGLJob.v1alpha1.qihoo.net "
        "in integrations.externalFrameworks; docs/operations.md, Running under Kueue). A job "
        "without the label, in a namespace with a LocalQueue named default, is queued there "
        "(Kueue's LocalQueueDefaulting)",
    ),
    "kueue_manage_jobs_without_queue_name": declare(
        "--kueue-manage-jobs-without-queue-name",
        action="store_true",
        help="with --kueue, as Kueue's manageJobsWithoutQueueName: no DGLJob runs outside "
        "Kueue; one without the label kueue.x-k8s.io/queue-name, in a namespace without a "
        "LocalQueue named default, waits without pods (Queued, reason QueueNameMissing) until "
        "it is labelled or that LocalQueue is made (docs/operations.md, Making the queue "
        "mandatory)",
    ),
    "network_policy": declare(
        "--network-policy",
        action=argparse.BooleanOptionalAction,
        help="give each job a NetworkPolicy: its pods take connections from its own pods only "
        "(--no-network-policy: the cluster's administrators manage policy themselves; "
        "docs/operations.md, Network isolation)",
    ),
    "operator_service_account": declare(
        "--operator-service-account",
        metavar="NAMESPACE/NAME",
        help="the operator's own service account: a job in its namespace whose pod templates "
        "name it is refused (the chart sets it)",
    ),
}


def parse_addr(value: str, flag: str) -> tuple[str, int] | None:
    """':8080' -> ('0.0.0.0', 8080); '0' or '' disables; errors name the flag."""
    if value in ("", "0"):
        return None
    host, sep, port = value.rpartition(":")
    if not sep:
        host, port = "", value
    try:
        number = int(port)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{flag}: {value!r} is not host:port") from None
    if not 0 < number < 65536:
        raise argparse.ArgumentTypeError(f"{flag}: port {number} is out of range")
    return host or "0.0.0.0", number


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="dgl-operator",
        description="Kubernetes operator for distributed DGL training (DGLJob qihoo.net/v1alpha1)",
    )
    p.add_argument("--version", action="version", version=f"dgl-operator {VERSION}")
    add_flags(p, OperatorSettings, os.environ)
    add_flags(p, BuildOptions, declared=BUILD_FLAGS)
    return p


def parse_settings(argv: Sequence[str] | None = None) -> OperatorSettings:
    parser = build_parser()
    a = parser.parse_args(argv)
    try:
        parse_addr(a.metrics_addr, "--metrics-addr")
        parse_addr(a.health_addr, "--health-addr")
    except argparse.ArgumentTypeError as e:
        parser.error(str(e))
    if bool(a.kubectl_download_url) != bool(a.kubectl_download_sha256):
        parser.error("--kubectl-download-url and --kubectl-download-sha256 go together")
    if not a.gang_scheduler_name.strip():
        parser.error("--gang-scheduler-name must not be empty")
    if a.renew_deadline >= a.lease_duration:
        parser.error("--leader-elect-renew-deadline must be shorter than the lease duration")
    if a.kueue_manage_jobs_without_queue_name and not a.kueue:
        parser.error("--kueue-manage-jobs-without-queue-name needs --kueue")
    if a.metrics_secure and not a.metrics_cert_dir:
        parser.error("--metrics-secure needs --metrics-cert-dir (tls.crt, tls.key)")
    if a.metrics_cert_dir and not a.metrics_secure:
        parser.error("--metrics-cert-dir goes with --metrics-secure")
    account = a.operator_service_account
    if account and not re.fullmatch(r"[^/\s]+/[^/\s]+", account):
        parser.error(f"--operator-service-account: {account!r} is not NAMESPACE/NAME")
    options = BuildOptions(**values(BuildOptions, a, declared=BUILD_FLAGS))
    return OperatorSettings(**values(OperatorSettings, a, os.environ, parser), options=options)


def configure_logging(fmt: str, level: str) -> None:
    renderer: Any = (
        structlog.processors.JSONRenderer()
        if fmt == "json"
        else structlog.dev.ConsoleRenderer(colors=False)
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(getattr(logging, level.upper())),
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
        cache_logger_on_first_use=True,
    )


class HealthServer:
    """/healthz: the process serves; /readyz: every informer cache has synced."""

    def __init__(self, addr: tuple[str, int], ready: Any) -> None:
        ready_fn = ready

        class HealthHandler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path == "/healthz":
                    self._answer(200, "ok")
                elif self.path == "/readyz":
                    ok = bool(ready_fn())
                    self._answer(200 if ok else 503, "ok" if ok else "informer caches not synced")
                else:
                    self._answer(404, "not found")

            def _answer(self, code: int, text: str) -> None:
                body = (text + "\n").encode()
                self.send_response(code)
                self.send_header("Content-Type", "text/plain; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(addr, HealthHandler)
        self.server.daemon_threads = True
        self.port = int(self.server.server_address[1])
        self.thread = threading.Thread(target=self.server.serve_forever, name="health", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def check_api(
    client: KubeClient, namespace: str | None, options: BuildOptions | None = None
) -> bool:
    """Say clearly, once, what stops the operator from working (it keeps retrying anyway)."""
    # the CRDs its settings need besides DGLJob's (controller/children.py), and what to say
    # when one is missing
    options = options or BuildOptions()
    kinds: list[ChildKind | WatchedKind] = [*active(options), *watched(options)]
    optional = [c for c in kinds if c.missing]
    try:
        client.list(DGLJOBS, namespace, limit=1)
        for kind in optional:
            try:
                client.list(kind.resource, namespace, limit=1)
            except NotFound:
                log.error(f"{kind.missing}; waiting for it")
                return False
    except NotFound:
        log.error(
            "the DGLJob CRD (dgljobs.qihoo.net) is not installed: apply "
            "charts/dgl-operator/crds/qihoo.net_dgljobs.yaml (or install the Helm chart); "
            "waiting for it"
        )
        return False
    except Forbidden as e:
        log.error(
            "not allowed to list DGLJobs, PodGroups, Workloads or LocalQueues: check the "
            "operator's RBAC",
            error=e.message,
        )
        return False
    except KubeError as e:
        log.warning("the API server is not reachable yet; retrying", error=str(e))
        return False
    return True


class Stop(threading.Event):
    """Set by SIGTERM/SIGINT (``reason`` names the signal) or by losing the lease.

    The signal handler only records and sets: Python runs it between two bytecodes of the
    main thread, which may be inside a log write holding the log's (non-reentrant) lock, so a
    handler that logs can deadlock. It also arms the last resort: if shutting down hangs
    anyway, every thread's stack is printed and the process exits 1."""

    def __init__(self) -> None:
        super().__init__()
        self.reason = ""

    def install_signal_handlers(self) -> None:
        signal.signal(signal.SIGTERM, self._on_signal)
        signal.signal(signal.SIGINT, self._on_signal)

    def _on_signal(self, signum: int, _frame: Any) -> None:
        self.reason = signal.Signals(signum).name
        self.set()
        faulthandler.dump_traceback_later(SHUTDOWN_SECONDS + 5, exit=True)

    def wait_until_set(self) -> None:
        """Block until set, waking every second: a signal the kernel hands to another thread
        only runs its handler when the main thread next runs Python code."""
        while not self.wait(1.0):
            pass
        if self.reason:
            log.info("signal received", signal=self.reason)


def run(settings: OperatorSettings, stop: Stop) -> int:
    """Run the operator until ``stop`` is set or leadership is lost; returns the exit code."""
    metrics = Metrics()
    client = RestClient.from_config(
        settings.kubeconfig,
        settings.context,
        pool_size=16 + settings.workers,
        observer=metrics.observe_request,
    )
    factory = SharedInformerFactory(
        client, namespace=settings.namespace, resync_period=settings.resync_period
    )
    controller = Controller(
        client,
        factory,
        options=settings.options,
        metrics=metrics,
        recorder=EventRecorder(client, on_drop=metrics.events_dropped.inc),
    )
    servers: list[HealthServer] = []
    health = parse_addr(settings.health_addr, "--health-addr")
    if health:
        hs = HealthServer(health, controller.has_synced)
        hs.start()
        servers.append(hs)
        log.info("health server listening", port=hs.port)
    metrics_addr = parse_addr(settings.metrics_addr, "--metrics-addr")
    if metrics_addr:
        secure = settings.metrics_cert_dir is not None
        if settings.metrics_cert_dir is not None and (why := cert_files(settings.metrics_cert_dir)):
            log.error("cannot serve metrics", error=why)
            return 2
        MetricsServer(
            metrics_addr,
            metrics.registry,
            Reviewer(client) if secure else None,
            settings.metrics_cert_dir,
        ).start()
        log.info("metrics server listening", port=metrics_addr[1], secure=secure)

    check_api(client, settings.namespace, settings.options)
    factory.start(stop)
    log.info("waiting for informer caches", namespace=settings.namespace or "(all)")
    if not factory.wait_for_cache_sync(stop):
        log.info("stopped before the caches synced", signal=stop.reason or None)
        return 0
    log.info("caches synced", jobs=len(controller.job_informer.store))

    exit_code = 0
    if settings.leader_elect:
        lost = threading.Event()
        identity = f"{socket.gethostname()}_{uuid.uuid4().hex[:8]}"

        term = threading.Lock()  # a term's start (its own thread) and end run in order

        def started() -> None:
            with term:
                if not elector.is_leader:
                    return  # (that term has already ended)
                metrics.is_leader.set(1)
                controller.resume()
                if controller.workers_started:  # the keys queued while we could not renew
                    log.info("workers resumed", term=elector.terms)
                else:
                    controller.start_workers(settings.workers)
                    log.info("workers started", workers=settings.workers)

        def stopped() -> None:
            with term:
                metrics.is_leader.set(0)
                controller.pause()

        def campaign() -> None:
            elector.run(stop)
            if not stop.is_set():  # another replica took the Lease
                lost.set()
                stop.set()

        elector = LeaderElector(
            client,
            LeaderConfig(
                settings.leader_elect_namespace,
                settings.leader_elect_id,
                identity,
                settings.lease_duration,
                settings.renew_deadline,
                settings.retry_period,
            ),
            on_started_leading=started,
            on_stopped_leading=stopped,
        )
        elector_thread = threading.Thread(target=campaign, daemon=True)
        elector_thread.start()
        stop.wait_until_set()
        controller.shutdown(SHUTDOWN_SECONDS)
        elector_thread.join(3)  # it releases the lease: one request
        if lost.is_set():
            log.error(
                "leader lease lost to another replica; exiting",
                holder=elector.taken_over,
            )
            exit_code = 1
    else:
        metrics.is_leader.set(1)
        controller.start_workers(settings.workers)
        log.info("workers started", workers=settings.workers)
        stop.wait_until_set()
        log.info("shutting down: draining the queue")
        controller.shutdown(SHUTDOWN_SECONDS)
    for s in servers:
        s.stop()
    log.info("stopped")
    return exit_code


def main(argv: Sequence[str] | None = None) -> int:
    settings = parse_settings(argv)
    configure_logging(settings.log_format, settings.log_level)
    stop = Stop()
    stop.install_signal_handlers()
    faulthandler.register(signal.SIGUSR1, all_threads=True)  # kill -USR1: every stack, stderr
    try:
        return run(settings, stop)
    except Exception as e:  # configuration errors: one clear line, no traceback
        from kubernetes.config.config_exception import ConfigException

        if isinstance(e, ConfigException | FileNotFoundError):
            log.error("cannot load Kubernetes configuration", error=str(e))
            return 2
        raise


if __name__ == "__main__":
    sys.exit(main())
