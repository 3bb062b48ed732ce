"""An in-memory fake of the Kubernetes API for unit tests.

The idea is client-go's fake clientset + object tracker: :class:`FakeKube` implements the
:class:`kubeclient.KubeClient` protocol on top of dicts, with the API server behaviours a
controller depends on:

* one global, etcd-like resourceVersion counter; every write bumps it;
* optimistic concurrency (409 Conflict on a stale ``metadata.resourceVersion``);
* the status subresource (main-resource writes keep the stored status and bump
  ``metadata.generation`` on spec changes, ``/status`` writes change only ``status``);
* finalizers and ``deletionTimestamp``; UID preconditions on delete;
* JSON merge patch (RFC 7386) and JSON patch (RFC 6902);
* list with label and field selectors; watches with a bounded event history, "too old
  resource version" (410 Expired) after compaction, selector transitions (an object that stops
  matching is sent as DELETED, one that starts matching as ADDED), bookmarks, server timeouts,
  clean ends and broken connections;
* fault injection, an action log and a garbage-collector emulation.

Errors are raised the way :class:`kubeclient.RestClient` raises them: through
:func:`kubeclient.error_from_status` with a Kubernetes ``Status`` body.

Every object handed out is a deep copy: callers can never mutate the store. Stored objects are
never mutated in place either (each write stores a fresh dict), so the event history can share
them.
"""

from __future__ import annotations

import copy
import random
import re
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterator
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from dataclasses import replace as dc_replace
from functools import lru_cache
from typing import TYPE_CHECKING, Any, NoReturn

from kubeclient import Obj, Resource, TransportError, error_from_status

#: Verbs known to :meth:`FakeKube.fail_next` and recorded in :attr:`FakeKube.actions`.
VERBS = frozenset({"list", "watch", "get", "create", "update", "patch", "delete"})
WRITE_VERBS = frozenset({"create", "update", "patch", "delete"})

#: The alphabet the API server uses for ``generateName`` suffixes (no vowels, no 0/1/3).
_GENERATE_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
_GENERATE_LENGTH = 5

_CONFLICT_MESSAGE = (
    "the object has been modified; please apply your changes to the latest version and try again"
)

# ---------------------------------------------------------------------------------------------
# Status bodies and errors
# ---------------------------------------------------------------------------------------------


def status_body(code: int, reason: str, message: str, details: dict[str, Any] | None = None) -> Obj:
    """A ``Status`` object as the API server sends it for a failure."""
    body: Obj = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    if details:
        body["details"] = details
    return body


def _fail(code: int, reason: str, message: str, details: dict[str, Any] | None = None) -> NoReturn:
    raise error_from_status(code, status_body(code, reason, message, details))


def _details(res: Resource, name: str | None = None, **extra: Any) -> dict[str, Any]:
    d: dict[str, Any] = {}
    if name:
        d["name"] = name
    if res.group:
        d["group"] = res.group
    d["kind"] = res.plural
    d.update(extra)
    return d


def _not_found(res: Resource, name: str) -> NoReturn:
    _fail(404, "NotFound", f'{res} "{name}" not found', _details(res, name))


def _no_such_path() -> NoReturn:
    _fail(404, "NotFound", "the server could not find the requested resource")


def _bad_request(message: str) -> NoReturn:
    _fail(400, "BadRequest", message)


def _conflict(res: Resource, name: str, why: str) -> NoReturn:
    _fail(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {res} "{name}": {why}',
        _details(res, name),
    )


def _invalid(res: Resource, name: str, field: str, message: str, cause: str) -> NoReturn:
    full = f"{field}: {message}"
    _fail(
        422,
        "Invalid",
        f'{res.kind} "{name}" is invalid: {full}',
        _details(res, name, causes=[{"reason": cause, "message": message, "field": field}]),
    )


