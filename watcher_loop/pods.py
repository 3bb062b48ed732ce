"""Follow the listed pods by name: one list+watch per pod, all into one view and one event.

Why by name: the launcher's Role may read only its own job's pods, named in its
``resourceNames``. Kubernetes authorizes a list or a watch against ``resourceNames`` only when
the request selects that one name, ``fieldSelector=metadata.name=<pod>``; a label selector
(``dgl-replica-name in (...)``) asks for every pod of the namespace that carries the label, and
such a Role refuses it (403). A field selector takes one name, so each pod is its own
:class:`~informers.reflector.Reflector` over a :class:`~informers.listwatch.ListWatch`: dropped
connections, expired resourceVersions (410) and throttling (429) are handled per pod, as the
informers handle them; nothing polls the API server.

The cost, for N pods (thousands of workers): N watches, that is N HTTP connections from this
init container to the API server (a watch holds its connection), N watchers on the API server,
N lists at the start, and one thread each here (its reflector; :meth:`PodWatch.stop` closes
every watch itself): thousands of threads count against a pod's PID limit (the kubelet's
``podPidsLimit``, when a cluster sets one). A throttled (429) or broken watch backs off that
pod's reflector alone. One watch of the namespace would be one connection and one thread, but
it needs a Role that may read every pod of the namespace (other jobs' pods, their specs and
env), which is what this trades them for.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

from informers.listwatch import ListWatch
from informers.reflector import Reflector
from informers.shared import strip_managed_fields
from kubeclient import PODS, KubeClient, Obj

JOIN_TIMEOUT = 5.0  # seconds to wait for the reflectors' threads on stop, all together


def name_selector(name: str) -> str:
    """The field selector that a Role's ``resourceNames`` authorizes a list/watch for."""
    return f"metadata.name={name}"


class _OnePod:
    """One pod's :class:`~informers.reflector.ReflectorSink`: its object (or none) in the view.

    It keeps only the object named ``name`` in ``namespace``, whatever else the API answers."""

    def __init__(self, view: PodWatch, name: str, namespace: str) -> None:
        self.view = view
        self.name = name
        self.namespace = namespace

    def _is_mine(self, obj: Obj) -> bool:
        meta = obj.get("metadata") or {}
        return meta.get("name") == self.name and meta.get("namespace", self.namespace) == (
            self.namespace
        )

    def on_list(self, items: list[Obj], resource_version: str) -> None:
        found = next((o for o in items if self._is_mine(o)), None)
        self.view._set(self.name, found, listed=True)

    def on_added(self, obj: Obj) -> None:
        if self._is_mine(obj):
            self.view._set(self.name, obj)

    on_modified = on_added

    def on_deleted(self, obj: Obj) -> None:
        if self._is_mine(obj):
            self.view._set(self.name, None)


class PodWatch:
    """The pods named ``names`` in ``namespace``, each followed by its own reflector.

    :attr:`changed` is set whenever a pod's object changes or a pod is first listed; clear it
    before reading :meth:`pods`, so that a later change wakes the reader again."""

    def __init__(
        self, client: KubeClient, namespace: str, names: Sequence[str], *, name: str = ""
    ) -> None:
        self.namespace = namespace
        self.names = list(dict.fromkeys(names))
        self.changed = threading.Event()
        self._lock = threading.Lock()
        self._pods: dict[str, Obj] = {}
        self._listed: set[str] = set()
        prefix = f"{name} " if name else ""
        self._reflectors = [
            Reflector(
                ListWatch(client, PODS, namespace=namespace, field_selector=name_selector(n)),
                _OnePod(self, n, namespace),
                name=f"{prefix}pod {namespace}/{n}",
            )
            for n in self.names
        ]
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def _set(self, name: str, obj: Obj | None, *, listed: bool = False) -> None:
        with self._lock:
            if obj is None:
                self._pods.pop(name, None)
            else:
                self._pods[name] = strip_managed_fields(obj)
            if listed:
                self._listed.add(name)
        self.changed.set()

    def start(self) -> None:
        for r in self._reflectors:
            t = threading.Thread(
                target=r.run, args=(self._stop,), kwargs={"closer": False}, name=r.name, daemon=True
            )
            t.start()
            self._threads.append(t)

    def stop(self) -> None:
        """Stop every reflector (their watches close) and wait a little for their threads."""
        self._stop.set()
        for r in self._reflectors:
            r.close_watch()
        deadline = time.monotonic() + JOIN_TIMEOUT
        for t in self._threads:
            t.join(max(0.0, deadline - time.monotonic()))

    def unlisted(self) -> list[str]:
        """The pods whose first list has not succeeded yet, in the order given."""
        with self._lock:
            return [n for n in self.names if n not in self._listed]

    def has_synced(self) -> bool:
        with self._lock:
            return len(self._listed) == len(self.names)

    def pods(self) -> dict[str, Obj]:
        """The pods that exist, by name (read-only objects)."""
        with self._lock:
            return dict(self._pods)
