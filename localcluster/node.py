"""A real single-node Kubernetes on this machine: the control plane of localcluster/cluster.py plus
kube-scheduler, kubelet, containerd + runc (Debian) and the CNI bridge plugin.

Networking stays inside the machine. A bridge ``dglk0`` holds 10.88.0.1/16; pods get
addresses from 10.88.1.1 on, with a route to 10.88.0.0/16 only (no default route, no NAT,
nothing routed out). The API server listens on 10.88.0.1:443 and the Service CIDR is
10.88.0.0/24, so the ``kubernetes`` Service's ClusterIP *is* the API server's address: pods'
in-cluster configuration (KUBERNETES_SERVICE_HOST/PORT) works without kube-proxy.

Images come from hack/build_images.py (OCI tarballs, no Docker) and are imported with
``ctr -n k8s.io images import``; the ``pause`` image is the sandbox image.

    python -m localcluster.node up   [--dir DIR]   # prints the kubeconfig
    python -m localcluster.node down [--dir DIR]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from localcluster import volumes
from localcluster.cluster import (
    CACHE,
    REPO,
    ClusterError,
    Component,
    ControlPlane,
    etcd_binary,
    k8s_binaries,
    kubeconfig,
)

NODE = "dgl-node"
BRIDGE = "dglk0"
NODE_IP = "10.88.0.1"
POD_CIDR = "10.88.0.0/16"
SERVICE_CIDR = "10.88.0.0/24"
DEFAULT_DIR = CACHE / "node"
NODE_CONTROLLERS = (
    "garbagecollector,namespace,serviceaccount,serviceaccount-token,deployment,replicaset,podgc,nodelifecycle,"
    "root-ca-cert-publisher,"
    # spec.storage: claims bind to the node's volumes (localcluster/volumes.py)
    "persistentvolume-binder-controller,persistentvolume-protection-controller,"
    "persistentvolumeclaim-protection-controller"
)
# containerd's content store and snapshots outlive a cluster: a 5 GB image is imported and
# unpacked once, not on every `make demo`.
CONTAINERD_ROOT = CACHE / "containerd-root"
IMAGE_TAG = "0.2.0"
# the proposal's example DGLJob names its image dgloperator/graphsage:v0.1.0
# The API server's audit log: every exec/attach/port-forward/proxy request into a pod, with
# its URI (the command of an exec), so tests can show what did or did not go through it.
AUDIT_LOG = "audit.log"  # under <dir>/control-plane
AUDIT_POLICY = """apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
  - level: Metadata
    resources:
      - group: ""
        resources: ["pods/exec", "pods/attach", "pods/portforward", "pods/proxy", "services/proxy"]
  - level: None
"""
IMAGE_ALIASES = {"graphsage": ["docker.io/dgloperator/graphsage:v0.1.0"]}


def _run(*argv: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    out = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout)
    if check and out.returncode != 0:
        raise ClusterError(f"`{' '.join(argv)}` failed: {(out.stderr or out.stdout).strip()}")
    return out


def tool(name: str) -> str:
    """Path of a Debian tool, installed by hack/tools.sh when missing."""
    out = _run(str(REPO / "hack" / "tools.sh"), name, timeout=600)
    return out.stdout.strip().splitlines()[-1].split("=", 1)[1]


def build_images() -> dict[str, Path]:
    out = _run(sys.executable, str(REPO / "hack" / "build_images.py"), timeout=3600)
    paths = [Path(p) for p in out.stdout.split() if p.endswith(".tar")]
    images = {}
    for p in paths:
        images[p.name.rsplit("-", 1)[0]] = p
    return images


@dataclass
class Node:
    dir: Path
    cp: ControlPlane
    components: dict[str, Component] = field(default_factory=dict)
    # What was there before this node: only what it added is removed (None: not started).
    netns_before: set[str] | None = None
    ip_forward_before: str | None = None

    @property
    def sock(self) -> Path:
        return self.dir / "containerd" / "containerd.sock"

    # -- configuration --------------------------------------------------------------------

    def _containerd_config(self) -> Path:
        d = self.dir / "containerd"
        d.mkdir(parents=True, exist_ok=True)
        cni = self.dir / "cni"
        (cni / "net.d").mkdir(parents=True, exist_ok=True)
        (cni / "net.d" / "10-dgl.conflist").write_text(
            json.dumps(
                {
                    "cniVersion": "1.0.0",
                    "name": "dgl-test",
                    "plugins": [
                        {
                            "type": "bridge",
                            "bridge": BRIDGE,
                            "isGateway": True,
                            "isDefaultGateway": False,
                            "ipMasq": False,
                            "hairpinMode": True,
                            "ipam": {
                                "type": "host-local",
                                "dataDir": str(cni / "ipam"),
                                "ranges": [
                                    [
                                        {
                                            "subnet": POD_CIDR,
                                            "rangeStart": "10.88.1.1",
                                            "rangeEnd": "10.88.255.254",
                                            "gateway": NODE_IP,
                                        }
                                    ]
                                ],
                                "routes": [{"dst": POD_CIDR}],
                            },
                        },
                        {"type": "loopback"},
                    ],
                },
                indent=1,
            )
        )
        cfg = d / "config.toml"
        CONTAINERD_ROOT.mkdir(parents=True, exist_ok=True)
        cfg.write_text(f"""version = 2
