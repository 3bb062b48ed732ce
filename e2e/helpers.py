"""What the e2e tests share: the kubeconfig of this machine's node, the measured figures the
session prints in its summary, and DGLJobs driven through pytest-kubernetes' kubectl."""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from localcluster.cluster import REPO
from localcluster.disk import pressures
from localcluster.node import DEFAULT_DIR
from tests.support.waiting import wait_for

NODE_KUBECONFIG = DEFAULT_DIR / "control-plane" / "admin.kubeconfig"

figures: list[str] = []


def figure(line: str) -> None:
    """A measured figure, printed in the test summary (figures, never assertions on time)."""
    figures.append(line)


EXAMPLE = REPO / "examples" / "graphsage"
JOB = "dgl-graphsage"


def example_job(namespace: str, name: str = JOB) -> dict[str, Any]:
    job: dict[str, Any] = yaml.safe_load((EXAMPLE / "dgljob.yaml").read_text())
    job["metadata"].update(name=name, namespace=namespace)
    return job


def apply(cluster: Any, obj: dict[str, Any]) -> None:
    """kubectl apply of a dict through a file (pytest-kubernetes' apply(dict) pipes YAML through
    a single-quoted shell echo, which breaks YAML's own single quotes)."""
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
        yaml.safe_dump(obj, f)
    try:
        cluster.apply(Path(f.name))
    finally:
        Path(f.name).unlink()


def launcher_args(job: dict[str, Any]) -> list[str]:
    args: list[str] = job["spec"]["dglReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][
        0
    ]["args"]
    return args


def get_job(cluster: Any, ns: str, name: str = JOB) -> dict[str, Any]:
    obj: dict[str, Any] = cluster.kubectl(["get", "dgljob", name, "-n", ns])
    return obj


def conditions(job: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in (job.get("status") or {}).get("conditions") or []}


def wait_job(
    cluster: Any,
    ns: str,
    name: str,
    pred: Callable[[dict[str, Any]], bool],
    timeout: float,
    what: str,
) -> dict[str, Any]:
    """The DGLJob once ``pred(job)`` holds; fails at once, with its reason, if the job fails
    first (rather than waiting out ``timeout`` for something that cannot happen any more)."""

    def check() -> dict[str, Any] | None:
        job = get_job(cluster, ns, name)
        failed = conditions(job).get("Failed", {})
        if failed.get("status") == "True":
            raise AssertionError(
                f"DGLJob {ns}/{name} failed while waiting for {what}: "
                f"{failed.get('reason')}: {failed.get('message')}"
            )
        return job if pred(job) else None

    found: dict[str, Any] = wait_for(check, what=what, timeout=timeout, interval=1.0)
    return found


def phase_is(phase: str) -> Callable[[dict[str, Any]], bool]:
    return lambda job: (job.get("status") or {}).get("phase") == phase


def progress_of(job: dict[str, Any]) -> str:
    return str((job.get("status") or {}).get("progress") or "")


def succeeded(job: dict[str, Any]) -> bool:
    return bool(conditions(job).get("Succeeded", {}).get("status") == "True")


def wait_finished(
    cluster: Any,
    ns: str,
    name: str = JOB,
    timeout: float = 600,
    progress: list[str] | None = None,
) -> dict[str, Any]:
    """The finished job; ``progress`` collects the distinct status.progress values seen."""

    def done() -> dict[str, Any] | None:
        job = get_job(cluster, ns, name)
        text = (job.get("status") or {}).get("progress")
        if progress is not None and text and text not in progress:
            progress.append(text)
        conds = conditions(job)
        for ctype in ("Succeeded", "Failed"):
            if conds.get(ctype, {}).get("status") == "True":
                return job
        return None

    found: dict[str, Any] = wait_for(
        done, what=f"DGLJob {ns}/{name} to finish", timeout=timeout, interval=1.0
    )
    return found


def wait_epochs(
    cluster: Any, ns: str, name: str = JOB, epochs: int = 1, timeout: float = 600
) -> str:
    """The launcher's log once the trainers have trained ``epochs`` epoch(s): rank 0's
    ``epoch <epochs - 1> loss`` line, printed after every trainer finished that epoch (an
    allreduce precedes it). A barrier on the trainers being under way, where a sleep would
    guess; fails at once, with the job's conditions, if the job finishes first."""
    mark = f" epoch {epochs - 1} loss "
    container = JOB  # the example's container name, whatever the job's

    def trained() -> str | None:
        job = get_job(cluster, ns, name)
        conds = conditions(job)
        if any(conds.get(t, {}).get("status") == "True" for t in ("Succeeded", "Failed")):
            raise AssertionError(f"{name} finished before epoch {epochs - 1}: {conds}")
        try:
            log: str = cluster.logs(f"{name}-launcher", container, ns)
        except Exception:  # (the launcher is not running yet, or is being replaced)
            return None
        return log if mark in log else None

    log: str = wait_for(trained, what=f"{name}'s epoch {epochs - 1}", timeout=timeout, interval=1.0)
    return log


