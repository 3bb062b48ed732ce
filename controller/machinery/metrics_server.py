"""The operator's ``/metrics`` endpoint, open (the default) or secure (``--metrics-secure``).

Secure, it behaves as controller-runtime's secure serving with its authentication and
authorization filter: HTTPS with the certificate of ``--metrics-cert-dir`` (``tls.crt``,
``tls.key``), and each request answered only for a caller that

1. sends a bearer token the API server's TokenReview authenticates, else **401**;
2. is allowed, by a SubjectAccessReview of that user, its groups and extra, ``get`` on the
   non-resource URL of the request's path (``/metrics``), else **403** ``Authorization denied
   for user <name>``.

An API error on either review is a **500** (nothing is served on doubt). Decisions are kept
:data:`DECISION_TTL` seconds per (token digest, path), as the API server's delegated
authentication and authorization cache theirs; at most :data:`MAX_DECISIONS` of them.

What one caller can take is bounded by :class:`Limits` (constants, no flags):

- the TLS handshake runs in the connection's own thread, within ``handshake_timeout``; an idle
  connection never holds up the accept loop, so never another caller's scrape;
- each read of the request must come within ``read_timeout``, and the whole connection ends
  within ``connection_deadline`` (a request trickled byte by byte holds no slot longer);
- at most ``max_connections`` connections are served at once; one more is closed at once
  (``refused``);
- reviews (a TokenReview and a SubjectAccessReview) start at most ``reviews_per_second``, in
  bursts of ``review_burst``; a caller without a kept decision beyond that gets **429** (and
  is asked again next time): a scraper's token costs one review per :data:`DECISION_TTL`.

The operator needs ``create`` on ``tokenreviews`` and ``subjectaccessreviews``
(tests/support/rbac.py METRICS_AUTH_RULES); a scraper needs ``get`` on
``nonResourceURLs: ["/metrics"]`` (the chart's ``<release>-metrics-reader`` ClusterRole).
"""

from __future__ import annotations

import contextlib
import hashlib
import socket
import ssl
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import structlog
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from kubeclient import ApiError, KubeClient, Resource, TransportError

log = structlog.get_logger("controller.metrics")

TOKENREVIEWS = Resource("authentication.k8s.io", "v1", "tokenreviews", "TokenReview", False)
SUBJECTACCESSREVIEWS = Resource(
    "authorization.k8s.io", "v1", "subjectaccessreviews", "SubjectAccessReview", False
)
DECISION_TTL = 10.0  # seconds
MAX_DECISIONS = 1024
PATH = "/metrics"


@dataclass(frozen=True)
class Limits:
    """What the callers of ``/metrics`` may take (seconds, counts)."""

    handshake_timeout: float = 10.0
    read_timeout: float = 10.0
    connection_deadline: float = 30.0  # (the whole connection, however slowly it trickles)
    max_connections: int = 32
    reviews_per_second: float = 5.0
    review_burst: int = 20


@dataclass(frozen=True)
class Decision:
    code: int  # 200, 401, 403, 429 or 500
    message: str = ""


LIMITED = Decision(429, "Too Many Requests")


class TokenBucket:
    """``rate`` takes a second, up to ``burst`` at once."""

    def __init__(self, rate: float, burst: int, clock: Callable[[], float]) -> None:
        self.rate, self.burst, self.clock = rate, float(burst), clock
        self._lock = threading.Lock()
        self._tokens, self._at = float(burst), clock()

    def take(self) -> bool:
        with self._lock:
            now = self.clock()
            self._tokens = min(self.burst, self._tokens + (now - self._at) * self.rate)
            self._at = now
            if self._tokens < 1:
                return False
            self._tokens -= 1
            return True


class Reviewer:
    """Who may read: TokenReview, then SubjectAccessReview, decisions kept a while."""

    def __init__(
        self,
        client: KubeClient,
        clock: Callable[[], float] = time.monotonic,
        limits: Limits = Limits(),
    ) -> None:
        self.client = client
        self.clock = clock
        self.bucket = TokenBucket(limits.reviews_per_second, limits.review_burst, clock)
        self.limited = 0  # callers answered 429
        self._lock = threading.Lock()
        self._kept: OrderedDict[tuple[str, str], tuple[float, Decision]] = OrderedDict()

    def decide(self, authorization: str | None, path: str, verb: str = "get") -> Decision:
        scheme, _, token = (authorization or "").partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            return Decision(401, "Unauthorized")
        key = (hashlib.sha256(token.encode()).hexdigest(), f"{verb} {path}")
        now = self.clock()
        with self._lock:
            kept = self._kept.get(key)
            if kept is not None and now - kept[0] < DECISION_TTL:
                return kept[1]
        if not self.bucket.take():
            with self._lock:
                self.limited += 1
            return LIMITED
        decision = self._review(token, path, verb)
        if decision.code != 500:  # (an API error is asked again at once)
            with self._lock:
                self._kept[key] = (now, decision)
                self._kept.move_to_end(key)
                while len(self._kept) > MAX_DECISIONS:
                    self._kept.popitem(last=False)
        return decision

    def _review(self, token: str, path: str, verb: str) -> Decision:
        try:
            review = self.client.create(
                TOKENREVIEWS,
                None,
                {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
                 "spec": {"token": token}},
            )  # fmt: skip
            st = review.get("status") or {}
            if not st.get("authenticated"):
                return Decision(401, "Unauthorized")
            user: dict[str, Any] = st.get("user") or {}
            name = str(user.get("username") or "")
            access = self.client.create(
                SUBJECTACCESSREVIEWS,
                None,
                {
                    "apiVersion": "authorization.k8s.io/v1",
                    "kind": "SubjectAccessReview",
                    "spec": {
                        "user": name,
                        "groups": user.get("groups") or [],
                        "extra": user.get("extra") or {},
                        "uid": user.get("uid") or "",
                        "nonResourceAttributes": {"path": path, "verb": verb},
                    },
                },
            )
        except (ApiError, TransportError) as e:
            log.warning("metrics: reviewing a caller failed", error=str(e))
            return Decision(500, "Internal Server Error")
        if not (access.get("status") or {}).get("allowed"):
            return Decision(403, f"Authorization denied for user {name}")
        return Decision(200)


