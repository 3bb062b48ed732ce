"""A real Kubernetes of one or more nodes on this machine: the control plane of
localcluster/cluster.py plus kube-scheduler (and, on request, the Coscheduling scheduler of
sigs.k8s.io/scheduler-plugins), and per node a kubelet and a containerd + runc (Debian) with
the CNI bridge plugin.

Networking stays inside the machine. The API server listens on 10.88.0.1:443 on a bridge
``dglk0`` (10.88.0.1/24, no pods) and the Service CIDR is 10.88.0.0/24, so the ``kubernetes``
Service's ClusterIP *is* the API server's address: pods' in-cluster configuration
(KUBERNETES_SERVICE_HOST/PORT) works without kube-proxy. Node k (1-based) has a bridge
``dglk<k>`` holding 10.88.k.1/24, which is both its pods' gateway and its node IP; its pods
get 10.88.k.2-254 with a route to 10.88.0.0/16 only (no default route, no NAT, nothing routed
out). The host routes between the bridges (ip_forward on while the cluster runs).

Images come from hack/build_images.py (OCI tarballs, no Docker). They are imported and
unpacked once into a *base* containerd root (~/.cache/dgl-operator/containerd-root) by a
short-lived containerd; every node's containerd gets a root cloned from it with hard links (the
content blobs and snapshot files are shared, only the bolt databases are copied), so N nodes
cost no N copies of the 1.4 GB graphsage image. The ``pause`` image is the sandbox image.

    python -m localcluster.node up [--nodes N] [--scheduler-plugins] [--dir DIR]
    python -m localcluster.node stop-node NAME [--dir DIR]   # a node "powered off"
    python -m localcluster.node down [--dir DIR]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from localcluster import disk, kueue, netpol, volumes
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
from localcluster.kubectl import Kubectl
from podcontract import quantity

NODE = "dgl-node"  # node 1's name; node k > 1 is dgl-node-<k>
API_BRIDGE = "dglk0"
API_IP = "10.88.0.1"
BRIDGE = API_BRIDGE  # (the API server's bridge; node k's is dglk<k>)
POD_CIDR = "10.88.0.0/16"
SERVICE_CIDR = "10.88.0.0/24"
MAX_NODES = 50
DEFAULT_DIR = CACHE / "node"
NODE_CONTROLLERS = (
    "garbagecollector,namespace,serviceaccount,serviceaccount-token,deployment,replicaset,podgc,nodelifecycle,"
    "root-ca-cert-publisher,"
    # the workers' headless Service lists them by hostname (what cluster DNS serves)
    "endpointslice-controller,"
    # spec.storage: claims bind to the node's volumes (localcluster/volumes.py)
    "persistentvolume-binder-controller,persistentvolume-protection-controller,"
    "persistentvolumeclaim-protection-controller,"
    # a namespace's ResourceQuota (a platform team's; e2e's restricted namespace has one)
    "resourcequota,"
    # the chart's DGLJob roles aggregated into admin, edit and view (docs/operations.md)
    "clusterrole-aggregation"
)
# The base containerd root outlives a cluster: a 1.4 GB image is imported and unpacked once, not
# on every `make demo`. Only a short-lived containerd of :func:`ensure_base_images` uses it;
# nodes run on hard-linked clones (:func:`clone_root`).
CONTAINERD_ROOT = CACHE / "containerd-root"
BASE_MARKER = "dgl-images.json"  # in CONTAINERD_ROOT: name -> manifest digest, imported+unpacked
IMAGE_TAG = "0.2.0"
# Several nodes: each gets this much allocatable (the rest of the host is reserved), so
# scheduling decisions show; one node keeps the whole machine.
NODE_CPU = "1"
NODE_MEMORY = "6Gi"
EVICTION_MEMORY = "200Mi"
# The second scheduler (--scheduler-plugins): Coscheduling, for PodGroups.
COSCHEDULER = "scheduler-plugins-scheduler"
COSCHEDULING_WAIT_SECONDS = 10
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
# The seed's (the original operator's) example DGLJobs name dgloperator/graphsage:v0.1.0; this
# repository's examples name the tag the build gives (IMAGE_TAG). Both run here.
IMAGE_ALIASES = {"graphsage": ["docker.io/dgloperator/graphsage:v0.1.0"]}
CGROUP_FS = Path("/sys/fs/cgroup")


def node_name(k: int) -> str:
    return NODE if k == 1 else f"{NODE}-{k}"


def node_ip(k: int) -> str:
    return f"10.88.{k}.1"


def node_bridge(k: int) -> str:
    return f"dglk{k}"


def node_cgroup_root(k: int) -> str | None:
    """Node 1 keeps the kubelet's default (kubepods at the hierarchy's root, as a single node
    always had); node k > 1 nests its own kubepods under /dgl-node-<k>."""
    return None if k == 1 else f"/{node_name(k)}"


def parse_quantity(text: str) -> int:
    """``6Gi``, ``512Mi``, ``2G``, ``6k``, ``1000`` -> bytes (or plain units), as Kubernetes
    reads them (podcontract/quantity.py: ``k`` is 1000, ``Ki`` 1024, ``K`` is refused)."""
    try:
        return int(quantity.parse_quantity(text))
    except ValueError as e:
        raise ClusterError(f"not a quantity: {e} (e.g. 6Gi, 512Mi)") from None


def parse_cpu(text: str) -> int:
    """``1``, ``1.5``, ``500m`` -> millicores."""
    try:
        return int(quantity.parse_quantity(text) * 1000)
    except ValueError as e:
        raise ClusterError(f"not a CPU quantity: {e} (e.g. 1, 500m)") from None


def reservation(cpu: str, memory: str) -> dict[str, str]:
    """kubeReserved that leaves a node ``cpu`` and ``memory`` allocatable on this host."""
    host_cpu = (os.cpu_count() or 1) * 1000
    with open("/proc/meminfo") as f:
        total = next(int(line.split()[1]) * 1024 for line in f if line.startswith("MemTotal:"))
    want_cpu, want_mem = parse_cpu(cpu), parse_quantity(memory)
    eviction = parse_quantity(EVICTION_MEMORY)
    if not 0 < want_cpu <= host_cpu:
        raise ClusterError(f"--node-cpu {cpu}: must be > 0 and at most the host's {host_cpu}m")
    if not 0 < want_mem <= total - eviction:
        raise ClusterError(
            f"--node-memory {memory}: must be > 0 and at most the host's "
            f"{(total - eviction) >> 20}Mi (MemTotal less the {EVICTION_MEMORY} eviction threshold)"
        )
    return {"cpu": f"{host_cpu - want_cpu}m", "memory": str(total - eviction - want_mem)}


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


@dataclass(frozen=True)
class Runtime:
    """What a node's containerd runs pods with: runc's binary and the CNI plugins' folder, both
    resolved through hack/tools.sh (declared in hack/prereqs.py), never assumed."""

    runc: str
    cni_bin: str

    @classmethod
    def resolve(cls) -> Runtime:
        return cls(runc=tool("runc"), cni_bin=tool("cni"))


def _containerd_toml(
    root: Path, state: Path, sock: Path, runc_root: Path, cni: Path | None, runtime: Runtime | None
) -> str:
    """containerd's configuration; without ``cni`` (and ``runtime``) the CRI plugin is off (the
    base containerd only imports images)."""
    text = f"""version = 2
