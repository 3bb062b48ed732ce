"""kubectl against one cluster: the benchmarks see the cluster as a user does."""

from __future__ import annotations

import functools
import json
import subprocess
from pathlib import Path
from typing import Any

from localcluster.cluster import k8s_binaries


class Kube:
    """kubectl with ``kubeconfig``; each call times out after ``timeout`` seconds. The binary
    (localcluster's build of this tree's Kubernetes version) is found at the first call."""

    def __init__(self, kubeconfig: Path, timeout: float = 300) -> None:
        self.kubeconfig, self.timeout = kubeconfig, timeout

    @functools.cached_property
    def binary(self) -> Path:
        return k8s_binaries("kubectl") / "kubectl"

    def run(self, *args: str, check: bool = True, input: str | None = None) -> str:
        """kubectl's standard output; with ``check``, a failure raises RuntimeError with its
        standard error."""
        out = subprocess.run(
            [str(self.binary), "--kubeconfig", str(self.kubeconfig), *args],
            capture_output=True,
            text=True,
            input=input,
            timeout=self.timeout,
        )
        if check and out.returncode != 0:
            raise RuntimeError(f"kubectl {' '.join(args[:4])}: {out.stderr.strip()}")
        return out.stdout

    def json(self, *args: str) -> dict[str, Any]:
        """``kubectl ARGS -o json``, parsed."""
        doc: dict[str, Any] = json.loads(self.run(*args, "-o", "json"))
        return doc

    def apply(self, obj: dict[str, Any]) -> None:
        """``kubectl apply`` of one object."""
        self.run("apply", "-f", "-", input=json.dumps(obj))
