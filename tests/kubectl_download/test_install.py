"""Pieces of the installer: backoff, the version check, interruption."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kubectl_download.install import InstallError, backoff_delay, check_version
from tests.kubectl_download.helpers import FAKE_KUBECTL, GIT_VERSION, Server, sha256

REPO = Path(__file__).resolve().parents[2]


def test_backoff_doubles_with_jitter_and_a_cap() -> None:
    assert [backoff_delay(1.0, a, rand=lambda: 1.0) for a in (1, 2, 3, 4)] == [1, 2, 4, 8]
    assert [backoff_delay(1.0, a, rand=lambda: 0.0) for a in (1, 2, 3, 4)] == [0.5, 1, 2, 4]
    assert backoff_delay(1.0, 20, rand=lambda: 1.0) == 30.0
    assert backoff_delay(0.0, 3, rand=lambda: 1.0) == 0.0


def test_backoff_waits_at_least_retry_after_within_a_cap() -> None:
    assert backoff_delay(1.0, 1, retry_after=7, rand=lambda: 0.0) == 7
    assert backoff_delay(1.0, 1, retry_after=3600, rand=lambda: 0.0) == 60.0
    assert backoff_delay(8.0, 1, retry_after=1, rand=lambda: 1.0) == 8.0


def script(tmp_path: Path, body: str) -> Path:
    p = tmp_path / "kubectl"
    p.write_text("#!/bin/sh\n" + body)
    p.chmod(0o755)
    return p


def test_version_of_the_stand_in(tmp_path: Path) -> None:
    p = tmp_path / "kubectl"
    p.write_bytes(FAKE_KUBECTL)
    p.chmod(0o755)
    assert check_version(p, 5) == GIT_VERSION


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("echo 'Client Version: v1.34.1'\n", "printed no JSON: 'Client Version: v1.34.1'"),
        ("echo '{\"serverVersion\": {}}'\n", "printed no clientVersion.gitVersion"),
        ("echo '[1]'\n", "printed no clientVersion.gitVersion"),
        ("exit 3\n", "exited with code 3"),
        ("kill -9 $$\n", "was killed by signal 9"),
    ],
)
def test_version_check_failures(tmp_path: Path, body: str, message: str) -> None:
    with pytest.raises(InstallError) as err:
        check_version(script(tmp_path, body), 5, shown=Path("/opt/kube/kubectl"))
    assert str(err.value).startswith("`/opt/kube/kubectl version --client -o json` ")
    assert message in str(err.value)


def test_version_check_times_out(tmp_path: Path) -> None:
    started = time.monotonic()
    with pytest.raises(InstallError, match=r"did not finish within 0.3s"):
        check_version(script(tmp_path, "exec sleep 30\n"), 0.3)
    assert time.monotonic() - started < 5


def test_version_check_of_a_file_that_is_not_executable(tmp_path: Path) -> None:
    p = tmp_path / "kubectl"
    p.write_bytes(FAKE_KUBECTL)
    p.chmod(0o644)
    with pytest.raises(InstallError, match=r"cannot run .*: Permission denied"):
        check_version(p, 5)


def test_sigterm_mid_download_leaves_nothing(server: Server, tmp_path: Path) -> None:
    """The real program, killed while the server stalls: no temporary file survives."""
    server.fail_first, server.fail_mode = 1, "stall"
    target_dir = tmp_path / "kube"
    env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")} | {
        "TARGET_DIR": str(target_dir),
        "KUBECTL_URL": server.url(),
        "KUBECTL_SHA256": sha256(FAKE_KUBECTL),
        "PYTHONPATH": str(REPO),
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "kubectl_download"],
        env=env,
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 10
        while server.count() == 0:  # the request is in flight: the temp file exists
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the program never sent its request"
            time.sleep(0.01)
        names = [p.name for p in target_dir.iterdir()]
        assert len(names) == 1
        assert names[0].startswith(".kubectl-"), names
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert "interrupted by signal 15; nothing installed" in err
    assert list(target_dir.iterdir()) == []
