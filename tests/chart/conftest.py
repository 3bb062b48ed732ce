"""The real ``helm`` binary (hack/tools.sh helm) and helpers to render the chart with it.

In CI (CI=true) a helm that cannot be found or installed fails the run; elsewhere the chart
tests are skipped with the reason. Helm runs with its own empty home (config, cache, data) and
without the caller's HELM_* / KUBECONFIG variables, so the tests neither read nor write the
user's Helm setup and ``template``/``lint`` never reach a cluster.
"""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "charts" / "dgl-operator"
# The local control plane's version: the tests render for it and validate against its schemas.
KUBE_VERSION = "1.34.0"


def _in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


@dataclass(frozen=True)
class Helm:
    path: Path
    env: dict[str, str]

    def run(
        self, *args: str, check: bool = True, timeout: float = 300
    ) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(
            [str(self.path), *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=REPO,
        )
        if check and proc.returncode != 0:
            raise AssertionError(
                f"helm {' '.join(args)} exited {proc.returncode}\n"
                f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
            )
        return proc

    def template_text(
        self,
        values: dict[str, Any] | None = None,
        *,
        tmp: Path,
        release: str = "dgl-operator",
        namespace: str = "dgl-system",
        chart: Path = CHART,
        extra: Sequence[str] = (),
        check: bool = True,
    ) -> subprocess.CompletedProcess[str]:
        args = ["template", release, str(chart), "--namespace", namespace]
        args += ["--kube-version", KUBE_VERSION]
        if values:
            # JSON (valid YAML) quotes every string: Helm's YAML 1.1 would read y/on as booleans
            f = tmp / f"values-{uuid.uuid4().hex[:8]}.yaml"
            f.write_text(json.dumps(values))
            args += ["--values", str(f)]
        return self.run(*args, *extra, check=check)

    def template(self, values: dict[str, Any] | None = None, **kw: Any) -> list[dict[str, Any]]:
        out = self.template_text(values, **kw).stdout
        return [d for d in yaml.safe_load_all(out) if d]


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
        if _in_ci():
            pytest.fail(msg)
        pytest.skip(msg)
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


def find(docs: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    """The one rendered object of ``kind`` (and ``name``)."""
    hits = [
        d for d in docs if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)
    ]
    assert len(hits) == 1, f"expected one {kind} {name or ''}, got {len(hits)}"
    return hits[0]


def kinds(docs: list[dict[str, Any]]) -> list[str]:
    return sorted(d["kind"] for d in docs)
