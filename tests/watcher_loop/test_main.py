"""The watcher-loop entry point: configuration errors end with exit 2, one line, no traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

import watcher_loop.__main__ as entry
from watcher_loop.__main__ import main

VARS = [
    "WATCHERFILE",
    "WATCHERMODE",
    "NAMESPACE",
    "WATCHER_EXPECTED_PODS",
    "WATCHER_TIMEOUT",
    "WATCHER_POLL_INTERVAL",
]


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    for var in VARS:
        monkeypatch.delenv(var, raising=False)
    log = tmp_path / "termination-log"
    log.write_text("")
    monkeypatch.setattr(entry, "TERMINATION_LOG", str(log))
    return log


def test_missing_watcherfile(capsys: pytest.CaptureFixture[str], clean_env: Path) -> None:
    assert main([]) == 2
    err = capsys.readouterr().err
    assert err.startswith("watcher-loop: error: WATCHERFILE is not set")
    assert "Traceback" not in err
    assert len(err.splitlines()) == 1
    assert clean_env.read_text().startswith("WATCHERFILE is not set")


def test_bad_mode(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WATCHERFILE", "/etc/dgl/hostfile")
    monkeypatch.setenv("WATCHERMODE", "Running")
    assert main([]) == 2
    assert "WATCHERMODE must be 'ready' or 'finished', got 'Running'" in capsys.readouterr().err


def test_bad_number(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WATCHERFILE", "/etc/dgl/hostfile")
    monkeypatch.setenv("WATCHERMODE", "ready")
    monkeypatch.setenv("WATCHER_EXPECTED_PODS", "many")
    assert main([]) == 2
    assert "WATCHER_EXPECTED_PODS must be a positive integer" in capsys.readouterr().err


def test_unusable_kubeconfig(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("WATCHERFILE", "/etc/dgl/hostfile")
    monkeypatch.setenv("WATCHERMODE", "ready")
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "no-such-kubeconfig"))
    assert main([]) == 2
    err = capsys.readouterr().err
    assert err.startswith(
        "watcher-loop: error: cannot configure the Kubernetes client (KUBECONFIG="
    )
    assert "Traceback" not in err


def test_help(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    assert "WATCHERFILE" in capsys.readouterr().out


class _FakeRestClient:
    kube: object = None

    @classmethod
    def from_config(cls, **_: object) -> object:
        return cls.kube


@pytest.mark.parametrize(("phase", "code"), [("Succeeded", 0), ("Failed", 1)])
def test_main_runs_the_wait(
    phase: str,
    code: int,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    clean_env: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from kubeclient import PODS
    from tests.fakekube import FakeKube
    from tests.watcher_loop.helpers import pod

    kube = FakeKube()
    kube.create(PODS, "team", pod("job-partitioner", phase, namespace="team"))
    monkeypatch.setattr(_FakeRestClient, "kube", kube)
    monkeypatch.setattr(entry, "RestClient", _FakeRestClient)
    monkeypatch.setattr(entry, "configure_logging", lambda: None)  # keep structlog as it is
    f = tmp_path / "partfile"
    f.write_text("10.0.0.1 30050 job-partitioner\n")
    monkeypatch.setenv("WATCHERFILE", str(f))
    monkeypatch.setenv("WATCHERMODE", "finished")
    monkeypatch.setenv("NAMESPACE", "team")
    monkeypatch.setenv("WATCHER_EXPECTED_PODS", "1")
    assert main([]) == code
    err = capsys.readouterr().err
    assert "Traceback" not in err
    if code:
        assert clean_env.read_text() == "pod job-partitioner is Failed"
    else:
        assert clean_env.read_text() == ""


def test_structlog_lines_are_short() -> None:
    line = entry._render(None, "warning", {"event": "list/watch failed", "error": "boom"})
    assert line == "watcher-loop: warning: list/watch failed (error=boom)"
