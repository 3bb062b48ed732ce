"""Kueue on the local cluster: its manager (hack/kueue.sh builds it from the Go module proxy)
as a host process, like the Coscheduling scheduler, with its CRDs and a configuration that
lists DGLJob under ``integrations.externalFrameworks``.

What is off, and why: Kueue's webhooks. They need a Service in front of the manager and a
CA bundle injected into webhook configurations; the manager runs outside the cluster here
(no Service reaches it), so no webhook configuration is installed and the API server never
calls them. Kueue objects are then not defaulted or validated by Kueue itself (their CRDs'
schemas and defaults still apply), and a Workload must be created complete: the operator's
are (controller/features/kueue.py). The webhook server still starts (the manager's readiness waits
for it) on loopback with a self-signed certificate, and the metrics certificate Kueue reads
from the fixed path /etc/kueue/metrics/certs is made there (removed by :func:`stop`).
Leader election is off (one manager), and so are the integrations of the kinds this cluster
does not run; batch/Job stays (Kueue needs one built-in framework).
"""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import time
import urllib.request
from pathlib import Path

from localcluster.cluster import ClusterError, Component, _openssl
from localcluster.volumes import Kubectl

REPO = Path(__file__).resolve().parents[1]
NAME = "kueue"
NAMESPACE = "kueue-system"
METRICS_CERTS = Path("/etc/kueue/metrics/certs")
HEALTH_PORT = 18581  # loopback only
WEBHOOK_PORT = 19543
EXTERNAL_FRAMEWORK = "DGLJob.v1alpha1.qihoo.net"
# Kueue's waitForPodsReady: a job whose pods are not all ready this long after its admission
# is evicted and requeued (the DGLJob reports PodsReady on its Workload)
PODS_READY_TIMEOUT = "5m"
# ... and one running whose PodsReady turned False (WaitForRecovery: a node lost, an elastic
# job rescaling) and not True again this long after (an elastic shrink takes the node
# monitor's 40 s grace and the new pods' start)
PODS_RECOVERY_TIMEOUT = "3m"


def folder() -> Path:
    """hack/kueue.sh's folder (``kueue`` and ``crds/``); builds it the first time (minutes)."""
    script = REPO / "hack" / "kueue.sh"
    out = subprocess.run(["bash", str(script)], capture_output=True, text=True, timeout=3600)
    if out.returncode != 0:
        raise ClusterError(f"hack/kueue.sh failed:\n{out.stderr.strip()[-2000:]}")
    return Path(out.stdout.strip().splitlines()[-1])


def configuration(certs: Path) -> dict[str, object]:
    """Kueue's Configuration (config.kueue.x-k8s.io/v1beta2)."""
    return {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "namespace": NAMESPACE,
        "health": {"healthProbeBindAddress": f"127.0.0.1:{HEALTH_PORT}"},
        "metrics": {"bindAddress": "0"},
        "webhook": {"port": WEBHOOK_PORT, "host": "127.0.0.1", "certDir": str(certs)},
        "leaderElection": {"leaderElect": False},
        "internalCertManagement": {"enable": False},
        "manageJobsWithoutQueueName": False,
        "waitForPodsReady": {
            "timeout": PODS_READY_TIMEOUT,
            "recoveryTimeout": PODS_RECOVERY_TIMEOUT,
            "blockAdmission": False,
        },
        "integrations": {
            "frameworks": ["batch/job"],
            "externalFrameworks": [EXTERNAL_FRAMEWORK],
        },
    }


def _self_signed(d: Path, cn: str) -> None:
    d.mkdir(parents=True, exist_ok=True)
    _openssl(
        "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
        "-keyout", "tls.key", "-out", "tls.crt", "-days", "3650", "-subj", f"/CN={cn}",
        "-addext", "subjectAltName=IP:127.0.0.1",
        cwd=d,
    )  # fmt: skip


def install_crds(kubectl: Kubectl, crds: Path) -> None:
    """Kueue's CRDs (server-side apply: the Workload CRD is too large for the last-applied
    annotation of a client-side apply), once established."""
    files = sorted(p for p in crds.glob("*.yaml"))
    for f in files:
        kubectl(["apply", "--server-side", "--force-conflicts", "-f", str(f)], None)
    names = [f"crd/{f.name.split('_', 1)[1].removesuffix('.yaml')}.kueue.x-k8s.io" for f in files]
    kubectl(["wait", "--for", "condition=Established", "--timeout", "60s", *names], None)


def running() -> bool:
    """Kueue's manager answers on this host (ready)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{HEALTH_PORT}/readyz", timeout=2) as r:
            return bool(r.status == 200)
    except OSError:
        return False


def start(dir: Path, kubeconfig: Path, kubectl: Kubectl, timeout: float = 120) -> Component:
    """Install the CRDs and start the manager; returns once it is ready. Another manager
    answering on this host's ports (another cluster's, another test's) is an error: this one
    could not bind them, and that one serves another API server (a flake-hunt run of the
    real-API-server layer beside an e2e session's Kueue once saw nothing admitted)."""
    if running():
        raise ClusterError(
            f"a Kueue manager already answers on 127.0.0.1:{HEALTH_PORT} (another cluster's or "
            "test's): stop it first (make cluster-down stops the local cluster's)"
        )
    built = folder()
    install_crds(kubectl, built / "crds")
    with contextlib.suppress(RuntimeError):  # (exists already)
        kubectl(["create", "namespace", NAMESPACE], None)
    certs = dir / "kueue" / "webhook-certs"
    _self_signed(certs, "kueue-webhook")
    if not (METRICS_CERTS / "tls.crt").exists():
        _self_signed(METRICS_CERTS, "kueue-metrics")
    config = dir / "kueue" / "config.json"
    config.write_text(json.dumps(configuration(certs), indent=1))
    comp = Component(
        NAME,
        [
            str(built / "kueue"),
            f"--config={config}",
            f"--kubeconfig={kubeconfig}",
            # the visibility API server (pending workloads) would need an APIService
            "--feature-gates=VisibilityOnDemand=false",
            "--zap-log-level=2",
        ],
        dir / "logs" / "kueue.log",
    )
    comp.start()
    deadline = time.monotonic() + timeout
    while not running():
        if comp.proc is not None and comp.proc.poll() is not None:
            raise ClusterError(f"kueue exited ({comp.proc.returncode}):\n{comp.tail()}")
        if time.monotonic() > deadline:
            comp.stop()
            raise ClusterError(f"kueue not ready after {timeout:.0f}s:\n{comp.tail()}")
        time.sleep(0.5)
    return comp


def stop(comp: Component | None = None) -> None:
    """Stop the manager this process started (``comp``; a cluster's goes with its other
    processes) and remove the metrics certificate."""
    if comp is not None:
        comp.stop()
    shutil.rmtree(METRICS_CERTS.parent.parent, ignore_errors=True)  # /etc/kueue
