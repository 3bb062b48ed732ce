"""The fake API server: :class:`FakeKube`, an in-memory :class:`kubeclient.KubeClient`.

Objects live in dicts under one global, etcd-like resourceVersion counter (every write bumps
it); it enforces optimistic concurrency (409 on a stale ``metadata.resourceVersion``), the
status subresource, finalizers and ``deletionTimestamp``, UID preconditions, generateName, a
pod bound to a node (``spec.nodeName``) that only a grace period of 0 removes (there is no
kubelet to confirm a graceful deletion, as with a real API server and no kubelet); it
keeps a bounded event history for watches (:mod:`tests.fakekube.watch`), and offers the test
controls: fault injection (:meth:`FakeKube.fail_next`), an action log (:class:`Action`), watch
ends and breaks, bookmarks, compaction and a garbage-collector emulation.

Every object handed out is a deep copy: callers can never mutate the store. Stored objects are
never mutated in place either (each write stores a fresh dict), so the event history can share
them.
"""

from __future__ import annotations

import copy
import json
import random
import threading
import time
import uuid
from collections import deque
from collections.abc import Iterator
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from dataclasses import replace as dc_replace
from typing import TYPE_CHECKING, Any

from clock import Clock, RealClock
from kubeclient import Obj, Resource
from tests.fakekube.patches import PatchError, json_merge_patch, json_patch
from tests.fakekube.selectors import (
    match_field_selector,
    match_label_selector,
    object_labels,
    parse_field_selector,
    parse_label_selector,
)
from tests.fakekube.status import (
    bad_request,
    conflict,
    fail,
    invalid,
    no_such_path,
    not_found,
    status_body,
    status_details,
    too_large_rv,
)
from tests.fakekube.validation import check_type, name_error, validate_meta
from tests.fakekube.watch import Event, FakeWatch

#: Verbs known to :meth:`FakeKube.fail_next` and recorded in :attr:`FakeKube.actions`.
VERBS = frozenset({"list", "watch", "get", "create", "update", "patch", "delete"})
WRITE_VERBS = frozenset({"create", "update", "patch", "delete"})

#: The alphabet the API server uses for ``generateName`` suffixes (no vowels, no 0/1/3).
_GENERATE_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
_GENERATE_LENGTH = 5

_CONFLICT_MESSAGE = (
    "the object has been modified; please apply your changes to the latest version and try again"
)


@dataclass(frozen=True)
class Action:
    """One call made on the fake (failed and injected-failure calls included)."""

    verb: str
    resource: str
    namespace: str | None
    name: str | None
    subresource: str | None = None
    grace_period_seconds: int | None = None  # a delete's


@dataclass
class _Fault:
    """A pending :meth:`FakeKube.fail_next`."""

    verb: str
    resource: str | None
    error: Exception
    remaining: int


def _builtin_group(group: str) -> bool:
    """Built-in API groups (core, no dot, *.k8s.io): their list items come without kind."""
    return group == "" or "." not in group or group.endswith(".k8s.io")


class LogStream:
    """A pod's log as :meth:`FakeKube.stream` answers it (kubeclient's ``ByteStream``)."""

    def __init__(self, data: bytes) -> None:
        self._data, self._at = data, 0

    def read(self, amt: int | None = None) -> bytes:
        end = len(self._data) if amt is None else self._at + amt
        out, self._at = self._data[self._at : end], min(end, len(self._data))
        return out

    def __iter__(self) -> Iterator[bytes]:
        rest = self.read()
        yield from rest.splitlines(keepends=True)

    def close(self) -> None:
        self._at = len(self._data)


