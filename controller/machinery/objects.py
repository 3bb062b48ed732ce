"""Typed access to the raw JSON objects the controller reads.

The caches keep every object as its JSON dict (``kubeclient.Obj``, ``dict[str, Any]``): nothing
is decoded on the watch path. The sync reads them here, at the edge: the TypedDicts below
spell the fields it reads (every one optional, as in the API's JSON: an absent field is
absent), and the accessors return those views of any object, whatever it lacks. A mistyped key
is then a mypy error, not a silent ``None`` (``tests/controller/test_objects.py`` shows it):
``view["namspace"]`` is refused outright, and ``view.get("namspace")`` is typed ``object``,
which no ``str``, ``int`` or ``list`` accepts. So read a field into its type (return it, or
give the variable its type), never through ``str(...)`` or ``bool(...)``, which take any
``object`` and would hide the typo again.

The views are the same dicts, cast: reading through them costs nothing, and writing through
them writes the cached object (the sync never does: it writes copies).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol, TypedDict, cast

from kubeclient import Obj

# -- the views ------------------------------------------------------------------------------


class OwnerReference(TypedDict, total=False):
    apiVersion: str
    kind: str
    name: str
    uid: str
    controller: bool
    blockOwnerDeletion: bool


class ObjectMeta(TypedDict, total=False):
    name: str
    namespace: str
    uid: str
    generation: int
    resourceVersion: str
    creationTimestamp: str
    deletionTimestamp: str
    deletionGracePeriodSeconds: int
    labels: dict[str, str]
    annotations: dict[str, str]
    ownerReferences: list[OwnerReference]


class Condition(TypedDict, total=False):
    """A condition of a pod, a node or a DGLJob."""

    type: str
    status: str
    reason: str
    message: str
    lastTransitionTime: str
    lastUpdateTime: str


class StateWaiting(TypedDict, total=False):
    reason: str
    message: str


class StateTerminated(TypedDict, total=False):
    exitCode: int
    reason: str
    message: str
    startedAt: str
    finishedAt: str


class ContainerState(TypedDict, total=False):
    waiting: StateWaiting
    running: dict[str, Any]
    terminated: StateTerminated


class ContainerStatus(TypedDict, total=False):
    name: str
    state: ContainerState
    ready: bool
    restartCount: int


class Container(TypedDict, total=False):
    name: str
    image: str
    resources: dict[str, Any]


class PodSpec(TypedDict, total=False):
    nodeName: str
    containers: list[Container]
    initContainers: list[Container]


class PodStatus(TypedDict, total=False):
    phase: str
    podIP: str
    reason: str
    message: str
    conditions: list[Condition]
    containerStatuses: list[ContainerStatus]
    initContainerStatuses: list[ContainerStatus]


class Taint(TypedDict, total=False):
    key: str
    value: str
    effect: str


class NodeSpec(TypedDict, total=False):
    taints: list[Taint]


class NodeStatus(TypedDict, total=False):
    conditions: list[Condition]


class JobStatus(TypedDict, total=False):
    """The DGLJob's status as the sync reads it (dglrun's own fields: podcontract)."""

    phase: str
    conditions: list[Condition]
    startTime: str
    completionTime: str
    restartCount: int
    replicaStatuses: dict[str, Any]
    observedGeneration: int
    trainingSeconds: float
    results: dict[str, Any]


# -- any object -----------------------------------------------------------------------------


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def meta(obj: Obj | None) -> ObjectMeta:
    """``metadata`` ({} when absent)."""
    return cast(ObjectMeta, _dict((obj or {}).get("metadata")))


def name(obj: Obj | None) -> str:
    return meta(obj).get("name") or ""


def namespace(obj: Obj | None) -> str:
    return meta(obj).get("namespace") or ""


def uid(obj: Obj | None) -> str:
    return meta(obj).get("uid") or ""


def key(obj: Obj) -> str:
    """``namespace/name``: the object's key in the caches and the work queue."""
    return f"{namespace(obj)}/{name(obj)}"


