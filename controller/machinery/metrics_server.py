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
authentication and authorization cache theirs; at most :data:`MAX_DECISIONS` of them. The
operator needs ``create`` on ``tokenreviews`` and ``subjectaccessreviews``
(tests/support/rbac.py METRICS_AUTH_RULES); a scraper needs ``get`` on
``nonResourceURLs: ["/metrics"]`` (the chart's ``<release>-metrics-reader`` ClusterRole).
"""

from __future__ import annotations

import hashlib
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
class Decision:
    code: int  # 200, 401, 403 or 500
    message: str = ""


class Reviewer:
    """Who may read: TokenReview, then SubjectAccessReview, decisions kept a while."""

    def __init__(self, client: KubeClient, clock: Callable[[], float] = time.monotonic) -> None:
        self.client = client
        self.clock = clock
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


class MetricsServer:
    """``/metrics`` of ``registry`` on ``addr`` (host, port); with ``reviewer``, only for the
    callers it admits; with ``cert_dir``, over TLS."""

    def __init__(
        self,
        addr: tuple[str, int],
        registry: CollectorRegistry,
        reviewer: Reviewer | None = None,
        cert_dir: Path | None = None,
    ) -> None:
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                outer.answer(self)

        self.registry = registry
        self.reviewer = reviewer
        self.httpd = ThreadingHTTPServer(addr, Handler)
        self.httpd.daemon_threads = True
        if cert_dir is not None:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.minimum_version = ssl.TLSVersion.TLSv1_2
            ctx.load_cert_chain(cert_dir / "tls.crt", cert_dir / "tls.key")
            self.httpd.socket = ctx.wrap_socket(self.httpd.socket, server_side=True)
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
        req.send_header("Content-Length", str(len(body)))
        req.end_headers()
        req.wfile.write(body)


def cert_files(cert_dir: Path) -> str | None:
    """Why ``cert_dir`` cannot serve TLS (None: it can)."""
    missing = [n for n in ("tls.crt", "tls.key") if not (cert_dir / n).is_file()]
    if missing:
        return f"--metrics-cert-dir {cert_dir}: no {' or '.join(missing)}"
    return None
