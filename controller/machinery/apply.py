"""Create, update and delete a job's children: ownership checks, expectations, events.

Events for children are aggregated per sync, as one Event per kind of happening: a sync that
creates the workers' Service, 4 worker pods and the partitioner records one
``SuccessfulCreate`` ("Created 1 service: j-worker; 5 pods: j-partitioner, j-worker-{0..3}"),
not six.
:meth:`Applier.batch` opens the tally (the sync handler wraps each sync in it); outside a batch
each change is told at once.
"""

from __future__ import annotations

import contextlib
import copy
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field

import structlog

from controller.machinery import objects as ob
from controller.machinery.events import NORMAL, WARNING, EventRecorder
from controller.machinery.expectations import ADD, DELETE, Expectations
from controller.machinery.objects import JobIdentity
from informers.store import controller_ref
from kubeclient import AlreadyExists, Conflict, KubeClient, KubeError, NotFound, Obj, Resource

log = structlog.get_logger("controller.apply")

REASON_RESOURCE_EXISTS = "ErrResourceExists"
REASON_CREATED = "SuccessfulCreate"
REASON_DELETED = "SuccessfulDelete"
# the children whose creation and deletion are told in Events (RBAC and the ConfigMap are not)
TOLD_KINDS = ("Pod", "Service")


class ForeignObjectError(Exception):
    """A child's name is taken by an object this job does not control: never adopt it."""

    def __init__(self, kind: str, name: str, owner: str) -> None:
        self.kind = kind
        self.name = name
        self.owner = owner
        super().__init__(
            f"{kind} {name!r} already exists and is not controlled by this DGLJob "
            f"(controller: {owner}); delete or rename it"
        )


def _name(obj: Obj) -> str:
    return ob.name(obj)


def owner_of(obj: Obj) -> str:
    ref = controller_ref(obj)
    return f"{ref.get('kind')}/{ref.get('name')}" if ref else "none"


def controlled_by(obj: Obj, job: JobIdentity) -> bool:
    ref = controller_ref(obj)
    return bool(ref and ref.get("uid") == job.uid)


_NUMBERED = re.compile(r"^(.*?)(\d+)$")


def summarize_names(names: list[str]) -> str:
    """``a-worker-0, a-worker-1, a-worker-2, b`` -> ``a-worker-{0..2}, b``: runs of consecutive
    numbers after the same prefix are folded; everything else is listed, sorted."""
    numbered: dict[str, list[int]] = {}
    plain: list[str] = []
    for name in sorted(set(names)):
        m = _NUMBERED.match(name)
        if m and (m.group(2) == "0" or not m.group(2).startswith("0")):
            numbered.setdefault(m.group(1), []).append(int(m.group(2)))
        else:
            plain.append(name)
    parts: list[tuple[str, str]] = [(n, n) for n in plain]
    for prefix, numbers in numbered.items():
        numbers.sort()
        run = [numbers[0]]
        for n in [*numbers[1:], None]:
            if n is not None and n == run[-1] + 1:
                run.append(n)
                continue
            text = f"{prefix}{run[0]}" if len(run) == 1 else f"{prefix}{{{run[0]}..{run[-1]}}}"
            parts.append((f"{prefix}{run[0]:020d}", text))
            if n is not None:
                run = [n]
    return ", ".join(text for _key, text in sorted(parts))


@dataclass
class _Tally:
    """The children one sync created and deleted, per job, in the order first seen."""

    # (job uid, verb, why) -> kind -> names; job uid -> the job
    changes: dict[tuple[str, str, str], dict[str, list[str]]] = field(default_factory=dict)
    jobs: dict[str, Obj] = field(default_factory=dict)

    def add(self, job: JobIdentity, verb: str, kind: str, name: str, why: str) -> None:
        self.jobs[job.uid] = job.raw
        self.changes.setdefault((job.uid, verb, why), {}).setdefault(kind, []).append(name)


def _describe(verb: str, kinds: dict[str, list[str]], why: str) -> str:
    parts = []
    for kind, names in kinds.items():
        noun = kind.lower() + ("s" if len(names) > 1 else "")
        parts.append(f"{len(names)} {noun}: {summarize_names(names)}")
    return f"{verb} " + "; ".join(parts) + (f" ({why})" if why else "")


