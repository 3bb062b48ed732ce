"""Bad input is answered 400 (or 404, 405) with ``{"error": ...}`` naming the field; the same
request put right is served (each group's first case)."""

from __future__ import annotations

import http.client
import json
import socket
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.agents import TOKEN, RunningAgent, wait_ended

AUTH = {"Authorization": f"Bearer {TOKEN}"}


def _request(
    agent: RunningAgent, method: str, path: str, body: bytes | None = None
) -> tuple[int, dict[str, Any]]:
    conn = http.client.HTTPConnection("127.0.0.1", agent.port, timeout=10)
    conn.request(method, path, body=body, headers=AUTH)
    resp = conn.getresponse()
    data = resp.read()
    conn.close()
    if resp.getheader("Content-Type") != "application/json":
        return resp.status, {"raw": data}
    return resp.status, json.loads(data)


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningAgent]:
    """One agent for the cases of this module (each leaves it as it was), running ``p``."""
    agent = RunningAgent(tmp_path_factory.mktemp("agent"))
    client = agent.client()
    client.start("p", ["sh", "-c", "trap '' USR1; echo hi; exec sleep 60"])
    yield agent
    client.stop("p", 5)
    agent.close()


def _start(**fields: object) -> bytes:
    return json.dumps(fields).encode()


@pytest.mark.parametrize(
    ("body", "status", "field"),
    [
        (_start(id="good", argv=["true"], env={"A": "b"}, cwd="."), 201, None),
        (_start(id="../x", argv=["true"]), 400, "id"),
        (_start(id="", argv=["true"]), 400, "id"),
        (_start(id="x" * 129, argv=["true"]), 400, "id"),
        (_start(id=5, argv=["true"]), 400, "id"),
        (_start(id="a"), 400, "argv"),
        (_start(id="a", argv="true"), 400, "argv"),
        (_start(id="a", argv=[]), 400, "argv"),
        (_start(id="a", argv=["tr\0ue"]), 400, "argv"),
        (_start(id="a", argv=["true", 1]), 400, "argv"),
        (_start(id="a", argv=["true"], env={"A": 1}), 400, "env"),
        (_start(id="a", argv=["true"], env={"A=B": "1"}), 400, "env"),
        (_start(id="a", argv=["true"], env=["A"]), 400, "env"),
        (_start(id="a", argv=["true"], cwd=5), 400, "cwd"),
        (_start(id="a", argv=["true"], cwd="no/such/dir"), 400, "cwd"),
        (_start(id="a", argv=["true"], argz=["x"]), 400, "argz"),
        (b"not json", 400, "body"),
        (b"[1, 2]", 400, "body"),
        (_start(id="a", argv=["/no/such/program"]), 422, "cannot start /no/such/program"),
    ],
)
def test_a_bad_start_names_the_field(
    shared: RunningAgent, body: bytes, status: int, field: str | None
) -> None:
    got, answer = _request(shared, "POST", "/v1/procs", body)
    assert got == status, answer
    if field is not None:
        assert answer["error"].startswith(f"{field}"), answer
        assert "a" not in [p.id for p in shared.client().list()]
    else:
        assert "good" in [p.id for p in shared.client().list()]


@pytest.mark.parametrize(
    ("method", "path", "body", "status", "field"),
    [
        ("GET", "/v1/procs/p/output?offset=0&wait=0", None, 200, None),
        ("GET", "/v1/procs/p/output?offset=-1", None, 400, "offset"),
        ("GET", "/v1/procs/p/output?offset=1e3", None, 400, "offset"),
        ("GET", "/v1/procs/p/output?offset=999", None, 400, "offset"),
        ("GET", "/v1/procs/p/output?wait=abc", None, 400, "wait"),
        ("GET", "/v1/procs/p/output?wait=-2", None, 400, "wait"),
        ("GET", "/v1/procs/p/output?wait=inf", None, 400, "wait"),
        ("POST", "/v1/procs/p/signal", b'{"signal": "SIGUSR1"}', 200, None),
        ("POST", "/v1/procs/p/signal", b'{"signal": "SIGSTOP"}', 400, "signal"),
        ("POST", "/v1/procs/p/signal", b'{"signal": 15}', 400, "signal"),
        ("POST", "/v1/procs/p/signal", b"{}", 400, "signal"),
        ("POST", "/v1/procs/p/stop", b'{"grace": -1}', 400, "grace"),
        ("POST", "/v1/procs/p/stop", b'{"grace": "5"}', 400, "grace"),
        ("POST", "/v1/procs/p/stop", b'{"grace": 5, "force": true}', 400, "force"),
        ("GET", "/v1/procs/nobody", None, 404, "no process"),
        ("GET", "/v1/procs/nobody/output", None, 404, "no process"),
        ("DELETE", "/v1/procs/p", None, 409, "p is running"),
        ("PUT", "/v1/procs/p", None, 405, "method"),
        ("GET", "/v1/procz", None, 404, "path"),
        ("GET", "/v1/files", None, 400, "path"),
        ("GET", "/v1/files?path=", None, 400, "path"),
        ("GET", "/v1/files?path=.", None, 400, "path"),
        ("GET", "/v1/stat", None, 400, "path"),
        ("GET", "/v1/manifest", None, 400, "dir"),
        ("GET", "/v1/manifest?dir=nothing-here", None, 404, "dir"),
        ("DELETE", "/v1/files?path=x", None, 405, "method"),
        ("PUT", "/v1/files?path=x&mode=999", b"abc", 400, "mode"),
        ("PUT", "/v1/files?path=x&mode=rwx", b"abc", 400, "mode"),
        ("PUT", "/v1/files?path=.", b"abc", 400, "path"),
    ],
)
def test_a_bad_request_names_the_field(
    shared: RunningAgent, method: str, path: str, body: bytes | None, status: int, field: str | None
) -> None:
    got, answer = _request(shared, method, path, body)
    assert got == status, answer
    if field is not None:
        assert answer["error"].startswith(field), answer
    assert shared.client().status("p").running
    assert not (shared.workdir / "x").exists()


def test_an_upload_without_a_length_is_refused_naming_it(agent: RunningAgent) -> None:
    with socket.create_connection(("127.0.0.1", agent.port), timeout=10) as s:
        s.sendall(
            f"PUT /v1/files?path=x HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer {TOKEN}\r\n"
            "Transfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n".encode()
        )
        reply = s.makefile("rb").read()
    assert reply.startswith(b"HTTP/1.1 400 ") and b'"Transfer-Encoding: ' in reply
    with socket.create_connection(("127.0.0.1", agent.port), timeout=10) as s:
        s.sendall(
            f"PUT /v1/files?path=x HTTP/1.1\r\nAuthorization: Bearer {TOKEN}\r\n\r\n".encode()
        )
        reply = s.makefile("rb").readline()
    assert reply.startswith(b"HTTP/1.1 400 ")
    assert not (agent.workdir / "x").exists()


def test_a_well_formed_request_after_a_bad_one_on_the_same_connection(
    agent: RunningAgent,
) -> None:
    """A refusal before the body was read closes the connection: the rest of the body is
    never taken for a request."""
    conn = http.client.HTTPConnection("127.0.0.1", agent.port, timeout=10)
    smuggled = b"GET /v1/procs HTTP/1.1\r\nHost: a\r\n\r\n"
    conn.request("PUT", "/v1/files?path=y&mode=999", body=smuggled, headers=AUTH)
    resp = conn.getresponse()
    assert resp.status == 400 and resp.getheader("Connection") == "close"
    resp.read()
    conn.close()
    client = agent.client()
    client.start("q", ["true"])
    assert wait_ended(client, "q") == 0
