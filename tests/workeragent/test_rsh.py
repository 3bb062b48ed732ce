"""mpirun's remote shell through the agents: the remote output and exit code, signals
forwarded, a line naming what is wrong."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.agents import RunningAgent, python_env
from tests.support.waiting import wait_for

RSH = [sys.executable, "-m", "workeragent.rsh"]


def _env(agent: RunningAgent, hostfile: Path) -> dict[str, str]:
    hostfile.write_text(
        "# the agents of the job\n\n"
        "127.0.0.2 30050 worker-1 slots=1\n127.0.0.1 30050 worker-0 slots=2\n"
    )  # (the operator's hostfile: DGL's port; the agents' is DGL_AGENT_PORT)
    return python_env(
        DGL_AGENT_HOSTFILE=str(hostfile),
        DGL_AGENT_TOKEN_FILE=str(agent.token_file),
        DGL_AGENT_PORT=str(agent.port),
    )


@pytest.mark.parametrize("host", ["worker-0", "127.0.0.1"])
def test_rsh_prints_the_remote_output_and_exits_with_its_code(
    agent: RunningAgent, tmp_path: Path, host: str
) -> None:
    env = _env(agent, tmp_path / "hostfile")
    words = ["echo", "hello", "$HOSTNAME_UNSET;", "echo", "oops", ">&2;", "exit", "7"]
    p = subprocess.run([*RSH, host, *words], capture_output=True, env=env, timeout=60)
    assert (p.returncode, p.stdout, p.stderr) == (7, b"hello\noops\n", b"")
    assert agent.client().list() == []  # (forgotten once read)


def test_rsh_forwards_sigterm_to_the_remote_process(agent: RunningAgent, tmp_path: Path) -> None:
    env = _env(agent, tmp_path / "hostfile")
    rsh = subprocess.Popen(
        [*RSH, "worker-0", "echo started; exec sleep 60"], stdout=subprocess.PIPE, env=env
    )
    assert rsh.stdout is not None
    assert rsh.stdout.readline() == b"started\n"
    [remote] = agent.client().list()
    assert remote.running
    rsh.send_signal(signal.SIGTERM)
    assert rsh.wait(30) == 143
    wait_for(lambda: agent.client().list() == [], what="the remote process forgotten")


@pytest.mark.parametrize(
    ("args", "hostfile_text", "message"),
    [
        (["worker-9", "true"], None, "host 'worker-9' is not in the hostfile"),
        (["worker-0", "true"], "garbage line\n", "line 1: 'garbage line' is not"),
        (["worker-0"], None, "usage: "),
    ],
)
def test_rsh_exits_2_with_a_line_naming_what_is_wrong(
    agent: RunningAgent, tmp_path: Path, args: list[str], hostfile_text: str | None, message: str
) -> None:
    hostfile = tmp_path / "hostfile"
    env = _env(agent, hostfile)
    if hostfile_text is not None:
        hostfile.write_text(hostfile_text)
    p = subprocess.run([*RSH, *args], capture_output=True, text=True, env=env, timeout=60)
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr.count("\n") == 1 and message in p.stderr, p.stderr


def test_rsh_names_an_unreadable_file(agent: RunningAgent, tmp_path: Path) -> None:
    env = _env(agent, tmp_path / "hostfile")
    missing = tmp_path / "missing"
    for var, name in (("DGL_AGENT_HOSTFILE", "hostfile"), ("DGL_AGENT_TOKEN_FILE", "token file")):
        p = subprocess.run(
            [*RSH, "worker-0", "true"],
            capture_output=True,
            text=True,
            env={**env, var: str(missing)},
            timeout=60,
        )
        assert p.returncode == 2 and f"{name} {missing}" in p.stderr, p.stderr


def test_rsh_with_a_wrong_token_exits_255(agent: RunningAgent, tmp_path: Path) -> None:
    env = _env(agent, tmp_path / "hostfile")
    wrong = tmp_path / "wrong-token"
    wrong.write_text("not the job's\n")
    p = subprocess.run(
        [*RSH, "worker-0", "touch", str(tmp_path / "ran")],
        capture_output=True,
        text=True,
        env={**env, "DGL_AGENT_TOKEN_FILE": str(wrong)},
        timeout=60,
    )
    assert p.returncode == 255 and "refused the token" in p.stderr
    assert not (tmp_path / "ran").exists()
