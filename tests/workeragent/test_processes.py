"""Processes through a real agent: their output (one ordered stream) and exit codes, a client
that goes away and one that comes back, signals to the whole session, the orphan grace, the
output buffer's limit, and the agent's own end."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.support.agents import RunningAgent, StartAgent, TcpProxy, alive, gated, wait_ended
from tests.support.waiting import wait_for
from workeragent.client import AgentAddress, AgentClient, AgentError, AgentUnreachable


def _collect(client: AgentClient, proc_id: str, offset: int = 0) -> tuple[bytes, int]:
    out = bytearray()
    code = client.follow(proc_id, offset, out.extend, wait=5)
    return bytes(out), code


def test_stdout_and_stderr_come_in_order_with_the_exit_code(agent: RunningAgent) -> None:
    client = agent.client()
    script = "echo one; echo two >&2; echo three; echo four >&2; exit 3"
    pid = client.start("p", ["sh", "-c", script])
    assert pid > 0
    assert _collect(client, "p") == (b"one\ntwo\nthree\nfour\n", 3)
    status = client.status("p")
    assert (status.running, status.exit, status.end, status.argv) == (
        False,
        3,
        len(b"one\ntwo\nthree\nfour\n"),
        ("sh", "-c", script),
    )


def test_env_and_cwd(agent: RunningAgent) -> None:
    (agent.workdir / "sub").mkdir()
    client = agent.client()
    client.start("p", ["sh", "-c", 'echo "$GREETING $(pwd)"'], env={"GREETING": "hi"}, cwd="sub")
    assert _collect(client, "p") == (f"hi {agent.workdir / 'sub'}\n".encode(), 0)


def test_a_process_killed_by_a_signal_exits_128_plus_it(agent: RunningAgent) -> None:
    client = agent.client()
    client.start("p", ["sh", "-c", "echo bye; kill -KILL $$"])
    assert _collect(client, "p") == (b"bye\n", 137)


def test_start_is_idempotent_by_id_and_refuses_another_argv(agent: RunningAgent) -> None:
    client = agent.client()
    pid = client.start("p", ["sleep", "60"])
    assert client.start("p", ["sleep", "60"]) == pid
    with pytest.raises(AgentError, match=r"start p: the agent answered 409: \"id: p exists"):
        client.start("p", ["sleep", "61"])
    with pytest.raises(AgentError, match="answered 409"):
        client.forget("p")
    assert client.stop("p", 5) == 143
    client.forget("p")
    with pytest.raises(AgentError, match=r"status of p: the agent answered 404: \"no process"):
        client.status("p")
    assert client.list() == []
    with pytest.raises(AgentError, match='422: "cannot start /no/such: No such file'):
        client.start("q", ["/no/such"])


def test_a_dropped_client_leaves_the_process_and_a_new_one_gets_the_rest_once(
    agent: RunningAgent, tmp_path: Path
) -> None:
    gate = tmp_path / "gate"
    argv, expected = gated(gate)
    direct = agent.client()
    direct.start("p", argv)
    proxy = TcpProxy(agent.port)
    first = AgentClient(
        AgentAddress("worker-0", "127.0.0.1", proxy.port), "t0ken-of-the-job", unreachable_after=0.5
    )
    got = bytearray()
    failed: list[BaseException] = []

    def follow() -> None:
        try:
            first.follow("p", 0, got.extend, wait=5)
        except AgentUnreachable as e:
            failed.append(e)

    reader = threading.Thread(target=follow, daemon=True)
    reader.start()
    wait_for(lambda: len(got) >= len(b"line 000\n") * 10, what="the first lines", timeout=10)
    proxy.stop()  # the first client's connection is cut mid-poll, and it gives up
    reader.join(10)
    assert failed and "unreachable" in str(failed[0]) and not reader.is_alive()
    saved = len(got)
    assert direct.status("p").running
    gate.touch()
    rest, code = _collect(agent.client(), "p", saved)
    assert bytes(got) + rest == expected and code == 5


def test_the_orphan_grace_stops_the_processes(start_agent: StartAgent) -> None:
    agent = start_agent("--orphan-grace", "2")
    client = agent.client()
    pid = client.start("sleeper", ["sleep", "60"])
    line = agent.wait_line("no request from dglrun", timeout=20)  # (no request meanwhile)
    assert "sleeper" in line and "orphan grace 2s" in line
    assert not alive(pid)
    assert client.status("sleeper").exit == 143


def test_a_client_that_keeps_asking_keeps_them(start_agent: StartAgent) -> None:
    """The twin: the same processes and grace, with a client polling."""
    agent = start_agent("--orphan-grace", "2")
    client = agent.client()
    pid = client.start("sleeper", ["sleep", "60"])
    deadline = time.monotonic() + 5  # (past twice the grace)
    while time.monotonic() < deadline:
        client.output("sleeper", 0, wait=0.3)
    assert client.status("sleeper").running and alive(pid)
    assert not agent.said("no request from dglrun")
    assert client.stop("sleeper", 5) == 143


def _grandchild(client: AgentClient, proc_id: str) -> int:
    """The pid the process printed first (its background child's)."""
    chunk = client.output(proc_id, 0, wait=10)
    while not chunk.data.endswith(b"\n"):
        more = client.output(proc_id, chunk.next, wait=10)
        chunk = type(chunk)(0, more.next, chunk.data + more.data, None, 0)
    return int(chunk.data.split()[0])


def test_a_signal_reaches_the_whole_session(agent: RunningAgent) -> None:
    client = agent.client()
    client.start("p", ["sh", "-c", "sleep 300 & echo $!; wait"])
    child, grandchild = client.status("p").pid, _grandchild(client, "p")
    assert alive(grandchild)
    # the twin: a signal to the process alone leaves what it started (and its output open)
    os.kill(child, signal.SIGTERM)
    wait_for(lambda: not alive(child), what="the shell to die")
    assert alive(grandchild) and client.status("p").running
    # the agent's signal goes to the group
    client.signal("p", "SIGTERM")
    wait_for(lambda: not alive(grandchild), what="the grandchild to die")
    assert wait_ended(client, "p") == 143


def test_stop_kills_the_session_that_ignores_sigterm(agent: RunningAgent) -> None:
    client = agent.client()
    client.start("p", ["sh", "-c", "trap '' TERM; sleep 300 & echo $!; wait"])
    grandchild = _grandchild(client, "p")
    # the twin: SIGTERM alone does not end it
    client.signal("p", "SIGTERM")
    with pytest.raises(AssertionError):
        wait_for(lambda: not alive(grandchild), what="the grandchild to die", timeout=0.5)
    assert client.status("p").running
    assert client.stop("p", grace=0.5) == 137
    assert not alive(grandchild)


def test_output_beyond_the_buffer_is_reported_skipped(start_agent: StartAgent) -> None:
    agent = start_agent("--output-buffer", "64Ki")
    client = agent.client()
    client.start("p", [sys.executable, "-c", "import sys; sys.stdout.write('x' * 300000)"])
    wait_ended(client, "p")
    chunk = client.output("p", 0, wait=0)
    kept = 64 * 1024
    assert (chunk.start, chunk.next, chunk.skipped) == (300000 - kept, 300000, 300000 - kept)
    assert chunk.data == b"x" * kept and chunk.exit == 0
    skipped: list[int] = []
    out = bytearray()
    assert client.follow("p", 0, out.extend, on_skip=skipped.append) == 0
    assert skipped == [300000 - kept] and len(out) == kept
    # without on_skip, a line in the output says so
    out.clear()
    client.follow("p", 100, out.extend)
    assert out.startswith(
        f"\n[dgl-agent: {300000 - kept - 100} bytes of output dropped]\n".encode()
    )


def test_output_within_the_buffer_is_all_there(agent: RunningAgent) -> None:
    """The twin: the default buffer (8 MiB) keeps it all."""
    client = agent.client()
    client.start("p", [sys.executable, "-c", "import sys; sys.stdout.write('x' * 300000)"])
    skipped: list[int] = []
    out = bytearray()
    assert client.follow("p", 0, out.extend, on_skip=skipped.append) == 0
    assert skipped == [] and out == b"x" * 300000


def test_sigterm_stops_the_agent_and_its_processes(agent: RunningAgent) -> None:
    client = agent.client()
    pid = client.start("p", ["sleep", "300"])
    agent.proc.send_signal(signal.SIGTERM)
    assert agent.proc.wait(30) == 128 + signal.SIGTERM  # (a worker pod stopped: Failed)
    assert not alive(pid)
    agent.wait_line("stopping: 1 process(es) running: p")


def test_the_boot_command_runs_beside_the_api(start_agent: StartAgent) -> None:
    agent = start_agent(command=["sh", "-c", "echo from-the-worker-command; exit 3"])
    agent.wait_line("from-the-worker-command")
    agent.wait_line("the worker command exited with 3")
    client = agent.client()
    assert client.health() and client.run(["echo", "still serving"]) == (0, "still serving\n")


def test_run_stops_a_process_past_its_timeout(agent: RunningAgent) -> None:
    client = agent.client()
    with pytest.raises(
        AgentError, match=r"run sh: still running after 0\.5s: stopped \(exit 143\)"
    ):
        client.run(["sh", "-c", "echo started; exec sleep 60"], timeout=0.5)
    assert client.list() == []