def labels(obj: Obj | None) -> dict[str, str]:
    return meta(obj).get("labels") or {}


def annotation(obj: Obj | None, name: str) -> str | None:
    """One annotation's value (None: the object has no such annotation)."""
    return (meta(obj).get("annotations") or {}).get(name)


def generation(obj: Obj) -> int:
    return int(meta(obj).get("generation") or 0)


def owner_uid(obj: Obj | None) -> str:
    """The uid of the object's controller (its ownerReference with ``controller: true``)."""
    for ref in meta(obj).get("ownerReferences") or []:
        if ref.get("controller"):
            return ref.get("uid") or ""
    return ""


def being_deleted(obj: Obj | None) -> bool:
    """``metadata.deletionTimestamp`` is set (for a pod: it is terminating)."""
    stamp: str | None = meta(obj).get("deletionTimestamp")
    return bool(stamp)


def conditions(status: Obj | PodStatus | NodeStatus | JobStatus) -> list[Condition]:
    return cast(list[Condition], status.get("conditions") or [])


# -- pods -----------------------------------------------------------------------------------


def pod_spec(pod: Obj | None) -> PodSpec:
    return cast(PodSpec, _dict((pod or {}).get("spec")))


def pod_status(pod: Obj | None) -> PodStatus:
    return cast(PodStatus, _dict((pod or {}).get("status")))


def container_statuses(pod: Obj, *, init: bool = False) -> list[ContainerStatus]:
    st = pod_status(pod)
    return (st.get("initContainerStatuses") if init else st.get("containerStatuses")) or []


def state(cs: ContainerStatus | None) -> ContainerState:
    return (cs or {}).get("state") or {}


def waiting(cs: ContainerStatus) -> StateWaiting | None:
    """The container's waiting state, if it waits."""
    w = state(cs).get("waiting")
    return w if isinstance(w, dict) else None


def terminated(cs: ContainerStatus | None) -> StateTerminated | None:
    """The container's terminated state, once it ended."""
    t = state(cs).get("terminated")
    return t if isinstance(t, dict) else None


# -- nodes ----------------------------------------------------------------------------------


def node_spec(node: Obj) -> NodeSpec:
    return cast(NodeSpec, _dict(node.get("spec")))


def node_status(node: Obj) -> NodeStatus:
    return cast(NodeStatus, _dict(node.get("status")))


# -- timestamps (RFC 3339, as the API writes them) ------------------------------------------


def now_rfc3339(now: float) -> str:
    """``now`` (seconds since the epoch) as the API's timestamps read."""
    return datetime.fromtimestamp(now, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(value: Any) -> float | None:
    """An API timestamp as seconds since the epoch (None: none, or not a timestamp)."""
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.strptime(value, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp()
    except ValueError:
        try:
            return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
        except ValueError:
            return None


# -- DGLJobs --------------------------------------------------------------------------------


def job_status(obj: Obj) -> JobStatus:
    return cast(JobStatus, _dict(obj.get("status")))


class JobIdentity(Protocol):
    """What acting on a job's children needs of the job: who it is. A parsed
    :class:`controller.api.DGLJob` is one; so is :class:`JobRef`, read from the raw object
    alone (a finished job is cleaned up whether or not its spec still parses)."""

    @property
    def namespace(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def uid(self) -> str: ...
    @property
    def key(self) -> str: ...
    @property
    def raw(self) -> Obj: ...
    @property
    def status(self) -> Obj: ...


@dataclass(frozen=True)
class JobRef:
    """A DGLJob's identity, from its metadata only (its spec is not read)."""

    namespace: str
    name: str
    uid: str
    raw: Obj

    @classmethod
    def of(cls, raw: Obj) -> JobRef:
        return cls(namespace(raw), name(raw), uid(raw), raw)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def status(self) -> Obj:
        st = self.raw.get("status")
        return st if isinstance(st, dict) else {}
