"""Who the agent serves: the job's token or nothing (but the probe); at most 64 connections."""

from __future__ import annotations

import http.client
import json
import socket
from pathlib import Path
from typing import Any

import pytest

import podcontract as pc
from tests.support.agents import TOKEN, RunningAgent, StartAgent
from tests.support.waiting import wait_for
from workeragent.client import AgentClient, AgentRefused
from workeragent.server import MAX_CONNECTIONS


def _post_start(
    agent: RunningAgent, headers: dict[str, str], marker: Path
) -> tuple[int, dict[str, Any]]:
    conn = http.client.HTTPConnection("127.0.0.1", agent.port, timeout=10)
    body = {"id": "touch", "argv": ["touch", str(marker)]}
    conn.request("POST", "/v1/procs", body=json.dumps(body), headers=headers)
    resp = conn.getresponse()
    answer = json.loads(resp.read())
    conn.close()
    return resp.status, answer


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": "Bearer wrong"},
        {"Authorization": f"Bearer {TOKEN}x"},
        {"Authorization": TOKEN},  # (no "Bearer ")
        {"Authorization": f"Basic {TOKEN}"},
    ],
    ids=["none", "wrong", "longer", "bare", "basic"],
)
def test_a_request_without_the_token_is_refused_and_starts_nothing(
    agent: RunningAgent, headers: dict[str, str], tmp_path: Path
) -> None:
    marker = tmp_path / "started"
    status, answer = _post_start(agent, headers, marker)
    assert status == 401 and "unauthorized" in answer["error"]
    assert agent.client().list() == [] and not marker.exists()
    line = agent.wait_line("refused POST")
    assert "127.0.0.1" in line
    assert not any(TOKEN in out or "Bearer" in out for out in agent.lines)


def test_the_token_starts_it(agent: RunningAgent, tmp_path: Path) -> None:
    """The twin: the same request with the job's token."""
    marker = tmp_path / "started"
    status, answer = _post_start(agent, {"Authorization": f"Bearer {TOKEN}"}, marker)
    assert status == 201 and answer["id"] == "touch"
    wait_for(marker.exists, what="the process to run")
    assert not agent.said("refused")


def test_the_client_says_refused_and_does_not_retry(agent: RunningAgent) -> None:
    slept: list[float] = []
    client = AgentClient(agent.address, "wrong", sleep=slept.append)
    with pytest.raises(AgentRefused, match=r"worker worker-0 \(127\.0\.0\.1:\d+\): list processes"):
        client.list()
    assert slept == []


def test_the_probe_needs_no_token(agent: RunningAgent) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", agent.port, timeout=10)
    conn.request("GET", pc.AGENT_HEALTH_PATH)
    resp = conn.getresponse()
    assert (resp.status, resp.read()) == (200, b"ok\n")
    assert agent.client(token="wrong").health()
    # ... and only the probe: the same path with another method is refused
    conn = http.client.HTTPConnection("127.0.0.1", agent.port, timeout=10)
    conn.request("DELETE", pc.AGENT_HEALTH_PATH)
    assert conn.getresponse().status == 401


def test_one_connection_past_the_limit_is_answered_503(start_agent: StartAgent) -> None:
    agent = start_agent()
    held = [socket.create_connection(("127.0.0.1", agent.port)) for _ in range(MAX_CONNECTIONS)]
    try:
        # (the agent accepts in order: the held ones have their slots before the next one)
        extra = socket.create_connection(("127.0.0.1", agent.port))
        extra.settimeout(10)
        reply = b""
        while chunk := extra.recv(4096):
            reply += chunk
        extra.close()
        assert reply.startswith(b"HTTP/1.1 503 ") and b"too many connections (at most 64)" in reply
        # the twin: one slot freed, a request is served
        held.pop().close()

        def served() -> bool:
            return agent.client().health()

        wait_for(served, what="a freed slot", timeout=10)
    finally:
        for s in held:
            s.close()
