"""The images run: imported into a private containerd with ``ctr images import`` and started
with ``ctr run --rm`` (no network: each container gets a network namespace with only lo)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from tests.images.containerd import Containerd, new_id

PYTHON_IMAGES = ("operator", "watcher-loop", "kubectl-download")


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_imported_under_their_names(containerd: Containerd, imported: dict[str, str]) -> None:
    listed = containerd.ctr("images", "ls", "-q").stdout.split()
    assert set(imported.values()) <= set(listed)


def test_operator_version(containerd: Containerd, imported: dict[str, str]) -> None:
    r = containerd.run(imported["operator"], "dgl-operator", "--version")
    assert (r.returncode, r.stdout.strip()) == (0, "dgl-operator 0.2.0"), r.stderr


def test_operator_entrypoint_needs_a_cluster(
    containerd: Containerd, imported: dict[str, str]
) -> None:
    """With no command the entrypoint runs: no kubeconfig and no in-cluster account here."""
    r = containerd.run(imported["operator"])
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert "cannot load Kubernetes configuration" in r.stdout + r.stderr


@pytest.mark.parametrize("name", PYTHON_IMAGES)
def test_runs_as_nonroot_without_network(
    name: str, containerd: Containerd, imported: dict[str, str]
) -> None:
    r = containerd.run(imported[name], "sh", "-c", "id -u; id -g; cat /proc/net/dev")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[:2] == ["65532", "65532"]
    interfaces = [ln.split(":")[0].strip() for ln in lines[4:]]
    assert interfaces == ["lo"]


def test_watcher_loop_without_watcherfile(containerd: Containerd, imported: dict[str, str]) -> None:
    r = containerd.run(imported["watcher-loop"])
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert "WATCHERFILE" in r.stderr


def test_kubectl_download_installs_the_baked_kubectl(
    containerd: Containerd, imported: dict[str, str], tmp_path: Path
) -> None:
    target = tmp_path / "kube"
    target.mkdir()
    os.chown(target, 65532, 65532)  # an emptyDir is writable for the pod's user
    r = containerd.run(
        imported["kubectl-download"],
        mounts=[f"type=bind,src={target},dst=/opt/kube,options=rbind:rw"],
    )
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert "kubectl-download: installed /opt/kube/kubectl (kubectl v1.34.4)" in r.stdout
    installed = target / "kubectl"
    assert os.access(installed, os.X_OK)
    baked = containerd.run(imported["kubectl-download"], "sha256sum", "/usr/local/bin/kubectl")
    assert baked.stdout.split()[0] == sha256(installed)
    version = subprocess.run(
        [str(installed), "version", "--client"], capture_output=True, text=True, timeout=60
    )
    assert version.returncode == 0 and "v1.34.4" in version.stdout


@pytest.mark.parametrize("name", PYTHON_IMAGES)
def test_dglrun_help(name: str, containerd: Containerd, imported: dict[str, str]) -> None:
    r = containerd.run(imported[name], "dglrun", "--help")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("usage: dglrun")


def test_pycs_are_used(containerd: Containerd, imported: dict[str, str]) -> None:
    """The layer's unchecked-hash pycs load (no recompiling at every start)."""
    r = containerd.run(imported["operator"], "python3", "-v", "-c", "import launcher.cli")
    assert r.returncode == 0, r.stderr
    site = "/opt/dgl-operator/site-packages"
    assert f"{site}/launcher/__pycache__/cli.cpython-311.pyc matches {site}/launcher/cli.py" in (
        r.stderr
    )


def test_pause_stays_up_until_killed(containerd: Containerd, imported: dict[str, str]) -> None:
    task = new_id()
    proc = subprocess.Popen(
        [
            containerd.tools["ctr"],
            "--address",
            str(containerd.socket),
            "-n",
            "test",
            "run",
            "--rm",
            imported["pause"],
            task,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 30
        status = ""
        while time.monotonic() < deadline and proc.poll() is None:
            listed = containerd.ctr("tasks", "ls", check=False).stdout
            status = next((ln for ln in listed.splitlines() if ln.startswith(task)), "")
            if "RUNNING" in status:
                break
            time.sleep(0.2)
        assert "RUNNING" in status
        time.sleep(1.0)
        assert proc.poll() is None, "pause exited by itself"
        containerd.ctr("tasks", "kill", "-s", "SIGTERM", task)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            containerd.ctr("tasks", "kill", "-s", "SIGKILL", task, check=False)
            proc.wait(timeout=30)


# -- graphsage (the CPU variant, 1.4 GB unpacked: importing it takes 20-50 s) --------------------


@pytest.mark.slow
def test_graphsage_imports_dgl(containerd: Containerd, graphsage_ref: str) -> None:
    r = containerd.run(
        graphsage_ref,
        "python3",
        "-c",
        "import dgl, torch, ogb; print(dgl.__version__)",
        env={"OUTDATED_IGNORE": "1"},
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines()[-1] == "2.1.0"


NO_CUDA = """
import torch
print(torch.cuda.is_available(), torch.cuda.device_count())
for call in (torch.cuda.graph_pool_handle, torch.backends.cudnn.version):
    try:
        call()
    except RuntimeError as e:
        print(str(e).splitlines()[0])
"""


@pytest.mark.slow
def test_graphsage_torch_has_no_cuda(containerd: Containerd, graphsage_ref: str) -> None:
    """The CPU image's torch sees no CUDA device, and what needs its CUDA libraries raises a
    RuntimeError naming the GPU image (the stubs), not a crash of the interpreter."""
    r = containerd.run(graphsage_ref, "python3", "-c", NO_CUDA, timeout=300)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.strip().splitlines()
    assert lines[0] == "False 0"
    assert len(lines) == 3
    for line, symbol in zip(lines[1:], ("graph_pool_handle", "cudnnGetVersion"), strict=True):
        assert symbol in line and "not in this CPU image" in line and "-gpu" in line, line


@pytest.mark.slow
def test_graphsage_default_command_and_workdir(containerd: Containerd, graphsage_ref: str) -> None:
    r = containerd.run(graphsage_ref)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("usage: dglrun")
    r = containerd.run(
        graphsage_ref, "sh", "-c", "pwd; id -u; ls code; touch probe && echo writable"
    )
    assert r.returncode == 0, r.stderr
    lines = r.stdout.split()
    assert lines[:2] == ["/dgl_workspace", "65532"]
    assert {"load_and_partition_graph.py", "train_dist.py", "common.py"} <= set(lines)
    assert lines[-1] == "writable"


@pytest.mark.slow
def test_graphsage_trains_in_the_image(containerd: Containerd, graphsage_ref: str) -> None:
    """The example's code/ scripts run from the WORKDIR: a small synthetic dataset, one epoch
    of single-process GraphSAGE."""
    script = (
        "python3 code/make_dataset.py --root raw_data --num-nodes 2000 && "
        "python3 code/train_single.py --dataset_root raw_data --num_epochs 1 "
        "--batch_size 256 --out metrics.json && cat metrics.json"
    )
    r = containerd.run(graphsage_ref, "sh", "-c", script, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    metrics: dict[str, Any] = json.loads(r.stdout[r.stdout.index("{") :])
    assert metrics["epochs"] == 1 and 0.0 <= metrics["test_accuracy"] <= 1.0
