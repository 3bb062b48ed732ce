"""kubectl as a cluster's admin, the way a user or an SRE types it: localcluster's own steps
(volumes, Kueue, the Coscheduling CRD), the chaos soak, the benchmarks and the e2e fixtures see
the cluster through it (one runner for all).

``Kubectl(kubeconfig).run(*args)`` is kubectl's standard output. A failure raises
:class:`KubectlError` quoting kubectl's standard error (with ``check``); each call times out
after ``timeout`` seconds (:class:`subprocess.TimeoutExpired`). The binary is localcluster's
build of this tree's Kubernetes version."""

from __future__ import annotations

import functools
import json
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from localcluster.cluster import k8s_binaries

Obj = dict[str, Any]


class KubectlError(RuntimeError):
    """kubectl exited non-zero; the message is the command's first words and its stderr."""


@dataclass(frozen=True)
class Kubectl:
    kubeconfig: Path
    timeout: float = 300

    @functools.cached_property
    def binary(self) -> Path:
        """Found at the first call (localcluster's build script, reused after)."""
        return k8s_binaries("kubectl") / "kubectl"

    def run(self, *args: str, input: str | None = None, check: bool = True) -> str:
        out = subprocess.run(
            [str(self.binary), "--kubeconfig", str(self.kubeconfig), *args],
            input=input,
            capture_output=True,
            text=True,
            timeout=self.timeout,
        )
        if check and out.returncode != 0:
            raise KubectlError(f"kubectl {' '.join(args[:4])}: {out.stderr.strip()}")
        return out.stdout

    def __call__(self, args: list[str], stdin: str | None = None) -> str:
        """:meth:`run` in the form localcluster.volumes and localcluster.kueue take."""
        return self.run(*args, input=stdin)

    def json(self, *args: str) -> Obj:
        """``kubectl ARGS -o json``, parsed."""
        doc: Obj = json.loads(self.run(*args, "-o", "json"))
        return doc

    def apply(self, obj: Obj) -> None:
        """Server-side apply of one object, taking the fields it sets."""
        self.run("apply", "--server-side", "--force-conflicts", "-f", "-", input=json.dumps(obj))