root = "{root}"
state = "{state}"
"""
    if cni is None or runtime is None:
        return (
            text
            + f"""disabled_plugins = ["io.containerd.grpc.v1.cri"]
[grpc]
  address = "{sock}"
"""
        )
    return (
        text
        + f"""[grpc]
  address = "{sock}"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "docker.io/dgloperator/pause:{IMAGE_TAG}"
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        BinaryName = "{runtime.runc}"
        Root = "{runc_root}"
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "{runtime.cni_bin}"
    conf_dir = "{cni}/net.d"
"""
    )


def _wait_containerd(ctr: str, sock: Path, comps: dict[str, Component]) -> None:
    _wait(
        lambda: (
            sock.exists()
            and _run(ctr, "--address", str(sock), "version", check=False).returncode == 0
        ),
        60,
        "containerd",
        comps,
    )


def import_images(ctr: str, sock: Path, images: dict[str, Path]) -> None:
    """Import (and unpack) what is not there yet, or not unpacked, by the tarball's manifest
    digest; tag the aliases."""
    base = [ctr, "--address", str(sock), "-n", "k8s.io"]
    present = _run(*base, "images", "ls").stdout
    unpacked = set(_run(*base, "images", "check", "-q", check=False).stdout.split())
    for name, tarball in sorted(images.items()):
        ref = f"docker.io/dgloperator/{name}:{IMAGE_TAG}"
        digest = _manifest_digest(tarball)
        if not (digest and digest in present and ref in unpacked):
            started = time.monotonic()
            _run(*base, "images", "import", str(tarball), timeout=1800)
            print(
                f"node: imported and unpacked {name} ({tarball.stat().st_size / 1e6:.0f} MB) "
                f"in {time.monotonic() - started:.0f}s",
                file=sys.stderr,
            )
        for alias in IMAGE_ALIASES.get(name, []):
            _run(*base, "images", "tag", "--force", ref, alias, check=False)


def ensure_base_images(work: Path, images: dict[str, Path]) -> None:
    """Have every image imported and unpacked in the base root: a short-lived containerd of its
    own (socket and state under ``work``) imports what is missing, drops the containers an
    older cluster left in the root's metadata, and stops. Skipped when the root's marker already
    names these very images."""
    marker = CONTAINERD_ROOT / BASE_MARKER
    wanted = {name: _manifest_digest(path) for name, path in images.items()}
    with contextlib.suppress(OSError, ValueError):
        if json.loads(marker.read_text()) == wanted and all(wanted.values()):
            return
    containerd, ctr = tool("containerd"), tool("ctr")
    CONTAINERD_ROOT.mkdir(parents=True, exist_ok=True)
    work.mkdir(parents=True, exist_ok=True)
    sock = work / "containerd.sock"
    cfg = work / "config.toml"
    cfg.write_text(
        _containerd_toml(CONTAINERD_ROOT, work / "state", sock, work / "runc", None, None)
    )
    comp = Component("base-containerd", [containerd, "--config", str(cfg)], work / "containerd.log")
    comp.start()
    try:
        _wait_containerd(ctr, sock, {"containerd": comp})
        base = [ctr, "--address", str(sock), "-n", "k8s.io"]
        stale = _run(*base, "containers", "ls", "-q", check=False).stdout.split()
        if stale:
            _run(*base, "containers", "rm", *stale, check=False, timeout=600)
        import_images(ctr, sock, images)
        marker.write_text(json.dumps(wanted))
    finally:
        comp.stop()
        _unmount_under(work)


# What a node's root takes from the base: hard links for content and snapshot files, real
# copies of the bolt databases (a containerd writes them in place).
_LINKED = (
    "io.containerd.content.v1.content/blobs",
    "io.containerd.snapshotter.v1.overlayfs/snapshots",
)
_COPIED = (
    "io.containerd.metadata.v1.bolt/meta.db",
    "io.containerd.snapshotter.v1.overlayfs/metadata.db",
)


def clone_root(root: Path) -> None:
    """A node's containerd root cloned from the base with hard links (no copy of the images)."""
    if root.exists():
        return
    tmp = root.with_name(root.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    for rel in _LINKED:
        src = CONTAINERD_ROOT / rel
        if src.exists():
            (tmp / rel).parent.mkdir(parents=True, exist_ok=True)
            _run("cp", "-a", "--link", str(src), str(tmp / rel), timeout=600)
    for rel in _COPIED:
        src = CONTAINERD_ROOT / rel
        if src.exists():
            (tmp / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, tmp / rel)
    tmp.rename(root)


@dataclass
class Node:
    dir: Path
    cp: ControlPlane
    index: int = 1
    # kubeReserved (several nodes: a small allocatable each); None: the whole machine
    reserved: dict[str, str] | None = None
    # faster node-failure detection (lease 10s, status every 4s)
    fast_heartbeat: bool = False
    components: dict[str, Component] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return node_name(self.index)

    @property
    def ip(self) -> str:
        return node_ip(self.index)

    @property
    def bridge(self) -> str:
        return node_bridge(self.index)

    @property
    def cgroup_root(self) -> str | None:
        return node_cgroup_root(self.index)

    @property
    def sock(self) -> Path:
        return self.dir / "containerd" / "containerd.sock"

    @property
    def runc_root(self) -> Path:
        return self.dir / "containerd" / "runc"

    # -- configuration --------------------------------------------------------------------

    def _containerd_config(self, runtime: Runtime) -> Path:
        d = self.dir / "containerd"
        d.mkdir(parents=True, exist_ok=True)
        cni = self.dir / "cni"
        (cni / "net.d").mkdir(parents=True, exist_ok=True)
        gateway = self.ip
        (cni / "net.d" / "10-dgl.conflist").write_text(
            json.dumps(
                {
                    "cniVersion": "1.0.0",
                    "name": "dgl-test",
                    "plugins": [
                        {
                            "type": "bridge",
                            "bridge": self.bridge,
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
                                            "subnet": f"10.88.{self.index}.0/24",
                                            "rangeStart": f"10.88.{self.index}.2",
                                            "rangeEnd": f"10.88.{self.index}.254",
                                            "gateway": gateway,
                                        }
                                    ]
                                ],
                                "routes": [{"dst": POD_CIDR, "gw": gateway}],
                            },
                        },
                        {"type": "loopback"},
                    ],
                },
                indent=1,
            )
        )
        cfg = d / "config.toml"
        cfg.write_text(
            _containerd_toml(d / "root", d / "state", self.sock, self.runc_root, cni, runtime)
        )
        return cfg

    def _kubelet_config(self) -> Path:
        pki = self.cp.pki
        d = self.dir / "kubelet"
        d.mkdir(parents=True, exist_ok=True)
        cfg = d / "config.json"
        config: dict[str, Any] = {
            "apiVersion": "kubelet.config.k8s.io/v1beta1",
            "kind": "KubeletConfiguration",
            "address": self.ip,
            "port": 10250,
            "readOnlyPort": 0,
            "healthzPort": 0,
            "authentication": {
                "anonymous": {"enabled": False},
                "webhook": {"enabled": False},
                "x509": {"clientCAFile": str(pki / "ca.crt")},
            },
            "authorization": {"mode": "AlwaysAllow"},
            "tlsCertFile": str(pki / f"kubelet-{self.name}.crt"),
            "tlsPrivateKeyFile": str(pki / f"kubelet-{self.name}.key"),
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
                "memory.available": EVICTION_MEMORY,
                "nodefs.available": f"{disk.EVICTION_SHARE:.0%}",
                "imagefs.available": f"{disk.EVICTION_SHARE:.0%}",
                "nodefs.inodesFree": f"{disk.EVICTION_SHARE:.0%}",
            },
            "imageGCHighThresholdPercent": 100,
            "imageGCLowThresholdPercent": 99,
            "syncFrequency": "5s",
            "fileCheckFrequency": "5s",
            "maxPods": 110,
            "podPidsLimit": -1,
        }
        if self.cgroup_root:
            config["cgroupRoot"] = self.cgroup_root
        if self.reserved:
            config["kubeReserved"] = self.reserved
        if self.fast_heartbeat:
            config["nodeLeaseDurationSeconds"] = 10
            config["nodeStatusUpdateFrequency"] = "4s"
        cfg.write_text(json.dumps(config, indent=1))
        return cfg

    # -- lifecycle ------------------------------------------------------------------------

    def start_containerd(self) -> None:
        """Clone the root from the base and start containerd (returns once it answers)."""
        containerd, ctr = tool("containerd"), tool("ctr")
        cfg = self._containerd_config(Runtime.resolve())
        clone_root(self.dir / "containerd" / "root")
        self.components["containerd"] = Component(
            "containerd", [containerd, "--config", str(cfg)], self.dir / "logs" / "containerd.log"
        )
        self.components["containerd"].start()
        _wait_containerd(ctr, self.sock, self.components)

    def start_kubelet(self) -> None:
        bins = k8s_binaries("kubelet")
        if self.cgroup_root:
            cgroup_create(self.cgroup_root)
        node_kc = kubeconfig(
            self.dir / "node.kubeconfig", self.cp.server, self.cp.pki, f"node-{self.name}"
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
                self.name,
                "--node-ip",
                self.ip,
                "--root-dir",
                str(self.dir / "kubelet" / "root"),
                "--cert-dir",
                str(self.dir / "kubelet" / "pki"),
                "--v",
                "1",
            ],
            self.dir / "logs" / "kubelet.log",
        )
        self.components["kubelet"].start()

    def ready(self) -> bool:
        code, body = self.cp.get(f"/api/v1/nodes/{self.name}")
        if code != 200:
            return False
        conds = json.loads(body).get("status", {}).get("conditions") or []
        return any(c["type"] == "Ready" and c["status"] == "True" for c in conds)

    node_ready = ready

    def pids(self) -> dict[str, int]:
        return {n: c.proc.pid for n, c in self.components.items() if c.proc is not None}

    def stop(self) -> None:
        comp = self.components.get("kubelet")
        if comp is not None:
            comp.stop()
        kill_containers(self.runc_root)
        comp = self.components.get("containerd")
        if comp is not None:
            comp.stop()
        _kill_shims(self.sock)


