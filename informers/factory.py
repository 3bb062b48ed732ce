"""One shared informer per (resource, selector), handed to whoever asks (client-go factory)."""

from __future__ import annotations

import threading

from informers.listwatch import ListWatch
from informers.shared import SharedInformer, Transform, strip_managed_fields, wait_for_cache_sync
from informers.store import IndexFunc
from kubeclient import KubeClient, Resource


class SharedInformerFactory:
    def __init__(
        self,
        client: KubeClient,
        *,
        namespace: str | None = None,
        resync_period: float = 0.0,
    ) -> None:
        self.client = client
        self.namespace = namespace
        self.resync_period = resync_period
        self._lock = threading.Lock()
        self._informers: dict[tuple[str, str], SharedInformer] = {}
        self._threads: dict[tuple[str, str], threading.Thread] = {}

    def informer_for(
        self,
        res: Resource,
        *,
        label_selector: str | None = None,
        indexers: dict[str, IndexFunc] | None = None,
        resync_period: float | None = None,
        transform: Transform | None = None,
    ) -> SharedInformer:
        """``transform`` (default: drop managedFields) applies to the informer this call
        creates; an informer made earlier for the same resource and selector keeps its own."""
        key = (str(res), label_selector or "")
        with self._lock:
            inf = self._informers.get(key)
            if inf is None:
                lw = ListWatch(
                    self.client, res, namespace=self.namespace, label_selector=label_selector
                )
                inf = SharedInformer(
                    lw,
                    resync_period=self.resync_period if resync_period is None else resync_period,
                    indexers=indexers,
                    transform=transform or strip_managed_fields,
                )
                self._informers[key] = inf
            elif indexers:
                inf.store.add_indexers(indexers)
            return inf

    def informers(self) -> list[SharedInformer]:
        with self._lock:
            return list(self._informers.values())

    def start(self, stop: threading.Event) -> None:
        """Start every informer not started yet (safe to call again after adding more)."""
        with self._lock:
            for key, inf in self._informers.items():
                if key not in self._threads:
                    self._threads[key] = inf.start(stop)

    def wait_for_cache_sync(self, stop: threading.Event, timeout: float | None = None) -> bool:
        return wait_for_cache_sync(stop, *self.informers(), timeout=timeout)

    def has_synced(self) -> bool:
        return all(inf.has_synced() for inf in self.informers())

    def join(self, timeout: float | None = None) -> None:
        with self._lock:
            threads = list(self._threads.values())
        for t in threads:
            t.join(timeout)
