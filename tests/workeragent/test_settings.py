"""The agent's flags and its token file: defaults from the pod contract, one line naming the
flag or the file for a bad one (status 2)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import podcontract as pc
from tests.support.agents import python_env
from workeragent.settings import AgentSettings, parse


def test_the_defaults_are_the_pod_contracts() -> None:
    s = parse([])
    assert s == AgentSettings()
    assert (s.host, s.port, s.token_file) == ("0.0.0.0", pc.AGENT_PORT, pc.AGENT_TOKEN_PATH)
    assert s.orphan_grace == pc.AGENT_ORPHAN_GRACE and s.buffer_bytes == 8 << 20
    assert s.workdir == os.getcwd() and s.command == ()


def test_every_flag_and_the_command(tmp_path: Path) -> None:
    s = parse(
        [
            "--host=127.0.0.1",
            "--port",
            "0",
            "--token-file",
            "/t",
            "--orphan-grace",
            "0",
            "--output-buffer",
            "1Mi",
            "--workdir",
            str(tmp_path),
            "--",
            "sh",
            "-c",
            "echo --port",
        ]
    )
    assert s == AgentSettings(
        host="127.0.0.1",
        port=0,
        token_file="/t",
        orphan_grace=0.0,
        buffer_bytes=1 << 20,
        workdir=str(tmp_path),
        command=("sh", "-c", "echo --port"),
    )


@pytest.mark.parametrize(
    ("argv", "flag"),
    [
        (["--port", "70000"], "--port"),
        (["--port", "x"], "--port"),
        (["--orphan-grace", "-1"], "--orphan-grace"),
        (["--orphan-grace", "nan"], "--orphan-grace"),
        (["--output-buffer", "10"], "--output-buffer"),
        (["--output-buffer", "8K"], "--output-buffer"),
        (["--workdir", "/no/such/dir"], "--workdir"),
        (["--host", ""], "--host"),
        (["--bogus"], "--bogus"),
    ],
)
def test_a_bad_flag_exits_2_with_one_line_naming_it(
    argv: list[str], flag: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as e:
        parse(argv)
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("dgl-agent: ") and flag in err, err


@pytest.mark.parametrize("content", [None, "", "  \n"])
def test_a_missing_or_empty_token_file_exits_2_naming_it(
    tmp_path: Path, content: str | None
) -> None:
    token = tmp_path / "token"
    if content is not None:
        token.write_text(content)
    p = subprocess.run(
        [sys.executable, "-m", "workeragent", "--port", "0", "--token-file", str(token)],
        capture_output=True,
        text=True,
        env=python_env(),
        timeout=30,
    )
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr.count("\n") == 1 and f"token file {token}: " in p.stderr, p.stderr
