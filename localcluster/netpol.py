"""NetworkPolicy enforced on the local cluster: sigs.k8s.io/kube-network-policies (SIG
Network's engine, the one kind's kindnet embeds), built by hack/network-policies.sh, as one
host process for every node.

How it enforces here: every node's pods hang off a bridge in this machine's network stack
(localcluster/node.py), and the bridge passes their packets through the IP hooks
(bridge-nf-call-iptables). The engine keeps an nftables table (inet kube-network-policies)
whose postrouting chain accepts established flows, the host's own root-owned traffic (the
kubelet's probes, the API server's proxy and exec) and DNS, and hands every new flow from or
to a pod that a NetworkPolicy selects to itself (NFQUEUE); it admits or drops it by the
policies. A SIGTERM removes the table (a cluster's processes get one at ``down``); a table
left by a killed engine is replaced by the next one's first sync.

Why it is patched (hack/network-policies.sh): this kernel lacks nft_queue (the xtables NFQUEUE
target is used instead), all nodes share one network stack (one engine, node name ``*``), and
v0.8.0 reads only the in-cluster configuration (it reads $KUBECONFIG here; identity: the
admin, as Kueue's manager and the Coscheduling scheduler have).
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

from localcluster.cluster import ClusterError, Component

REPO = Path(__file__).resolve().parents[1]
NAME = "kube-network-policies"
QUEUE_ID = 98  # as upstream's install.yaml
METRICS = "127.0.0.1:19080"  # loopback only (its default is every interface's :9080)
# logged once its caches are synced: its table and queue follow within milliseconds
READY = f"Caches are synced for {NAME}"


def binary() -> Path:
    """hack/network-policies.sh's engine; built the first time (a minute and a half)."""
    script = REPO / "hack" / "network-policies.sh"
    out = subprocess.run(["bash", str(script)], capture_output=True, text=True, timeout=3600)
    if out.returncode != 0:
        raise ClusterError(f"hack/network-policies.sh failed:\n{out.stderr.strip()[-2000:]}")
    return Path(out.stdout.strip().splitlines()[-1]) / NAME


def start(dir: Path, kubeconfig: Path, timeout: float = 60) -> Component:
    """Start the engine; returns once its caches are synced (its rules follow at once)."""
    log = dir / "logs" / f"{NAME}.log"
    comp = Component(
        NAME,
        [
            "env",
            f"KUBECONFIG={kubeconfig}",
            str(binary()),
            "--hostname-override=*",
            f"--nfqueue-id={QUEUE_ID}",
            f"--metrics-bind-address={METRICS}",
            # the race it works around is fixed in the kernels this runs on (>= 6.12)
            "--netfilter-bug-1766-fix=false",
            "--v=2",
        ],
        log,
    )
    comp.start()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if comp.proc is not None and comp.proc.poll() is not None:
            raise ClusterError(f"{NAME} exited {comp.proc.returncode}:\n{comp.tail()}")
        if log.exists() and READY in log.read_text(errors="replace"):
            time.sleep(1)
            return comp
        time.sleep(0.5)
    comp.stop()
    raise ClusterError(f"{NAME} did not sync its caches in {timeout:.0f}s:\n{comp.tail()}")
