"""follow() over an agent that cannot be reached for a while: it retries, re-attaches at its
offset (every byte once), and gives up only after ``unreachable_after`` seconds."""

from __future__ import annotations

import http.server
import os
import signal
import threading
from pathlib import Path

import pytest

from tests.support.agents import TOKEN, RunningAgent, TcpProxy, gated
from tests.support.waiting import wait_for
from workeragent.client import AgentAddress, AgentClient, AgentUnreachable


class Follower:
    """follow() on a thread, its bytes and its end (an exit code or an exception)."""

    def __init__(self, client: AgentClient, proc_id: str, wait: float) -> None:
        self.got = bytearray()
        self.code: int | None = None
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(client, proc_id, wait))
        self._thread.daemon = True
        self._thread.start()

    def _run(self, client: AgentClient, proc_id: str, wait: float) -> None:
        try:
            self.code = client.follow(proc_id, 0, self.got.extend, wait=wait)
        except BaseException as e:
            self.error = e

    def join(self, timeout: float = 30) -> None:
        self._thread.join(timeout)
        assert not self._thread.is_alive(), "follow() still running"


def _through(proxy: TcpProxy, **kwargs: float) -> tuple[AgentClient, list[float]]:
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        threading.Event().wait(seconds)

    address = AgentAddress("worker-3", "127.0.0.1", proxy.port)
    return AgentClient(address, TOKEN, sleep=sleep, **kwargs), slept  # type: ignore[arg-type]


def test_follow_survives_the_agent_unreachable_for_a_while(
    agent: RunningAgent, tmp_path: Path
) -> None:
    gate = tmp_path / "gate"
    argv, expected = gated(gate)
    agent.client().start("p", argv)
    proxy = TcpProxy(agent.port)
    client, slept = _through(proxy, timeout=2.0, unreachable_after=30.0)
    follower = Follower(client, "p", wait=1.0)
    wait_for(lambda: len(follower.got) >= 90, what="the first lines", timeout=10)
    proxy.stop()
    gate.touch()  # (the rest is printed while nobody can read it)
    wait_for(lambda: len(slept) >= 3, what="three retries", timeout=10)
    assert follower.error is None and not follower.got.endswith(b"line 029\n")
    proxy.start()
    follower.join()
    assert follower.error is None
    assert (bytes(follower.got), follower.code) == (expected, 5)


def test_follow_gives_up_after_unreachable_after(agent: RunningAgent, tmp_path: Path) -> None:
    """The twin: the same cut, never mended."""
    argv, _ = gated(tmp_path / "gate")
    agent.client().start("p", argv)
    proxy = TcpProxy(agent.port)
    client, slept = _through(proxy, timeout=2.0, unreachable_after=1.5)
    follower = Follower(client, "p", wait=1.0)
    wait_for(lambda: len(follower.got) >= 90, what="the first lines", timeout=10)
    proxy.stop()
    follower.join()
    assert isinstance(follower.error, AgentUnreachable)
    message = str(follower.error)
    assert message.startswith(f"worker worker-3 (127.0.0.1:{proxy.port}): output of p: ")
    assert "unreachable for " in message and slept
    assert agent.client().status("p").running  # (the process does not care)


def test_follow_survives_a_stopped_agent(agent: RunningAgent, tmp_path: Path) -> None:
    """The agent frozen (SIGSTOP: connections hang, nothing is refused) and thawed."""
    gate = tmp_path / "gate"
    argv, expected = gated(gate)
    slept: list[float] = []
    client = AgentClient(
        agent.address, TOKEN, timeout=0.5, unreachable_after=30.0, sleep=slept.append
    )
    client.start("p", argv)
    follower = Follower(client, "p", wait=0.5)
    wait_for(lambda: len(follower.got) >= 90, what="the first lines", timeout=10)
    os.kill(agent.proc.pid, signal.SIGSTOP)
    try:
        gate.touch()
        wait_for(lambda: len(slept) >= 2, what="two timed-out requests", timeout=20)
    finally:
        os.kill(agent.proc.pid, signal.SIGCONT)
    follower.join()
    assert follower.error is None
    assert (bytes(follower.got), follower.code) == (expected, 5)


@pytest.mark.parametrize("status", [502, 503])
def test_a_5xx_is_retried(agent: RunningAgent, status: int) -> None:
    """What a proxy in front of the agent answers while the agent is away."""
    served: list[str] = []

    class Flaky(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            served.append(self.path)
            self.send_response(status)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: object) -> None:
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Flaky)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        address = AgentAddress("worker-5", "127.0.0.1", httpd.server_address[1])
        slept: list[float] = []

        def sleep(seconds: float) -> None:
            slept.append(seconds)
            threading.Event().wait(seconds)

        client = AgentClient(address, TOKEN, unreachable_after=0.5, sleep=sleep)
        with pytest.raises(AgentUnreachable, match=f"the agent answered {status}"):
            client.status("p")
        assert len(served) >= 2 and len(slept) == len(served) - 1
    finally:
        httpd.shutdown()
        httpd.server_close()