def _too_large_rv(requested: int, current: int) -> NoReturn:
    _fail(
        504,
        "Timeout",
        f"Too large resource version: {requested}, current: {current}",
        {
            "causes": [
                {"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}
            ],
            "retryAfterSeconds": 1,
        },
    )


# ---------------------------------------------------------------------------------------------
# Names and labels validation (the subset of apimachinery validation a controller can trip on)
# ---------------------------------------------------------------------------------------------

_QUALIFIED_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_DNS1035_LABEL = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")


def _label_key_error(key: str) -> str | None:
    prefix, slash, name = key.rpartition("/")
    bad_prefix = not prefix or len(prefix) > 253 or not _DNS1123_SUBDOMAIN.fullmatch(prefix)
    if slash and bad_prefix:
        return f"prefix part of {key!r} must be a DNS-1123 subdomain"
    if not name or len(name) > 63 or not _QUALIFIED_NAME.fullmatch(name):
        return (
            f"name part of {key!r} must consist of alphanumeric characters, '-', '_' or '.', "
            "start and end with an alphanumeric character and be at most 63 characters"
        )
    return None


def _label_value_error(value: str) -> str | None:
    if value == "":
        return None
    if len(value) > 63:
        return "must be no more than 63 characters"
    if not _QUALIFIED_NAME.fullmatch(value):
        return (
            "a valid label must be an empty string or consist of alphanumeric characters, "
            "'-', '_' or '.', and must start and end with an alphanumeric character"
        )
    return None


def _name_error(res: Resource, name: str) -> str | None:
    if res.group == "" and res.plural == "services":
        if len(name) > 63 or not _DNS1035_LABEL.fullmatch(name):
            return (
                "a DNS-1035 label must consist of lower case alphanumeric characters or '-', "
                "start with an alphabetic character, and end with an alphanumeric character"
            )
        return None
    if res.group == "" and res.plural == "namespaces":
        if len(name) > 63 or not _DNS1123_LABEL.fullmatch(name):
            return (
                "a lowercase RFC 1123 label must consist of lower case alphanumeric characters "
                "or '-', and must start and end with an alphanumeric character"
            )
        return None
    if len(name) > 253 or not _DNS1123_SUBDOMAIN.fullmatch(name):
        return (
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, "
            "'-' or '.', and must start and end with an alphanumeric character"
        )
    return None


# ---------------------------------------------------------------------------------------------
# Label selectors
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Requirement:
    """One term of a label selector. ``op`` is one of
    ``=``, ``!=``, ``exists``, ``!``, ``in``, ``notin``, ``>``, ``<``."""

    key: str
    op: str
    values: tuple[str, ...] = ()

    def matches(self, labels: dict[str, str]) -> bool:
        present = self.key in labels
        value = str(labels[self.key]) if present else None
        if self.op == "exists":
            return present
        if self.op == "!":
            return not present
        if self.op in ("=", "in"):
            return present and value in self.values
        if self.op in ("!=", "notin"):
            return not present or value not in self.values
        if self.op in (">", "<"):
            if value is None:
                return False
            try:
                have = int(value)
            except ValueError:
                return False
            want = int(self.values[0])
            return have > want if self.op == ">" else have < want
        raise AssertionError(self.op)


_TOKEN = re.compile(r"\s*(?:(!=|==|=|!|\(|\)|,|<|>)|([^\s!=(),<>]+))")


def _tokenize(selector: str) -> list[tuple[str, str]]:
    tokens: list[tuple[str, str]] = []
    pos = 0
    while pos < len(selector):
        m = _TOKEN.match(selector, pos)
        if m is None:
            if selector[pos:].strip() == "":
                break
            raise ValueError(f"unable to parse selector {selector!r} at position {pos}")
        if m.group(1) is not None:
            tokens.append(("op", m.group(1)))
        else:
            tokens.append(("id", m.group(2)))
        pos = m.end()
    return tokens


@lru_cache(maxsize=512)
def parse_label_selector(selector: str) -> tuple[Requirement, ...]:
    """Parse a Kubernetes label selector (``k8s.io/apimachinery/pkg/labels.Parse`` syntax).

    Supports ``a=b``, ``a==b``, ``a!=b``, ``a``, ``!a``, ``a in (x,y)``, ``a notin (x,y)``,
    ``a>1``, ``a<1``, joined by commas (AND). Raises :class:`ValueError` on bad syntax or an
    invalid label key/value.
    """
    toks = _tokenize(selector)
    if not toks:
        return ()
    i = 0

    def peek() -> tuple[str, str] | None:
        return toks[i] if i < len(toks) else None

    def take_id(what: str) -> str:
        nonlocal i
        t = peek()
        if t is None or t[0] != "id":
            found = "end of string" if t is None else repr(t[1])
            raise ValueError(f"unable to parse requirement: expected {what}, found {found}")
        i += 1
        return t[1]

    def take_op(op: str) -> None:
        nonlocal i
        t = peek()
        if t != ("op", op):
            found = "end of string" if t is None else repr(t[1])
            raise ValueError(f"unable to parse requirement: expected {op!r}, found {found}")
        i += 1

    reqs: list[Requirement] = []
    while True:
        t = peek()
        if t == ("op", "!"):
            i += 1
            req = Requirement(take_id("key"), "!")
        else:
            key = take_id("key")
            t = peek()
            if t is None or t == ("op", ","):
                req = Requirement(key, "exists")
            elif t[0] == "op" and t[1] in ("=", "==", "!="):
                i += 1
                nxt = peek()
                value = ""
                if nxt is not None and nxt[0] == "id":
                    value = nxt[1]
                    i += 1
                req = Requirement(key, "!=" if t[1] == "!=" else "=", (value,))
            elif t[0] == "op" and t[1] in (">", "<"):
                i += 1
                value = take_id("an integer value")
                try:
                    int(value)
                except ValueError:
                    raise ValueError(
                        f"unable to parse requirement: for 'Gt', 'Lt' operators, the value "
                        f"must be an integer, got {value!r}"
                    ) from None
                req = Requirement(key, t[1], (value,))
            elif t in (("id", "in"), ("id", "notin")):
                i += 1
                take_op("(")
                values: list[str] = []
                while True:
                    nxt = peek()
                    if nxt is not None and nxt[0] == "id":
                        values.append(nxt[1])
                        i += 1
                        nxt = peek()
                    else:
                        values.append("")
                    if nxt == ("op", ")"):
                        i += 1
                        break
                    if nxt == ("op", ","):
                        i += 1
                        continue
                    found = "end of string" if nxt is None else repr(nxt[1])
                    raise ValueError(
                        f"unable to parse requirement: expected ',' or ')', found {found}"
                    )
                req = Requirement(key, t[1], tuple(dict.fromkeys(values)))
            else:
                raise ValueError(
                    f"unable to parse requirement: unexpected {t[1]!r} after key {key!r}"
                )
        err = _label_key_error(req.key)
        if err:
            raise ValueError(f"unable to parse requirement: invalid label key {req.key!r}: {err}")
        if req.op not in (">", "<"):
            for v in req.values:
                verr = _label_value_error(v)
                if verr:
                    raise ValueError(
                        f"unable to parse requirement: invalid label value {v!r}: {verr}"
                    )
        reqs.append(req)
        t = peek()
        if t is None:
            return tuple(reqs)
        take_op(",")


def match_label_selector(selector: str, labels: dict[str, str]) -> bool:
    """True if ``labels`` satisfy the Kubernetes label ``selector`` (empty matches all)."""
    return all(r.matches(labels) for r in parse_label_selector(selector))


# ---------------------------------------------------------------------------------------------
# Field selectors
# ---------------------------------------------------------------------------------------------

_FIELDS: dict[str, Callable[[Obj], str]] = {
    "metadata.name": lambda o: str((o.get("metadata") or {}).get("name") or ""),
    "metadata.namespace": lambda o: str((o.get("metadata") or {}).get("namespace") or ""),
    "status.phase": lambda o: str((o.get("status") or {}).get("phase") or ""),
}


@lru_cache(maxsize=512)
def parse_field_selector(selector: str) -> tuple[tuple[str, bool, str], ...]:
    """Parse ``field=value``, ``field==value``, ``field!=value`` terms joined by commas.

    Returns ``(field, equal, value)`` triples. Supported fields: ``metadata.name``,
    ``metadata.namespace``, ``status.phase``; anything else raises :class:`ValueError`
    (the API server answers 400 "field label not supported").
    """
    out: list[tuple[str, bool, str]] = []
    for raw in selector.split(","):
        term = raw.strip()
        if not term:
            continue
        for op in ("!=", "==", "="):
            if op in term:
                field, value = term.split(op, 1)
                break
        else:
            raise ValueError(f"invalid field selector term {term!r}: no operator")
        field = field.strip()
        if field not in _FIELDS:
            raise ValueError(f'field label not supported: "{field}"')
        out.append((field, op != "!=", value.strip()))
    return tuple(out)


def match_field_selector(selector: str, obj: Obj) -> bool:
    return all((_FIELDS[f](obj) == v) == eq for f, eq, v in parse_field_selector(selector))


# ---------------------------------------------------------------------------------------------
# Patches
# ---------------------------------------------------------------------------------------------


def json_merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch; returns a new document (inputs are not modified)."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result: dict[str, Any] = copy.deepcopy(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            result.pop(k, None)
        else:
            result[k] = json_merge_patch(result.get(k), v)
    return result


class PatchError(ValueError):
    """A JSON patch that is well formed but cannot be applied (missing path, failed test)."""


def _pointer(path: Any) -> list[str]:
    if not isinstance(path, str):
        raise PatchError(f"JSON pointer must be a string, got {path!r}")
    if path == "":
        return []
    if not path.startswith("/"):
        raise PatchError(f"invalid JSON pointer {path!r}")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _index(token: str, size: int, *, allow_end: bool) -> int:
    if token == "-" and allow_end:
        return size
    if not re.fullmatch(r"0|[1-9][0-9]*", token):
        raise PatchError(f"invalid array index {token!r}")
    idx = int(token)
    if idx > size or (idx == size and not allow_end):
        raise PatchError(f"array index {idx} out of bounds")
    return idx


def _get(doc: Any, tokens: list[str], path: str) -> Any:
    cur = doc
    for t in tokens:
        if isinstance(cur, dict):
            if t not in cur:
                raise PatchError(f"path {path!r} does not exist")
            cur = cur[t]
        elif isinstance(cur, list):
            cur = cur[_index(t, len(cur), allow_end=False)]
        else:
            raise PatchError(f"path {path!r} does not exist")
    return cur


def _json_equal(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_json_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    return type(a) is type(b) and a == b


def _add(doc: Any, tokens: list[str], value: Any, path: str) -> Any:
    if not tokens:
        return value
    parent = _get(doc, tokens[:-1], path)
    last = tokens[-1]
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        parent.insert(_index(last, len(parent), allow_end=True), value)
    else:
        raise PatchError(f"path {path!r} does not exist")
    return doc


def _remove(doc: Any, tokens: list[str], path: str) -> Any:
    if not tokens:
        raise PatchError("cannot remove the whole document")
    parent = _get(doc, tokens[:-1], path)
    last = tokens[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise PatchError(f"path {path!r} does not exist")
        return parent.pop(last)
    if isinstance(parent, list):
        return parent.pop(_index(last, len(parent), allow_end=False))
    raise PatchError(f"path {path!r} does not exist")


def json_patch(doc: Any, operations: Any) -> Any:
    """RFC 6902 JSON patch (add, remove, replace, move, copy, test); returns a new document.

    Raises :class:`TypeError` for a malformed patch and :class:`PatchError` when an operation
    cannot be applied.
    """
    if not isinstance(operations, list):
        raise TypeError("a JSON patch must be a list of operations")
    out = copy.deepcopy(doc)
    for op in operations:
        if not isinstance(op, dict) or "op" not in op or "path" not in op:
            raise TypeError(f"malformed JSON patch operation: {op!r}")
        kind = op["op"]
        path = op["path"]
        tokens = _pointer(path)
        if kind in ("add", "replace", "test") and "value" not in op:
            raise TypeError(f"JSON patch operation {kind!r} needs a value")
        if kind in ("move", "copy") and "from" not in op:
            raise TypeError(f"JSON patch operation {kind!r} needs 'from'")
        if kind == "add":
            out = _add(out, tokens, copy.deepcopy(op["value"]), path)
        elif kind == "remove":
            _remove(out, tokens, path)
        elif kind == "replace":
            _get(out, tokens, path)  # must exist
            if tokens:
                _remove(out, tokens, path)
            out = _add(out, tokens, copy.deepcopy(op["value"]), path)
        elif kind == "test":
            if not _json_equal(_get(out, tokens, path), op["value"]):
                raise PatchError(f"testing value {path} failed: test failed")
        elif kind == "move":
            src = _pointer(op["from"])
            if tokens[: len(src)] == src and tokens != src:
                raise PatchError("cannot move a value into one of its children")
            value = _remove(out, src, op["from"])
            out = _add(out, tokens, value, path)
        elif kind == "copy":
            value = copy.deepcopy(_get(out, _pointer(op["from"]), op["from"]))
            out = _add(out, tokens, value, path)
        else:
            raise TypeError(f"unknown JSON patch operation {kind!r}")
    return out


# ---------------------------------------------------------------------------------------------
# Records
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Action:
    """One call made on the fake (failed and injected-failure calls included)."""

    verb: str
    resource: str
    namespace: str | None
    name: str | None
    subresource: str | None = None


@dataclass
class _Fault:
    verb: str
    resource: str | None
    error: Exception
    remaining: int


@dataclass(frozen=True)
class _Event:
    rv: int
    resource: str
    namespace: str
    type: str
    obj: Obj
    prev: Obj | None


def _labels(obj: Obj) -> dict[str, str]:
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return {str(k): str(v) for k, v in labels.items()}


def _builtin_group(group: str) -> bool:
    return group == "" or "." not in group or group.endswith(".k8s.io")


# ---------------------------------------------------------------------------------------------
# Watch streams
# ---------------------------------------------------------------------------------------------


class FakeWatch:
    """A :class:`kubeclient.WatchStream` fed by :class:`FakeKube`.

    Iterating blocks until an event arrives. The stream ends (``StopIteration``) on
    :meth:`close` (from any thread), when the server-side ``timeout_seconds`` elapses, or after
    :meth:`FakeKube.end_watches` (events already queued are delivered first). After
    :meth:`FakeKube.break_watches` it raises :class:`TransportError`; with a ``read_timeout``
    and no event for that long it raises :class:`TransportError` too, like a client read
    timeout on a silent connection.
    """

    def __init__(
        self,
        kube: FakeKube,
        res: Resource,
        namespace: str | None,
        label_selector: str,
        field_selector: str,
        timeout_seconds: int | None,
        read_timeout: float | None,
        allow_bookmarks: bool,
    ) -> None:
        self._kube = kube
        self._cond = kube._cond
        self.resource = res
        self.namespace = namespace
        self.label_selector = label_selector
        self.field_selector = field_selector
        self.allow_bookmarks = allow_bookmarks
        self._pending: deque[Obj] = deque()
        self._closed = False  # closed by the client
        self._ended = False  # ended by the server: drain what is queued, then stop
        self._broken = False  # connection broke: raise TransportError
        self._finished = False  # the iterator has ended
        now = time.monotonic()
        self._deadline = now + timeout_seconds if timeout_seconds else None
        self._read_timeout = read_timeout
        self._last_activity = now

    # -- used by FakeKube, under its lock ---------------------------------------------------

    def _accepting(self, now: float) -> bool:
        if self._closed or self._ended or self._broken or self._finished:
            return False
        return self._deadline is None or now < self._deadline

    def _matches(self, obj: Obj) -> bool:
        if self.label_selector and not match_label_selector(self.label_selector, _labels(obj)):
            return False
        return not self.field_selector or match_field_selector(self.field_selector, obj)

    def _offer(self, ev: _Event) -> None:
        if ev.resource != str(self.resource):
            return
        if self.namespace and ev.namespace != self.namespace:
            return
        cur = self._matches(ev.obj)
        if ev.type in ("ADDED", "DELETED") or ev.prev is None:
            if cur:
                self._pending.append({"type": ev.type, "object": ev.obj})
            return
        old = self._matches(ev.prev)
        if cur and old:
            self._pending.append({"type": "MODIFIED", "object": ev.obj})
        elif cur:
            self._pending.append({"type": "ADDED", "object": ev.obj})
        elif old:
            # Like the API server's watch cache: the previous content, the new resourceVersion.
            gone = copy.deepcopy(ev.prev)
            gone.setdefault("metadata", {})["resourceVersion"] = str(ev.rv)
            self._pending.append({"type": "DELETED", "object": gone})

    def _finish(self) -> None:
        self._finished = True
        self._kube._unregister(self)

    # -- WatchStream --------------------------------------------------------------------------

    def __iter__(self) -> Iterator[Obj]:
        return self

    def __next__(self) -> Obj:
        with self._cond:
            while True:
                if self._closed or self._finished:
                    raise StopIteration
                if self._broken:
                    self._finish()
                    raise TransportError(
                        "watch stream broke: ('Connection broken: ConnectionResetError(104, "
                        "'Connection reset by peer')' (fake))"
                    )
                if self._pending:
                    self._last_activity = time.monotonic()
                    return copy.deepcopy(self._pending.popleft())
                if self._ended:
                    self._finish()
                    raise StopIteration
                now = time.monotonic()
                waits: list[float] = []
                if self._deadline is not None:
                    if now >= self._deadline:
                        self._finish()
                        raise StopIteration
                    waits.append(self._deadline - now)
                if self._read_timeout is not None:
                    read_deadline = self._last_activity + self._read_timeout
                    if now >= read_deadline:
                        self._finish()
                        raise TransportError(
                            "watch stream broke: Read timed out. "
                            f"(read timeout={self._read_timeout})"
                        )
                    waits.append(read_deadline - now)
                self._cond.wait(min(waits) if waits else None)

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._pending.clear()
            self._kube._unregister(self)
            self._cond.notify_all()

    def __enter__(self) -> FakeWatch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# ---------------------------------------------------------------------------------------------
# The fake API server
# ---------------------------------------------------------------------------------------------


class FakeKube:
    """In-memory :class:`kubeclient.KubeClient` for unit tests (thread-safe, one lock)."""

    def __init__(
        self,
        *,
        status_subresources: AbstractSet[str] = frozenset({"dgljobs.qihoo.net"}),
        history: int = 1000,
        clock: Callable[[], float] | None = None,
    ) -> None:
        if history < 0:
            raise ValueError("history must be >= 0")
        self.status_subresources = frozenset(status_subresources)
        self._history_size = history
        self._clock = clock or time.time
        self._cond = threading.Condition(threading.RLock())
        self._rv = 0
        self._store: dict[str, dict[tuple[str, str], Obj]] = {}
        self._resources: dict[str, Resource] = {}
        self._history: deque[_Event] = deque()
        self._compacted = 0  # highest resourceVersion whose event was dropped from history
        self._watches: list[FakeWatch] = []
        self._actions: list[Action] = []
        self._faults: list[_Fault] = []
        self._random = random.Random()

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
            return sum(1 for w in self._watches if w._accepting(now))

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
                w._ended = True
            self._watches.clear()
            self._cond.notify_all()

    def break_watches(self) -> None:
        """Every open watch's connection breaks: its iterator raises ``TransportError``."""
        with self._cond:
            for w in self._watches:
                w._broken = True
            self._watches.clear()
            self._cond.notify_all()

    def send_bookmark(self) -> None:
        """Send a BOOKMARK at the current resourceVersion to every open watch that allows them."""
        with self._cond:
            now = time.monotonic()
            for w in self._watches:
                if w._accepting(now) and w.allow_bookmarks:
                    w._pending.append(
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
    ) -> None:
        self._resources.setdefault(str(res), res)
        self._actions.append(
            Action(verb, str(res), namespace if res.namespaced else None, name, subresource)
        )
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
        return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self._clock()))

    def _object_ns(self, res: Resource, namespace: str | None) -> str:
        """The namespace key of a single object; "" for cluster-scoped resources."""
        if not res.namespaced:
            return ""
        if not namespace:
            _no_such_path()
        return namespace

    def _lookup(self, res: Resource, ns: str, name: str) -> Obj:
        obj = self._bucket(res).get((ns, name))
        if obj is None:
            _not_found(res, name)
        return obj

    def _check_subresource(self, res: Resource, subresource: str | None) -> None:
        if subresource is None:
            return
        if subresource != "status" or str(res) not in self.status_subresources:
            _no_such_path()

    def _parse_rv(self, rv: str | None) -> int | None:
        """None for "unset/any" (None, "", "0"); raises 400/504 like the API server."""
        if rv is None or rv in ("", "0"):
            return None
        try:
            value = int(rv)
        except ValueError:
            _bad_request(f'invalid resource version "{rv}"')
        if value < 0:
            _bad_request(f'invalid resource version "{rv}"')
        if value > self._rv:
            _too_large_rv(value, self._rv)
        return value

    def _check_selectors(self, label_selector: str | None, field_selector: str | None) -> None:
        try:
            parse_label_selector(label_selector or "")
        except ValueError as e:
            _bad_request(str(e))
        try:
            parse_field_selector(field_selector or "")
        except ValueError as e:
            _bad_request(str(e))

    def _check_type(self, res: Resource, obj: Obj) -> None:
        api_version = obj.get("apiVersion")
        if api_version and api_version != res.api_version:
            _bad_request(
                f"the API version in the data ({api_version}) does not match the expected "
                f"API version ({res.api_version})"
            )
        kind = obj.get("kind")
        if kind and kind != res.kind:
            _bad_request(
                f"the kind in the data ({kind}) does not match the expected kind ({res.kind})"
            )

    def _validate_meta(self, res: Resource, name: str, meta: Obj) -> None:
        labels = meta.get("labels") or {}
        if not isinstance(labels, dict):
            _bad_request("metadata.labels must be an object")
        for k, v in labels.items():
            err = _label_key_error(str(k))
            if err:
                _invalid(
                    res,
                    name,
                    "metadata.labels",
                    f'Invalid value: "{k}": {err}',
                    "FieldValueInvalid",
                )
            if not isinstance(v, str):
                _bad_request(f"metadata.labels[{k}] must be a string, got {v!r}")
            verr = _label_value_error(v)
            if verr:
                _invalid(
                    res,
                    name,
                    "metadata.labels",
                    f'Invalid value: "{v}": {verr}',
                    "FieldValueInvalid",
                )
        refs = meta.get("ownerReferences") or []
        controllers = 0
        for i, ref in enumerate(refs):
            for field in ("apiVersion", "kind", "name", "uid"):
                if not isinstance(ref, dict) or not ref.get(field):
                    _invalid(
                        res,
                        name,
                        f"metadata.ownerReferences[{i}].{field}",
                        "Required value",
                        "FieldValueRequired",
                    )
            if ref.get("controller"):
                controllers += 1
        if controllers > 1:
            _invalid(
                res,
                name,
                "metadata.ownerReferences",
                "Invalid value: only one reference can have Controller set to true",
                "FieldValueInvalid",
            )

    def _emit(self, res: Resource, ns: str, kind: str, obj: Obj, prev: Obj | None) -> None:
        ev = _Event(self._rv, str(res), ns, kind, obj, prev)
        self._history.append(ev)
        while len(self._history) > self._history_size:
            dropped = self._history.popleft()
            self._compacted = max(self._compacted, dropped.rv)
        if self._history_size == 0:
            self._compacted = self._rv
        now = time.monotonic()
        for w in self._watches:
            if w._accepting(now):
                w._offer(ev)
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
            _bad_request("the request body must be a JSON object")
        meta_in = body.get("metadata")
        if meta_in is None:
            meta_in = body["metadata"] = {}
        if not isinstance(meta_in, dict):
            _bad_request("metadata must be an object")
        if meta_in.get("name") not in (None, "", name):
            _bad_request(
                f"the name of the object ({meta_in['name']}) does not match the name on the URL "
                f"({name})"
            )
        if res.namespaced and meta_in.get("namespace") not in (None, "", ns):
            _bad_request(
                "the namespace of the provided object does not match the namespace sent on the "
                "request"
            )
        cmeta = current["metadata"]
        rv_in = meta_in.get("resourceVersion")
        if rv_in and str(rv_in) != cmeta["resourceVersion"]:
            _conflict(res, name, _CONFLICT_MESSAGE)

        if subresource == "status":
            new = copy.deepcopy(current)
            if "status" in body:
                new["status"] = body["status"]
            else:
                new.pop("status", None)
        else:
            self._check_type(res, body)
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
                    _invalid(
                        res,
                        name,
                        "metadata.finalizers",
                        f"Forbidden: no new finalizers can be added if the object is being "
                        f"deleted, found new finalizers {added}",
                        "FieldValueForbidden",
                    )
            self._validate_meta(res, name, meta)
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

    def _delete_obj(self, res: Resource, ns: str, name: str, current: Obj) -> Obj:
        meta = current["metadata"]
        bucket = self._bucket(res)
        new = copy.deepcopy(current)
        if meta.get("finalizers"):
            if meta.get("deletionTimestamp"):
                return new  # already terminating: nothing changes
            self._rv += 1
            new["metadata"]["deletionTimestamp"] = self._now()
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
            for (ns, _), obj in sorted(self._bucket(res).items()):
                if res.namespaced and namespace and ns != namespace:
                    continue
                if label_selector and not match_label_selector(label_selector, _labels(obj)):
                    continue
                if field_selector and not match_field_selector(field_selector, obj):
                    continue
                item = copy.deepcopy(obj)
                if strip_type:
                    # Built-in types' list items come without kind/apiVersion on the wire.
                    item.pop("kind", None)
                    item.pop("apiVersion", None)
                items.append(item)
            return {
                "apiVersion": res.api_version,
                "kind": f"{res.kind}List",
                "metadata": {"resourceVersion": str(self._rv)},
                "items": items,
            }

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
                self,
                res,
                namespace if res.namespaced else None,
                label_selector or "",
                field_selector or "",
                timeout_seconds,
                read_timeout,
                allow_bookmarks,
            )
            if start is not None and start < self._compacted:
                w._pending.append(
                    {
                        "type": "ERROR",
                        "object": status_body(
                            410,
                            "Expired",
                            f"too old resource version: {start} ({self._compacted})",
                        ),
                    }
                )
                w._ended = True
                return w
            if start is not None:
                for ev in self._history:
                    if ev.rv > start:
                        w._offer(ev)
            self._watches.append(w)
            self._cond.notify_all()
            return w

    def get(self, res: Resource, namespace: str | None, name: str) -> Obj:
        with self._cond:
            self._begin("get", res, namespace, name)
            return copy.deepcopy(self._lookup(res, self._object_ns(res, namespace), name))

    def create(self, res: Resource, namespace: str | None, body: Obj) -> Obj:
        with self._cond:
            meta_in = body.get("metadata") if isinstance(body, dict) else None
            req_name = meta_in.get("name") if isinstance(meta_in, dict) else None
            self._begin("create", res, namespace, req_name or None)
            if not isinstance(body, dict):
                _bad_request("the request body must be a JSON object")
            self._check_type(res, body)
            obj: Obj = {"apiVersion": res.api_version, "kind": res.kind}
            obj.update(
                (k, copy.deepcopy(v)) for k, v in body.items() if k not in ("apiVersion", "kind")
            )
            meta = obj.get("metadata")
            if meta is None:
                meta = obj["metadata"] = {}
            if not isinstance(meta, dict):
                _bad_request("metadata must be an object")
            if res.namespaced:
                if not namespace:
                    _fail(
                        405,
                        "MethodNotAllowed",
                        "the server does not allow this method on the requested resource",
                    )
                if meta.get("namespace") not in (None, "", namespace):
                    _bad_request(
                        "the namespace of the provided object does not match the namespace sent "
                        "on the request"
                    )
                ns = namespace
                meta["namespace"] = ns
            else:
                ns = ""
                meta.pop("namespace", None)
            if meta.get("resourceVersion"):
                _bad_request("resourceVersion should not be set on objects to be created")
            bucket = self._bucket(res)
            name = str(meta.get("name") or "")
            if not name:
                prefix = meta.get("generateName")
                if not prefix:
                    _invalid(
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
            err = _name_error(res, name)
            if err:
                _invalid(
                    res,
                    name,
                    "metadata.name",
                    f'Invalid value: "{name}": {err}',
                    "FieldValueInvalid",
                )
            if (ns, name) in bucket:
                _fail(
                    409,
                    "AlreadyExists",
                    f'{res} "{name}" already exists',
                    _details(res, name),
                )
            self._validate_meta(res, name, meta)
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
                _bad_request("the request body must be a JSON object")
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
                    _bad_request("a JSON merge patch for an object must be a JSON object")
                result = json_merge_patch(current, patch)
            elif patch_type == "json":
                try:
                    result = json_patch(current, patch)
                except TypeError as e:
                    _bad_request(str(e))
                except PatchError as e:
                    _fail(422, "Invalid", str(e))
            elif patch_type == "strategic":
                _fail(
                    415,
                    "UnsupportedMediaType",
                    "the body of the request was in an unknown format - accepted media types "
                    "include: application/json-patch+json, application/merge-patch+json "
                    "(strategic merge patch is not implemented by the fake)",
                )
            else:
                raise ValueError(f"unknown patch type {patch_type!r}")
            if not isinstance(result, dict):
                _bad_request("the patched object must be a JSON object")
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
            self._begin("delete", res, namespace, name)
            ns = self._object_ns(res, namespace)
            if propagation_policy not in (None, "Orphan", "Background", "Foreground"):
                _bad_request(
                    f"DeleteOptions.propagationPolicy: Unsupported value: {propagation_policy!r}"
                )
            current = self._lookup(res, ns, name)
            have = current["metadata"]["uid"]
            if uid and uid != have:
                _conflict(
                    res,
                    name,
                    f"Precondition failed: UID in precondition: {uid}, UID in object meta: {have}",
                )
            return self._delete_obj(res, ns, name, current)


if TYPE_CHECKING:
    from kubeclient import KubeClient, WatchStream

    def _conforms(kube: FakeKube, stream: FakeWatch) -> tuple[KubeClient, WatchStream]:
        return kube, stream