def kill_containers(runc_root: Path) -> None:
    """SIGKILL every container of one containerd (its runc root) and delete them."""
    runc = tool("runc")
    root = runc_root / "k8s.io"
    if not root.exists():
        return
    listing = _run(runc, "--root", str(root), "list", "-q", check=False).stdout.split()
    for cid in listing:
        _run(runc, "--root", str(root), "kill", "--all", cid, "KILL", check=False)
    for cid in listing:
        _run(runc, "--root", str(root), "delete", "--force", cid, check=False)


def refresh_images(dir: Path = DEFAULT_DIR) -> dict[str, str]:
    """(Re)build the images, have them in the base root, and import what changed into every
    running node's containerd; returns each image's manifest digest (e.g. to roll a Deployment
    when its image changed)."""
    images = build_images()
    ensure_base_images(dir / "base-containerd", images)
    ctr = tool("ctr")
    for info in _read_state(dir).get("nodes", {}).values():
        sock = Path(info["dir"]) / "containerd" / "containerd.sock"
        if not info.get("stopped") and sock.exists():
            import_images(ctr, sock, images)
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


# Every kubelet on this host serves its device-plugin registration at this one path (the kubelet
# hard-codes it: --root-dir does not move it). Starting, a kubelet empties the folder and then
# listens there; two kubelets starting together can interleave those steps, and the later
# listen fails (EADDRINUSE: "Failed to start ContainerManager") and that kubelet exits. One
# after another, each once the one before listens, they cannot. (A kubelet that starts while
# others run, a node powered on again, removes their sockets: nothing registers there.)
DEVICE_PLUGIN_SOCKET = Path("/var/lib/kubelet/device-plugins/kubelet.sock")
KUBELET_LISTEN_SECONDS = 60.0


