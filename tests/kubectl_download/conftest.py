"""Fixtures of the kubectl-download tests: the stand-in kubectl's server, and an environment
without proxies or our variables."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.kubectl_download.helpers import FAKE_KUBECTL, Server, serving

PROXY_VARS = ["http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"]
ENV_VARS = [
    "TARGET_DIR",
    "KUBECTL_URL",
    "KUBECTL_SHA256",
    "KUBECTL_SOURCE",
    "KUBECTL_RETRIES",
    "KUBECTL_TIMEOUT",
    "KUBECTL_BACKOFF",
]


@pytest.fixture
def server() -> Iterator[Server]:
    with serving(Server(files={"/kubectl": FAKE_KUBECTL})) as srv:
        yield srv


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No proxies (the server is local), none of our variables, a private termination log."""
    import kubectl_download.__main__ as entry

    for var in PROXY_VARS + ENV_VARS:
        monkeypatch.delenv(var, raising=False)
    log = tmp_path / "termination-log"
    log.write_text("")
    monkeypatch.setattr(entry, "TERMINATION_LOG", str(log))
    return log
