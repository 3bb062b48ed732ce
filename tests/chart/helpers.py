"""The real ``helm`` binary (:class:`Helm`, found by the ``helm`` fixture) and helpers to
render the chart with it and to pick objects out of what it rendered.

Helm runs with its own empty home (config, cache, data) and without the caller's HELM_* /
KUBECONFIG variables, so the tests neither read nor write the user's Helm setup and
``template``/``lint`` never reach a cluster.
"""

from __future__ import annotations

import json
import subprocess
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tests.support.paths import CHART, REPO

# The local control plane's version: the tests render for it and validate against its schemas.
KUBE_VERSION = "1.34.0"


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


def find(docs: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    """The one rendered object of ``kind`` (and ``name``)."""
    hits = [
        d for d in docs if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)
    ]
    assert len(hits) == 1, f"expected one {kind} {name or ''}, got {len(hits)}"
    return hits[0]


def kinds(docs: list[dict[str, Any]]) -> list[str]:
    return sorted(d["kind"] for d in docs)
