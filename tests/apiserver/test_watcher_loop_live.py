"""watcher-loop against the real API server: waits, succeeds, fails fast, times out."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kubeclient import PODS, RestClient
from localcluster.cluster import ControlPlane
from tests.support.live import Kubelet
from tests.support.paths import REPO


def make_pods(api: RestClient, ns: str, *names: str) -> None:
    for name in names:
        api.create(
            PODS,
            ns,
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": name, "labels": {"dgl-replica-name": name}},
                "spec": {"containers": [{"name": "c", "image": "busybox"}]},
            },
        )


STARTED: list[subprocess.Popen[str]] = []


@pytest.fixture(autouse=True)
def no_watcher_outlives_its_test() -> Iterator[None]:
    yield
    while STARTED:
        proc = STARTED.pop()
        if proc.poll() is None:  # the test failed before the watcher ended
            proc.kill()
            proc.communicate(timeout=10)


def watcher(
    cp: ControlPlane, ns: str, file: Path, mode: str, *, expected: int, timeout: float = 0
) -> subprocess.Popen[str]:
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "KUBECONFIG": str(cp.kubeconfig),
        "WATCHERFILE": str(file),
        "WATCHERMODE": mode,
        "NAMESPACE": ns,
        "WATCHER_EXPECTED_PODS": str(expected),
        "WATCHER_TIMEOUT": str(timeout),
        "WATCHER_POLL_INTERVAL": "0.2",
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "watcher_loop"],
        env=env,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    STARTED.append(proc)
    return proc


def test_waits_for_ready_workers_then_succeeds(
    api: RestClient, namespace: str, control_plane: ControlPlane, tmp_path: Path
) -> None:
    names = ["j-worker-0", "j-worker-1"]
    make_pods(api, namespace, *names)
    hostfile = tmp_path / "hostfile"
    hostfile.write_text("10.1.0.1 30050 j-worker-0 slots=1\n")  # incomplete at first
    proc = watcher(control_plane, namespace, hostfile, "ready", expected=2)
    time.sleep(1.5)
    assert proc.poll() is None, "it must wait for the rest of the file and for the pods"
    hostfile.write_text("10.1.0.1 30050 j-worker-0 slots=1\n10.1.0.2 30050 j-worker-1 slots=1\n")
    kubelet = Kubelet(api, namespace)
    kubelet.run("j-worker-0", "10.1.0.1")
    time.sleep(1.0)
    assert proc.poll() is None, "one worker is not ready yet"
    started = time.monotonic()
    kubelet.run("j-worker-1", "10.1.0.2")
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert time.monotonic() - started < 10


def test_finished_mode(
    api: RestClient, namespace: str, control_plane: ControlPlane, tmp_path: Path
) -> None:
    make_pods(api, namespace, "j-partitioner")
    partfile = tmp_path / "partfile"
    partfile.write_text("10.1.0.3 30050 j-partitioner\n")
    proc = watcher(control_plane, namespace, partfile, "finished", expected=1)
    kubelet = Kubelet(api, namespace)
    kubelet.run("j-partitioner", "10.1.0.3")
    threading.Timer(1.0, kubelet.finish, ("j-partitioner",)).start()
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err


def test_fails_fast_naming_the_failed_pod(
    api: RestClient, namespace: str, control_plane: ControlPlane, tmp_path: Path
) -> None:
    make_pods(api, namespace, "j-worker-0", "j-worker-1")
    hostfile = tmp_path / "hostfile"
    hostfile.write_text("10.1.0.1 30050 j-worker-0 slots=1\n10.1.0.2 30050 j-worker-1 slots=1\n")
    proc = watcher(control_plane, namespace, hostfile, "ready", expected=2)
    time.sleep(1.0)
    started = time.monotonic()
    Kubelet(api, namespace).finish("j-worker-1", exit_code=3)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 1
    assert time.monotonic() - started < 5
    assert "j-worker-1" in err and "Traceback" not in err


def test_times_out_cleanly(
    api: RestClient, namespace: str, control_plane: ControlPlane, tmp_path: Path
) -> None:
    make_pods(api, namespace, "j-worker-0")
    hostfile = tmp_path / "hostfile"
    hostfile.write_text("10.1.0.1 30050 j-worker-0 slots=1\n")
    proc = watcher(control_plane, namespace, hostfile, "ready", expected=1, timeout=3)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 2
    assert "j-worker-0" in err and "Traceback" not in err
