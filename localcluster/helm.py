"""Installing the operator's chart with the real helm binary (hack/tools.sh fetches it)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from localcluster.cluster import REPO
from localcluster.node import IMAGE_TAG


def helm_binary() -> str:
    out = subprocess.run(
        [str(REPO / "hack" / "tools.sh"), "helm"], capture_output=True, text=True, check=True
    )
    return out.stdout.strip().split("=", 1)[1]


def install_operator(
    kubeconfig: Path, digest: str = "", values: dict[str, str] | None = None
) -> None:
    """helm upgrade --install of charts/dgl-operator into dgl-system; a changed image digest
    (annotation on the pod template) rolls the operator's pod even under the same tag.
    ``values``: chart values, each passed as ``--set key=value``."""
    extra = []
    if digest:
        extra = ["--set-string", f"podAnnotations.dgl\\.qihoo\\.net/image-digest={digest}"]
    for key, value in (values or {}).items():
        extra += ["--set", f"{key}={value}"]
    argv = [
        helm_binary(),
        "upgrade",
        "--install",
        "dgl-operator",
        str(REPO / "charts" / "dgl-operator"),
        "--kubeconfig",
        str(kubeconfig),
        "-n",
        "dgl-system",
        "--create-namespace",
        "--set",
        f"image.tag={IMAGE_TAG}",
        *extra,
        "--wait",
        "--timeout",
        "5m",
    ]
    out = subprocess.run(argv, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"helm install of the operator failed:\n{out.stderr}")