def pods(cluster: Any, ns: str) -> dict[str, dict[str, Any]]:
    items = cluster.kubectl(["get", "pods", "-n", ns])["items"]
    return {p["metadata"]["name"]: p for p in items}


def accuracy(log: str) -> float:
    for line in log.splitlines():
        if line.startswith("dglrun: done") and "test accuracy" in line:
            return float(line.split("test accuracy ")[1].split(",")[0])
    raise AssertionError(f"no accuracy in the launcher log:\n{log[-3000:]}")


def dgl_python(purpose: str) -> str:
    """The DGL environment's interpreter (``purpose``: what it is for, in the failure or skip
    that names it missing)."""
    from tests.support.dgl_python import find_dgl_python
    from tests.support.prerequisites import unavailable

    python = find_dgl_python()
    if python is None:
        unavailable(f"no DGL environment for {purpose} (make dgl-venv)")
    return python


def single_process_accuracy(batch_size: int, epochs: int = 2) -> float:
    """Single-process GraphSAGE on the same synthetic graph the image carries (seed 0): the
    baseline a distributed run with ``batch_size`` = trainers x their batch is compared with."""
    python = dgl_python("the single-process baseline")
    env = {**os.environ, "OUTDATED_IGNORE": "1", "DGLBACKEND": "pytorch"}
    with tempfile.TemporaryDirectory() as d:
        subprocess.run(
            [str(python), str(EXAMPLE / "make_dataset.py"), "--root", d],
            check=True,
            capture_output=True,
            env=env,
        )
        out = Path(d) / "metrics.json"
        argv = [str(python), str(EXAMPLE / "train_single.py"), "--dataset_root", d]
        argv += ["--num_epochs", str(epochs), "--batch_size", str(batch_size), "--out", str(out)]
        subprocess.run(argv, check=True, capture_output=True, env=env)
        return float(json.loads(out.read_text())["test_accuracy"])


def fresh_namespace(cluster: Any, prefix: str = "e2e") -> Iterator[str]:
    """A new namespace ``<prefix>-<6 hex>`` (the generator under a fixture), deleted after.
    The session stops here when a node shows a pressure condition: its kubelet refuses every
    new pod while it lasts, and each test after would fail at its own timeout."""
    stop_on_pressure(cluster)
    name = f"{prefix}-{uuid.uuid4().hex[:6]}"
    cluster.kubectl(["create", "namespace", name], as_dict=False)
    yield name
    cluster.kubectl(["delete", "namespace", name, "--wait=false"], as_dict=False)


def stop_on_pressure(cluster: Any) -> None:
    """End the session (pytest.exit) naming each node's pressure condition, if any."""
    found = pressures(cluster.kubectl(["get", "nodes"])["items"])
    if found:
        pytest.exit(
            "a node's kubelet refuses new pods, so every test after this one would fail: "
            + "; ".join(found),
            returncode=1,
        )


def claims_namespace(cluster: Any, kubeconfig: Path, prefix: str) -> Iterator[str]:
    """A namespace for jobs with spec.storage (the generator under a fixture): on this
    machine's node, its static volumes are made ready first (released ones recycled)."""
    if kubeconfig == NODE_KUBECONFIG:
        from localcluster import volumes
        from localcluster.kubectl import Kubectl

        volumes.ensure(Kubectl(NODE_KUBECONFIG, timeout=60), DEFAULT_DIR / "volumes")
    yield from fresh_namespace(cluster, prefix)


def epochs_done(job: dict[str, Any]) -> int:
    """The epoch status.progress reports during training (0 before)."""
    progress = progress_of(job)
    if not progress.startswith("5/5 train: epoch "):
        return 0
    return int(progress.split("epoch ")[1].split("/")[0])


def event_messages(cluster: Any, ns: str, reason: str, within: float = 60.0) -> list[str]:
    """The messages of the namespace's Events of ``reason``, oldest first.

    The operator's recorder sends Events from a thread of its own, after the status write they
    tell of: one can trail the status a test has just seen (CI failed so once). So this waits up
    to ``within`` seconds for the first one, and returns [] only when none came.
    """

    def messages() -> list[str]:
        items = cluster.kubectl(["get", "events", "-n", ns])["items"]
        items.sort(key=lambda e: e["metadata"]["creationTimestamp"])
        return [e["message"] for e in items if e["reason"] == reason]

    try:
        return wait_for(messages, what=f"an Event {reason} in {ns}", timeout=within, interval=1.0)
    except AssertionError:
        return []


