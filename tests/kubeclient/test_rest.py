"""RestClient against a real local HTTP server (http.server on 127.0.0.1, ephemeral port)."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import kubernetes.client
import pytest

from kubeclient import (
    PODS,
    AlreadyExists,
    ApiError,
    Conflict,
    Forbidden,
    Gone,
    Invalid,
    NotFound,
    Resource,
    RestClient,
    ServerError,
    TooManyRequests,
    TransportError,
    Unauthorized,
)
from kubeclient.auth import INTERVAL as AUTH_INTERVAL
from kubeclient.auth import AuthHeaders
from localcluster.ports import free_port
from tests.fakekube import status_body
from tests.support.waiting import wait_for

DGLJOBS = Resource("qihoo.net", "v1alpha1", "dgljobs", "DGLJob")
JOB_PATH = "/apis/qihoo.net/v1alpha1/namespaces/team/dgljobs"
PODS_PATH = "/api/v1/namespaces/team/pods"


@dataclass
class Req:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Reply:
    status: int = 200
    body: Any = field(default_factory=dict)  # dict/list -> JSON; bytes/str sent as is
    headers: dict[str, str] = field(default_factory=dict)
    content_type: str = "application/json"


Route = Reply | Callable[[BaseHTTPRequestHandler, Req], None]


def send_reply(h: BaseHTTPRequestHandler, reply: Reply) -> None:
    body = reply.body
    data = body if isinstance(body, bytes) else body.encode() if isinstance(body, str) else None
    if data is None:
        data = json.dumps(body).encode()
    h.send_response(reply.status)
    h.send_header("Content-Type", reply.content_type)
    h.send_header("Content-Length", str(len(data)))
    for k, v in reply.headers.items():
        h.send_header(k, v)
    h.end_headers()
    h.wfile.write(data)


def start_chunked(h: BaseHTTPRequestHandler, status: int = 200) -> None:
    h.send_response(status)
    h.send_header("Content-Type", "application/json")
    h.send_header("Transfer-Encoding", "chunked")
    h.end_headers()
    h.wfile.flush()


def send_chunk(h: BaseHTTPRequestHandler, data: bytes) -> None:
    h.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
    h.wfile.flush()


def end_chunked(h: BaseHTTPRequestHandler) -> None:
    h.wfile.write(b"0\r\n\r\n")
    h.wfile.flush()


def line(event: dict[str, Any]) -> bytes:
    return json.dumps(event).encode() + b"\n"


class FakeApiServer:
    """Answers canned responses per (method, path) and records every request."""

    def __init__(self) -> None:
        self.routes: dict[tuple[str, str], Route] = {}
        self.requests: list[Req] = []
        self.release = threading.Event()  # set on teardown: stalled handlers give up
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _handle(self) -> None:
                parts = urlsplit(self.path)
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                req = Req(
                    self.command,
                    parts.path,
                    parse_qs(parts.query, keep_blank_values=True),
                    {k.lower(): v for k, v in self.headers.items()},
                    body,
                )
                with server._lock:
                    server.requests.append(req)
                    route = server.routes.get((self.command, parts.path))
                if route is None:
                    send_reply(self, Reply(404, status_body(404, "NotFound", "no route")))
                elif isinstance(route, Reply):
                    send_reply(self, route)
                else:
                    route(self, req)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _handle

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self.thread.start()

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    def route(self, method: str, path: str, route: Route) -> None:
        with self._lock:
            self.routes[(method, path)] = route

    def last(self) -> Req:
        with self._lock:
            return self.requests[-1]

    def count(self) -> int:
        with self._lock:
            return len(self.requests)

    def close(self) -> None:
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()


Observed = list[tuple[str, str, int, float]]


@pytest.fixture(autouse=True)
def no_proxy_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(var, raising=False)


@pytest.fixture
def server() -> Iterator[FakeApiServer]:
    s = FakeApiServer()
    yield s
    s.close()


@pytest.fixture
def observed() -> Observed:
    return []


def make_client(url: str, observed: Observed) -> RestClient:
    cfg = kubernetes.client.Configuration()
    cfg.host = url
    cfg.api_key = {"BearerToken": "tok"}
    cfg.api_key_prefix = {"BearerToken": "Bearer"}
    api = kubernetes.client.ApiClient(cfg)
    return RestClient(api, observer=lambda *a: observed.append(a), timeout=5.0)


@pytest.fixture
def client(server: FakeApiServer, observed: Observed) -> RestClient:
    return make_client(server.url, observed)


def assert_common_headers(req: Req) -> None:
    assert req.headers["authorization"] == "Bearer tok"
    assert req.headers["accept"] == "application/json"
    assert req.headers["user-agent"] == "dgl-operator"


# -- requests ---------------------------------------------------------------------------------


def test_list_path_and_query(server: FakeApiServer, client: RestClient) -> None:
    page = {
        "kind": "PodList",
        "apiVersion": "v1",
        "metadata": {"resourceVersion": "42", "continue": "next-token"},
        "items": [{"metadata": {"name": "a"}}],
    }
    server.route("GET", PODS_PATH, Reply(200, page))
    got = client.list(
        PODS,
        "team",
        label_selector="app=dgl,role in (worker)",
        field_selector="status.phase=Running",
        limit=50,
        continue_token="tok-123",
    )
    assert got == page
    req = server.last()
    assert req.method == "GET"
    assert req.path == PODS_PATH
    assert req.query == {
        "labelSelector": ["app=dgl,role in (worker)"],
        "fieldSelector": ["status.phase=Running"],
        "limit": ["50"],
        "continue": ["tok-123"],
    }
    assert_common_headers(req)


def test_list_all_namespaces_and_cluster_scoped_without_query(
    server: FakeApiServer, client: RestClient
) -> None:
    server.route("GET", "/api/v1/pods", Reply(200, {"items": []}))
    assert client.list(PODS) == {"items": []}
    assert server.last().query == {}
    server.route("GET", "/apis/qihoo.net/v1alpha1/dgljobs", Reply(200, {"items": []}))
    client.list(DGLJOBS, None, resource_version="0")
    assert server.last().query == {"resourceVersion": ["0"]}


def test_list_and_watch_of_metadata_only_ask_for_partial_object_metadata(
    server: FakeApiServer, client: RestClient
) -> None:
    page = {"kind": "PartialObjectMetadataList", "apiVersion": "meta.k8s.io/v1", "items": []}
    server.route("GET", PODS_PATH, Reply(200, page))
    assert client.list(PODS, "team", metadata_only=True) == page
    assert server.last().headers["accept"] == (
        "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
    )

    def watch(h: BaseHTTPRequestHandler, req: Req) -> None:
        start_chunked(h)
        send_chunk(h, line(ev("ADDED", "a", "8")))
        end_chunked(h)

    server.route("GET", PODS_PATH, watch)
    stream = client.watch(PODS, "team", resource_version="7", metadata_only=True)
    assert [e["object"]["metadata"]["name"] for e in stream] == ["a"]
    assert server.last().headers["accept"] == (
        "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
    )


def test_get(server: FakeApiServer, client: RestClient) -> None:
    job = {"apiVersion": "qihoo.net/v1alpha1", "kind": "DGLJob", "metadata": {"name": "j1"}}
    server.route("GET", f"{JOB_PATH}/j1", Reply(200, job))
    assert client.get(DGLJOBS, "team", "j1") == job
    req = server.last()
    assert (req.method, req.path, req.body) == ("GET", f"{JOB_PATH}/j1", b"")
    assert_common_headers(req)


def test_create_sends_json_body(server: FakeApiServer, client: RestClient) -> None:
    body = {
        "apiVersion": "qihoo.net/v1alpha1",
        "kind": "DGLJob",
        "metadata": {"name": "j1", "labels": {"a": "b"}},
        "spec": {"replicas": 2, "ok": True, "none": None},
    }
    created = dict(body, metadata={"name": "j1", "uid": "u-1", "resourceVersion": "7"})
    server.route("POST", JOB_PATH, Reply(201, created))
    assert client.create(DGLJOBS, "team", body) == created
    req = server.last()
    assert req.method == "POST" and req.path == JOB_PATH
    assert req.headers["content-type"] == "application/json"
    assert req.json() == body, f"server got {req.body!r}"
    assert_common_headers(req)


def test_replace_status_subresource(server: FakeApiServer, client: RestClient) -> None:
    body = {"metadata": {"name": "j1", "resourceVersion": "7"}, "status": {"phase": "Running"}}
    server.route("PUT", f"{JOB_PATH}/j1/status", Reply(200, body))
    assert client.replace(DGLJOBS, "team", "j1", body, subresource="status") == body
    req = server.last()
    assert (req.method, req.path) == ("PUT", f"{JOB_PATH}/j1/status")
    assert req.headers["content-type"] == "application/json"
    assert req.json() == body
    assert_common_headers(req)


def test_replace_main_resource(server: FakeApiServer, client: RestClient) -> None:
    body = {"metadata": {"name": "j1"}, "spec": {"replicas": 3}}
    server.route("PUT", f"{JOB_PATH}/j1", Reply(200, body))
    client.replace(DGLJOBS, "team", "j1", body)
    assert server.last().path == f"{JOB_PATH}/j1"
    assert server.last().json() == body


def test_patch_merge(server: FakeApiServer, client: RestClient) -> None:
    patch = {"metadata": {"labels": {"x": "1", "gone": None}}}
    server.route("PATCH", f"{JOB_PATH}/j1", Reply(200, {"metadata": {"name": "j1"}}))
    assert client.patch(DGLJOBS, "team", "j1", patch) == {"metadata": {"name": "j1"}}
    req = server.last()
    assert req.method == "PATCH"
    assert req.headers["content-type"] == "application/merge-patch+json"
    assert req.json() == patch
    assert_common_headers(req)


def test_patch_json_patch_status(server: FakeApiServer, client: RestClient) -> None:
    ops = [{"op": "replace", "path": "/status/phase", "value": "Done"}]
    server.route("PATCH", f"{JOB_PATH}/j1/status", Reply(200, {}))
    client.patch(DGLJOBS, "team", "j1", ops, patch_type="json", subresource="status")
    req = server.last()
    assert req.path == f"{JOB_PATH}/j1/status"
    assert req.headers["content-type"] == "application/json-patch+json"
    assert req.json() == ops


def test_delete_sends_delete_options(server: FakeApiServer, client: RestClient) -> None:
    gone = {"kind": "Status", "status": "Success"}
    server.route("DELETE", f"{PODS_PATH}/w0", Reply(200, gone))
    got = client.delete(
        PODS, "team", "w0", uid="uid-1", propagation_policy="Foreground", grace_period_seconds=0
    )
    assert got == gone
    req = server.last()
    assert (req.method, req.path) == ("DELETE", f"{PODS_PATH}/w0")
    assert req.headers["content-type"] == "application/json"
    assert req.json() == {
        "apiVersion": "v1",
        "kind": "DeleteOptions",
        "preconditions": {"uid": "uid-1"},
        "propagationPolicy": "Foreground",
        "gracePeriodSeconds": 0,
    }
    assert_common_headers(req)


def test_delete_minimal_options(server: FakeApiServer, client: RestClient) -> None:
    server.route("DELETE", f"{PODS_PATH}/w0", Reply(200, {}))
    client.delete(PODS, "team", "w0")
    assert server.last().json() == {"apiVersion": "v1", "kind": "DeleteOptions"}


# -- errors -----------------------------------------------------------------------------------


def call(client: RestClient, verb: str) -> Any:
    if verb == "get":
        return client.get(PODS, "team", "x")
    if verb == "list":
        return client.list(PODS, "team")
    if verb == "create":
        return client.create(PODS, "team", {"metadata": {"name": "x"}})
    if verb == "update":
        return client.replace(PODS, "team", "x", {"metadata": {"name": "x"}})
    if verb == "patch":
        return client.patch(PODS, "team", "x", {"metadata": {}})
    if verb == "delete":
        return client.delete(PODS, "team", "x")
    raise AssertionError(verb)


ROUTE_OF = {
    "get": ("GET", f"{PODS_PATH}/x"),
    "list": ("GET", PODS_PATH),
    "create": ("POST", PODS_PATH),
    "update": ("PUT", f"{PODS_PATH}/x"),
    "patch": ("PATCH", f"{PODS_PATH}/x"),
    "delete": ("DELETE", f"{PODS_PATH}/x"),
}


@pytest.mark.parametrize(
    ("verb", "code", "reason", "cls"),
    [
        ("get", 404, "NotFound", NotFound),
        ("create", 409, "AlreadyExists", AlreadyExists),
        ("update", 409, "Conflict", Conflict),
        ("list", 410, "Expired", Gone),
        ("patch", 422, "Invalid", Invalid),
        ("delete", 403, "Forbidden", Forbidden),
        ("get", 500, "InternalError", ServerError),
        ("delete", 500, "InternalError", ServerError),
    ],
)
def test_error_status_mapping(
    server: FakeApiServer,
    client: RestClient,
    observed: Observed,
    verb: str,
    code: int,
    reason: str,
    cls: type[ApiError],
) -> None:
    server.route(*ROUTE_OF[verb], Reply(code, status_body(code, reason, f"{reason} happened")))
    with pytest.raises(cls) as info:
        call(client, verb)
    err = info.value
    assert type(err) is cls
    assert err.status == code
    assert err.reason == reason
    assert err.message == f"{reason} happened"
    assert err.body["code"] == code
    assert err.retry_after is None
    assert server.count() == 1, "the request must not be retried"
    assert observed[-1][:3] == (verb, "pods", code)
    if cls is Conflict:
        assert not isinstance(err, AlreadyExists)


@pytest.mark.parametrize("verb", ["get", "list", "create", "update", "patch", "delete"])
def test_429_with_retry_after(
    server: FakeApiServer, client: RestClient, observed: Observed, verb: str
) -> None:
    server.route(
        *ROUTE_OF[verb],
        Reply(
            429,
            status_body(429, "TooManyRequests", "slow down"),
            headers={"Retry-After": "3"},
        ),
    )
    t0 = time.monotonic()
    with pytest.raises(TooManyRequests) as info:
        call(client, verb)
    assert time.monotonic() - t0 < 2.0, "the client must not sleep on Retry-After itself"
    assert info.value.retry_after == 3.0
    assert info.value.status == 429
    assert server.count() == 1, "429 must reach the caller, not be retried by urllib3"
    assert observed[-1][:3] == (verb, "pods", 429)


def test_503_with_retry_after_is_server_error_with_retry_after(
    server: FakeApiServer, client: RestClient
) -> None:
    server.route(
        "GET",
        f"{PODS_PATH}/x",
        Reply(503, status_body(503, "ServiceUnavailable", "x"), headers={"Retry-After": "2"}),
    )
    t0 = time.monotonic()
    with pytest.raises(ServerError) as info:
        client.get(PODS, "team", "x")
    assert time.monotonic() - t0 < 1.5
    assert info.value.status == 503 and info.value.retry_after == 2.0
    assert server.count() == 1


def test_unparseable_retry_after_is_ignored(server: FakeApiServer, client: RestClient) -> None:
    server.route(
        "POST",
        PODS_PATH,
        Reply(429, status_body(429, "TooManyRequests", "x"), headers={"Retry-After": "soon"}),
    )
    with pytest.raises(TooManyRequests) as info:
        client.create(PODS, "team", {"metadata": {"name": "x"}})
    assert info.value.retry_after is None


def test_non_json_error_body(server: FakeApiServer, client: RestClient) -> None:
    html = "<html><body>502 Bad Gateway</body></html>"
    server.route("GET", f"{PODS_PATH}/x", Reply(502, html, content_type="text/html"))
    with pytest.raises(ServerError) as info:
        client.get(PODS, "team", "x")
    err = info.value
    assert err.status == 502
    assert "502 Bad Gateway" in err.message
    assert "502" in str(err) and "Bad Gateway" in str(err)


def test_empty_error_body(server: FakeApiServer, client: RestClient) -> None:
    server.route("GET", f"{PODS_PATH}/x", Reply(401, b""))
    with pytest.raises(ApiError) as info:
        client.get(PODS, "team", "x")
    assert info.value.status == 401
    assert str(info.value).startswith("401")


def test_connection_refused_is_transport_error(observed: Observed) -> None:
    port = free_port()  # nothing listens there
    client = make_client(f"http://127.0.0.1:{port}", observed)
    with pytest.raises(TransportError):
        client.get(PODS, "team", "x")
    with pytest.raises(TransportError):
        client.watch(PODS, "team", resource_version="1", read_timeout=1)
    assert [o[:3] for o in observed] == [("get", "pods", 0), ("watch", "pods", 0)]
    assert all(o[3] >= 0 for o in observed)


def test_observer_gets_every_request(
    server: FakeApiServer, client: RestClient, observed: Observed
) -> None:
    server.route("GET", PODS_PATH, Reply(200, {"items": []}))
    server.route("POST", f"{JOB_PATH}", Reply(201, {}))
    server.route("PATCH", f"{JOB_PATH}/j1/status", Reply(200, {}))
    server.route("DELETE", f"{PODS_PATH}/w0", Reply(200, {}))
    client.list(PODS, "team")
    client.create(DGLJOBS, "team", {"metadata": {"name": "j1"}})
    client.patch(DGLJOBS, "team", "j1", {"status": {}}, subresource="status")
    client.delete(PODS, "team", "w0")
    with pytest.raises(NotFound):
        client.get(PODS, "team", "missing")
    assert [o[:3] for o in observed] == [
        ("list", "pods", 200),
        ("create", "dgljobs.qihoo.net", 201),
        ("patch", "dgljobs.qihoo.net", 200),
        ("delete", "pods", 200),
        ("get", "pods", 404),
    ]
    assert all(isinstance(o[3], float) and 0 <= o[3] < 5 for o in observed)


# -- watch ------------------------------------------------------------------------------------


def ev(etype: str, name: str, rv: str) -> dict[str, Any]:
    return {
        "type": etype,
        "object": {"kind": "Pod", "metadata": {"name": name, "resourceVersion": rv}},
    }


def test_watch_parses_chunked_events(
    server: FakeApiServer, client: RestClient, observed: Observed
) -> None:
    events = [ev("ADDED", "a", "8"), ev("MODIFIED", "a", "9"), ev("DELETED", "b", "10")]
    events.append({"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "11"}}})
    events.append(ev("ADDED", "c" * 300, "12"))
    wire = b"".join(line(e) for e in events)
    first_len = len(line(events[0]))
    got_first = threading.Event()

    def watch(h: BaseHTTPRequestHandler, req: Req) -> None:
        start_chunked(h)
        # chunk 1: the first event whole and half of the second
        send_chunk(h, wire[: first_len + 10])
        # the client must hand out the first event before the rest exists
        if not got_first.wait(5):
            return
        rest = wire[first_len + 10 :]
        # chunk 2: the rest of event 2, events 3-4 whole, and 5 bytes of event 5
        cut = len(rest) - len(line(events[-1])) + 5
        send_chunk(h, rest[:cut])
        time.sleep(0.02)
        # then the last event dribbles in byte-size pieces, blank keep-alive line included
        for i in range(cut, len(rest), 97):
            send_chunk(h, rest[i : i + 97])
        send_chunk(h, b"\n")
        end_chunked(h)

    server.route("GET", PODS_PATH, watch)
    stream = client.watch(
        PODS,
        "team",
        resource_version="7",
        timeout_seconds=30,
        label_selector="app=dgl",
        read_timeout=5,
    )
    got: list[dict[str, Any]] = []
    for event in stream:
        got.append(event)
        if len(got) == 1:
            got_first.set()
    assert got == events
    req = server.last()
    assert req.method == "GET" and req.path == PODS_PATH
    assert req.query == {
        "watch": ["true"],
        "resourceVersion": ["7"],
        "timeoutSeconds": ["30"],
        "labelSelector": ["app=dgl"],
        "allowWatchBookmarks": ["true"],
    }
    assert_common_headers(req)
    assert observed[-1][:3] == ("watch", "pods", 200)


def test_watch_error_status_when_opening(server: FakeApiServer, client: RestClient) -> None:
    server.route("GET", PODS_PATH, Reply(410, status_body(410, "Expired", "too old")))
    with pytest.raises(Gone):
        client.watch(PODS, "team", resource_version="1", read_timeout=5)


def test_watch_in_stream_error_event_is_passed_through(
    server: FakeApiServer, client: RestClient
) -> None:
    err = {"type": "ERROR", "object": status_body(410, "Expired", "too old resource version")}

    def watch(h: BaseHTTPRequestHandler, req: Req) -> None:
        start_chunked(h)
        send_chunk(h, line(err))
        end_chunked(h)

    server.route("GET", PODS_PATH, watch)
    assert list(client.watch(PODS, "team", resource_version="1", read_timeout=5)) == [err]


def stalled_watch(server: FakeApiServer) -> Callable[[BaseHTTPRequestHandler, Req], None]:
    def watch(h: BaseHTTPRequestHandler, req: Req) -> None:
        start_chunked(h)
        send_chunk(h, line(ev("ADDED", "a", "2")))
        server.release.wait(10)  # silent until teardown
        with contextlib.suppress(OSError):
            end_chunked(h)

    return watch


def test_watch_read_timeout_on_silent_server(server: FakeApiServer, client: RestClient) -> None:
    server.route("GET", PODS_PATH, stalled_watch(server))
    stream = client.watch(PODS, "team", resource_version="1", timeout_seconds=30, read_timeout=0.3)
    it = iter(stream)
    assert next(it)["object"]["metadata"]["name"] == "a"
    t0 = time.monotonic()
    with pytest.raises(TransportError):
        next(it)
    assert 0.25 <= time.monotonic() - t0 < 3.0


def test_default_watch_read_timeout_exceeds_server_timeout(
    server: FakeApiServer, client: RestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[Any] = []
    pool = client._server
    assert pool is not None  # no proxy: requests go straight to the server's pool
    real = pool.urlopen

    def spy(*a: Any, **kw: Any) -> Any:
        seen.append((kw["timeout"].connect_timeout, kw["timeout"].read_timeout))
        return real(*a, **kw)

    monkeypatch.setattr(pool, "urlopen", spy)

    def watch(h: BaseHTTPRequestHandler, req: Req) -> None:
        start_chunked(h)
        end_chunked(h)

    server.route("GET", PODS_PATH, watch)
    assert list(client.watch(PODS, "team", resource_version="1", timeout_seconds=100)) == []
    assert seen == [(10.0, 160.0)]


def test_close_from_another_thread_ends_blocked_watch(
    server: FakeApiServer, client: RestClient
) -> None:
    server.route("GET", PODS_PATH, stalled_watch(server))
    server.route("GET", f"{PODS_PATH}/after", Reply(200, {"metadata": {"name": "after"}}))
    stream = client.watch(PODS, "team", resource_version="1", read_timeout=30)
    got: list[dict[str, Any]] = []
    errors: list[BaseException] = []

    def consume() -> None:
        try:
            for event in stream:
                got.append(event)
        except BaseException as e:
            errors.append(e)

    t = threading.Thread(target=consume, daemon=True)
    t.start()
    wait_for(lambda: len(got) == 1, what="the first watch event", timeout=5.0)
    t0 = time.monotonic()
    stream.close()
    t.join(2)
    assert not t.is_alive(), "close() did not unblock the watch iteration"
    assert time.monotonic() - t0 < 1.0
    assert errors == [], f"close() must end the iteration cleanly, got {errors!r}"
    stream.close()  # idempotent
    # the client (and its connection pool) is still usable afterwards
    assert client.get(PODS, "team", "after") == {"metadata": {"name": "after"}}


# -- configuration ----------------------------------------------------------------------------


def test_from_config_with_kubeconfig(
    server: FakeApiServer, tmp_path: Path, observed: Observed, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KUBECONFIG", raising=False)
    kubeconfig = tmp_path / "config"
    kubeconfig.write_text(
        f"""apiVersion: v1
