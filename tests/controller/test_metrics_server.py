"""controller/machinery/metrics_server.py: the Reviewer's answers, that it asks the API server
again only once a decision is DECISION_TTL old and at most at its rate; and, over real sockets
and real TLS, that an idle connection stops no scrape and that connections are capped (the
live test: tests/prometheus/test_secure_metrics.py)."""

from __future__ import annotations

import socket
import ssl
import subprocess
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, Counter

from controller.machinery import metrics_server as ms
from kubeclient import Obj, Resource, TransportError

WAIT = 60.0  # seconds: a bound on waits for an outcome, never an assertion on time


class Reviews:
    """The two review APIs, answering from tables (token -> user, user -> allowed)."""

    def __init__(self, users: dict[str, str], allowed: set[str]) -> None:
        self.users, self.allowed, self.calls = users, allowed, 0
        self.down = False

    def create(self, res: Resource, namespace: str | None, body: Obj, **_: Any) -> Obj:
        self.calls += 1
        if self.down:
            raise TransportError("connection refused")
        if res == ms.TOKENREVIEWS:
            user = self.users.get(body["spec"]["token"])
            return {"status": {"authenticated": user is not None, "user": {"username": user}}}
        assert body["spec"]["nonResourceAttributes"] == {"path": "/metrics", "verb": "get"}
        return {"status": {"allowed": body["spec"]["user"] in self.allowed}}


def test_decisions_and_their_time_to_live() -> None:
    now = [0.0]
    api = Reviews({"t-prom": "prom", "t-other": "other"}, {"prom"})
    r = ms.Reviewer(api, clock=lambda: now[0])  # type: ignore[arg-type]
    assert r.decide(None, "/metrics") == ms.Decision(401, "Unauthorized")
    assert r.decide("Basic abc", "/metrics").code == 401
    assert api.calls == 0  # (no token: nothing asked)
    assert r.decide("Bearer nope", "/metrics").code == 401
    assert r.decide("Bearer t-other", "/metrics") == ms.Decision(
        403, "Authorization denied for user other"
    )
    assert r.decide("Bearer t-prom", "/metrics") == ms.Decision(200)
    asked = api.calls
    now[0] = ms.DECISION_TTL - 1
    assert r.decide("Bearer t-prom", "/metrics").code == 200 and api.calls == asked
    now[0] = ms.DECISION_TTL + 1  # asked again: a revoked grant is seen within the TTL
    api.allowed.clear()
    assert r.decide("Bearer t-prom", "/metrics").code == 403
    api.down = True
    now[0] += ms.DECISION_TTL + 1
    assert r.decide("Bearer t-prom", "/metrics") == ms.Decision(500, "Internal Server Error")
    api.down = False
    assert r.decide("Bearer t-prom", "/metrics").code == 403  # (a 500 is not kept)


def test_reviews_are_rate_limited_and_kept() -> None:
    now = [0.0]
    api = Reviews({f"t{i}": "prom" for i in range(5)}, {"prom"})
    limits = ms.Limits(reviews_per_second=1.0, review_burst=2)
    r = ms.Reviewer(api, clock=lambda: now[0], limits=limits)  # type: ignore[arg-type]
    assert r.decide("Bearer t0", "/metrics").code == 200
    assert r.decide("Bearer t1", "/metrics").code == 200
    asked = api.calls
    assert r.decide("Bearer t2", "/metrics") == ms.Decision(429, "Too Many Requests")
    assert api.calls == asked and r.limited == 1  # (the API server was not asked)
    for _ in range(100):  # a scraper's repeated token: its kept decision, no review
        assert r.decide("Bearer t0", "/metrics").code == 200
    assert api.calls == asked
    now[0] = 1.0  # one more review a second
    assert r.decide("Bearer t2", "/metrics").code == 200  # (a 429 is not kept)
    assert r.decide("Bearer t3", "/metrics").code == 429
    now[0] = 100.0  # refilled up to the burst, not beyond
    assert [r.decide(f"Bearer t{i}", "/metrics").code for i in (3, 4, 1)] == [200, 200, 429]


# -- real sockets, real TLS -----------------------------------------------------------------


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("metrics-certs")
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
         "-nodes", "-keyout", "tls.key", "-out", "tls.crt", "-days", "1", "-subj", "/CN=metrics",
         "-addext", "subjectAltName=IP:127.0.0.1"],
        cwd=d, check=True, capture_output=True, timeout=WAIT,
    )  # fmt: skip
    return d


@pytest.fixture
def serve(certs: Path) -> Iterator[Callable[..., ms.MetricsServer]]:
    started: list[ms.MetricsServer] = []

    def start(limits: ms.Limits, **users: str) -> ms.MetricsServer:
        registry = CollectorRegistry()
        Counter("probe", "a series to scrape", registry=registry).inc()
        reviewer = ms.Reviewer(Reviews(users, set(users.values())), limits=limits)  # type: ignore[arg-type]
        server = ms.MetricsServer(("127.0.0.1", 0), registry, reviewer, certs, limits).start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


def client_tls() -> ssl.SSLContext:
    ctx = ssl.create_default_context()
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    return ctx


def connect(server: ms.MetricsServer) -> socket.socket:
    return socket.create_connection(("127.0.0.1", server.port), timeout=WAIT)


def handshake(server: ms.MetricsServer) -> ssl.SSLSocket:
    return client_tls().wrap_socket(connect(server))


