"""List and watch one resource type as raw dicts: the reflector's only view of the API."""

from __future__ import annotations

import builtins
from typing import Protocol

from kubeclient import KubeClient, Obj, Resource, WatchStream, is_expired


class ListerWatcher(Protocol):
    def list(self) -> tuple[list[Obj], str]:
        """A consistent snapshot: ``(items, resourceVersion)``."""
        ...

    def watch(
        self, resource_version: str, timeout_seconds: int, read_timeout: float
    ) -> WatchStream:
        """Events after ``resource_version``; bookmarks allowed."""
        ...


class ListWatch:
    """``ListerWatcher`` for one resource, optionally one namespace and label/field selector."""

    def __init__(
        self,
        client: KubeClient,
        res: Resource,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        page_size: int = 500,
    ) -> None:
        self.client = client
        self.res = res
        self.namespace = namespace
        self.label_selector = label_selector
        self.field_selector = field_selector
        self.page_size = page_size

    def describe(self) -> str:
        where = f" in {self.namespace}" if self.namespace else ""
        sel = f" [{self.label_selector}]" if self.label_selector else ""
        return f"{self.res}{where}{sel}"

    def list(self) -> tuple[builtins.list[Obj], str]:
        try:
            return self._list(self.page_size)
        except Exception as e:
            # A continue token can expire between pages: fall back to one unpaginated list.
            if is_expired(e):
                return self._list(None)
            raise

    def _list(self, limit: int | None) -> tuple[builtins.list[Obj], str]:
        items: builtins.list[Obj] = []
        token: str | None = None
        rv = ""
        while True:
            page = self.client.list(
                self.res,
                self.namespace,
                label_selector=self.label_selector,
                field_selector=self.field_selector,
                limit=limit,
                continue_token=token,
            )
            meta = page.get("metadata") or {}
            if not rv:
                rv = str(meta.get("resourceVersion") or "")
            for item in page.get("items") or []:
                # List items carry no kind/apiVersion; watch events do. Make them uniform.
                item.setdefault("kind", self.res.kind)
                item.setdefault("apiVersion", self.res.api_version)
                items.append(item)
            token = meta.get("continue") or None
            if not token:
                return items, rv

    def watch(
        self, resource_version: str, timeout_seconds: int, read_timeout: float
    ) -> WatchStream:
        return self.client.watch(
            self.res,
            self.namespace,
            resource_version=resource_version,
            timeout_seconds=timeout_seconds,
            label_selector=self.label_selector,
            field_selector=self.field_selector,
            allow_bookmarks=True,
            read_timeout=read_timeout,
        )
