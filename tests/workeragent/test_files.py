"""The files API through the client: put (a 20 MB file too), get, stat, manifest."""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

import pytest

from tests.support.agents import RunningAgent
from workeragent.client import AgentError, AgentRefused, RemoteStat


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_put_get_stat_and_manifest(agent: RunningAgent, tmp_path: Path) -> None:
    client = agent.client()
    big = os.urandom(20 * 1000 * 1000)
    local = tmp_path / "big.bin"
    local.write_bytes(big)
    assert client.put_file("data/part0/big.bin", str(local)) == (len(big), _sha(big))
    small = tmp_path / "run.sh"
    small.write_text("#!/bin/sh\necho hi\n")
    absolute = agent.workdir / "data" / "run.sh"
    assert client.put_file(str(absolute), str(small), mode=0o755)[0] == small.stat().st_size
    empty = tmp_path / "empty"
    empty.write_bytes(b"")
    client.put_file("data/part0/empty", str(empty))
    # written where asked (relative: under the workdir), whole, with the mode asked for
    remote = agent.workdir / "data" / "part0" / "big.bin"
    assert remote.read_bytes() == big
    assert stat.S_IMODE(absolute.stat().st_mode) == 0o755
    assert stat.S_IMODE(remote.stat().st_mode) == 0o644
    assert sorted(os.listdir(agent.workdir / "data" / "part0")) == ["big.bin", "empty"]
    # and back
    back = tmp_path / "back" / "big.bin"
    back.parent.mkdir()
    assert client.get_file("data/part0/big.bin", str(back))
    assert back.read_bytes() == big
    assert client.get_file("data/part0/empty", str(tmp_path / "empty-back"))
    assert (tmp_path / "empty-back").read_bytes() == b""
    assert not client.get_file("data/nothing", str(tmp_path / "nothing"))
    assert not (tmp_path / "nothing").exists()
    assert sorted(os.listdir(tmp_path / "back")) == ["big.bin"]  # (no part file left)
    # stat
    assert client.stat("data/part0/big.bin") == RemoteStat(True, True, False, len(big))
    assert client.stat("data") == RemoteStat(True, False, True, 0)
    assert client.stat("data/nothing") == RemoteStat(False, False, False, 0)
    assert client.stat("data/run.sh/below") == RemoteStat(False, False, False, 0)
    # manifest: every file below, by relative path
    assert client.manifest("data") == {
        "part0/big.bin": (len(big), _sha(big)),
        "part0/empty": (0, _sha(b"")),
        "run.sh": (small.stat().st_size, _sha(small.read_bytes())),
    }
    with pytest.raises(AgentError, match=r"manifest of data/run\.sh: the agent answered 404"):
        client.manifest("data/run.sh")


def test_a_file_is_replaced_whole(agent: RunningAgent, tmp_path: Path) -> None:
    client = agent.client()
    one, two = tmp_path / "one", tmp_path / "two"
    one.write_bytes(b"first version, longer\n")
    two.write_bytes(b"second\n")
    client.put_file("f", str(one))
    client.put_file("f", str(two))
    assert (agent.workdir / "f").read_bytes() == b"second\n"
    assert sorted(os.listdir(agent.workdir)) == ["f"]  # (no temporary file left)


def test_an_upload_with_a_wrong_token_is_refused_and_writes_nothing(
    agent: RunningAgent, tmp_path: Path
) -> None:
    local = tmp_path / "big.bin"
    local.write_bytes(os.urandom(20 * 1000 * 1000))
    slept: list[float] = []
    refused = agent.client(token="wrong", sleep=slept.append)
    with pytest.raises(AgentRefused, match=r"put big\.bin: the agent refused the token"):
        refused.put_file("big.bin", str(local))
    assert slept == [] and os.listdir(agent.workdir) == []
    # the twin: the job's token
    agent.client().put_file("big.bin", str(local))
    assert os.listdir(agent.workdir) == ["big.bin"]


def test_a_path_the_agent_cannot_write_is_an_error_naming_it(
    agent: RunningAgent, tmp_path: Path
) -> None:
    (agent.workdir / "plain").write_text("a file, not a folder")
    local = tmp_path / "x"
    local.write_text("x")
    with pytest.raises(AgentError, match=r"put plain/x: the agent answered 400: \"path: cannot"):
        agent.client().put_file("plain/x", str(local))
    with pytest.raises(AgentError, match=r"put y: .*no-such-file: No such file"):
        agent.client().put_file("y", str(tmp_path / "no-such-file"))
