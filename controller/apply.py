"""Create, update and delete a job's children: ownership checks, expectations, events."""

from __future__ import annotations

import copy

import structlog

from controller.api import DGLJob
from controller.events import NORMAL, WARNING, EventRecorder
from controller.expectations import ADD, DELETE, Expectations
from informers.store import controller_ref
from kubeclient import AlreadyExists, Conflict, KubeClient, KubeError, NotFound, Obj, Resource

log = structlog.get_logger("controller.apply")

REASON_RESOURCE_EXISTS = "ErrResourceExists"


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
    return str((obj.get("metadata") or {}).get("name") or "")


def owner_of(obj: Obj) -> str:
    ref = controller_ref(obj)
    return f"{ref.get('kind')}/{ref.get('name')}" if ref else "none"


def controlled_by(obj: Obj, job: DGLJob) -> bool:
    ref = controller_ref(obj)
    return bool(ref and ref.get("uid") == job.uid)


class Applier:
    def __init__(
        self, client: KubeClient, expectations: Expectations, recorder: EventRecorder
    ) -> None:
        self.client = client
        self.expectations = expectations
        self.recorder = recorder

    def check_owned(self, job: DGLJob, res: Resource, existing: Obj | None) -> None:
        """Raise (and record a Warning) when a cached object of that name is someone else's."""
        if existing is not None and not controlled_by(existing, job):
            err = ForeignObjectError(res.kind, _name(existing), owner_of(existing))
            self.recorder.record(job.raw, WARNING, REASON_RESOURCE_EXISTS, str(err))
            raise err

    def create(self, job: DGLJob, res: Resource, obj: Obj) -> bool:
        """Create a child; True if created, False if it already existed and is ours."""
        name = _name(obj)
        self.expectations.expect(job.key, ADD, res.plural, [name])
        try:
            self.client.create(res, job.namespace, obj)
        except AlreadyExists:
            self.expectations.lower(job.key, ADD, res.plural, name)
            existing = self.client.get(res, job.namespace, name)
            self.check_owned(job, res, existing)
            return False
        except KubeError:
            self.expectations.lower(job.key, ADD, res.plural, name)
            raise
        if res.kind in ("Pod", "Service"):
            self.recorder.record(
                job.raw, NORMAL, f"SuccessfulCreate{res.kind}", f"Created {res.kind.lower()} {name}"
            )
        log.debug("created", kind=res.kind, name=name)
        return True

    def create_unwatched(self, job: DGLJob, res: Resource, obj: Obj) -> bool:
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
        self, job: DGLJob, res: Resource, obj: Obj, why: str, *, force: bool = False
    ) -> None:
        """Delete a child by name with a UID precondition (never a namesake created later).
        ``force``: grace period 0, for a pod on a lost node (no kubelet will ever confirm
        a graceful deletion there)."""
        name = _name(obj)
        uid = (obj.get("metadata") or {}).get("uid")
        self.expectations.expect(job.key, DELETE, res.plural, [name])
        try:
            self.client.delete(
                res, job.namespace, name, uid=uid, grace_period_seconds=0 if force else None
            )
        except (NotFound, Conflict):
            self.expectations.lower(job.key, DELETE, res.plural, name)
            return
        except KubeError:
            self.expectations.lower(job.key, DELETE, res.plural, name)
            raise
        if res.kind in ("Pod", "Service"):
            self.recorder.record(
                job.raw,
                NORMAL,
                f"SuccessfulDelete{res.kind}",
                f"Deleted {res.kind.lower()} {name}: {why}",
            )


def _meta_ns(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("namespace") or "")
