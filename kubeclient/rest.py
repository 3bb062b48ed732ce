"""The only place that speaks HTTP to the API server.

``RestClient`` implements :class:`kubeclient.client.KubeClient` (raw JSON dicts in and out, no
generated model classes) on top of the ``kubernetes`` package, which is used for configuration,
TLS and authentication only (kubeconfig, in-cluster token, exec plugins), never for
(de)serialisation. Non-2xx answers raise :mod:`kubeclient.errors` by status.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import urlencode, urlsplit

from kubeclient.auth import AuthHeaders
from kubeclient.client import WatchStream
from kubeclient.errors import TransportError, error_from_status
from kubeclient.resources import Resource
from kubeclient.types import Obj

#: Called after every request with (verb, resource, HTTP status or 0, seconds).
RequestObserver = Callable[[str, str, int, float], None]

PATCH_TYPES = {
    "merge": "application/merge-patch+json",
    "json": "application/json-patch+json",
    "strategic": "application/strategic-merge-patch+json",
}


METADATA_ONLY = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
"""The Accept header that makes the API server answer with the object's metadata only (a
create's answer, a watch's events)."""
METADATA_LIST = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
"""The same for a list: the items' metadata only."""


def _query(**params: Any) -> str:
    pairs = [(k, v) for k, v in params.items() if v is not None and v != ""]
    out = []
    for k, v in pairs:
        if isinstance(v, bool):
            v = "true" if v else "false"
        out.append((k, str(v)))
    return urlencode(out)


def _without_retry_after(retries: Any) -> Any:
    """urllib3's default ``Retry`` answers a 413/429/503 carrying ``Retry-After`` to a GET, PUT
    or DELETE by sleeping and re-sending (up to 3 times) on its own; callers must get the
    :class:`TooManyRequests` (with ``retry_after``) instead and decide themselves."""
    from urllib3.util.retry import Retry

    return Retry.from_int(retries).new(respect_retry_after_header=False)


def _timeout(seconds: float | tuple[float, float | None]) -> Any:
    """urllib3's timeout: a total, or (connect, read) as the ``kubernetes`` package takes it."""
    from urllib3 import Timeout

    if isinstance(seconds, tuple):
        return Timeout(connect=seconds[0], read=seconds[1])
    return Timeout(total=seconds)


def _transport_errors() -> tuple[type[BaseException], ...]:
    import urllib3.exceptions

    return (urllib3.exceptions.HTTPError, OSError)


def _lines(response: Any) -> Iterator[bytes]:
    """A streamed body's lines as they arrive, each with its ``\\n`` (the last may lack it)."""
    buf = b""
    for chunk in response.stream(65536, decode_content=True):
        buf += chunk
        while (nl := buf.find(b"\n")) >= 0:
            line, buf = buf[: nl + 1], buf[nl + 1 :]
            yield line
    if buf:
        yield buf


def _release(response: Any) -> None:
    """End a streamed response, best effort (the socket may already be dead)."""
    with contextlib.suppress(Exception):
        response.shutdown()
    with contextlib.suppress(Exception):
        response.release_conn()


class _HttpWatch:
    """Reads a watch response line by line (one JSON event per line)."""

    def __init__(self, response: Any, on_close: Callable[[], None]) -> None:
        self._resp = response
        self._on_close = on_close
        self._closed = False
        self._lock = threading.Lock()

    def __iter__(self) -> Iterator[Obj]:
        try:
            for line in _lines(self._resp):
                if line.strip():
                    yield json.loads(line)
        except _transport_errors() as e:
            if self._closed:
                return
            raise TransportError(f"watch stream broke: {e}") from e
        finally:
            self.close()

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        _release(self._resp)
        self._on_close()