class Applier:
    def __init__(
        self, client: KubeClient, expectations: Expectations, recorder: EventRecorder
    ) -> None:
        self.client = client
        self.expectations = expectations
        self.recorder = recorder
        self._local = threading.local()

    @contextlib.contextmanager
    def batch(self) -> Iterator[None]:
        """Tell the children created and deleted inside as one Event per job and happening
        (on the way out, exceptions too: what was done is told). Nests: the outermost tells."""
        if getattr(self._local, "tally", None) is not None:
            yield
            return
        tally = self._local.tally = _Tally()
        try:
            yield
        finally:
            self._local.tally = None
            self._tell(tally)

    def _told(self, job: JobIdentity, verb: str, kind: str, name: str, why: str = "") -> None:
        if kind not in TOLD_KINDS:
            return
        tally: _Tally | None = getattr(self._local, "tally", None)
        if tally is not None:
            tally.add(job, verb, kind, name, why)
            return
        one = _Tally()
        one.add(job, verb, kind, name, why)
        self._tell(one)

    def _tell(self, tally: _Tally) -> None:
        for (uid, verb, why), kinds in tally.changes.items():
            reason = REASON_CREATED if verb == "create" else REASON_DELETED
            message = _describe("Created" if verb == "create" else "Deleted", kinds, why)
            self.recorder.record(tally.jobs[uid], NORMAL, reason, message)

    def check_owned(self, job: JobIdentity, res: Resource, existing: Obj | None) -> None:
        """Raise (and record a Warning) when a cached object of that name is someone else's."""
        if existing is not None and not controlled_by(existing, job):
            err = ForeignObjectError(res.kind, _name(existing), owner_of(existing))
            self.recorder.record(job.raw, WARNING, REASON_RESOURCE_EXISTS, str(err))
            raise err

    def create(self, job: JobIdentity, res: Resource, obj: Obj) -> Obj | None:
        """Create a child; the created object's metadata (PartialObjectMetadata: the
        informer brings the whole object, nothing reads the answer's body), or None if it
        already existed and is ours."""
        name = _name(obj)
        self.expectations.expect(job.key, ADD, res.plural, [name])
        try:
            created = self.client.create(res, job.namespace, obj, metadata_only=True)
        except AlreadyExists:
            self.expectations.lower(job.key, ADD, res.plural, name)
            existing = self.client.get(res, job.namespace, name)
            self.check_owned(job, res, existing)
            return None
        except KubeError:
            self.expectations.lower(job.key, ADD, res.plural, name)
            raise
        self._told(job, "create", res.kind, name)
        log.debug("created", kind=res.kind, name=name)
        return created

    def create_unwatched(self, job: JobIdentity, res: Resource, obj: Obj) -> bool:
        """Create a child no informer watches and the operator may not read (the transfer
        token Secret): no expectation; True if created, False if the name exists already."""
        try:
            self.client.create(res, job.namespace, obj)
        except AlreadyExists:
            return False
        log.debug("created", kind=res.kind, name=_name(obj))
        return True

    def update_data(self, res: Resource, existing: Obj, data: dict[str, str]) -> Obj:
        """Replace a ConfigMap's data, guarded by the cached resourceVersion."""
        body = copy.deepcopy(existing)
        body["data"] = data
        return self.client.replace(res, _meta_ns(existing), _name(existing), body)

    def delete(
        self,
        job: JobIdentity,
        res: Resource,
        obj: Obj,
        why: str,
        *,
        force: bool = False,
        grace: int | None = None,
    ) -> None:
        """Delete a child by name with a UID precondition (never a namesake created later).
        ``force``: grace period 0, for a pod on a lost node (no kubelet will ever confirm
        a graceful deletion there); ``grace``: a grace period of that many seconds (None: the
        object's own)."""
        name = _name(obj)
        uid = ob.uid(obj) or None
        self.expectations.expect(job.key, DELETE, res.plural, [name])
        try:
            self.client.delete(
                res, job.namespace, name, uid=uid, grace_period_seconds=0 if force else grace
            )
        except (NotFound, Conflict):
            self.expectations.lower(job.key, DELETE, res.plural, name)
            return
        except KubeError:
            self.expectations.lower(job.key, DELETE, res.plural, name)
            raise
        self._told(job, "delete", res.kind, name, why)


def _meta_ns(obj: Obj) -> str:
    return ob.namespace(obj)
