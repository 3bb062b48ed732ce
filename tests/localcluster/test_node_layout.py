"""localcluster/node.py's multi-node layout without starting anything: names, addresses and
bridges per node, kubelet and scheduler configurations, the allocatable reservation, the
hard-linked clone of the base containerd root, and the state file other processes read."""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from localcluster import node
from localcluster.cluster import ClusterError, ControlPlane


def make_node(tmp_path: Path, index: int, **kw: object) -> node.Node:
    cp = ControlPlane.__new__(ControlPlane)
    cp.pki = tmp_path / "pki"
    return node.Node(tmp_path / f"n{index}", cp, index, **kw)  # type: ignore[arg-type]


def test_node_k_has_its_own_name_address_bridge_and_cgroup_root() -> None:
    assert [node.node_name(k) for k in (1, 2, 3)] == ["dgl-node", "dgl-node-2", "dgl-node-3"]
    assert [node.node_ip(k) for k in (1, 2)] == ["10.88.1.1", "10.88.2.1"]
    assert [node.node_bridge(k) for k in (1, 2)] == ["dglk1", "dglk2"]
    assert node.node_cgroup_root(1) is None  # the single node's kubepods stay where they were
    assert node.node_cgroup_root(3) == "/dgl-node-3"


def test_the_kubelet_of_node_1_keeps_the_single_node_defaults(tmp_path: Path) -> None:
    cfg = json.loads(make_node(tmp_path, 1)._kubelet_config().read_text())
    assert cfg["address"] == "10.88.1.1"
    assert cfg["tlsCertFile"].endswith("kubelet-dgl-node.crt")
    for key in ("cgroupRoot", "kubeReserved", "nodeLeaseDurationSeconds"):
        assert key not in cfg


def test_a_node_of_several_is_small_nests_its_cgroups_and_heartbeats_fast(tmp_path: Path) -> None:
    reserved = {"cpu": "1000m", "memory": "1000"}
    n = make_node(tmp_path, 2, reserved=reserved, fast_heartbeat=True)
    cfg = json.loads(n._kubelet_config().read_text())
    assert cfg["address"] == "10.88.2.1" and cfg["cgroupRoot"] == "/dgl-node-2"
    assert cfg["kubeReserved"] == reserved
    assert cfg["nodeLeaseDurationSeconds"] == 10 and cfg["nodeStatusUpdateFrequency"] == "4s"
    n._containerd_config(node.Runtime(runc="/opt/x/runc", cni_bin="/opt/x/cni"))
    net = json.loads((n.dir / "cni" / "net.d" / "10-dgl.conflist").read_text())["plugins"][0]
    assert net["bridge"] == "dglk2"
    (rng,) = net["ipam"]["ranges"][0]
    assert (rng["subnet"], rng["rangeStart"], rng["gateway"]) == (
        "10.88.2.0/24",
        "10.88.2.2",
        "10.88.2.1",
    )
    toml = (n.dir / "containerd" / "config.toml").read_text()
    assert f'root = "{n.dir}/containerd/root"' in toml and str(n.runc_root) in toml
    # the runtime's binaries are the resolved ones (hack/prereqs.py), not assumed system paths
    assert 'BinaryName = "/opt/x/runc"' in toml and 'bin_dir = "/opt/x/cni"' in toml


def test_quantities_and_the_reservation_that_leaves_the_asked_allocatable() -> None:
    assert node.parse_quantity("6Gi") == 6 << 30 and node.parse_quantity("512Mi") == 512 << 20
    assert node.parse_quantity("2G") == 2_000_000_000
    # as Kubernetes reads them (the operator's parser): k is 1000, Ki 1024, K is no suffix
    assert node.parse_quantity("6k") == 6000 and node.parse_quantity("6Ki") == 6144
    with pytest.raises(ClusterError, match=r"not a quantity.*K is not a suffix: k is 1000, Ki"):
        node.parse_quantity("6K")
    assert node.parse_cpu("1") == 1000 and node.parse_cpu("500m") == 500
    r = node.reservation("1", "1Gi")
    assert r["cpu"] == f"{(os.cpu_count() or 1) * 1000 - 1000}m"
    assert int(r["memory"]) > 0
    with pytest.raises(ClusterError, match="--node-cpu"):
        node.reservation("999", "1Gi")
    with pytest.raises(ClusterError, match="--node-memory"):
        node.reservation("1", "100Ti")
    with pytest.raises(ClusterError, match="not a quantity"):
        node.parse_quantity("lots")


def test_the_coscheduling_profile(tmp_path: Path) -> None:
    cfg = json.loads(node.coscheduling_config(tmp_path / "c.json", tmp_path / "kc").read_text())
    assert cfg["leaderElection"] == {"leaderElect": False}
    (profile,) = cfg["profiles"]
    assert profile["schedulerName"] == "scheduler-plugins-scheduler"
    assert profile["plugins"]["queueSort"] == {
        "enabled": [{"name": "Coscheduling"}],
        "disabled": [{"name": "*"}],
    }
    assert profile["plugins"]["multiPoint"] == {"enabled": [{"name": "Coscheduling"}]}