class FakeKube:
    """In-memory :class:`kubeclient.KubeClient` for unit tests (thread-safe, one lock)."""

    def __init__(
        self,
        *,
        status_subresources: AbstractSet[str] = frozenset(
            {"dgljobs.qihoo.net", "workloads.kueue.x-k8s.io"}
        ),
        history: int = 1000,
        clock: Clock | None = None,
    ) -> None:
        if history < 0:
            raise ValueError("history must be >= 0")
        self.status_subresources = frozenset(status_subresources)
        self._history_size = history
        self._clock: Clock = clock or RealClock()  # the wall time stamped on objects
        self._cond = threading.Condition(threading.RLock())
        self._rv = 0
        self._store: dict[str, dict[tuple[str, str], Obj]] = {}
        self._resources: dict[str, Resource] = {}
        self._history: deque[Event] = deque()
        self._compacted = 0  # highest resourceVersion whose event was dropped from history
        self._watches: list[FakeWatch] = []
        self._actions: list[Action] = []
        self._faults: list[_Fault] = []
        self._random = random.Random()
        self._logs: dict[tuple[str, str], bytes] = {}  # (namespace, pod) -> its log
        self.log_queries: list[dict[str, Any]] = []  # every pod log request's query

    # -- test helpers ---------------------------------------------------------------------------

    @property
    def resource_version(self) -> int:
        """The current global resourceVersion (the last write's)."""
        with self._cond:
            return self._rv

    @property
    def actions(self) -> list[Action]:
        """A copy of the action log, oldest first."""
        with self._cond:
            return list(self._actions)

    def set_log(self, namespace: str, pod: str, text: str | bytes) -> None:
        """What ``pods/<pod>/log`` answers (:meth:`stream`), as a kubelet would."""
        with self._cond:
            self._logs[(namespace, pod)] = text.encode() if isinstance(text, str) else text

    def clear_actions(self) -> None:
        with self._cond:
            self._actions.clear()

    def writes(self) -> list[Action]:
        """The create/update/patch/delete actions, oldest first."""
        with self._cond:
            return [a for a in self._actions if a.verb in WRITE_VERBS]

    def fail_next(
        self, verb: str, resource: Resource | None, error: Exception, times: int = 1
    ) -> None:
        """Make the next ``times`` calls of ``verb`` on ``resource`` (None: any) raise ``error``.

        Verbs: list, watch, get, create, update (``replace`` is accepted as an alias), patch,
        delete. The failed call is still recorded in :attr:`actions`.
        """
        if verb == "replace":
            verb = "update"
        if verb not in VERBS:
            raise ValueError(f"unknown verb {verb!r}; expected one of {sorted(VERBS)}")
        if times < 1:
            raise ValueError("times must be >= 1")
        with self._cond:
            self._faults.append(
                _Fault(verb, str(resource) if resource is not None else None, error, times)
            )

    def clear_faults(self) -> None:
        """Forget every pending :meth:`fail_next`."""
        with self._cond:
            self._faults.clear()

    def objects(self, res: Resource, namespace: str | None = None) -> list[Obj]:
        """Copies of the stored objects of ``res`` (in ``namespace``, or all), sorted."""
        with self._cond:
            bucket = self._store.get(str(res), {})
            return [
                copy.deepcopy(o)
                for (ns, _), o in sorted(bucket.items())
                if not (res.namespaced and namespace) or ns == namespace
            ]

    def compact(self, rv: int | None = None) -> None:
        """Drop the event history up to ``rv`` (default: everything so far), like etcd compaction.

        A later watch from an older resourceVersion gets a 410 Expired ERROR event.
        """
        with self._cond:
            upto = self._rv if rv is None else min(rv, self._rv)
            while self._history and self._history[0].rv <= upto:
                self._history.popleft()
            self._compacted = max(self._compacted, upto)

    def open_watches(self) -> int:
        """Number of watch streams still open (not closed, ended, broken or timed out)."""
        with self._cond:
            now = time.monotonic()
            return sum(1 for w in self._watches if w.accepting(now))

    def wait_for_watches(self, count: int = 1, timeout: float = 5.0) -> bool:
        """Block until at least ``count`` watches are open; False on timeout."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while self.open_watches() < count:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(min(left, 0.05))
            return True

    def end_watches(self) -> None:
        """The server closes every open watch cleanly (queued events are still delivered)."""
        with self._cond:
            for w in self._watches:
                w.end()
            self._watches.clear()
            self._cond.notify_all()

    def break_watches(self) -> None:
        """Every open watch's connection breaks: its iterator raises ``TransportError``."""
        with self._cond:
            for w in self._watches:
                w.sever()
            self._watches.clear()
            self._cond.notify_all()

    def send_bookmark(self) -> None:
        """Send a BOOKMARK at the current resourceVersion to every open watch that allows them."""
        with self._cond:
            now = time.monotonic()
            for w in self._watches:
                if w.accepting(now) and w.allow_bookmarks:
                    w.push(
                        {
                            "type": "BOOKMARK",
                            "object": {
                                "kind": w.resource.kind,
                                "apiVersion": w.resource.api_version,
                                "metadata": {"resourceVersion": str(self._rv)},
                            },
                        }
                    )
            self._cond.notify_all()

    def collect_garbage(self) -> int:
        """Emulate the garbage collector (background propagation).

        Repeatedly deletes (with events) every object all of whose ownerReferences point to
        UIDs no longer in the store; an object with some owners left only loses the dangling
        references. Objects held by finalizers get a deletionTimestamp and stay (their own
        dependents survive until they are really gone). Returns how many objects were deleted
        (marked-for-deletion ones included).
        """
        deleted = 0
        with self._cond:
            while True:
                uids = {
                    o["metadata"]["uid"] for bucket in self._store.values() for o in bucket.values()
                }
                changed = False
                for key in sorted(self._store):
                    res = self._resources[key]
                    for (ns, name), obj in sorted(self._store[key].items()):
                        meta = obj["metadata"]
                        refs = meta.get("ownerReferences") or []
                        if not refs:
                            continue
                        alive = [r for r in refs if r.get("uid") in uids]
                        if len(alive) == len(refs):
                            continue
                        if alive:
                            new = copy.deepcopy(obj)
                            new["metadata"]["ownerReferences"] = alive
                            self._apply_update(res, ns, name, obj, new, None)
                            changed = True
                        elif not meta.get("deletionTimestamp"):
                            self._delete_obj(res, ns, name, obj)
                            deleted += 1
                            changed = True
                if not changed:
                    return deleted

    # -- internals (call with the lock held) -----------------------------------------------

    def _bucket(self, res: Resource) -> dict[tuple[str, str], Obj]:
        key = str(res)
        self._resources.setdefault(key, res)
        return self._store.setdefault(key, {})

    def _begin(
        self,
        verb: str,
        res: Resource,
        namespace: str | None,
        name: str | None,
        subresource: str | None = None,
        grace_period_seconds: int | None = None,
    ) -> None:
        self._resources.setdefault(str(res), res)
        ns = namespace if res.namespaced else None
        self._actions.append(Action(verb, str(res), ns, name, subresource, grace_period_seconds))
        for fault in self._faults:
            if fault.verb == verb and fault.resource in (None, str(res)):
                fault.remaining -= 1
                if fault.remaining <= 0:
                    self._faults.remove(fault)
                raise fault.error

    def _unregister(self, w: FakeWatch) -> None:
        with self._cond:
            if w in self._watches:
                self._watches.remove(w)
            self._cond.notify_all()

    def _now(self) -> str:
        return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self._clock.wall()))

    def _object_ns(self, res: Resource, namespace: str | None) -> str:
        """The namespace key of a single object; "" for cluster-scoped resources."""
        if not res.namespaced:
            return ""
        if not namespace:
            no_such_path()
        return namespace

    def _lookup(self, res: Resource, ns: str, name: str) -> Obj:
        obj = self._bucket(res).get((ns, name))
        if obj is None:
            not_found(res, name)
        return obj

    def _check_subresource(self, res: Resource, subresource: str | None) -> None:
        if subresource is None:
            return
        if subresource != "status" or str(res) not in self.status_subresources:
            no_such_path()

    def _parse_rv(self, rv: str | None) -> int | None:
        """None for "unset/any" (None, "", "0"); raises 400/504 like the API server."""
        if rv is None or rv in ("", "0"):
            return None
        try:
            value = int(rv)
        except ValueError:
            bad_request(f'invalid resource version "{rv}"')
        if value < 0:
            bad_request(f'invalid resource version "{rv}"')
        if value > self._rv:
            too_large_rv(value, self._rv)
        return value

    def _check_selectors(self, label_selector: str | None, field_selector: str | None) -> None:
        try:
            parse_label_selector(label_selector or "")
        except ValueError as e:
            bad_request(str(e))
        try:
            parse_field_selector(field_selector or "")
        except ValueError as e:
            bad_request(str(e))

    def _emit(self, res: Resource, ns: str, kind: str, obj: Obj, prev: Obj | None) -> None:
        ev = Event(self._rv, str(res), ns, kind, obj, prev)
        self._history.append(ev)
        while len(self._history) > self._history_size:
            dropped = self._history.popleft()
            self._compacted = max(self._compacted, dropped.rv)
        if self._history_size == 0:
            self._compacted = self._rv
        now = time.monotonic()
        for w in self._watches:
            if w.accepting(now):
                w.offer(ev)
        self._cond.notify_all()

    @staticmethod
    def _body_for_generation(obj: Obj) -> Obj:
        return {k: v for k, v in obj.items() if k not in ("metadata", "status")}

    def _apply_update(
        self,
        res: Resource,
        ns: str,
        name: str,
        current: Obj,
        body: Obj,
        subresource: str | None,
    ) -> Obj:
        """Store ``body`` (a private copy) as the new state of ``current``; returns a copy."""
        if not isinstance(body, dict):
            bad_request("the request body must be a JSON object")
        meta_in = body.get("metadata")
        if meta_in is None:
            meta_in = body["metadata"] = {}
        if not isinstance(meta_in, dict):
            bad_request("metadata must be an object")
        if meta_in.get("name") not in (None, "", name):
            bad_request(
                f"the name of the object ({meta_in['name']}) does not match the name on the URL "
                f"({name})"
            )
        if res.namespaced and meta_in.get("namespace") not in (None, "", ns):
            bad_request(
                "the namespace of the provided object does not match the namespace sent on the "
                "request"
            )
        cmeta = current["metadata"]
        rv_in = meta_in.get("resourceVersion")
        if rv_in and str(rv_in) != cmeta["resourceVersion"]:
            conflict(res, name, _CONFLICT_MESSAGE)

        if subresource == "status":
            new = copy.deepcopy(current)
            if "status" in body:
                new["status"] = body["status"]
            else:
                new.pop("status", None)
        else:
            check_type(res, body)
            new = {"apiVersion": res.api_version, "kind": res.kind}
            new.update((k, v) for k, v in body.items() if k not in ("apiVersion", "kind"))
            if str(res) in self.status_subresources:
                if "status" in current:
                    new["status"] = copy.deepcopy(current["status"])
                else:
                    new.pop("status", None)
            meta = new["metadata"]
            for k in (
                "name",
                "namespace",
                "uid",
                "creationTimestamp",
                "generation",
                "deletionTimestamp",
                "deletionGracePeriodSeconds",
            ):
                if k in cmeta:
                    meta[k] = cmeta[k]
                else:
                    meta.pop(k, None)
            if cmeta.get("deletionTimestamp"):
                added = [
                    f
                    for f in meta.get("finalizers") or []
                    if f not in (cmeta.get("finalizers") or [])
                ]
                if added:
                    invalid(
                        res,
                        name,
                        "metadata.finalizers",
                        f"Forbidden: no new finalizers can be added if the object is being "
                        f"deleted, found new finalizers {added}",
                        "FieldValueForbidden",
                    )
            validate_meta(res, name, meta)
            if self._body_for_generation(new) != self._body_for_generation(current):
                meta["generation"] = int(cmeta.get("generation") or 0) + 1

        new["metadata"]["resourceVersion"] = cmeta["resourceVersion"]
        if new == current:
            return copy.deepcopy(current)
        self._rv += 1
        new["metadata"]["resourceVersion"] = str(self._rv)
        bucket = self._bucket(res)
        if new["metadata"].get("deletionTimestamp") and not new["metadata"].get("finalizers"):
            del bucket[(ns, name)]
            self._emit(res, ns, "DELETED", new, current)
        else:
            bucket[(ns, name)] = new
            self._emit(res, ns, "MODIFIED", new, current)
        return copy.deepcopy(new)

    def _delete_obj(
        self, res: Resource, ns: str, name: str, current: Obj, grace: int | None = None
    ) -> Obj:
        meta = current["metadata"]
        bucket = self._bucket(res)
        new = copy.deepcopy(current)
        bound = res.kind == "Pod" and bool((current.get("spec") or {}).get("nodeName"))
        if bound and grace != 0 and meta.get("deletionGracePeriodSeconds") != 0:
            # a graceful deletion of a pod on a node: only its kubelet (none here) would end
            # it; it stays Terminating until a delete with grace period 0
            if meta.get("deletionTimestamp"):
                return new
            self._rv += 1
            new["metadata"]["deletionTimestamp"] = self._now()
            new["metadata"]["deletionGracePeriodSeconds"] = 30 if grace is None else grace
            new["metadata"]["resourceVersion"] = str(self._rv)
            bucket[(ns, name)] = new
            self._emit(res, ns, "MODIFIED", new, current)
            return copy.deepcopy(new)
        if meta.get("finalizers"):
            if meta.get("deletionTimestamp") and meta.get("deletionGracePeriodSeconds") == 0:
                return new  # already terminating: nothing changes
            self._rv += 1
            new["metadata"].setdefault("deletionTimestamp", self._now())
            new["metadata"]["deletionGracePeriodSeconds"] = 0
            new["metadata"]["resourceVersion"] = str(self._rv)
            bucket[(ns, name)] = new
            self._emit(res, ns, "MODIFIED", new, current)
            return copy.deepcopy(new)
        self._rv += 1
        new["metadata"]["resourceVersion"] = str(self._rv)
        del bucket[(ns, name)]
        self._emit(res, ns, "DELETED", new, current)
        return copy.deepcopy(new)

    # -- KubeClient -------------------------------------------------------------------------

    def list(
        self,
        res: Resource,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        resource_version: str | None = None,
        limit: int | None = None,
        continue_token: str | None = None,
    ) -> Obj:
        with self._cond:
            self._begin("list", res, namespace, None)
            self._check_selectors(label_selector, field_selector)
            self._parse_rv(resource_version)
            strip_type = _builtin_group(res.group)
            items: list[Obj] = []
            keys: list[tuple[str, str]] = []
            after = tuple(json.loads(continue_token)) if continue_token else None
            for (ns, name), obj in sorted(self._bucket(res).items()):
                if res.namespaced and namespace and ns != namespace:
                    continue
                if after is not None and (ns, name) <= after:
                    continue  # (a page after the one the token ended)
                if label_selector and not match_label_selector(label_selector, object_labels(obj)):
                    continue
                if field_selector and not match_field_selector(field_selector, obj):
                    continue
                item = copy.deepcopy(obj)
                if strip_type:
                    # Built-in types' list items come without kind/apiVersion on the wire.
                    item.pop("kind", None)
                    item.pop("apiVersion", None)
                items.append(item)
                keys.append((ns, name))
            meta: dict[str, Any] = {"resourceVersion": str(self._rv)}
            if limit and len(items) > limit:  # a page: the token names its last item's key
                meta["continue"] = json.dumps(keys[limit - 1])
                meta["remainingItemCount"] = len(items) - limit
                items = items[:limit]
            return {
                "apiVersion": res.api_version,
                "kind": f"{res.kind}List",
                "metadata": meta,
                "items": items,
            }

    def stream(
        self,
        res: Resource,
        namespace: str | None,
        name: str,
        subresource: str,
        *,
        query: dict[str, Any] | None = None,
        read_timeout: float | None = None,
    ) -> LogStream:
        """``pods/<name>/log`` (what :meth:`set_log` set; empty by default) with the API
        server's ``tailLines`` (the last lines) and ``limitBytes`` (at most that many bytes,
        from the first); another subresource is a 404."""
        with self._cond:
            self._begin("get", res, namespace, name, subresource)
            ns = self._object_ns(res, namespace)
            self._lookup(res, ns, name)  # (NotFound for a pod that is not there)
            if res.kind != "Pod" or subresource != "log":
                not_found(res, f"{name}/{subresource}")
            q = dict(query or {})
            self.log_queries.append(q)
            data = self._logs.get((ns or "", name), b"")
            if q.get("tailLines") is not None:
                lines = data.splitlines(keepends=True)
                data = b"".join(lines[len(lines) - min(int(q["tailLines"]), len(lines)) :])
            if q.get("limitBytes") is not None:
                data = data[: int(q["limitBytes"])]
            return LogStream(data)

    def watch(
        self,
        res: Resource,
        namespace: str | None = None,
        *,
        resource_version: str | None = None,
        timeout_seconds: int | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        allow_bookmarks: bool = True,
        read_timeout: float | None = None,
    ) -> FakeWatch:
        with self._cond:
            self._begin("watch", res, namespace, None)
            self._check_selectors(label_selector, field_selector)
            start = self._parse_rv(resource_version)
            w = FakeWatch(
                self._cond,
                self._unregister,
                res,
                namespace if res.namespaced else None,
                label_selector or "",
                field_selector or "",
                timeout_seconds,
                read_timeout,
                allow_bookmarks,
            )
            if start is not None and start < self._compacted:
                w.push(
                    {
                        "type": "ERROR",
                        "object": status_body(
                            410,
                            "Expired",
                            f"too old resource version: {start} ({self._compacted})",
                        ),
                    }
                )
                w.end()
                return w
            if start is not None:
                for ev in self._history:
                    if ev.rv > start:
                        w.offer(ev)
            self._watches.append(w)
            self._cond.notify_all()
            return w

    def get(self, res: Resource, namespace: str | None, name: str) -> Obj:
        with self._cond:
            self._begin("get", res, namespace, name)
            return copy.deepcopy(self._lookup(res, self._object_ns(res, namespace), name))

    def create(
        self, res: Resource, namespace: str | None, body: Obj, *, metadata_only: bool = False
    ) -> Obj:
        with self._cond:
            meta_in = body.get("metadata") if isinstance(body, dict) else None
            req_name = meta_in.get("name") if isinstance(meta_in, dict) else None
            self._begin("create", res, namespace, req_name or None)
            if not isinstance(body, dict):
                bad_request("the request body must be a JSON object")
            check_type(res, body)
            obj: Obj = {"apiVersion": res.api_version, "kind": res.kind}
            obj.update(
                (k, copy.deepcopy(v)) for k, v in body.items() if k not in ("apiVersion", "kind")
            )
            meta = obj.get("metadata")
            if meta is None:
                meta = obj["metadata"] = {}
            if not isinstance(meta, dict):
                bad_request("metadata must be an object")
            if res.namespaced:
                if not namespace:
                    fail(
                        405,
                        "MethodNotAllowed",
                        "the server does not allow this method on the requested resource",
                    )
                if meta.get("namespace") not in (None, "", namespace):
                    bad_request(
                        "the namespace of the provided object does not match the namespace sent "
                        "on the request"
                    )
                ns = namespace
                meta["namespace"] = ns
            else:
                ns = ""
                meta.pop("namespace", None)
            if meta.get("resourceVersion"):
                bad_request("resourceVersion should not be set on objects to be created")
            bucket = self._bucket(res)
            name = str(meta.get("name") or "")
            if not name:
                prefix = meta.get("generateName")
                if not prefix:
                    invalid(
                        res,
                        "",
                        "metadata.name",
                        "Required value: name or generateName is required",
                        "FieldValueRequired",
                    )
                for _ in range(100):
                    name = str(prefix) + "".join(
                        self._random.choices(_GENERATE_ALPHABET, k=_GENERATE_LENGTH)
                    )
                    if (ns, name) not in bucket:
                        break
                meta["name"] = name
                self._actions[-1] = dc_replace(self._actions[-1], name=name)
            err = name_error(res, name)
            if err:
                invalid(
                    res,
                    name,
                    "metadata.name",
                    f'Invalid value: "{name}": {err}',
                    "FieldValueInvalid",
                )
            if (ns, name) in bucket:
                fail(
                    409,
                    "AlreadyExists",
                    f'{res} "{name}" already exists',
                    status_details(res, name),
                )
            validate_meta(res, name, meta)
            meta["uid"] = str(uuid.uuid4())
            meta["creationTimestamp"] = self._now()
            meta["generation"] = 1
            meta.pop("deletionTimestamp", None)
            meta.pop("deletionGracePeriodSeconds", None)
            if str(res) in self.status_subresources:
                obj.pop("status", None)
            self._rv += 1
            meta["resourceVersion"] = str(self._rv)
            bucket[(ns, name)] = obj
            self._emit(res, ns, "ADDED", obj, None)
            if metadata_only:
                return {
                    "apiVersion": "meta.k8s.io/v1",
                    "kind": "PartialObjectMetadata",
                    "metadata": copy.deepcopy(meta),
                }
            return copy.deepcopy(obj)

    def replace(
        self,
        res: Resource,
        namespace: str | None,
        name: str,
        body: Obj,
        *,
        subresource: str | None = None,
    ) -> Obj:
        with self._cond:
            self._begin("update", res, namespace, name, subresource)
            ns = self._object_ns(res, namespace)
            self._check_subresource(res, subresource)
            current = self._lookup(res, ns, name)
            if not isinstance(body, dict):
                bad_request("the request body must be a JSON object")
            return self._apply_update(res, ns, name, current, copy.deepcopy(body), subresource)

    def patch(
        self,
        res: Resource,
        namespace: str | None,
        name: str,
        patch: Any,
        *,
        patch_type: str = "merge",
        subresource: str | None = None,
    ) -> Obj:
        with self._cond:
            self._begin("patch", res, namespace, name, subresource)
            ns = self._object_ns(res, namespace)
            self._check_subresource(res, subresource)
            current = self._lookup(res, ns, name)
            if patch_type == "merge":
                if not isinstance(patch, dict):
                    bad_request("a JSON merge patch for an object must be a JSON object")
                result = json_merge_patch(current, patch)
            elif patch_type == "json":
                try:
                    result = json_patch(current, patch)
                except TypeError as e:
                    bad_request(str(e))
                except PatchError as e:
                    fail(422, "Invalid", str(e))
            elif patch_type == "strategic":
                fail(
                    415,
                    "UnsupportedMediaType",
                    "the body of the request was in an unknown format - accepted media types "
                    "include: application/json-patch+json, application/merge-patch+json "
                    "(strategic merge patch is not implemented by the fake)",
                )
            else:
                raise ValueError(f"unknown patch type {patch_type!r}")
            if not isinstance(result, dict):
                bad_request("the patched object must be a JSON object")
            return self._apply_update(res, ns, name, current, result, subresource)

    def delete(
        self,
        res: Resource,
        namespace: str | None,
        name: str,
        *,
        uid: str | None = None,
        propagation_policy: str | None = None,
        grace_period_seconds: int | None = None,
    ) -> Obj | None:
        """Delete (or, with finalizers, mark for deletion). ``propagation_policy`` is validated
        but otherwise ignored: dependents go away through :meth:`collect_garbage`."""
        with self._cond:
            self._begin("delete", res, namespace, name, grace_period_seconds=grace_period_seconds)
            ns = self._object_ns(res, namespace)
            if propagation_policy not in (None, "Orphan", "Background", "Foreground"):
                bad_request(
                    f"DeleteOptions.propagationPolicy: Unsupported value: {propagation_policy!r}"
                )
            current = self._lookup(res, ns, name)
            have = current["metadata"]["uid"]
            if uid and uid != have:
                conflict(
                    res,
                    name,
                    f"Precondition failed: UID in precondition: {uid}, UID in object meta: {have}",
                )
            return self._delete_obj(res, ns, name, current, grace_period_seconds)


if TYPE_CHECKING:
    from kubeclient import KubeClient, WatchStream

    def _conforms(kube: FakeKube, stream: FakeWatch) -> tuple[KubeClient, WatchStream]:
        return kube, stream
