"""``make demo``: a real single-node Kubernetes on this machine, the operator installed with
Helm, the GraphSAGE DGLJob run to Succeeded, its test accuracy printed.

Steps: build the images (no Docker; cached), bring the node up (or reuse a running one),
``helm upgrade --install`` the chart, apply examples/graphsage/dgljob.yaml, follow the job's
phases and the launcher's log, print the accuracy and the machine's peak memory.

    python -m localcluster.demo [DGLJOB.yaml]
    make demo JOB=examples/graphsage/dgljob-parmetis.yaml     # the same, through make

runs another DGLJob manifest instead (its own name and namespace), e.g. one of the ParMETIS
modes' examples, or dgljob-storage.yaml (results and checkpoints on a claim).
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

from localcluster.cluster import REPO, k8s_binaries
from localcluster.helm import OperatorCannotStart, install_operator
from localcluster.node import DEFAULT_DIR, refresh_images, running
from localcluster.node import main as node_main
from localcluster.stuck import StuckPods, kubectl_runner

OP_NS = "dgl-system"
EXAMPLE = REPO / "examples" / "graphsage" / "dgljob.yaml"


def say(text: str) -> None:
    print(f"demo: {text}", flush=True)


class MemorySampler:
    """Used memory of the whole machine (MemTotal - MemAvailable), sampled twice a second."""

    def __init__(self) -> None:
        self.baseline = self.used()
        self.peak = self.baseline
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    @staticmethod
    def used() -> int:
        info = {}
        for line in Path("/proc/meminfo").read_text().splitlines():
            key, value = line.split(":", 1)
            info[key] = int(value.split()[0]) * 1024
        return info["MemTotal"] - info["MemAvailable"]

    def _run(self) -> None:
        while not self._stop.wait(0.5):
            self.peak = max(self.peak, self.used())

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(2)


def run(*argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    out = subprocess.run(list(argv), capture_output=True, text=True)
    if check and out.returncode != 0:
        raise SystemExit(f"demo: `{' '.join(argv[:4])} ...` failed:\n{out.stderr or out.stdout}")
    return out


def manifest(path: Path) -> tuple[str, str, str]:
    """(name, namespace, main container) of the DGLJob in ``path``."""
    import yaml

    try:
        doc = yaml.safe_load(path.read_text())
        meta = doc["metadata"]
        main = doc["spec"]["dglReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]
        return str(meta["name"]), str(meta.get("namespace") or "default"), str(main["name"])
    except (OSError, yaml.YAMLError, KeyError, TypeError, IndexError) as e:
        raise SystemExit(f"demo: {path} is not a readable DGLJob manifest: {e}") from None


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    example = Path(args[0]).resolve() if args else EXAMPLE
    job, ns, container = manifest(example)
    started = time.monotonic()
    mem = MemorySampler()
    kubeconfig = DEFAULT_DIR / "control-plane" / "admin.kubeconfig"
    if running(DEFAULT_DIR) and kubeconfig.exists():
        say(f"reusing the running cluster ({kubeconfig})")
    else:
        say(
            "bringing up a single-node Kubernetes (etcd, kube-apiserver, controller-manager, "
            "scheduler, kubelet, containerd) and building/importing the images; the first run "
            "takes minutes"
        )
        if node_main(["up", "--free-disk", "2Gi"]) != 0:
            return 1
    kc = [str(k8s_binaries("kubectl") / "kubectl"), "--kubeconfig", str(kubeconfig)]
    digests = refresh_images()  # this checkout's images (a no-op when nothing changed)
    say(f"cluster up after {time.monotonic() - started:.0f}s; installing the operator with Helm")
    try:
        install_operator(kubeconfig, digests.get("dgl-operator", ""))
    except OperatorCannotStart as e:
        say(f"stopped: {e}")
        return 1
    run(*kc, "create", "namespace", ns, check=False)
    run(*kc, "-n", ns, "delete", "dgljob", job, "--ignore-not-found", "--wait=true")
    run(*kc, "apply", "-f", str(example))
    say(f"applied {example}; following it (kubectl -n {ns} get dglj -w)")
    phase, deadline = "", time.monotonic() + 900
    status: dict[str, object] = {}
    stuck = StuckPods(kubectl_runner(kubeconfig), ns, f"dgl.qihoo.net/job-name={job}")
    while time.monotonic() < deadline:
        report = stuck.check()
        if report:
            say(f"stopped: a pod of DGLJob {ns}/{job} cannot start: {report}")
            say(f"the job is left for you to look at: kubectl -n {ns} describe dglj {job}")
            mem.stop()
            return 1
        out = run(*kc, "-n", ns, "get", "dgljob", job, "-o", "json", check=False)
        if out.returncode == 0:
            status = json.loads(out.stdout).get("status") or {}
            if status.get("phase") and status.get("phase") != phase:
                phase = str(status.get("phase"))
                replicas = status.get("replicaStatuses")
                workers = replicas.get("Worker", {}) if isinstance(replicas, dict) else {}
                say(
                    f"  {time.monotonic() - started:5.0f}s  phase {phase:<12} "
                    f"workers ready {workers.get('ready', '-')}"
                )
            if phase in ("Completed", "Failed"):
                break
        time.sleep(1)
    partitioner = run(*kc, "-n", ns, "logs", f"{job}-partitioner", check=False)
    if partitioner.returncode == 0:  # DGL-API and ParMETIS: the partition phase ran there
        print(
            "\n".join(
                f"  | {ln}"
                for ln in partitioner.stdout.splitlines()
                if ln.startswith(("[1/5]", "[2/5]", "  "))
            )
        )
    logs = run(*kc, "-n", ns, "logs", f"{job}-launcher", "-c", container, check=False).stdout
    print(
        "\n".join(
            f"  | {ln}"
            for ln in logs.splitlines()
            if not ln.startswith(f"[{job}-worker") or "done:" in ln
        )
    )
    mem.stop()
    summary = [ln for ln in logs.splitlines() if ln.startswith("dglrun: done")]
    took = time.monotonic() - started
    gib = 2**30
    say(
        f"peak memory of the machine {mem.peak / gib:.1f} GiB (before the demo "
        f"{mem.baseline / gib:.1f} GiB: the cluster and the job added "
        f"{(mem.peak - mem.baseline) / gib:.1f} GiB)"
    )
    if phase != "Completed":
        conds = status.get("conditions") or []
        say(f"the job ended {phase or 'nowhere'}: {conds}")
        return 1
    accuracy = summary[0].split("test accuracy ")[1].split(",")[0] if summary else "?"
    say(f"DGLJob {ns}/{job} Succeeded in {took:.0f}s: test accuracy {accuracy}")
    if status.get("results"):  # spec.storage (examples/graphsage/dgljob-storage.yaml)
        say(f"results (model.pt, metrics.json) kept on the claim: {status['results']}")
    say(f"explore: export KUBECONFIG={kubeconfig}; kubectl get dglj,pods -A")
    say("clean up: make cluster-down")
    return 0


if __name__ == "__main__":
    sys.exit(main())