def get(conn: ssl.SSLSocket, token: str, header: str = "") -> str:
    """The status line of GET /metrics on ``conn`` (and the value of ``header``), read to the
    end."""
    conn.sendall(f"GET /metrics HTTP/1.0\r\nAuthorization: Bearer {token}\r\n\r\n".encode())
    answer = b""
    while chunk := conn.recv(65536):
        answer += chunk
    conn.close()
    head = answer.split(b"\r\n\r\n", 1)[0].decode().split("\r\n")
    if header:
        head[0] += "".join(f" ({h})" for h in head[1:] if h.startswith(f"{header}:"))
    return head[0]


def scrape(server: ms.MetricsServer, token: str, header: str = "") -> str:
    return get(handshake(server), token, header)


def still_open(sock: socket.socket) -> bool:
    """The server has neither closed nor reset ``sock`` (nothing was sent on it)."""
    sock.setblocking(False)
    try:
        return sock.recv(1) != b""
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        sock.setblocking(True)


def until(done: Callable[[], bool]) -> None:
    stop = threading.Event()
    for _ in range(int(WAIT / 0.05)):
        if done():
            return
        stop.wait(0.05)
    raise AssertionError("the outcome did not come")


def test_an_idle_connection_stops_no_scrape(serve: Callable[..., ms.MetricsServer]) -> None:
    """The attack: a TCP connection that never starts its handshake. The handshake timeout is
    longer than the whole test may wait, so the scrape can only be answered while the idle
    socket still waits (a handshake in the accept loop would hold every scrape for it)."""
    server = serve(ms.Limits(handshake_timeout=10 * WAIT, connection_deadline=10 * WAIT), t="prom")
    idle = connect(server)
    until(lambda: server.httpd.active == 1)  # (accepted, its thread waits for the handshake)
    assert scrape(server, "t") == "HTTP/1.0 200 OK"
    assert scrape(server, "t") == "HTTP/1.0 200 OK"
    # (a scrape's thread frees its slot just after its answer is read: wait for that)
    until(lambda: server.httpd.active == 1)
    assert still_open(idle)
    idle.close()


def test_a_connection_that_never_handshakes_is_closed(
    serve: Callable[..., ms.MetricsServer],
) -> None:
    server = serve(ms.Limits(handshake_timeout=0.2), t="prom")
    idle = connect(server)
    until(lambda: not still_open(idle))
    assert server.httpd.failed_handshakes == 1
    until(lambda: server.httpd.active == 0)  # (its slot is free again)
    assert scrape(server, "t") == "HTTP/1.0 200 OK"


def test_a_request_that_never_comes_is_cut(serve: Callable[..., ms.MetricsServer]) -> None:
    server = serve(ms.Limits(read_timeout=0.2), t="prom")
    silent = handshake(server)  # (handshaken, then nothing sent)
    until(lambda: server.httpd.active == 0)
    assert silent.recv(1) == b""  # (closed by the server)
    assert scrape(server, "t") == "HTTP/1.0 200 OK"


def test_a_request_trickled_slowly_is_cut_at_the_deadline(
    serve: Callable[..., ms.MetricsServer],
) -> None:
    server = serve(ms.Limits(read_timeout=10 * WAIT, connection_deadline=0.5), t="prom")
    slow = handshake(server)
    slow.sendall(b"GET /metrics HTTP/1.0\r\n")  # (and never the end of the headers)
    until(lambda: server.httpd.active == 0)
    assert server.httpd.cut == 1
    assert scrape(server, "t") == "HTTP/1.0 200 OK"
    slow.close()


def test_connections_past_the_cap_are_refused_while_the_others_finish(
    serve: Callable[..., ms.MetricsServer],
) -> None:
    server = serve(
        ms.Limits(max_connections=2, handshake_timeout=10 * WAIT, connection_deadline=10 * WAIT),
        t="prom",
    )
    first = handshake(server)  # (handshaken, its request not sent yet)
    idle = connect(server)
    until(lambda: server.httpd.active == 2)
    with pytest.raises(OSError):  # (closed at once: the handshake cannot finish)
        handshake(server)
    assert server.httpd.refused == 1 and still_open(idle)
    assert get(first, "t") == "HTTP/1.0 200 OK"  # (an admitted connection is served)
    until(lambda: server.httpd.active == 1)
    assert scrape(server, "t") == "HTTP/1.0 200 OK"  # (its slot is free again)
    idle.close()
    until(lambda: server.httpd.active == 0)
    assert server.httpd.refused == 1


def test_a_caller_past_the_review_rate_gets_429(serve: Callable[..., ms.MetricsServer]) -> None:
    server = serve(ms.Limits(reviews_per_second=0.001, review_burst=1), a="prom", b="prom")
    assert scrape(server, "a") == "HTTP/1.0 200 OK"
    assert scrape(server, "b", "Retry-After") == "HTTP/1.0 429 Too Many Requests (Retry-After: 1)"
    assert scrape(server, "a") == "HTTP/1.0 200 OK"  # (kept: no review)


def test_the_operations_guide_states_the_limits() -> None:
    limits = ms.Limits()
    text = " ".join((Path(__file__).parents[2] / "docs" / "operations.md").read_text().split())
    for said in (
        f"must finish within {limits.handshake_timeout:g} s",
        f"every read within {limits.read_timeout:g} s",
        f"ends within {limits.connection_deadline:g} s",
        f"at most {limits.max_connections} connections",
        f"at most {limits.reviews_per_second:g} a second, in bursts of {limits.review_burst}",
        f"kept {ms.DECISION_TTL:g} s per token digest",
    ):
        assert said in text, said