class ByteStream:
    """A streamed response body (a pod's log, a pod's proxied answer): ``read(n)`` as a file
    object (``tarfile`` reads it so), iteration by line; ``close`` ends it."""

    def __init__(self, response: Any) -> None:
        self._resp = response
        self._closed = False

    def read(self, amt: int | None = None) -> bytes:
        try:
            data: bytes = self._resp.read(amt, decode_content=True)
        except _transport_errors() as e:
            if self._closed:
                return b""
            raise TransportError(f"stream broke: {e}") from e
        return data

    def __iter__(self) -> Iterator[bytes]:
        """Lines (with their ``\\n``; the last one may lack it)."""
        try:
            yield from _lines(self._resp)
        except _transport_errors() as e:
            if self._closed:
                return
            raise TransportError(f"stream broke: {e}") from e

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        _release(self._resp)

    def __enter__(self) -> ByteStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class RestClient:
    """``KubeClient`` over the ``kubernetes`` package's configuration and connection pool."""

    def __init__(
        self,
        api_client: Any,
        *,
        observer: RequestObserver | None = None,
        user_agent: str = "dgl-operator",
        timeout: float = 30.0,
    ) -> None:
        self._api = api_client
        self._observer = observer
        self._timeout = timeout
        self._api.user_agent = user_agent
        pool = self._api.rest_client.pool_manager
        pool.connection_pool_kw["retries"] = _without_retry_after(
            pool.connection_pool_kw.get("retries")
        )
        pool.clear()
        self._pool = pool
        self._auth = AuthHeaders(self._api.configuration)
        host = self._api.configuration.host
        # The API server's connection pool, asked directly (the manager's per-request URL
        # parsing and pool lookup were 6% of the operator's CPU in a burst); through a proxy,
        # the manager, which knows the form of request line the proxy needs.
        self._server = None if getattr(pool, "proxy", None) else pool.connection_from_url(host)
        self._prefix = urlsplit(host).path  # a server behind a path (https://h/k8s/clusters/x)

    @classmethod
    def from_config(
        cls,
        kubeconfig: str | None = None,
        context: str | None = None,
        *,
        pool_size: int = 16,
        observer: RequestObserver | None = None,
        user_agent: str = "dgl-operator",
    ) -> RestClient:
        """Kubeconfig if given (or $KUBECONFIG / ~/.kube/config exists), else in-cluster."""
        import os

        from kubernetes import client, config

        cfg = client.Configuration()
        explicit = kubeconfig or os.environ.get("KUBECONFIG")
        default_path = os.path.expanduser("~/.kube/config")
        if explicit or os.path.exists(default_path):
            config.load_kube_config(  # type: ignore[no-untyped-call]
                config_file=explicit or default_path,
                context=context,
                client_configuration=cfg,
            )
        else:
            config.load_incluster_config(client_configuration=cfg)  # type: ignore[no-untyped-call]
        cfg.connection_pool_maxsize = pool_size
        return cls(client.ApiClient(cfg), observer=observer, user_agent=user_agent)

    # -- plumbing ------------------------------------------------------------------------

    def _send(
        self,
        verb: str,
        method: str,
        res: Resource,
        path: str,
        query: str = "",
        body: Any = None,
        content_type: str = "application/json",
        timeout: float | tuple[float, float | None] | None = None,
        stream: bool = False,
        accept: str = "application/json",
    ) -> Any:
        """One request straight through the connection pool the ``kubernetes`` package set
        up (TLS, proxy): its own request layer (``param_serialize``, ``RESTClientObject``)
        cost a third of the operator's CPU per request and added nothing used here."""
        headers = {**self._api.default_headers, "Accept": accept, "Content-Type": content_type}
        headers.update(self._auth.headers())
        target = f"{path}?{query}" if query else path
        timeout = timeout if timeout is not None else self._timeout
        started = time.monotonic()
        request: dict[str, Any] = {
            "body": None if body is None else json.dumps(body).encode(),
            "headers": headers,
            "timeout": _timeout(timeout),
            "preload_content": False,
        }
        try:
            if self._server is not None:
                resp = self._server.urlopen(
                    method, self._prefix + target, assert_same_host=False, redirect=False,
                    **request,
                )  # fmt: skip
            else:
                host = self._api.configuration.host
                resp = self._pool.request(method, host + target, **request)
        except _transport_errors() as e:
            self._observe(verb, res, 0, started)
            raise TransportError(f"{method} {path}: {e}") from e
        status = int(resp.status)
        if status >= 400 or not stream:
            try:
                data = resp.data
            except _transport_errors() as e:
                self._observe(verb, res, 0, started)
                raise TransportError(f"{method} {path}: reading body: {e}") from e
            finally:
                resp.release_conn()
            self._observe(verb, res, status, started)
            if status == 401:
                self._auth.expire()
            if status >= 400:
                retry_after = None
                ra = resp.headers.get("Retry-After")
                if ra:
                    try:
                        retry_after = float(ra)
                    except ValueError:
                        retry_after = None
                raise error_from_status(status, data, retry_after)
            return json.loads(data) if data else None
        self._observe(verb, res, status, started)
        return resp

    def _observe(self, verb: str, res: Resource, status: int, started: float) -> None:
        if self._observer is not None:
            self._observer(verb, str(res), status, time.monotonic() - started)

    # -- KubeClient ----------------------------------------------------------------------

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
        metadata_only: bool = False,
    ) -> Obj:
        """``metadata_only``: a PartialObjectMetadataList (the items' metadata only)."""
        q = _query(
            labelSelector=label_selector,
            fieldSelector=field_selector,
            resourceVersion=resource_version,
            limit=limit,
            **{"continue": continue_token},
        )
        accept = METADATA_LIST if metadata_only else "application/json"
        out: Obj = self._send("list", "GET", res, res.path(namespace), q, accept=accept)
        return out

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
        metadata_only: bool = False,
    ) -> WatchStream:
        """``metadata_only``: each event's object is its PartialObjectMetadata."""
        q = _query(
            watch=True,
            resourceVersion=resource_version,
            timeoutSeconds=timeout_seconds,
            labelSelector=label_selector,
            fieldSelector=field_selector,
            allowWatchBookmarks=allow_bookmarks,
        )
        if read_timeout is None:
            read_timeout = float(timeout_seconds or 300) + 60.0
        resp = self._send(
            "watch",
            "GET",
            res,
            res.path(namespace),
            q,
            timeout=(10.0, read_timeout),
            stream=True,
            accept=METADATA_ONLY if metadata_only else "application/json",
        )
        return _HttpWatch(resp, lambda: None)

    def stream(
        self,
        res: Resource,
        namespace: str | None,
        name: str,
        subresource: str,
        *,
        query: dict[str, Any] | None = None,
        read_timeout: float | None = 60.0,
    ) -> ByteStream:
        """GET a subresource whose answer is not JSON, as it arrives: ``pods/<name>/log``
        (``follow``), ``pods/<name>:<port>/proxy/<path>``. A refusal raises as any request;
        ``read_timeout`` bounds each read (None: wait for ever)."""
        resp = self._send(
            "get",
            "GET",
            res,
            res.path(namespace, name, subresource),
            _query(**(query or {})),
            timeout=(10.0, read_timeout),
            stream=True,
            accept="*/*",
        )
        return ByteStream(resp)

    def get(self, res: Resource, namespace: str | None, name: str) -> Obj:
        out: Obj = self._send("get", "GET", res, res.path(namespace, name))
        return out

    def create(
        self,
        res: Resource,
        namespace: str | None,
        body: Obj,
        *,
        field_validation: str | None = None,
        dry_run: bool = False,
        name: str | None = None,
        subresource: str | None = None,
        metadata_only: bool = False,
    ) -> Obj:
        """``field_validation`` Strict rejects unknown fields instead of dropping them;
        ``name`` + ``subresource`` POST to a subresource (e.g. serviceaccounts/x/token);
        ``metadata_only``: the answer is the object's PartialObjectMetadata."""
        q = _query(fieldValidation=field_validation, dryRun="All" if dry_run else None)
        path = res.path(namespace, name, subresource) if name else res.path(namespace)
        accept = METADATA_ONLY if metadata_only else "application/json"
        out: Obj = self._send("create", "POST", res, path, q, body=body, accept=accept)
        return out

    def replace(
        self,
        res: Resource,
        namespace: str | None,
        name: str,
        body: Obj,
        *,
        subresource: str | None = None,
    ) -> Obj:
        out: Obj = self._send(
            "update", "PUT", res, res.path(namespace, name, subresource), body=body
        )
        return out

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
        out: Obj = self._send(
            "patch",
            "PATCH",
            res,
            res.path(namespace, name, subresource),
            body=patch,
            content_type=PATCH_TYPES[patch_type],
        )
        return out

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
        body: Obj = {"apiVersion": "v1", "kind": "DeleteOptions"}
        if uid:
            body["preconditions"] = {"uid": uid}
        if propagation_policy:
            body["propagationPolicy"] = propagation_policy
        if grace_period_seconds is not None:
            body["gracePeriodSeconds"] = grace_period_seconds
        out: Obj | None = self._send("delete", "DELETE", res, res.path(namespace, name), body=body)
        return out
