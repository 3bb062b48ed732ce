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


class Watcher:
    """A watcher-loop process, its stderr read as it comes: :meth:`logged` is the barrier on
    what it has seen (its "waiting for ..." lines), where a sleep would guess."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.proc = proc
        self.lines: list[str] = []
        self.grew = threading.Condition()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            with self.grew:
                self.lines.append(line)
                self.grew.notify_all()
        with self.grew:
            self.lines.append("")  # the end of its output
            self.grew.notify_all()

    def logged(self, text: str, timeout: float = 30) -> None:
        """Once a line of its output holds ``text``; fails if it ends or times out first."""
        with self.grew:
            seen = self.grew.wait_for(
                lambda: any(text in line for line in self.lines) or self.lines[-1:] == [""],
                timeout,
            )
            assert seen and any(text in line for line in self.lines), (
                f"watcher-loop never logged {text!r} (exit {self.proc.poll()}):\n"
                + "".join(self.lines)
            )

    def finish(self, timeout: float = 30) -> tuple[int, str]:
        """Its exit code and whole output, once it has ended."""
        code = self.proc.wait(timeout=timeout)
        self.reader.join(timeout)
        return code, "".join(self.lines)


STARTED: list[subprocess.Popen[str]] = []


@pytest.fixture(autouse=True)
def no_watcher_outlives_its_test() -> Iterator[None]:
    yield
    while STARTED:
        proc = STARTED.pop()
        if proc.poll() is None:  # the test failed before the watcher ended
            proc.kill()
            proc.wait(timeout=10)


def watcher(
    cp: ControlPlane, ns: str, file: Path, mode: str, *, expected: int, timeout: float = 0
) -> Watcher:
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
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    STARTED.append(proc)
    return Watcher(proc)


def test_waits_for_ready_workers_then_succeeds(
    api: RestClient, namespace: str, control_plane: ControlPlane, tmp_path: Path
) -> None:
    names = ["j-worker-0", "j-worker-1"]
    make_pods(api, namespace, *names)
    hostfile = tmp_path / "hostfile"
    hostfile.write_text("10.1.0.1 30050 j-worker-0 slots=1\n")  # incomplete at first
    w = watcher(control_plane, namespace, hostfile, "ready", expected=2)
    w.logged(f"waiting for {hostfile}")
    assert w.proc.poll() is None, "it must wait for the rest of the file and for the pods"
    hostfile.write_text("10.1.0.1 30050 j-worker-0 slots=1\n10.1.0.2 30050 j-worker-1 slots=1\n")
    w.logged("waiting for 2 of 2 pod(s)")  # it read the whole file, and the pods
    kubelet = Kubelet(api, namespace)
    kubelet.run("j-worker-0", "10.1.0.1")
    w.logged("waiting for 1 of 2 pod(s): j-worker-1")  # it saw worker-0 ready
    assert w.proc.poll() is None, "one worker is not ready yet"
    started = time.monotonic()
    kubelet.run("j-worker-1", "10.1.0.2")
    code, err = w.finish()
    assert code == 0, err
    assert time.monotonic() - started < 10


def test_finished_mode(
    api: RestClient, namespace: str, control_plane: ControlPlane, tmp_path: Path
) -> None:
    make_pods(api, namespace, "j-partitioner")
    partfile = tmp_path / "partfile"
    partfile.write_text("10.1.0.3 30050 j-partitioner\n")
    w = watcher(control_plane, namespace, partfile, "finished", expected=1)
    kubelet = Kubelet(api, namespace)
    kubelet.run("j-partitioner", "10.1.0.3")
    w.logged("waiting for 1 of 1 pod(s): j-partitioner (Running")  # running is not finished
    assert w.proc.poll() is None
    kubelet.finish("j-partitioner")
    code, err = w.finish()
    assert code == 0, err


def test_fails_fast_naming_the_failed_pod(
    api: RestClient, namespace: str, control_plane: ControlPlane, tmp_path: Path
) -> None:
    make_pods(api, namespace, "j-worker-0", "j-worker-1")
    hostfile = tmp_path / "hostfile"
    hostfile.write_text("10.1.0.1 30050 j-worker-0 slots=1\n10.1.0.2 30050 j-worker-1 slots=1\n")
    w = watcher(control_plane, namespace, hostfile, "ready", expected=2)
    w.logged("waiting for 2 of 2 pod(s)")  # it watches both pods
    started = time.monotonic()
    Kubelet(api, namespace).finish("j-worker-1", exit_code=3)
    code, err = w.finish()
    assert code == 1
    assert time.monotonic() - started < 5
    assert "j-worker-1" in err and "Traceback" not in err


def test_times_out_cleanly(
    api: RestClient, namespace: str, control_plane: ControlPlane, tmp_path: Path
) -> None:
    make_pods(api, namespace, "j-worker-0")
    hostfile = tmp_path / "hostfile"
    hostfile.write_text("10.1.0.1 30050 j-worker-0 slots=1\n")
    code, err = watcher(control_plane, namespace, hostfile, "ready", expected=1, timeout=3).finish()
    assert code == 2
    assert "j-worker-0" in err and "Traceback" not in err
