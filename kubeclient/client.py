"""``KubeClient``: the interface every caller of the API server is typed against.

Raw JSON dicts (:data:`kubeclient.types.Obj`) in and out; failures raise
:mod:`kubeclient.errors`. :class:`kubeclient.rest.RestClient` implements it over HTTP, the
tests' in-memory ``FakeKube`` in memory. A watch is a :class:`WatchStream` of events.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Protocol

from kubeclient.resources import Resource
from kubeclient.types import Obj


class WatchStream(Protocol):
    """An open watch: iterate for events ``{"type": ..., "object": {...}}``; ``close`` ends it."""

    def __iter__(self) -> Iterator[Obj]: ...

    def close(self) -> None: ...


class KubeClient(Protocol):
    """List, watch, get, create, replace, patch and delete objects of a :class:`Resource`."""

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
    ) -> Obj: ...

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
    ) -> WatchStream: ...

    def get(self, res: Resource, namespace: str | None, name: str) -> Obj: ...

    def create(
        self, res: Resource, namespace: str | None, body: Obj, *, metadata_only: bool = False
    ) -> Obj:
        """The created object; with ``metadata_only`` its PartialObjectMetadata (the API
        server encodes, and the client decodes, nothing but its metadata)."""
        ...

    def replace(
        self,
        res: Resource,
        namespace: str | None,
        name: str,
        body: Obj,
        *,
        subresource: str | None = None,
    ) -> Obj: ...

    def patch(
        self,
        res: Resource,
        namespace: str | None,
        name: str,
        patch: Any,
        *,
        patch_type: str = "merge",
        subresource: str | None = None,
    ) -> Obj: ...

    def delete(
        self,
        res: Resource,
        namespace: str | None,
        name: str,
        *,
        uid: str | None = None,
        propagation_policy: str | None = None,
        grace_period_seconds: int | None = None,
    ) -> Obj | None: ...
