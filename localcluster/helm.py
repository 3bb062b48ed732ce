"""Installing the operator's chart with the real helm binary (hack/tools.sh fetches it)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from localcluster.cluster import REPO, ClusterError
from localcluster.node import IMAGE_TAG
from localcluster.stuck import GRACE_SECONDS, StuckPods, kubectl_runner

NAMESPACE = "dgl-system"
RELEASE = "dgl-operator"


class OperatorCannotStart(ClusterError):
    """The operator's pod cannot start: its waiting reason and last events."""


def helm_binary() -> str:
    out = subprocess.run(
        [str(REPO / "hack" / "tools.sh"), "helm"], capture_output=True, text=True, check=True
    )
    return out.stdout.strip().split("=", 1)[1]


def install_operator(
    kubeconfig: Path,
    digest: str = "",
    values: dict[str, str] | None = None,
    *,
    grace: float = GRACE_SECONDS,
) -> None:
    """helm upgrade --install of charts/dgl-operator into dgl-system; a changed image digest
    (annotation on the pod template) rolls the operator's pod even under the same tag.
    ``values``: chart values, each passed as ``--set key=value``.

    While helm waits for the rollout, the operator's pods are watched: one that cannot start
    for ``grace`` seconds (no CNI plugin, no image, a crash loop) stops helm and raises
    :class:`OperatorCannotStart` with its waiting reason and last events, rather than helm's
    timeout minutes later."""
    extra = []
    if digest:
        extra = ["--set-string", f"podAnnotations.dgl\\.qihoo\\.net/image-digest={digest}"]
    for key, value in (values or {}).items():
        extra += ["--set", f"{key}={value}"]
    argv = [
        helm_binary(),
        "upgrade",
        "--install",
        RELEASE,
        str(REPO / "charts" / "dgl-operator"),
        "--kubeconfig",
        str(kubeconfig),
        "-n",
        NAMESPACE,
        "--create-namespace",
        "--set",
        f"image.tag={IMAGE_TAG}",
        *extra,
        "--wait",
        "--timeout",
        "5m",
    ]
    stuck = StuckPods(
        kubectl_runner(kubeconfig),
        NAMESPACE,
        f"app.kubernetes.io/instance={RELEASE}",
        grace=grace,
    )
    helm = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    while True:
        try:
            _, stderr = helm.communicate(timeout=2)
            break
        except subprocess.TimeoutExpired:
            report = stuck.check()
            if report:
                helm.terminate()
                helm.communicate()
                raise OperatorCannotStart(f"the operator cannot start: {report}") from None
    if helm.returncode != 0:
        raise RuntimeError(f"helm install of the operator failed:\n{stderr}")
