"""Wiring: informers -> event handlers -> rate-limited workqueue -> workers -> JobSync.

One informer watches DGLJobs and one each child kind of controller/children.py's registry;
one watches Nodes (cluster-wide, only what says whether a node is lost): a node that turns
NotReady/Unknown, gets tainted unreachable or is deleted queues every job with a pod bound
to it (the pods informer is indexed by ``spec.nodeName``). One watches each kind the
features read but do not own (controller/children.py's WATCHED: Kueue's LocalQueues): one
added or deleted that concerns the jobs (a LocalQueue named ``default``) queues every job of
its namespace.
One ``Clock`` runs the queue (requeue-afters, retries), the sync's times and the expectations.

Handlers only enqueue keys (a child's key is its controlling DGLJob's); workers pull keys,
run one sync each with the job key and a reconcile id bound to the log context, and requeue
by the result: error -> rate-limited, requeue-after -> forget + add_after, else forget.
"""

from __future__ import annotations

import sys
import threading
import time
import traceback
import uuid

import structlog

from clock import Clock, RealClock
from controller.api import API_VERSION, DGLJOBS, KIND
from controller.builders import BuildOptions
from controller.builders.kind import WatchedKind
from controller.children import Listers, active, watched
from controller.machinery import objects as ob
from controller.machinery.apply import ForeignObjectError
from controller.machinery.events import EventRecorder
from controller.machinery.expectations import ADD, DELETE, Expectations
from controller.machinery.gate import Gate
from controller.machinery.prom_workqueue import PrometheusWorkqueueMetricsProvider
from controller.machinery.slim import slim_node
from controller.metrics import CONTROLLER, Metrics
from controller.status.node_loss import node_lost, silent
from controller.status.pod_state import is_terminating
from controller.sync import JobSync
from controller.watched_nodes import NODE_LOSS_CONFIRM_SECONDS, UnwellNodes, WatchedNodes
from informers.factory import SharedInformerFactory
from informers.lister import Lister
from informers.shared import EventHandler, SharedInformer
from informers.store import (
    CONTROLLER_UID_INDEX,
    DeletedFinalStateUnknown,
    controller_ref,
    controller_uid_index,
    meta_namespace_key,
)
from kubeclient import NODES, PODS, KubeClient, KubeError, Obj, Resource
from workqueue import RateLimitingQueue

log = structlog.get_logger("controller")


def owner_job_key(obj: Obj) -> str | None:
    """``namespace/name`` of the DGLJob controlling ``obj``, or None for anything else."""
    ref = controller_ref(obj)
    if not ref or ref.get("kind") != KIND or ref.get("apiVersion") != API_VERSION:
        return None
    return f"{ob.namespace(obj)}/{ref.get('name')}"


def _unwrap(obj: Obj | DeletedFinalStateUnknown) -> Obj:
    return obj.obj if isinstance(obj, DeletedFinalStateUnknown) else obj


def _rv(obj: Obj) -> str:
    return str(ob.meta(obj).get("resourceVersion") or "")


NODE_NAME_INDEX = "spec.nodeName"


def node_name_index(obj: Obj) -> list[str]:
    name = ob.pod_spec(obj).get("nodeName")
    return [str(name)] if name else []