def test_a_node_root_is_a_hard_linked_clone_with_its_own_databases(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = tmp_path / "base"
    blob = base / "io.containerd.content.v1.content" / "blobs" / "sha256" / "ab"
    layer = base / "io.containerd.snapshotter.v1.overlayfs" / "snapshots" / "1" / "fs" / "f"
    for f in (blob, layer, *(base / rel for rel in node._COPIED)):
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(f.name)
    monkeypatch.setattr(node, "CONTAINERD_ROOT", base)
    root = tmp_path / "n1" / "root"
    root.parent.mkdir()
    node.clone_root(root)
    for f in (blob, layer):
        assert (root / f.relative_to(base)).stat().st_ino == f.stat().st_ino
    for rel in node._COPIED:
        assert (root / rel).read_text() == (base / rel).read_text()
        assert (root / rel).stat().st_ino != (base / rel).stat().st_ino


def test_the_state_file_names_the_nodes_and_a_stopped_node_keeps_the_cluster_running(
    tmp_path: Path,
) -> None:
    me = os.getpid()
    state = {
        "pids": [me],
        "nodes": {
            "dgl-node-2": {"index": 2, "dir": str(tmp_path / "n2"), "pids": {}},
            "dgl-node": {"index": 1, "dir": str(tmp_path / "n1"), "pids": {}},
        },
        "schedulers": ["default-scheduler", "scheduler-plugins-scheduler"],
    }
    (tmp_path / "pids.json").write_text(json.dumps(state))
    assert node.running(tmp_path)
    assert node.node_names(tmp_path) == ["dgl-node", "dgl-node-2"]
    assert "scheduler-plugins-scheduler" in node.schedulers(tmp_path)
    node.stop_node(tmp_path, "dgl-node-2")  # (no processes to kill in this state)
    assert json.loads((tmp_path / "pids.json").read_text())["nodes"]["dgl-node-2"]["stopped"]
    assert node.running(tmp_path)
    with pytest.raises(ClusterError, match="no node 'dgl-node-9'"):
        node.stop_node(tmp_path, "dgl-node-9")


class StandInKubelet:
    """A node whose kubelet, as the real one does at its start, empties the device-plugin
    folder, then (once ``ready()``: its other start-up work) listens there; like the real one
    it exits if that listen fails (EADDRINUSE: another kubelet listens there since its
    cleanup)."""

    def __init__(self, name: str, sock: Path, ready: Callable[[], object]) -> None:
        self.name, self.sock, self.ready = name, sock, ready
        self.components: dict[str, object] = {}
        self.cleaned, self.listening = threading.Event(), threading.Event()
        self.failed: OSError | None = None
        self.log: list[str] = []

    def start_kubelet(self) -> None:
        self.log.append(f"{self.name} starts")
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self) -> None:
        for old in self.sock.parent.iterdir():
            old.unlink(missing_ok=True)  # (another one's cleanup may have come first)
        self.cleaned.set()
        self.ready()
        listener = socket.socket(socket.AF_UNIX)
        try:
            listener.bind(str(self.sock))
        except OSError as e:
            self.failed = e
            return
        self.listener = listener
        self.log.append(f"{self.name} listens")
        self.listening.set()


def test_kubelets_start_one_after_another_once_each_listens(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The 3-node cluster's start that failed in make bench (nodes_bench): node 1's kubelet
    "Failed to start ContainerManager ... bind: address already in use", node 2's socket made
    between node 1's cleanup and its listen. Stand-ins started together and interleaved so
    fail the same way; started by start_kubelets, each listens before the next starts."""
    folder = tmp_path / "device-plugins"
    folder.mkdir()
    sock = folder / "kubelet.sock"
    sock.write_text("")  # (a socket the last cluster left)
    monkeypatch.setattr(node, "DEVICE_PLUGIN_SOCKET", sock)

    n1: StandInKubelet
    n2: StandInKubelet
    n1 = StandInKubelet("n1", sock, lambda: n2.listening.wait(5))  # (n1 slower to start)
    n2 = StandInKubelet("n2", sock, lambda: n1.cleaned.wait(5))
    n1.start_kubelet()
    n2.start_kubelet()  # (as node.py did: all at once)
    assert n2.listening.wait(5)
    deadline = time.monotonic() + 5
    while n1.failed is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert isinstance(n1.failed, OSError) and not n1.listening.is_set()

    for old in folder.iterdir():
        old.unlink()
    log: list[str] = []
    members = [StandInKubelet(f"n{k}", sock, lambda: time.sleep(0.2)) for k in (1, 2, 3)]
    for m in members:
        m.log = log
    node.start_kubelets(members)  # type: ignore[arg-type]
    assert [m.failed for m in members] == [None, None, None]
    assert log == [f"n{k} {what}" for k in (1, 2, 3) for what in ("starts", "listens")]
