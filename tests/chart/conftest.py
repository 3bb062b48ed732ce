"""The ``helm`` fixture: the real helm binary (hack/tools.sh helm) with a private home.

In CI (CI=true) a helm that cannot be found or installed fails the run; elsewhere the chart
tests are skipped with the reason.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.chart.helpers import Helm
from tests.support.paths import REPO
from tests.support.prerequisites import unavailable


@pytest.fixture(scope="session")
def helm(tmp_path_factory: pytest.TempPathFactory) -> Helm:
    try:
        proc = subprocess.run(
            [str(REPO / "hack" / "tools.sh"), "helm"],
            capture_output=True,
            text=True,
            timeout=900,
            cwd=REPO,
        )
        found = dict(
            line.split("=", 1) for line in proc.stdout.splitlines() if line.startswith("helm=")
        )
        problem = "" if proc.returncode == 0 and found else proc.stderr.strip()
    except (OSError, subprocess.TimeoutExpired) as e:
        found, problem = {}, str(e)
    path = Path(found["helm"]) if found else None
    if path is None or not os.access(path, os.X_OK):
        msg = f"helm is not available (hack/tools.sh helm): {problem or 'no helm= line'}"
        unavailable(msg)
    home = tmp_path_factory.mktemp("helm-home")
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("HELM_") and k not in ("KUBECONFIG", "XDG_CONFIG_HOME")
    }
    env.update(
        HELM_CONFIG_HOME=str(home / "config"),
        HELM_CACHE_HOME=str(home / "cache"),
        HELM_DATA_HOME=str(home / "data"),
        HELM_NO_PLUGINS="1",
        NO_COLOR="1",
    )
    h = Helm(path, env)
    version = h.run("version", "--short").stdout.strip()
    assert version.startswith("v"), version
    return h