class Controller:
    def __init__(
        self,
        client: KubeClient,
        factory: SharedInformerFactory,
        *,
        options: BuildOptions | None = None,
        metrics: Metrics | None = None,
        recorder: EventRecorder | None = None,
        clock: Clock | None = None,
        expectations: Expectations | None = None,
        node_loss_confirm: float = NODE_LOSS_CONFIRM_SECONDS,
    ) -> None:
        self.client = client
        self.factory = factory
        # the one clock of the queue (requeue-afters, retries), the sync and the expectations
        self.clock: Clock = clock or RealClock()
        self.metrics = metrics or Metrics()
        self.recorder = recorder or EventRecorder(
            client, clock=self.clock, on_drop=self.metrics.events_dropped.inc
        )
        self.expectations = expectations or Expectations(clock=self.clock)
        self.queue: RateLimitingQueue[str] = RateLimitingQueue(
            "dgljob",
            clock=self.clock,
            metrics_provider=PrometheusWorkqueueMetricsProvider(self.metrics.registry),
        )
        options = options or BuildOptions()
        self.job_informer = factory.informer_for(DGLJOBS)
        self.child_informers: dict[Resource, SharedInformer] = {
            child.resource: factory.informer_for(
                child.resource,
                label_selector=child.label_selector,
                indexers={CONTROLLER_UID_INDEX: controller_uid_index},
                transform=child.transform,
            )
            for child in active(options)
        }
        self.child_informers[PODS].store.add_indexers({NODE_NAME_INDEX: node_name_index})
        self.node_informer = factory.informer_for(NODES, transform=slim_node)
        # the Node cache and since when each node is unwell (controller/watched_nodes.py)
        self.nodes = WatchedNodes(
            Lister(self.node_informer.store), UnwellNodes(self.clock, node_loss_confirm)
        )
        self.watched_informers: dict[WatchedKind, SharedInformer] = {
            kind: factory.informer_for(kind.resource, transform=kind.transform)
            for kind in watched(options)
        }
        self.listers = Listers(
            Lister(self.job_informer.store),
            {
                **{res: Lister(inf.store) for res, inf in self.child_informers.items()},
                **{k.resource: Lister(inf.store) for k, inf in self.watched_informers.items()},
            },
            options,
        )
        self.sync = JobSync(
            client,
            self.listers,
            options=options,
            recorder=self.recorder,
            metrics=self.metrics,
            expectations=self.expectations,
            clock=self.clock,
            nodes=self.nodes,
        )
        self.job_informer.add_event_handler(
            EventHandler(
                on_add=self._enqueue_job,
                on_update=lambda _old, new: self._enqueue_job(new),
                on_delete=lambda obj: self._enqueue_job(_unwrap(obj)),
            )
        )
        for res, inf in self.child_informers.items():
            inf.add_event_handler(self._child_handler(res.plural))
        self.node_informer.add_event_handler(
            EventHandler(
                on_add=self._node_changed,
                on_update=lambda old, new: self._node_changed(new, old),
                on_delete=lambda obj: self._node_gone(_unwrap(obj)),
            )
        )
        for kind, inf in self.watched_informers.items():
            inf.add_event_handler(self._watched_handler(kind))
        self._workers: list[threading.Thread] = []
        self._syncing: dict[str, str] = {}  # worker thread's name -> the key it syncs
        self.gate = Gate()  # closed while the leader Lease is lost (pause, resume)

    # -- handlers -------------------------------------------------------------------------

    def _enqueue_job(self, obj: Obj) -> None:
        self.queue.add(meta_namespace_key(obj))

    def _child_handler(self, plural: str) -> EventHandler:
        def on_add(obj: Obj) -> None:
            key = owner_job_key(obj)
            if key:
                self.expectations.observe(key, ADD, plural, obj["metadata"]["name"])
                if is_terminating(obj):  # e.g. seen first after a relist
                    self.expectations.observe(key, DELETE, plural, obj["metadata"]["name"])
                self.queue.add(key)

        def on_update(old: Obj, new: Obj) -> None:
            if _rv(old) == _rv(new):
                return  # periodic resync of a child: the job's own resync covers it
            keys = {owner_job_key(old), owner_job_key(new)} - {None}
            for key in keys:
                assert key is not None
                if is_terminating(new):
                    # As Kubernetes' own controllers do: a deletionTimestamp is the deletion
                    # we waited for; the pod's grace period must not hold the job's syncs.
                    self.expectations.observe(key, DELETE, plural, new["metadata"]["name"])
                self.queue.add(key)

        def on_delete(obj: Obj | DeletedFinalStateUnknown) -> None:
            real = _unwrap(obj)
            key = owner_job_key(real)
            if key:
                self.expectations.observe(key, DELETE, plural, real["metadata"]["name"])
                self.queue.add(key)

        return EventHandler(on_add=on_add, on_update=on_update, on_delete=on_delete)

    def _watched_handler(self, kind: WatchedKind) -> EventHandler:
        """One added or deleted that concerns the jobs queues every job of its namespace
        (its updates queue nothing: only its being there is read)."""

        def changed(obj: Obj | DeletedFinalStateUnknown) -> None:
            real = _unwrap(obj)
            if not kind.concerns(real):
                return
            namespace = ob.namespace(real)
            if not namespace:
                return
            for job in self.listers.jobs.list(namespace):
                key = meta_namespace_key(job)
                log.info(f"a {kind.resource.kind} of the job's namespace came or went", job=key)
                self.queue.add(key)

        return EventHandler(on_add=changed, on_delete=changed)

    def _node_changed(self, node: Obj, old: Obj | None = None) -> None:
        """A node became lost (or recovered): its jobs look again. (Added lost: after a
        relist, or a node the operator never saw Ready.) A node that recovers may end a full
        disruption (node_loss.py): the jobs on the nodes still silent look again too."""
        unwell = self.nodes.unwell
        if unwell.observe(node):  # unwell now: its jobs look again once that is confirmed
            self._enqueue_jobs_on(ob.name(node), after=unwell.confirm)
        lost = node_lost(node)
        if (lost is None) == (old is None or node_lost(old) is None):
            return  # no change in lostness (heartbeats, labels, images)
        self._enqueue_jobs_on(ob.name(node))
        if lost is None:
            for other in self.nodes.lister.list():
                if ob.name(other) != ob.name(node) and silent(other):
                    self._enqueue_jobs_on(ob.name(other))

    def _node_gone(self, node: Obj) -> None:
        self.nodes.unwell.forget(ob.name(node))
        self._enqueue_jobs_on(ob.name(node))

    def _enqueue_jobs_on(self, node: str, after: float = 0.0) -> None:
        if not node:
            return
        pods = self.child_informers[PODS].store.by_index(NODE_NAME_INDEX, node)
        for key in sorted({k for k in map(owner_job_key, pods) if k}):
            log.info("a node of the job's pods changed", node=node, job=key)
            if after > 0:
                self.queue.add_after(key, after)
            else:
                self.queue.add(key)

    # -- workers --------------------------------------------------------------------------

    def informers(self) -> list[SharedInformer]:
        return [
            self.job_informer,
            *self.child_informers.values(),
            self.node_informer,
            *self.watched_informers.values(),
        ]

    def has_synced(self) -> bool:
        return all(inf.has_synced() for inf in self.informers())

    def start_workers(self, n: int) -> None:
        self.metrics.max_concurrent.labels(CONTROLLER).set(n)
        self.recorder.start()
        for i in range(n):
            t = threading.Thread(target=self._worker, name=f"worker-{i}", daemon=True)
            t.start()
            self._workers.append(t)

    @property
    def workers_started(self) -> bool:
        return bool(self._workers)

    def pause(self) -> None:
        """No sync starts until :meth:`resume` (the Lease lost): the informers go on and their
        keys wait in the queue; a sync under way finishes."""
        self.gate.close()

    def resume(self) -> None:
        self.gate.open()

    def shutdown(self, timeout: float = 20.0) -> None:
        """Stop taking new keys, let in-flight syncs finish, then flush events: all within
        ``timeout`` seconds (a pod's grace period is 30 s by default). Syncs still running
        then are abandoned, which is safe: every sync is idempotent and the next leader redoes
        it; the warning names the jobs and where their threads were. Paused, nothing drains:
        the keys queued are the next leader's."""
        deadline = time.monotonic() + timeout
        self.gate.shut()  # (paused workers end without taking a key)
        drained = threading.Thread(target=self.queue.shut_down_with_drain, daemon=True)
        drained.start()
        drained.join(max(0.0, deadline - time.monotonic() - 2.0))  # 2 s left for the events
        self.queue.shut_down()
        for t in self._workers:
            t.join(max(0.0, deadline - time.monotonic() - 2.0))
        busy = [t for t in self._workers if t.is_alive()]
        if busy:
            frames = sys._current_frames()
            log.warning(
                "shutdown deadline passed; abandoning syncs still running",
                jobs=sorted(k for t in busy if (k := self._syncing.get(t.name))),
                stacks={
                    t.name: "".join(traceback.format_stack(frames[t.ident])[-6:])
                    for t in busy
                    if t.ident in frames
                },
            )
        self.recorder.stop(max(0.5, deadline - time.monotonic()))

    def _worker(self) -> None:
        while self.gate.wait() and self.process_next():
            pass

    def process_next(self) -> bool:
        key, shutdown = self.queue.get()
        if shutdown or key is None:
            return False
        if not self.gate.is_open():  # taken just as the gate closed: back in the queue
            self.queue.add(key)
            self.queue.done(key)
            return True
        active = self.metrics.active_workers.labels(CONTROLLER)
        active.inc()
        started = self.clock.now()
        me = threading.current_thread().name
        self._syncing[me] = key
        structlog.contextvars.bind_contextvars(job=key, reconcile_id=uuid.uuid4().hex[:12])
        try:
            result = self.sync.sync(key)
        except Exception as e:  # every failure is logged and retried with backoff
            self.queue.add_rate_limited(key)
            self.metrics.reconcile_total.labels(CONTROLLER, "error").inc()
            self.metrics.reconcile_errors.labels(CONTROLLER).inc()
            retries = self.queue.num_requeues(key)
            if isinstance(e, KubeError | ForeignObjectError):
                log.warning("sync failed; will retry", error=str(e), retries=retries)
            else:
                log.exception("sync crashed; will retry", retries=retries)
        else:
            self.queue.forget(key)
            if result.requeue_after is not None:
                self.queue.add_after(key, result.requeue_after)
                self.metrics.reconcile_total.labels(CONTROLLER, "requeue_after").inc()
            else:
                self.metrics.reconcile_total.labels(CONTROLLER, "success").inc()
        finally:
            self.metrics.reconcile_time.labels(CONTROLLER).observe(self.clock.now() - started)
            active.dec()
            structlog.contextvars.clear_contextvars()
            self._syncing.pop(me, None)
            self.queue.done(key)
        return True