root = "{CONTAINERD_ROOT}"
state = "{d}/state"
[grpc]
  address = "{self.sock}"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "docker.io/dgloperator/pause:{IMAGE_TAG}"
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        Root = "{d}/runc"
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "{cni}/net.d"
""")
        return cfg

    def _kubelet_config(self) -> Path:
        pki = self.cp.pki
        d = self.dir / "kubelet"
        d.mkdir(parents=True, exist_ok=True)
        cfg = d / "config.json"
        cfg.write_text(
            json.dumps(
                {
                    "apiVersion": "kubelet.config.k8s.io/v1beta1",
                    "kind": "KubeletConfiguration",
                    "address": NODE_IP,
                    "port": 10250,
                    "readOnlyPort": 0,
                    "healthzPort": 0,
                    "authentication": {
                        "anonymous": {"enabled": False},
                        "webhook": {"enabled": False},
                        "x509": {"clientCAFile": str(pki / "ca.crt")},
                    },
                    "authorization": {"mode": "AlwaysAllow"},
                    "tlsCertFile": str(pki / "kubelet.crt"),
                    "tlsPrivateKeyFile": str(pki / "kubelet.key"),
                    "cgroupDriver": "cgroupfs",
                    "failCgroupV1": False,
                    "failSwapOn": False,
                    "containerRuntimeEndpoint": f"unix://{self.sock}",
                    "oomScoreAdj": 0,
                    "registerNode": True,
                    "serializeImagePulls": False,
                    "podLogsDir": str(self.dir / "pod-logs"),
                    "resolvConf": "/etc/resolv.conf",
                    "evictionHard": {
                        "memory.available": "200Mi",
                        "nodefs.available": "1%",
                        "imagefs.available": "1%",
                        "nodefs.inodesFree": "1%",
                    },
                    "imageGCHighThresholdPercent": 100,
                    "imageGCLowThresholdPercent": 99,
                    "syncFrequency": "5s",
                    "fileCheckFrequency": "5s",
                    "maxPods": 110,
                    "podPidsLimit": -1,
                },
                indent=1,
            )
        )
        return cfg

    # -- lifecycle ------------------------------------------------------------------------

    def start(self, images: dict[str, Path], timeout: float = 180) -> None:
        bins = k8s_binaries("kube-scheduler", "kubelet")
        containerd, ctr = tool("containerd"), tool("ctr")
        tool("runc")
        tool("cni")
        self.netns_before = _netns()
        self.ip_forward_before = _ip_forward()  # the CNI bridge plugin turns it on
        logs = self.dir / "logs"
        self.components["containerd"] = Component(
            "containerd",
            [containerd, "--config", str(self._containerd_config())],
            logs / "containerd.log",
        )
        self.components["containerd"].start()
        _wait(
            lambda: (
                self.sock.exists()
                and _run(ctr, "--address", str(self.sock), "version", check=False).returncode == 0
            ),
            60,
            "containerd",
        )
        self.import_images(ctr, images)
        sched_kc = kubeconfig(
            self.dir / "scheduler.kubeconfig", self.cp.server, self.cp.pki, "scheduler"
        )
        node_kc = kubeconfig(self.dir / "node.kubeconfig", self.cp.server, self.cp.pki, "node")
        self.components["kube-scheduler"] = Component(
            "kube-scheduler",
            [
                str(bins / "kube-scheduler"),
                "--kubeconfig",
                str(sched_kc),
                "--authentication-kubeconfig",
                str(sched_kc),
                "--authorization-kubeconfig",
                str(sched_kc),
                "--leader-elect=false",
                "--bind-address",
                "127.0.0.1",
                "--secure-port",
                "0",
                "--v",
                "1",
            ],
            logs / "kube-scheduler.log",
        )
        self.components["kubelet"] = Component(
            "kubelet",
            [
                str(bins / "kubelet"),
                "--config",
                str(self._kubelet_config()),
                "--kubeconfig",
                str(node_kc),
                "--hostname-override",
                NODE,
                "--node-ip",
                NODE_IP,
                "--root-dir",
                str(self.dir / "kubelet" / "root"),
                "--cert-dir",
                str(self.dir / "kubelet" / "pki"),
                "--v",
                "1",
            ],
            logs / "kubelet.log",
        )
        self.components["kube-scheduler"].start()
        self.components["kubelet"].start()
        _wait(self.node_ready, timeout, "the node to become Ready", self.components)

    def import_images(self, ctr: str, images: dict[str, Path]) -> None:
        """Import what is not there yet (by the tarball's manifest digest)."""
        base = [ctr, "--address", str(self.sock), "-n", "k8s.io"]
        present = _run(*base, "images", "ls").stdout
        for name, tarball in sorted(images.items()):
            digest = _manifest_digest(tarball)
            if digest and digest in present:
                continue
            started = time.monotonic()
            _run(*base, "images", "import", "--no-unpack", str(tarball), timeout=1800)
            print(
                f"node: imported {name} ({tarball.stat().st_size / 1e6:.0f} MB) in "
                f"{time.monotonic() - started:.0f}s",
                file=sys.stderr,
            )
            for alias in IMAGE_ALIASES.get(name, []):
                ref = f"docker.io/dgloperator/{name}:{IMAGE_TAG}"
                _run(*base, "images", "tag", "--force", ref, alias, check=False)

    def node_ready(self) -> bool:
        code, body = self.cp.get(f"/api/v1/nodes/{NODE}")
        if code != 200:
            return False
        conds = json.loads(body).get("status", {}).get("conditions") or []
        return any(c["type"] == "Ready" and c["status"] == "True" for c in conds)

    def stop(self) -> None:
        for name in ("kubelet", "kube-scheduler"):
            comp = self.components.get(name)
            if comp is not None:
                comp.stop()
        self._kill_containers()
        comp = self.components.get("containerd")
        if comp is not None:
            comp.stop()
        _kill_shims(self.sock)
        _unmount_under(self.dir)
        self.restore_host()

    def restore_host(self) -> None:
        """Delete the pods' network namespaces and put ip_forward back as it was."""
        if self.netns_before is not None:
            for ns in _netns() - self.netns_before:
                if ns.startswith("cni-"):
                    _run("ip", "netns", "del", ns, check=False)
        if self.ip_forward_before is not None:
            _ip_forward(self.ip_forward_before)

    def _kill_containers(self) -> None:
        runc = shutil.which("runc") or "/usr/sbin/runc"
        root = self.dir / "containerd" / "runc" / "k8s.io"
        if not root.exists():
            return
        listing = _run(runc, "--root", str(root), "list", "-q", check=False).stdout.split()
        for cid in listing:
            _run(runc, "--root", str(root), "kill", "--all", cid, "KILL", check=False)
        for cid in listing:
            _run(runc, "--root", str(root), "delete", "--force", cid, check=False)


def refresh_images(dir: Path = DEFAULT_DIR) -> dict[str, str]:
    """(Re)build the images and import what changed into a running node's containerd;
    returns each image's manifest digest (e.g. to roll a Deployment when its image changed)."""
    images = build_images()
    node = Node(dir / "node", ControlPlane.__new__(ControlPlane))
    node.import_images(tool("ctr"), images)
    return {name: _manifest_digest(path) for name, path in images.items()}


def _manifest_digest(tarball: Path) -> str:
    import tarfile

    with contextlib.suppress(Exception), tarfile.open(tarball) as t:
        f = t.extractfile("index.json")
        if f is not None:
            return str(json.load(f)["manifests"][0]["digest"])
    return ""


IP_FORWARD = Path("/proc/sys/net/ipv4/ip_forward")


def _ip_forward(value: str | None = None) -> str:
    """The host's ip_forward setting; with ``value``, set it first."""
    if value is not None:
        with contextlib.suppress(OSError):
            IP_FORWARD.write_text(value + "\n")
    return IP_FORWARD.read_text().strip()


def _netns() -> set[str]:
    out = _run("ip", "netns", "list", check=False).stdout
    return {line.split()[0] for line in out.splitlines() if line.strip()}


def _kill_shims(sock: Path) -> None:
    out = _run("pgrep", "-f", f"containerd-shim.*{sock}", check=False).stdout.split()
    for pid in out:
        with contextlib.suppress(ProcessLookupError, ValueError):
            os.kill(int(pid), signal.SIGKILL)


def _unmount_under(path: Path) -> None:
    prefix = str(path.resolve()) + "/"
    mounts = []
    with open("/proc/self/mounts") as f:
        for line in f:
            target = line.split()[1].replace("\\040", " ")
            if target.startswith(prefix):
                mounts.append(target)
    for target in sorted(mounts, key=len, reverse=True):
        subprocess.run(["umount", "-l", target], capture_output=True)


def _wait(
    probe: object, timeout: float, what: str, components: dict[str, Component] | None = None
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for comp in (components or {}).values():
            if comp.proc is not None and comp.proc.poll() is not None:
                raise ClusterError(
                    f"{comp.name} exited ({comp.proc.returncode}) while waiting "
                    f"for {what}:\n{comp.tail()}"
                )
        if probe():  # type: ignore[operator]
            return
        time.sleep(0.5)
    details = "\n".join(f"--- {c.name}\n{c.tail(15)}" for c in (components or {}).values())
    raise ClusterError(f"timed out after {timeout:.0f}s waiting for {what}\n{details}")


def bridge_up() -> None:
    if _run("ip", "link", "show", BRIDGE, check=False).returncode != 0:
        _run("ip", "link", "add", "name", BRIDGE, "type", "bridge")
    _run("ip", "addr", "replace", f"{NODE_IP}/16", "dev", BRIDGE)
    _run("ip", "link", "set", BRIDGE, "up")


def bridge_down() -> None:
    _run("ip", "link", "del", BRIDGE, check=False)


@dataclass
class LocalCluster:
    dir: Path
    cp: ControlPlane
    node: Node

    @property
    def kubeconfig(self) -> Path:
        return self.cp.kubeconfig

    def stop(self) -> None:
        self.node.stop()
        self.cp.stop()
        bridge_down()


def start(dir: Path, images: dict[str, Path] | None = None) -> LocalCluster:
    """Bring a whole node up (building or reusing binaries and images)."""
    if os.geteuid() != 0:
        raise ClusterError("a local Kubernetes node needs root (containers, networking, mounts)")
    images = images if images is not None else build_images()
    missing = {"pause", "dgl-operator", "watcher-loop", "kubectl-download", "graphsage"} - set(
        images
    )
    if missing:
        raise ClusterError(f"images missing from hack/build_images.py: {sorted(missing)}")
    dir.mkdir(parents=True, exist_ok=True)
    bridge_up()
    bins = k8s_binaries("kube-apiserver", "kube-controller-manager")
    certs = {
        "scheduler": ("/CN=system:kube-scheduler", "clientAuth", ""),
        "node": (f"/O=system:nodes/CN=system:node:{NODE}", "clientAuth", ""),
        "kubelet": (f"/CN={NODE}", "serverAuth", f"IP:{NODE_IP},DNS:{NODE}"),
        "apiserver-kubelet": (
            "/O=system:masters/CN=kube-apiserver-kubelet-client",
            "clientAuth",
            "",
        ),
    }
    cp = ControlPlane(
        dir / "control-plane",
        bins,
        etcd_binary(),
        host=NODE_IP,
        port=443,
        service_cidr=SERVICE_CIDR,
        controllers=NODE_CONTROLLERS,
        extra_certs=certs,
    )
    pki = cp.pki
    policy = dir / "control-plane" / "audit-policy.yaml"
    policy.parent.mkdir(parents=True, exist_ok=True)
    policy.write_text(AUDIT_POLICY)
    cp.extra_args = [
        "--audit-policy-file",
        str(policy),
        "--audit-log-path",
        str(dir / "control-plane" / AUDIT_LOG),
        "--audit-log-maxsize",
        "200",
        "--kubelet-client-certificate",
        str(pki / "apiserver-kubelet.crt"),
        "--kubelet-client-key",
        str(pki / "apiserver-kubelet.key"),
        "--kubelet-certificate-authority",
        str(pki / "ca.crt"),
        "--kubelet-preferred-address-types",
        "InternalIP",
    ]
    node = Node(dir / "node", cp)
    try:
        cp.start()
        node.start(images)
        kubectl = k8s_binaries("kubectl") / "kubectl"
        volumes.ensure(volumes.kubectl_for(kubectl, cp.kubeconfig), dir / "volumes")
    except BaseException:
        node.stop()
        cp.stop()
        bridge_down()
        raise
    return LocalCluster(dir, cp, node)


# -- CLI -----------------------------------------------------------------------------------


def _state(dir: Path) -> Path:
    return dir / "pids.json"


def running(dir: Path = DEFAULT_DIR) -> bool:
    """A cluster started from ``dir`` is up: its state file names processes that all live."""
    try:
        pids = json.loads(_state(dir).read_text()).get("pids") or []
    except (OSError, ValueError):
        return False
    for pid in pids:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            pass
    return bool(pids)


def down(dir: Path) -> None:
    state = _state(dir)
    if state.exists():
        info = json.loads(state.read_text())
        for pid in reversed(info.get("pids", [])):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGTERM)
        time.sleep(2)
        for pid in info.get("pids", []):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
        node = Node(dir / "node", ControlPlane.__new__(ControlPlane))
        if "netns_before" in info:
            node.netns_before = set(info["netns_before"])
        node.ip_forward_before = info.get("ip_forward_before")
        node._kill_containers()
        _kill_shims(node.sock)
        _unmount_under(dir)
        node.restore_host()
    bridge_down()
    shutil.rmtree(dir, ignore_errors=True)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m localcluster.node")
    p.add_argument("action", choices=["up", "down"])
    p.add_argument("--dir", type=Path, default=DEFAULT_DIR)
    a = p.parse_args(argv)
    if a.action == "down":
        down(a.dir)
        print(f"node cluster in {a.dir} stopped")
        return 0
    if running(a.dir):
        print(
            f"a cluster already runs from {a.dir}; run `make cluster-down` first", file=sys.stderr
        )
        return 1
    if _state(a.dir).exists():  # left by a cluster that died (a reboot, kill -9): clean up
        print(f"cleaning up a stopped cluster in {a.dir}", file=sys.stderr)
        down(a.dir)
    try:
        cluster = start(a.dir)
    except ClusterError as e:
        print(f"cluster-up failed: {e}", file=sys.stderr)
        return 1
    comps = [*cluster.cp.components.values(), *cluster.node.components.values()]
    _state(a.dir).write_text(
        json.dumps(
            {
                "pids": [c.proc.pid for c in comps if c.proc],
                "netns_before": sorted(cluster.node.netns_before or ()),
                "ip_forward_before": cluster.node.ip_forward_before,
                "kubeconfig": str(cluster.kubeconfig),
            }
        )
    )
    print(f"export KUBECONFIG={cluster.kubeconfig}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
