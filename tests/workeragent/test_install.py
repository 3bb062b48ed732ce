"""The zipapp the workers' init container writes: one file that runs from anywhere, with
nothing of this project on the path, under this Python and (when the machine has one) 3.9,
the oldest the agent supports."""

from __future__ import annotations

import glob
import os
import signal
import stat
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import podcontract as pc
from tests.support.agents import RunningAgent, python_env


def _install(folder: Path) -> Path:
    p = subprocess.run(
        [sys.executable, "-m", "workeragent.install", str(folder)],
        capture_output=True,
        text=True,
        env=python_env(),
        timeout=60,
    )
    archive = folder / os.path.basename(pc.AGENT_ZIPAPP)
    assert p.returncode == 0 and p.stderr == "", p.stderr
    assert p.stdout.startswith(f"dgl-agent-install: wrote {archive} (")
    return archive


def _bare_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env["PYTHONPATH"] = ""
    return env


def test_the_zipapp_holds_the_two_packages_and_is_executable(tmp_path: Path) -> None:
    archive = _install(tmp_path / "opt" / "dgl-agent")
    assert stat.S_IMODE(archive.stat().st_mode) == 0o755
    assert archive.read_bytes().startswith(b"#!/usr/bin/env python3\n")
    names = zipfile.ZipFile(archive).namelist()
    assert {n.split("/")[0] for n in names} == {"__main__.py", "workeragent", "podcontract"}
    assert "workeragent/client.py" in names and "podcontract/__init__.py" in names
    assert not [n for n in names if "__pycache__" in n or not n.endswith((".py", "/"))]
    assert os.listdir(archive.parent) == [archive.name]  # (no temporary file left)


def test_the_zipapp_runs_from_another_folder_with_an_empty_path(tmp_path: Path) -> None:
    archive = _install(tmp_path / "opt")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    p = subprocess.run(
        [sys.executable, "-P", str(archive), "--help"],
        capture_output=True,
        text=True,
        cwd=elsewhere,
        env=_bare_env(),
        timeout=60,
    )
    assert p.returncode == 0 and p.stdout.startswith("usage: dgl-agent [flags] [-- CMD...]")


def _pythons() -> list[str]:
    """This interpreter, and a Python 3.9 if the machine has one (pyenv's)."""
    root = os.environ.get("PYENV_ROOT", os.path.expanduser("~/.pyenv"))
    old = sorted(glob.glob(os.path.join(root, "versions", "3.9*", "bin", "python3.9")))
    return [sys.executable, *old[-1:]]


@pytest.mark.parametrize("python", _pythons(), ids=lambda p: os.path.basename(p))
def test_the_zipapp_serves_and_runs_processes(tmp_path: Path, python: str) -> None:
    archive = _install(tmp_path / "opt")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    agent = RunningAgent(
        tmp_path, argv=[python, "-I", str(archive)], env=_bare_env(), cwd=elsewhere
    )
    try:
        client = agent.client()
        assert client.health()
        code, out = client.run([python, "-c", "import sys; print(sys.version_info[:2])"])
        assert code == 0 and out.startswith("(3, ")
    finally:
        agent.close()
    assert agent.proc.returncode == 128 + signal.SIGTERM  # (closed with SIGTERM)
    # and the rest (dglrun's client, mpirun's remote shell, the installer) imports under it
    imports = (
        f"import sys; sys.path.insert(0, {str(archive)!r}); "
        "import workeragent.rsh, workeragent.install"
    )
    p = subprocess.run(
        [python, "-I", "-c", imports], capture_output=True, text=True, env=_bare_env()
    )
    assert (p.returncode, p.stderr) == (0, "")


def test_install_needs_one_folder(tmp_path: Path) -> None:
    p = subprocess.run(
        [sys.executable, "-m", "workeragent.install"],
        capture_output=True,
        text=True,
        env=python_env(),
        timeout=60,
    )
    assert p.returncode == 2 and p.stderr.startswith("usage: python -m workeragent.install DIR")