class _Server(ThreadingHTTPServer):
    """A thread per connection, at most ``limits.max_connections`` of them; with ``tls``, the
    handshake in that thread, bounded by ``limits.handshake_timeout`` (the accept loop only
    accepts)."""

    daemon_threads = True
    block_on_close = False  # (stop() does not wait for the connections' timeouts)

    def __init__(
        self,
        addr: tuple[str, int],
        handler: type[BaseHTTPRequestHandler],
        limits: Limits,
        tls: ssl.SSLContext | None,
    ) -> None:
        super().__init__(addr, handler)
        self.limits, self.tls = limits, tls
        self._slots = threading.BoundedSemaphore(limits.max_connections)
        self._lock = threading.Lock()
        self.active = 0  # connections being served
        self.refused = 0  # connections closed at once: max_connections were being served
        self.failed_handshakes = 0
        self.cut = 0  # connections shut down at their connection_deadline

    def _count(self, name: str, by: int) -> None:
        with self._lock:
            setattr(self, name, getattr(self, name) + by)

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            self._count("refused", 1)
            self.shutdown_request(request)
            return
        self._count("active", 1)
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._count("active", -1)
            self._slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        conn = request
        cut = request.dup()  # (the same connection, for the deadline to shut down)
        deadline = threading.Timer(self.limits.connection_deadline, self._cut, (cut,))
        deadline.daemon = True
        deadline.start()
        try:
            conn = self._handshake(request)
            if conn is not None:
                self.finish_request(conn, client_address)
        except Exception as e:
            log.debug("metrics: a connection failed", error=str(e))
        finally:
            deadline.cancel()
            self.shutdown_request(conn if conn is not None else request)
            cut.close()
            self._count("active", -1)
            self._slots.release()

    def _cut(self, sock: socket.socket) -> None:
        self._count("cut", 1)
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)  # (wakes the thread's blocked read or write)

    def _handshake(self, sock: socket.socket) -> socket.socket | None:
        if self.tls is None:
            return sock
        sock.settimeout(self.limits.handshake_timeout)
        try:
            tls = self.tls.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
            tls.do_handshake()
        except (OSError, ValueError) as e:  # (ssl.SSLError and TimeoutError are OSErrors)
            self._count("failed_handshakes", 1)
            log.debug("metrics: TLS handshake failed", error=str(e))
            sock.close()
            return None
        return tls

    def handle_error(self, request: Any, client_address: Any) -> None:
        log.debug("metrics: a request failed", client=str(client_address))


class MetricsServer:
    """``/metrics`` of ``registry`` on ``addr`` (host, port); with ``reviewer``, only for the
    callers it admits; with ``cert_dir``, over TLS; within ``limits``."""

    def __init__(
        self,
        addr: tuple[str, int],
        registry: CollectorRegistry,
        reviewer: Reviewer | None = None,
        cert_dir: Path | None = None,
        limits: Limits = Limits(),
    ) -> None:
        outer = self

        class Handler(BaseHTTPRequestHandler):
            timeout = limits.read_timeout  # (each read of the request)

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                outer.answer(self)

        self.registry = registry
        self.reviewer = reviewer
        tls: ssl.SSLContext | None = None
        if cert_dir is not None:
            tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            tls.minimum_version = ssl.TLSVersion.TLSv1_2
            tls.load_cert_chain(cert_dir / "tls.crt", cert_dir / "tls.key")
        self.httpd = _Server(addr, Handler, limits, tls)
        self.port = int(self.httpd.server_address[1])
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def start(self) -> MetricsServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def answer(self, req: BaseHTTPRequestHandler) -> None:
        path = req.path.split("?", 1)[0]
        if path != PATH:
            self._send(req, 404, b"not found\n", "text/plain")
            return
        if self.reviewer is not None:
            decision = self.reviewer.decide(req.headers.get("Authorization"), path)
            if decision.code != 200:
                self._send(req, decision.code, f"{decision.message}\n".encode(), "text/plain")
                return
        self._send(req, 200, generate_latest(self.registry), CONTENT_TYPE_LATEST)

    @staticmethod
    def _send(req: BaseHTTPRequestHandler, code: int, body: bytes, ctype: str) -> None:
        req.send_response(code)
        req.send_header("Content-Type", ctype)
        if code == LIMITED.code:
            req.send_header("Retry-After", "1")
        req.send_header("Content-Length", str(len(body)))
        req.end_headers()
        req.wfile.write(body)


def cert_files(cert_dir: Path) -> str | None:
    """Why ``cert_dir`` cannot serve TLS (None: it can)."""
    missing = [n for n in ("tls.crt", "tls.key") if not (cert_dir / n).is_file()]
    if missing:
        return f"--metrics-cert-dir {cert_dir}: no {' or '.join(missing)}"
    return None
