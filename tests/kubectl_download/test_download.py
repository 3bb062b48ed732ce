"""kubectl-download end to end against a real local HTTP server."""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

import pytest

from kubectl_download.__main__ import main
from localcluster.ports import free_port
from tests.kubectl_download.helpers import FAKE_KUBECTL, GIT_VERSION, Server, sha256

Capture = pytest.CaptureFixture[str]


@pytest.fixture
def target_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    d = tmp_path / "opt" / "kube"  # does not exist yet: created
    monkeypatch.setenv("TARGET_DIR", str(d))
    monkeypatch.setenv("KUBECTL_BACKOFF", "0.01")
    return d


def download_env(monkeypatch: pytest.MonkeyPatch, url: str, digest: str) -> None:
    monkeypatch.setenv("KUBECTL_URL", url)
    monkeypatch.setenv("KUBECTL_SHA256", digest)


def assert_installed(target_dir: Path, content: bytes = FAKE_KUBECTL) -> None:
    assert sorted(os.listdir(target_dir)) == ["kubectl"]  # no temporary files left
    target = target_dir / "kubectl"
    assert target.read_bytes() == content
    assert stat.S_IMODE(target.stat().st_mode) == 0o755


def assert_nothing_installed(target_dir: Path) -> None:
    assert os.listdir(target_dir) == []


def test_success(
    server: Server, target_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: Capture
) -> None:
    download_env(monkeypatch, server.url(), sha256(FAKE_KUBECTL))
    assert main([]) == 0
    assert_installed(target_dir)
    out, err = capsys.readouterr()
    assert out == f"kubectl-download: installed {target_dir}/kubectl (kubectl {GIT_VERSION})\n"
    assert f"downloading {server.url()} (attempt 1/6)" in err
    assert "SHA-256 verified" in err
    assert server.requests == ["/kubectl"]


def test_flags_work_like_the_environment(server: Server, tmp_path: Path, capsys: Capture) -> None:
    d = tmp_path / "flags"
    argv = ["--target-dir", str(d), "--url", server.url(), "--sha256", sha256(FAKE_KUBECTL)]
    assert main(argv) == 0
    assert_installed(d)