def _socket_identity(path: Path) -> tuple[int, int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_dev, st.st_ino, st.st_ctime_ns


def start_kubelets(members: Sequence[Node]) -> None:
    """Each node's kubelet, started once the one before it listens at
    :data:`DEVICE_PLUGIN_SOCKET` (made again: another socket than the one there before)."""
    for n in members:
        before = _socket_identity(DEVICE_PLUGIN_SOCKET)
        n.start_kubelet()
        _wait(
            lambda before=before: _socket_identity(DEVICE_PLUGIN_SOCKET) not in (None, before),
            KUBELET_LISTEN_SECONDS,
            f"{n.name}'s kubelet to listen at {DEVICE_PLUGIN_SOCKET}",
            n.components,
        )


def _wait(
    probe: Callable[..., object],  # called without arguments (a lambda may bind defaults)
    timeout: float,
    what: str,
    components: dict[str, Component] | None = None,
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for comp in (components or {}).values():
            if comp.proc is not None and comp.proc.poll() is not None:
                raise ClusterError(
                    f"{comp.name} exited ({comp.proc.returncode}) while waiting "
                    f"for {what}:\n{comp.tail()}"
                )
        if probe():
            return
        time.sleep(0.5)
    details = "\n".join(f"--- {c.name}\n{c.tail(15)}" for c in (components or {}).values())
    raise ClusterError(f"timed out after {timeout:.0f}s waiting for {what}\n{details}")


# -- host networking and cgroups ------------------------------------------------------------


def bridge_mac(name: str) -> str:
    """The fixed MAC address of bridge ``dglk<k>``: locally administered, "dglk" and k.

    A Linux bridge whose address was never set takes its lowest port's, so it changed whenever
    the pod holding that veth went away; the other pods' cached neighbour entry for the gateway
    then pointed nowhere and their connections to the API server (long ``kubectl exec``
    streams above all) stalled until ARP noticed, often long enough to fail. An address set by
    hand is kept whatever ports come and go."""
    k = int(name.removeprefix("dglk"))
    return f"02:64:67:6c:{k >> 8:02x}:{k & 0xFF:02x}"


def bridge_up(name: str = API_BRIDGE, address: str = f"{API_IP}/24") -> None:
    if _run("ip", "link", "show", name, check=False).returncode != 0:
        _run("ip", "link", "add", "name", name, "type", "bridge")
    _run("ip", "link", "set", "dev", name, "address", bridge_mac(name))
    _run("ip", "addr", "flush", "dev", name, check=False)
    _run("ip", "addr", "replace", address, "dev", name)
    _run("ip", "link", "set", name, "up")


def bridges() -> list[str]:
    """This cluster's bridges present on the host (dglk0, dglk1, ...)."""
    out = _run("ip", "-o", "link", "show", "type", "bridge", check=False).stdout
    names = [line.split(":")[1].strip().split("@")[0] for line in out.splitlines() if ":" in line]
    return [n for n in names if re.fullmatch(r"dglk[0-9]+", n)]


def bridge_down() -> None:
    for name in bridges():
        _run("ip", "link", "del", name, check=False)


def _hierarchies() -> list[Path]:
    """The mounted cgroup hierarchies (v1 controllers, name=systemd, a v2 "unified")."""
    found = []
    with open("/proc/self/mounts") as f:
        for line in f:
            parts = line.split()
            if parts[2] in ("cgroup", "cgroup2") and parts[1].startswith(str(CGROUP_FS)):
                found.append(Path(parts[1]))
    return found


def cgroup_create(root: str) -> None:
    """``root`` in every hierarchy (the kubelet requires it; cpuset needs its cpus and mems)."""
    for h in _hierarchies():
        path = h / root.strip("/")
        path.mkdir(exist_ok=True)
        for name in ("cpuset.cpus", "cpuset.mems"):
            if (path / name).exists() and not (path / name).read_text().strip():
                (path / name).write_text((h / name).read_text())


def cgroup_remove(root: str) -> None:
    """Remove ``root`` and everything under it (its processes must be gone) in every
    hierarchy."""
    for h in _hierarchies():
        top = h / root.strip("/")
        if not top.is_dir():
            continue
        for d, _, _ in sorted(os.walk(top), key=lambda w: -len(w[0])):
            for _ in range(20):
                try:
                    os.rmdir(d)
                    break
                except FileNotFoundError:
                    break
                except OSError:  # a process not reaped yet
                    time.sleep(0.1)


# -- the cluster ----------------------------------------------------------------------------


def scheduler_plugins() -> Path:
    """hack/scheduler-plugins.sh's folder (``scheduler`` and the PodGroup CRD); builds it the
    first time (minutes) or waits for a build already running."""
    script = REPO / "hack" / "scheduler-plugins.sh"
    out = _run(str(script), timeout=3600)
    return Path(out.stdout.strip().splitlines()[-1])


def coscheduling_config(path: Path, kubeconfig_path: Path) -> Path:
    """One profile, ``scheduler-plugins-scheduler``: Coscheduling sorts the queue (instead of
    PrioritySort) and gates pods of a PodGroup until minMember of them can be placed."""
    path.write_text(
        json.dumps(
            {
                "apiVersion": "kubescheduler.config.k8s.io/v1",
                "kind": "KubeSchedulerConfiguration",
                "leaderElection": {"leaderElect": False},
                "clientConnection": {"kubeconfig": str(kubeconfig_path)},
                "profiles": [
                    {
                        "schedulerName": COSCHEDULER,
                        "plugins": {
                            "queueSort": {
                                "enabled": [{"name": "Coscheduling"}],
                                "disabled": [{"name": "*"}],
                            },
                            "multiPoint": {"enabled": [{"name": "Coscheduling"}]},
                        },
                        "pluginConfig": [
                            {
                                "name": "Coscheduling",
                                "args": {"permitWaitingTimeSeconds": COSCHEDULING_WAIT_SECONDS},
                            }
                        ],
                    }
                ],
            },
            indent=1,
        )
    )
    return path


@dataclass
class LocalCluster:
    dir: Path
    cp: ControlPlane
    nodes: list[Node]
    components: dict[str, Component] = field(default_factory=dict)  # the schedulers
    # What was there before this cluster: only what it added is removed.
    netns_before: set[str] = field(default_factory=set)
    ip_forward_before: str | None = None

    @property
    def kubeconfig(self) -> Path:
        return self.cp.kubeconfig

    @property
    def node(self) -> Node:
        """The first node (a single-node cluster's only one)."""
        return self.nodes[0]

    def stop(self) -> None:
        for n in self.nodes:
            n.stop()
        for comp in self.components.values():
            comp.stop()
        self.cp.stop()
        _clean_host(self.dir, self.nodes, self.netns_before, self.ip_forward_before)

    def state(self) -> dict[str, Any]:
        cluster_pids = [c.proc.pid for c in self.cp.components.values() if c.proc]
        cluster_pids += [c.proc.pid for c in self.components.values() if c.proc]
        return {
            "pids": cluster_pids,
            "nodes": {
                n.name: {
                    "index": n.index,
                    "dir": str(n.dir),
                    "ip": n.ip,
                    "bridge": n.bridge,
                    "cgroup_root": n.cgroup_root,
                    "pids": n.pids(),
                }
                for n in self.nodes
            },
            "schedulers": [
                "default-scheduler",
                *([COSCHEDULER] if self.components.get(COSCHEDULER) else []),
            ],
            "kueue": kueue.NAME in self.components,
            "netns_before": sorted(self.netns_before),
            "ip_forward_before": self.ip_forward_before,
            "kubeconfig": str(self.kubeconfig),
        }


def _clean_host(
    dir: Path, nodes: Sequence[Node], netns_before: set[str] | None, ip_forward_before: str | None
) -> None:
    """After the processes: containers, shims, mounts, netns, cgroup roots, bridges,
    ip_forward."""
    for n in nodes:
        kill_containers(n.runc_root)
        _kill_shims(n.sock)
    _unmount_under(dir)
    if netns_before is not None:
        for ns in _netns() - netns_before:
            if ns.startswith("cni-"):
                _run("ip", "netns", "del", ns, check=False)
    for n in nodes:
        if n.cgroup_root:
            cgroup_remove(n.cgroup_root)
    bridge_down()
    if ip_forward_before is not None:
        _ip_forward(ip_forward_before)


def start(
    dir: Path,
    images: dict[str, Path] | None = None,
    nodes: int = 1,
    scheduler_plugins_: bool = False,
    node_cpu: str = NODE_CPU,
    node_memory: str = NODE_MEMORY,
    kueue_: bool = False,
) -> LocalCluster:
    """Bring the cluster up (building or reusing binaries and images)."""
    if os.geteuid() != 0:
        raise ClusterError("a local Kubernetes node needs root (containers, networking, mounts)")
    if not 1 <= nodes <= MAX_NODES:
        raise ClusterError(f"--nodes {nodes}: between 1 and {MAX_NODES}")
    reserved = reservation(node_cpu, node_memory) if nodes > 1 else None
    images = images if images is not None else build_images()
    missing = {"pause", "dgl-operator", "watcher-loop", "kubectl-download", "graphsage"} - set(
        images
    )
    if missing:
        raise ClusterError(f"images missing from hack/build_images.py: {sorted(missing)}")
    sp_dir = scheduler_plugins() if scheduler_plugins_ else None
    dir.mkdir(parents=True, exist_ok=True)
    bins = k8s_binaries("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet")
    certs: dict[str, tuple[str, str, str]] = {
        "scheduler": ("/CN=system:kube-scheduler", "clientAuth", ""),
        "apiserver-kubelet": (
            "/O=system:masters/CN=kube-apiserver-kubelet-client",
            "clientAuth",
            "",
        ),
    }
    for k in range(1, nodes + 1):
        name = node_name(k)
        certs[f"node-{name}"] = (f"/O=system:nodes/CN=system:node:{name}", "clientAuth", "")
        certs[f"kubelet-{name}"] = (f"/CN={name}", "serverAuth", f"IP:{node_ip(k)},DNS:{name}")
    cp = ControlPlane(
        dir / "control-plane",
        bins,
        etcd_binary(),
        host=API_IP,
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
    if nodes > 1:  # a stopped node is NotReady after 20s, not 40s (node lease 10s, status 4s)
        cp.cm_extra_args = ["--node-monitor-period", "2s", "--node-monitor-grace-period", "20s"]
    members = [
        Node(dir / "nodes" / node_name(k), cp, k, reserved, fast_heartbeat=nodes > 1)
        for k in range(1, nodes + 1)
    ]
    cluster = LocalCluster(dir, cp, members, netns_before=_netns(), ip_forward_before=_ip_forward())
    try:
        bridge_up()
        for n in members:
            bridge_up(n.bridge, f"{n.ip}/24")
        _ip_forward("1")  # pods of one node reach another's through the host
        ensure_base_images(dir / "base-containerd", images)
        cp.start()
        # NetworkPolicy enforced before any pod runs (localcluster/netpol.py)
        cluster.components[netpol.NAME] = netpol.start(dir, cp.kubeconfig)
        sched_kc = kubeconfig(dir / "scheduler.kubeconfig", cp.server, pki, "scheduler")
        logs = dir / "logs"
        cluster.components["kube-scheduler"] = Component(
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
        cluster.components["kube-scheduler"].start()
        if sp_dir is not None:
            _start_coscheduler(cluster, sp_dir)
        for n in members:
            n.start_containerd()
        start_kubelets(members)
        every = {f"{n.name}/{c}": comp for n in members for c, comp in n.components.items()}
        every.update(cluster.components)
        _wait(
            lambda: all(n.ready() for n in members),
            180 + 30 * nodes,
            f"{nodes} node(s) to become Ready",
            every,
        )
        admin = Kubectl(cp.kubeconfig, timeout=60)
        volumes.ensure(admin, dir / "volumes")
        if kueue_:  # (localcluster/kueue.py: its manager, as the admin)
            cluster.components[kueue.NAME] = kueue.start(dir, cp.kubeconfig, admin)
    except BaseException:
        cluster.stop()
        raise
    return cluster


def _start_coscheduler(cluster: LocalCluster, sp_dir: Path) -> None:
    """The PodGroup CRD, then the Coscheduling scheduler as a second scheduler. Its identity is
    the admin certificate (system:masters): it reads and updates PodGroups, which no built-in
    role grants; acceptable for this development cluster."""
    kubectl = Kubectl(cluster.kubeconfig, timeout=60)
    kubectl(["apply", "-f", str(sp_dir / "scheduling.x-k8s.io_podgroups.yaml")], None)
    kubectl(
        [
            "wait",
            "--for",
            "condition=Established",
            "--timeout",
            "60s",
            "crd/podgroups.scheduling.x-k8s.io",
        ],
        None,
    )
    cfg = coscheduling_config(cluster.dir / "coscheduling.json", cluster.kubeconfig)
    cluster.components[COSCHEDULER] = Component(
        COSCHEDULER,
        [
            str(sp_dir / "scheduler"),
            "--config",
            str(cfg),
            "--authentication-kubeconfig",
            str(cluster.kubeconfig),
            "--authorization-kubeconfig",
            str(cluster.kubeconfig),
            "--bind-address",
            "127.0.0.1",
            "--secure-port",
            "0",
            # A gang rejected at Permit waits in the unschedulable queue until an event
            # Coscheduling listens to (a pod or PodGroup added) or this flush: the default 5
            # minutes would hold a gang long after the job before it finished and freed its CPUs.
            "--pod-max-in-unschedulable-pods-duration",
            "30s",
            "--v",
            "1",
        ],
        cluster.dir / "logs" / f"{COSCHEDULER}.log",
    )
    cluster.components[COSCHEDULER].start()


# -- CLI and what other processes (tests) do with a running cluster -------------------------


def _state(dir: Path) -> Path:
    return dir / "pids.json"


def _read_state(dir: Path) -> dict[str, Any]:
    try:
        found: dict[str, Any] = json.loads(_state(dir).read_text())
        return found
    except (OSError, ValueError):
        return {}


def _write_state(dir: Path, state: dict[str, Any]) -> None:
    tmp = _state(dir).with_suffix(".tmp")
    tmp.write_text(json.dumps(state))
    tmp.rename(_state(dir))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True


def running(dir: Path = DEFAULT_DIR) -> bool:
    """A cluster started from ``dir`` is up: the control plane and scheduler processes its
    state file names all live (a node stopped by :func:`stop_node` does not count)."""
    pids = _read_state(dir).get("pids") or []
    return bool(pids) and all(_alive(pid) for pid in pids)


def node_names(dir: Path = DEFAULT_DIR) -> list[str]:
    """The names of the cluster's nodes, in order (dgl-node, dgl-node-2, ...)."""
    nodes = _read_state(dir).get("nodes") or {}
    return sorted(nodes, key=lambda n: nodes[n]["index"])


def schedulers(dir: Path = DEFAULT_DIR) -> list[str]:
    """The schedulerNames the running cluster serves."""
    return list(_read_state(dir).get("schedulers") or [])


def stop_node(dir: Path, name: str) -> None:
    """Power node ``name`` off as a crash would: SIGKILL its kubelet and containerd and every
    container of it (runc kill + delete in its runc root), so its pods' processes die while
    their API objects (and the Node) stay. Works from any process; the rest of the cluster keeps
    running and ``down`` still cleans up everything."""
    state = _read_state(dir)
    info = (state.get("nodes") or {}).get(name)
    if info is None:
        raise ClusterError(f"no node {name!r} in the cluster of {dir} (nodes: {node_names(dir)})")
    for comp in ("kubelet", "containerd"):
        pid = (info.get("pids") or {}).get(comp)
        if pid and not info.get("stopped"):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
    node_dir = Path(info["dir"])
    kill_containers(node_dir / "containerd" / "runc")
    _kill_shims(node_dir / "containerd" / "containerd.sock")
    info["stopped"] = True
    _write_state(dir, state)


def start_node(dir: Path, name: str, timeout: float = 120.0) -> None:
    """Power node ``name`` on again after :func:`stop_node`: its containerd (same root: the
    images stay) and its kubelet, with the configuration it had, and wait until it is Ready.
    The pods it ran before are gone (their containers were killed); the kubelet finds their
    API objects deleted or deletes what is left, as after a real reboot."""
    state = _read_state(dir)
    info = (state.get("nodes") or {}).get(name)
    if info is None:
        raise ClusterError(f"no node {name!r} in the cluster of {dir} (nodes: {node_names(dir)})")
    if not info.get("stopped"):
        raise ClusterError(f"node {name} is not stopped (stop-node powers it off)")
    node_dir = Path(info["dir"])
    try:
        old = json.loads((node_dir / "kubelet" / "config.json").read_text())
    except (OSError, ValueError) as e:
        raise ClusterError(f"node {name}: its kubelet configuration is unreadable: {e}") from None
    cp = ControlPlane(dir / "control-plane", Path(), Path(), host=API_IP, port=443)
    node = Node(
        node_dir,
        cp,
        int(info["index"]),
        old.get("kubeReserved"),
        fast_heartbeat="nodeLeaseDurationSeconds" in old,
    )
    node.start_containerd()
    node.start_kubelet()
    _wait(node.ready, timeout, f"node {name} to become Ready again", node.components)
    info["pids"] = node.pids()
    info["stopped"] = False
    _write_state(dir, state)


@contextlib.contextmanager
def kubelet_frozen(dir: Path, name: str) -> Iterator[None]:
    """Node ``name``'s kubelet stopped (SIGSTOP) for the block, then continued (SIGCONT): a
    hung kubelet, or one cut off from the control plane. Its containers run on and its pods
    reach each other; past the node monitor's grace, kube-controller-manager marks the node
    Ready=Unknown and taints it unreachable, as after a long API server outage."""
    info = (_read_state(dir).get("nodes") or {}).get(name)
    if info is None or info.get("stopped"):
        raise ClusterError(f"no running node {name!r} in the cluster of {dir}")
    pid = int((info.get("pids") or {})["kubelet"])
    os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGCONT)


def restart_apiserver(
    dir: Path = DEFAULT_DIR, down_for: float = 0.0, timeout: float = 120.0
) -> float:
    """Restart the running cluster's kube-apiserver from any process, as its supervisor would
    after a crash: SIGTERM (SIGKILL after 10 s), ``down_for`` seconds down, then the same
    command line, environment and log again; returns once /readyz answers, with the seconds
    it did not serve. The state file then names the new process (``down`` stops it)."""
    state = _read_state(dir)
    pids: list[int] = list(state.get("pids") or [])
    found = [
        (pid, argv)
        for pid in pids
        for argv in [_cmdline(pid)]
        if argv and Path(argv[0]).name == "kube-apiserver"
    ]
    if not found:
        raise ClusterError(f"no kube-apiserver runs in the cluster of {dir}")
    pid, argv = found[0]
    env = _environ(pid)
    log = Path(os.readlink(f"/proc/{pid}/fd/1"))
    stopped = time.monotonic()
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGTERM)
    deadline = time.monotonic() + 10
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)  # (a child of this process only when it started it)
    time.sleep(down_for)
    with log.open("ab") as out:
        proc = subprocess.Popen(
            argv, env=env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True,
        )  # fmt: skip
    state["pids"] = [proc.pid if p == pid else p for p in pids]
    _write_state(dir, state)
    cp = ControlPlane(dir / "control-plane", Path(), Path(), host=API_IP, port=443)
    _wait(cp.ready, timeout, "kube-apiserver /readyz after its restart", {})
    return time.monotonic() - stopped


def _cmdline(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [a.decode() for a in raw.split(b"\0") if a]


def _environ(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes()
    pairs = (item.decode().split("=", 1) for item in raw.split(b"\0") if b"=" in item)
    return dict((k, v) for k, v in pairs)


def down(dir: Path) -> None:
    state = _state(dir)
    info = _read_state(dir)
    nodes = []
    for name, n in (info.get("nodes") or {}).items():
        node = Node(Path(n["dir"]), ControlPlane.__new__(ControlPlane), int(n["index"]))
        nodes.append(node)
        if not n.get("stopped"):
            for pid in (n.get("pids") or {}).values():
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(pid, signal.SIGTERM)
        del name
    if state.exists():
        for pid in reversed(info.get("pids", [])):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGTERM)
        time.sleep(2)
        every = list(info.get("pids", []))
        every += [
            p
            for n in (info.get("nodes") or {}).values()
            if not n.get("stopped")
            for p in (n.get("pids") or {}).values()
        ]
        for pid in every:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
    if not nodes:  # a state file of an older single-node layout, or none
        nodes = [Node(dir / "node", ControlPlane.__new__(ControlPlane), 1)]
        nodes += [
            Node(d, ControlPlane.__new__(ControlPlane), _index(d.name))
            for d in sorted((dir / "nodes").glob("*"))
        ]
    netns_before = set(info["netns_before"]) if "netns_before" in info else None
    _clean_host(dir, nodes, netns_before, info.get("ip_forward_before"))
    if info.get("kueue"):
        kueue.stop()  # (its process went with the others: its certificate in /etc)
    shutil.rmtree(dir, ignore_errors=True)


def _index(name: str) -> int:
    return int(name.rsplit("-", 1)[1]) if name != NODE and name[-1].isdigit() else 1


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m localcluster.node")
    p.add_argument("action", choices=["up", "down", "stop-node", "start-node"])
    p.add_argument(
        "name", nargs="?", help="stop-node, start-node: the node to power off or on (dgl-node-2)"
    )
    p.add_argument("--dir", type=Path, default=DEFAULT_DIR)
    p.add_argument("--nodes", type=int, default=1, help="how many nodes (default 1)")
    p.add_argument(
        "--scheduler-plugins",
        action="store_true",
        help=f"also run the Coscheduling scheduler ({COSCHEDULER}) and the PodGroup CRD",
    )
    p.add_argument(
        "--kueue",
        action="store_true",
        help="also run Kueue's manager (hack/kueue.sh; DGLJob in its externalFrameworks)",
    )
    p.add_argument("--node-cpu", default=NODE_CPU, help="allocatable CPU per node (nodes > 1)")
    p.add_argument(
        "--node-memory", default=NODE_MEMORY, help="allocatable memory per node (nodes > 1)"
    )
    p.add_argument(
        "--free-disk",
        default=f"{disk.SESSION_NEED >> 30}Gi",
        help="refuse to start unless the disk has this much free above the kubelet's eviction "
        "threshold (default: what a test session needs)",
    )
    a = p.parse_args(argv)
    if a.action == "down":
        down(a.dir)
        print(f"node cluster in {a.dir} stopped")
        return 0
    power = {
        "stop-node": (stop_node, "stopped (kubelet, containerd and its containers killed)"),
        "start-node": (start_node, "started again (containerd and kubelet) and Ready"),
    }
    if a.action in power:
        act, done = power[a.action]
        if not a.name:
            p.error(f"{a.action} needs the node's name")
        try:
            act(a.dir, a.name)
        except ClusterError as e:
            print(f"{a.action} failed: {e}", file=sys.stderr)
            return 1
        print(f"node {a.name} {done}")
        return 0
    if a.name:
        p.error("up takes no node name")
    if running(a.dir):
        print(
            f"a cluster already runs from {a.dir}; run `make cluster-down` first", file=sys.stderr
        )
        return 1
    if _state(a.dir).exists() or (a.dir / "nodes").exists():  # left by a cluster that died
        print(f"cleaning up a stopped cluster in {a.dir}", file=sys.stderr)
        down(a.dir)
    started = time.monotonic()
    try:
        disk.require_free(a.dir, parse_quantity(a.free_disk))
        cluster = start(
            a.dir,
            nodes=a.nodes,
            scheduler_plugins_=a.scheduler_plugins,
            node_cpu=a.node_cpu,
            node_memory=a.node_memory,
            kueue_=a.kueue,
        )
    except ClusterError as e:
        print(f"cluster-up failed: {e}", file=sys.stderr)
        return 1
    _state(a.dir).write_text(json.dumps(cluster.state(), indent=1))
    print(
        f"node: {len(cluster.nodes)} node(s) Ready in {time.monotonic() - started:.0f}s: "
        + ", ".join(f"{n.name} ({n.ip})" for n in cluster.nodes),
        file=sys.stderr,
    )
    print(f"export KUBECONFIG={cluster.kubeconfig}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
