"""The features that cut across a DGLJob's children: one registry, :data:`FEATURES`, one entry
each, as controller/children.py is for the kinds of object.

A feature is a module of controller/features/ that holds all of its code, and its entry there
(an object) implements the few small interfaces below that it needs (in the spirit of Kubeflow
Trainer v2's runtime plugins); each is called for every entry that implements it, in the order
of :data:`FEATURES`:

- :class:`ChildKinds`: the kinds of child it owns that the controller watches (each
  informer, lister and creation follows, controller/children.py);
- :class:`WatchedKinds`: the kinds it reads but does not own (an informer and a lister each;
  one added or deleted queues the jobs of its namespace);
- :class:`ChildrenBuilder`: its children, made once and left alone, before any pod
  (``desired()``, controller/builders/desired.py);
- :class:`PodMutator`: its last change to every pod ``desired()`` makes;
- :class:`PodSetsMutator`: its change to the podSets a queued job's Workload asks Kueue for
  (controller/builders/workload.py);
- :class:`AttemptView`: the job as the running attempt sees it (the ``observed`` step);
- :class:`AttemptCounter`: the attempts it starts besides the restarts (a pod's attempt
  annotation is the sum);
- :class:`AttemptEnd`: what the end of an attempt (a restart, a rescale, a stop) forgets;
- :class:`TrainingStart`: what it counts once an attempt trains (a metric, after the status
  write);
- :class:`JobEnv`, :class:`DeliveryEnv`: its settings in the env of a pod that runs dglrun
  (controller/builders/env.py, which asks for each kind at its place in that env: the job's
  after its memory limit, the partitions' delivery after the partition mode; ``role``: the
  pod's replica type).

A new feature is one more module and one more entry here. A feature's own lifecycle steps
(Kueue's ``queued`` and its Workload Finished, elastic jobs' ``elastic``) are registered on the
steps' floor, above this one: its step's module makes a ``FeatureStep`` naming the feature and
the named point of the lifecycle where it runs (controller/lifecycle/points.py,
controller/lifecycle/feature_steps.py). What is not an interface: the mounts whose place among
a pod's others the builders decide (the storage's, the transfer token's: their modules'
functions, called by controller/builders/pods.py).

The storage's entry (controller/features/storage.py) gives only its env: no other interface
fits it without changing what is built or when. Its claim is not a child made once and left
alone: it is made first and waited for, may outlive the job, is not watched, and a refusal of
it fails the job (the create step's, before any child, also when an elastic job sizes). Its
mount as a :class:`PodMutator` (the last change to a pod) would come after the operator's own
mounts instead of before them, and reach the operator's init containers.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Protocol, runtime_checkable

from controller.api import DGLJob
from controller.builders.kind import ChildKind, WatchedKind
from controller.builders.options import BuildOptions
from controller.features.elastic import ELASTIC
from controller.features.gang import GANG
from controller.features.kueue import KUEUE
from controller.features.network import NETWORK
from controller.features.storage import STORAGE
from controller.features.transfer import TRANSFER
from controller.metrics import Metrics
from kubeclient import Obj


@runtime_checkable
class ChildKinds(Protocol):
    """The kinds of child this feature owns that the controller watches."""

    kinds: tuple[ChildKind, ...]


@runtime_checkable
class WatchedKinds(Protocol):
    """The kinds this feature reads but does not own, that the controller watches."""

    watches: tuple[WatchedKind, ...]


@runtime_checkable
class ChildrenBuilder(Protocol):
    """Children for a job: made once, before any pod (``before_rbac``: before the job's
    ServiceAccounts, Roles and RoleBindings too, else after them)."""

    name: str
    before_rbac: bool

    def children(self, job: DGLJob, opts: BuildOptions, token: str) -> list[Obj]: ...


@runtime_checkable
class PodMutator(Protocol):
    """A change to each pod of the job, after its builder made it."""

    def mutate_pod(self, job: DGLJob, opts: BuildOptions, pod: Obj) -> Obj: ...


@runtime_checkable
class PodSetsMutator(Protocol):
    """A change to the podSets of the job's Workload (made of its pods), before they are
    hashed."""

    def mutate_pod_sets(self, job: DGLJob, sets: list[Obj]) -> list[Obj]: ...


@runtime_checkable
class AttemptView(Protocol):
    """The job as the running attempt sees it (``status``: the job's; ``pods``: all of them)."""

    def for_attempt(self, job: DGLJob, status: Obj, pods: Iterable[Obj]) -> DGLJob: ...


@runtime_checkable
class AttemptCounter(Protocol):
    """The attempts this feature started, besides the restarts (status.restartCount)."""

    def attempts(self, status: Obj) -> int: ...


@runtime_checkable
class AttemptEnd(Protocol):
    """What the end of an attempt forgets of the status (the next one starts afresh)."""

    def attempt_over(self, status: Obj) -> None: ...


@runtime_checkable
class TrainingStart(Protocol):
    """The attempt trains: what this feature records in the status being decided, and what it
    counts once that status is written (None: nothing)."""

    def training(
        self, job: DGLJob, status: Obj, now: float
    ) -> Callable[[Metrics], None] | None: ...


@runtime_checkable
class JobEnv(Protocol):
    """Its settings of the job in the env of ``role``'s pod when it runs dglrun (``role``: a
    replica type; the env's order is theirs, in the order of :data:`FEATURES`)."""

    def job_env(self, job: DGLJob, role: str) -> tuple[tuple[str, str], ...]: ...


@runtime_checkable
class DeliveryEnv(Protocol):
    """Its settings of the partitions' delivery in the env of ``role``'s pod when it runs
    dglrun (after the partition mode's)."""

    def delivery_env(self, job: DGLJob, role: str) -> tuple[tuple[str, str], ...]: ...


FEATURES: tuple[object, ...] = (GANG, KUEUE, NETWORK, STORAGE, ELASTIC, TRANSFER)


def kinds() -> tuple[ChildKind, ...]:
    """The kinds of child the features own, in the order of :data:`FEATURES`."""
    return tuple(k for f in FEATURES if isinstance(f, ChildKinds) for k in f.kinds)


def watched() -> tuple[WatchedKind, ...]:
    """The kinds the features read but do not own, in the order of :data:`FEATURES`."""
    return tuple(k for f in FEATURES if isinstance(f, WatchedKinds) for k in f.watches)


def builders() -> list[ChildrenBuilder]:
    return [f for f in FEATURES if isinstance(f, ChildrenBuilder)]


def mutate_pod(job: DGLJob, opts: BuildOptions, pod: Obj) -> Obj:
    """``pod`` as every feature changes it."""
    for f in FEATURES:
        if isinstance(f, PodMutator):
            pod = f.mutate_pod(job, opts, pod)
    return pod


def mutate_pod_sets(job: DGLJob, sets: list[Obj]) -> list[Obj]:
    """``sets`` as every feature changes them."""
    for f in FEATURES:
        if isinstance(f, PodSetsMutator):
            sets = f.mutate_pod_sets(job, sets)
    return sets


def job_env(job: DGLJob, role: str) -> tuple[tuple[str, str], ...]:
    """Every feature's settings of the job for ``role``'s dglrun, in order."""
    return tuple(p for f in FEATURES if isinstance(f, JobEnv) for p in f.job_env(job, role))


def delivery_env(job: DGLJob, role: str) -> tuple[tuple[str, str], ...]:
    """Every feature's settings of the partitions' delivery for ``role``'s dglrun, in order."""
    return tuple(
        p for f in FEATURES if isinstance(f, DeliveryEnv) for p in f.delivery_env(job, role)
    )


def for_attempt(job: DGLJob, status: Obj, pods: Iterable[Obj]) -> DGLJob:
    """``job`` as the running attempt sees it."""
    pods = list(pods)
    for f in FEATURES:
        if isinstance(f, AttemptView):
            job = f.for_attempt(job, status, pods)
    return job


def attempt(status: Obj) -> int:
    """The attempt the job's pods must carry: the restarts so far, and the attempts the
    features started (an elastic job's rescales)."""
    started = sum(f.attempts(status) for f in FEATURES if isinstance(f, AttemptCounter))
    return int(status.get("restartCount") or 0) + started


def attempt_over(status: Obj) -> None:
    """The attempt ended: the next one starts afresh."""
    for f in FEATURES:
        if isinstance(f, AttemptEnd):
            f.attempt_over(status)


def training(job: DGLJob, status: Obj, now: float) -> list[Callable[[Metrics], None]]:
    """The attempt trains: each feature's record in ``status``, and what to count once it is
    written."""
    counts = []
    for f in FEATURES:
        if isinstance(f, TrainingStart):
            count = f.training(job, status, now)
            if count is not None:
                counts.append(count)
    return counts