def test_uppercase_digest_with_prefix(
    server: Server, target_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    download_env(monkeypatch, server.url(), "sha256:" + sha256(FAKE_KUBECTL).upper())
    assert main([]) == 0
    assert_installed(target_dir)


@pytest.mark.parametrize("mode", ["503", "reset", "truncate"])
def test_retries_then_succeeds(
    mode: str,
    server: Server,
    target_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: Capture,
) -> None:
    server.fail_first, server.fail_mode = 2, mode
    download_env(monkeypatch, server.url(), sha256(FAKE_KUBECTL))
    assert main([]) == 0
    assert server.count() == 3
    assert_installed(target_dir)
    err = capsys.readouterr().err
    assert "attempt 1/6 failed: " in err
    assert "attempt 2/6 failed: " in err
    if mode == "503":
        assert "attempt 1/6 failed: HTTP 503" in err
    if mode == "truncate":
        half = len(FAKE_KUBECTL) // 2
        assert f"connection closed after {half} of {len(FAKE_KUBECTL)} bytes" in err


def test_per_attempt_timeout_then_retry(
    server: Server, target_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: Capture
) -> None:
    server.fail_first, server.fail_mode = 1, "stall"
    download_env(monkeypatch, server.url(), sha256(FAKE_KUBECTL))
    monkeypatch.setenv("KUBECTL_TIMEOUT", "0.3")
    started = time.monotonic()
    assert main([]) == 0
    assert time.monotonic() - started < 5
    assert server.count() == 2
    assert "timed out" in capsys.readouterr().err
    assert_installed(target_dir)


def test_retry_after_is_honoured(
    server: Server, target_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: Capture
) -> None:
    server.fail_first, server.fail_mode, server.retry_after = 1, "429", "0.3"
    download_env(monkeypatch, server.url(), sha256(FAKE_KUBECTL))
    assert main([]) == 0
    assert "attempt 1/6 failed: HTTP 429 Too Many Requests; retrying in 0.3s" in (
        capsys.readouterr().err
    )
    assert_installed(target_dir)


def test_redirect_is_followed(
    server: Server, target_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    server.redirects["/release/kubectl"] = "/kubectl"
    download_env(monkeypatch, server.url("/release/kubectl"), sha256(FAKE_KUBECTL))
    assert main([]) == 0
    assert server.requests == ["/release/kubectl", "/kubectl"]
    assert_installed(target_dir)


def test_sha_mismatch_leaves_nothing(
    server: Server,
    target_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: Capture,
    clean_env: Path,
) -> None:
    wrong = sha256(b"another binary")
    download_env(monkeypatch, server.url(), wrong)
    assert main([]) == 1
    assert_nothing_installed(target_dir)
    assert server.count() == 1  # a wrong digest is not retried
    err = capsys.readouterr().err
    expected = (
        f"SHA-256 mismatch for {server.url()}: expected {wrong} (KUBECTL_SHA256), "
        f"got {sha256(FAKE_KUBECTL)}; nothing installed"
    )
    assert f"kubectl-download: error: {expected}\n" in err
    assert "Traceback" not in err
    assert clean_env.read_text() == expected


def test_sha_mismatch_keeps_an_existing_kubectl(
    server: Server, target_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target_dir.mkdir(parents=True)
    (target_dir / "kubectl").write_bytes(b"previous")
    download_env(monkeypatch, server.url(), sha256(b"another binary"))
    assert main([]) == 1
    assert sorted(os.listdir(target_dir)) == ["kubectl"]
    assert (target_dir / "kubectl").read_bytes() == b"previous"


@pytest.mark.parametrize(("code", "reason"), [(404, "Not Found"), (403, "Forbidden")])
def test_client_errors_fail_at_once(
    code: int,
    reason: str,
    server: Server,
    target_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: Capture,
) -> None:
    server.statuses["/kubectl"] = code
    download_env(monkeypatch, server.url(), sha256(FAKE_KUBECTL))
    assert main([]) == 1
    assert server.count() == 1
    assert_nothing_installed(target_dir)
    err = capsys.readouterr().err
    assert (
        f"kubectl-download: error: download of {server.url()} failed: HTTP {code} {reason} "
        "(not retried)\n"
    ) in err


def test_all_retries_exhausted(
    server: Server,
    target_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: Capture,
    clean_env: Path,
) -> None:
    server.fail_first = 1000
    download_env(monkeypatch, server.url(), sha256(FAKE_KUBECTL))
    monkeypatch.setenv("KUBECTL_RETRIES", "2")
    assert main([]) == 1
    assert server.count() == 3
    assert_nothing_installed(target_dir)
    expected = (
        f"download of {server.url()} failed after 3 attempt(s); "
        "last error: HTTP 503 Service Unavailable"
    )
    assert f"kubectl-download: error: {expected}\n" in capsys.readouterr().err
    assert clean_env.read_text() == expected


def test_connection_refused_is_retried(
    target_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: Capture
) -> None:
    port = free_port()  # nothing listens there
    url = f"http://127.0.0.1:{port}/kubectl"
    download_env(monkeypatch, url, sha256(FAKE_KUBECTL))
    monkeypatch.setenv("KUBECTL_RETRIES", "1")
    assert main([]) == 1
    err = capsys.readouterr().err
    assert "attempt 1/2 failed: " in err
    assert "Connection refused" in err
    assert f"download of {url} failed after 2 attempt(s)" in err
    assert_nothing_installed(target_dir)


def test_zero_retries_means_one_attempt(
    server: Server, target_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    server.fail_first = 1
    download_env(monkeypatch, server.url(), sha256(FAKE_KUBECTL))
    monkeypatch.setenv("KUBECTL_RETRIES", "0")
    assert main([]) == 1
    assert server.count() == 1


def test_url_without_sha_is_refused(
    server: Server, target_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: Capture
) -> None:
    monkeypatch.setenv("KUBECTL_URL", server.url())
    assert main([]) == 2
    assert server.count() == 0
    assert not target_dir.exists()
    err = capsys.readouterr().err
    assert err.startswith("kubectl-download: error: KUBECTL_URL is set but KUBECTL_SHA256 is not")
    assert len(err.splitlines()) == 1


def test_existing_target_is_replaced_atomically(
    server: Server, target_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target_dir.mkdir(parents=True)
    old = target_dir / "kubectl"
    old.write_bytes(b"old kubectl")
    old.chmod(0o700)
    old_inode = old.stat().st_ino
    with old.open("rb") as reader:  # a process still using the old binary
        download_env(monkeypatch, server.url(), sha256(FAKE_KUBECTL))
        assert main([]) == 0
        assert reader.read() == b"old kubectl"  # renamed over, never rewritten in place
    assert_installed(target_dir)
    assert old.stat().st_ino != old_inode


def test_version_check_failure_removes_the_download(
    server: Server, target_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: Capture
) -> None:
    broken = b"#!/bin/sh\necho 'error: unknown flag: --client' >&2\nexit 1\n"
    server.files["/kubectl"] = broken
    download_env(monkeypatch, server.url(), sha256(broken))
    assert main([]) == 1
    assert_nothing_installed(target_dir)
    err = capsys.readouterr().err
    assert (
        f"kubectl-download: error: `{target_dir}/kubectl version --client -o json` exited with "
        "code 1: error: unknown flag: --client\n"
    ) in err


def test_wrong_architecture_binary_is_refused(
    server: Server, target_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: Capture
) -> None:
    binary = b"\x7fELF\x02\x01\x01" + bytes(200)  # an ELF header this system cannot run
    server.files["/kubectl"] = binary
    download_env(monkeypatch, server.url(), sha256(binary))
    assert main([]) == 1
    assert_nothing_installed(target_dir)
    assert f"cannot run {target_dir}/kubectl: Exec format error" in capsys.readouterr().err


def test_copy_mode(
    tmp_path: Path, target_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: Capture
) -> None:
    source = tmp_path / "image" / "kubectl"
    source.parent.mkdir()
    source.write_bytes(FAKE_KUBECTL)
    source.chmod(0o600)  # the copy gets 0755 whatever the source's mode
    monkeypatch.setenv("KUBECTL_SOURCE", str(source))
    assert main([]) == 0
    assert_installed(target_dir)
    out, err = capsys.readouterr()
    assert f"copying {source}" in err
    assert GIT_VERSION in out
    assert source.read_bytes() == FAKE_KUBECTL


def test_copy_mode_verifies_a_given_sha(
    tmp_path: Path, target_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: Capture
) -> None:
    source = tmp_path / "kubectl-src"
    source.write_bytes(FAKE_KUBECTL)
    monkeypatch.setenv("KUBECTL_SOURCE", str(source))
    monkeypatch.setenv("KUBECTL_SHA256", sha256(FAKE_KUBECTL))
    assert main([]) == 0
    assert_installed(target_dir)
    monkeypatch.setenv("KUBECTL_SHA256", sha256(b"x"))
    (target_dir / "kubectl").unlink()
    assert main([]) == 1
    assert_nothing_installed(target_dir)
    assert f"SHA-256 mismatch for {source}" in capsys.readouterr().err


def test_copy_mode_missing_source(
    tmp_path: Path, target_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: Capture
) -> None:
    monkeypatch.setenv("KUBECTL_SOURCE", str(tmp_path / "nope"))
    assert main([]) == 1
    assert_nothing_installed(target_dir)
    assert f"KUBECTL_SOURCE {tmp_path / 'nope'} does not exist" in capsys.readouterr().err


def test_target_dir_that_is_a_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Capture
) -> None:
    f = tmp_path / "file"
    f.write_text("")
    source = tmp_path / "kubectl-src"
    source.write_bytes(FAKE_KUBECTL)
    monkeypatch.setenv("TARGET_DIR", str(f))
    monkeypatch.setenv("KUBECTL_SOURCE", str(source))
    assert main([]) == 1
    assert f"cannot create TARGET_DIR {f}" in capsys.readouterr().err


def test_help(capsys: Capture) -> None:
    assert main(["--help"]) == 0
    assert "KUBECTL_SHA256" in capsys.readouterr().out