# -- reaching pods over the network (NetworkPolicy) -----------------------------------------

# Run in a pod: connects to every host:port of argv[2:] at once, each with argv[1] seconds, and
# prints {target: "connected" | "timeout" (dropped: what a NetworkPolicy does) | "refused" (no
# listener, but the packet arrived) | "error <errno>"}.
PROBE = r"""
import json, socket, sys, threading
out = {}
def one(target):
    host, port = target.rsplit(":", 1)
    s = socket.socket()
    s.settimeout(float(sys.argv[1]))
    try:
        s.connect((host, int(port)))
        out[target] = "connected"
    except socket.timeout:
        out[target] = "timeout"
    except ConnectionRefusedError:
        out[target] = "refused"
    except OSError as e:
        out[target] = f"error {e.errno}"
    finally:
        s.close()
threads = [threading.Thread(target=one, args=(t,)) for t in sys.argv[2:]]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(json.dumps(out))
"""


def kubectl_run(cluster: Any, argv: list[str], timeout: float = 60) -> str:
    """stdout of our kubectl on the cluster (a list argv: no shell quoting to break)."""
    from localcluster.cluster import k8s_binaries

    kubectl = str(k8s_binaries("kubectl") / "kubectl")
    out = subprocess.run(
        [kubectl, "--kubeconfig", str(cluster.kubeconfig), *argv],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert out.returncode == 0, f"kubectl {' '.join(argv[:6])}: {out.stderr.strip()}"
    return out.stdout


def connect(
    cluster: Any, ns: str, pod: str, targets: list[str], timeout: float = 3.0
) -> dict[str, str]:
    """What pod ``ns/pod`` gets connecting to each ``host:port`` (see :data:`PROBE`)."""
    argv = ["exec", "-n", ns, pod, "--", "python3", "-c", PROBE, str(timeout), *targets]
    found: dict[str, str] = json.loads(kubectl_run(cluster, argv, timeout=timeout + 60))
    return found


def start_prober(
    cluster: Any, ns: str, name: str, image: str, labels: dict[str, str] | None = None
) -> str:
    """A pod that only sleeps, in ``ns`` (with ``labels``): where connections are tried from.
    Returns its IP once it is Ready."""
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "labels": labels or {}},
        "spec": {
            "terminationGracePeriodSeconds": 0,
            "containers": [
                {
                    "name": "probe",
                    "image": image,
                    "command": ["sleep", "3600"],
                    "resources": {"limits": {"cpu": "100m", "memory": "128Mi"}},
                }
            ],
        },
    }
    apply(cluster, pod)
    return str(wait_ready(cluster, ns, name, 180)["status"]["podIP"])


def wait_ready(cluster: Any, ns: str, name: str, timeout: float) -> dict[str, Any]:
    """The pod ``ns/name`` once it is Ready (it may not exist yet: `kubectl wait` fails at
    once on a pod the operator has not made so far)."""

    def ready() -> dict[str, Any] | None:
        selector = f"metadata.name={name}"
        found = cluster.kubectl(["get", "pods", "-n", ns, "--field-selector", selector])
        for pod in found["items"]:
            conds = (pod.get("status") or {}).get("conditions") or []
            if any(c["type"] == "Ready" and c["status"] == "True" for c in conds):
                return dict(pod)
        return None

    pod: dict[str, Any] = wait_for(
        ready, what=f"pod {ns}/{name} Ready", timeout=timeout, interval=0.5
    )
    return pod


def listening(cluster: Any, ns: str, pod: str, port: int) -> bool:
    """Whether something in ``ns/pod`` listens on TCP ``port`` (read from /proc/net/tcp*, no
    connection made: DGL's servers take every connection for one of their clients)."""
    script = (
        "import sys\n"
        "p = '%04X' % int(sys.argv[1])\n"
        "rows = [l.split() for f in ('/proc/net/tcp', '/proc/net/tcp6') for l in open(f)][1:]\n"
        "print(any(r[1].endswith(':' + p) and r[3] == '0A' for r in rows if len(r) > 3))\n"
    )
    argv = ["exec", "-n", ns, pod, "--", "python3", "-c", script, str(port)]
    return kubectl_run(cluster, argv).strip() == "True"