kind: Config
clusters:
- name: test
  cluster:
    server: {server.url}
users:
- name: token-user
  user:
    token: tok
contexts:
- name: test
  context:
    cluster: test
    user: token-user
    namespace: team
current-context: test
"""
    )
    client = RestClient.from_config(
        str(kubeconfig), observer=lambda *a: observed.append(a), user_agent="dgl-test"
    )
    server.route("GET", f"{PODS_PATH}/a", Reply(200, {"metadata": {"name": "a"}}))
    assert client.get(PODS, "team", "a") == {"metadata": {"name": "a"}}
    req = server.last()
    assert req.headers["authorization"] == "Bearer tok"
    assert req.headers["user-agent"] == "dgl-test"
    assert observed[-1][:3] == ("get", "pods", 200)


class FakeNow:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def renewing_client(server: FakeApiServer, observed: Observed) -> tuple[RestClient, FakeNow]:
    """A client whose token the refresh hook renews at every call (first, second, ...), on a
    fake clock."""
    client = make_client(server.url, observed)
    tokens = iter(["first", "second", "third"])

    def renew(cfg: kubernetes.client.Configuration) -> None:
        cfg.api_key["BearerToken"] = next(tokens)

    cfg = client._api.configuration
    cfg.refresh_api_key_hook = renew
    now = FakeNow()
    client._auth = AuthHeaders(cfg, now=now)
    server.route("GET", f"{PODS_PATH}/a", Reply(200, {"metadata": {"name": "a"}}))
    return client, now


def test_a_renewed_token_is_sent_once_the_interval_has_passed(
    server: FakeApiServer, observed: Observed
) -> None:
    """kubeconfig exec plugins and projected token files renew the token through the
    configuration's refresh hook: it is asked again once a second, not at every request."""
    client, now = renewing_client(server, observed)
    client.get(PODS, "team", "a")
    assert server.last().headers["authorization"] == "Bearer first"
    now.t += AUTH_INTERVAL - 0.01
    client.get(PODS, "team", "a")
    assert server.last().headers["authorization"] == "Bearer first"
    now.t += 0.01
    client.get(PODS, "team", "a")
    assert server.last().headers["authorization"] == "Bearer second"


def test_after_a_401_the_next_request_asks_for_the_token_again(
    server: FakeApiServer, observed: Observed
) -> None:
    client, _now = renewing_client(server, observed)
    refused = status_body(401, "Unauthorized", "token expired")
    server.route("GET", f"{PODS_PATH}/b", Reply(401, refused))
    with pytest.raises(Unauthorized):
        client.get(PODS, "team", "b")
    assert server.last().headers["authorization"] == "Bearer first"
    client.get(PODS, "team", "a")  # on the same fake second
    assert server.last().headers["authorization"] == "Bearer second"


def test_a_server_behind_a_path_gets_the_path_before_every_request(
    server: FakeApiServer, observed: Observed
) -> None:
    client = make_client(f"{server.url}/k8s/clusters/c-1", observed)
    server.route("GET", f"/k8s/clusters/c-1{PODS_PATH}/a", Reply(200, {"metadata": {"name": "a"}}))
    assert client.get(PODS, "team", "a") == {"metadata": {"name": "a"}}
    assert server.last().path == f"/k8s/clusters/c-1{PODS_PATH}/a"
